// Publisher: snapshots are freed, and callbacks run, only after every
// worker has reported quiescence since the publish.
#include "control/switch/publisher.h"

#include <cstdlib>

#include <gtest/gtest.h>
#include <rte_rcu_qsbr.h>

#include "dataplane/sg_stage.h"

namespace strait::ctl {
namespace {

class PublisherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    size_t sz = rte_rcu_qsbr_get_memsize(2);
    mem_ = std::aligned_alloc(RTE_CACHE_LINE_SIZE, (sz + RTE_CACHE_LINE_SIZE - 1) & ~size_t(RTE_CACHE_LINE_SIZE - 1));
    shared_.qsbr = static_cast<rte_rcu_qsbr*>(mem_);
    ASSERT_EQ(rte_rcu_qsbr_init(shared_.qsbr, 2), 0);
    for (unsigned t = 0; t < 2; t++) {
      rte_rcu_qsbr_thread_register(shared_.qsbr, t);
      rte_rcu_qsbr_thread_online(shared_.qsbr, t);
    }
  }
  void TearDown() override { std::free(mem_); }
  void* mem_ = nullptr;
  dp::DataplaneShared shared_;
};

TEST_F(PublisherTest, ReplyWaitsForEveryWorker) {
  Publisher pub(&shared_);
  pub.publish(std::make_unique<dp::Snapshot>());
  bool done = false;
  pub.after_grace([&] { done = true; });
  pub.poll();
  EXPECT_FALSE(done);
  rte_rcu_qsbr_quiescent(shared_.qsbr, 0);
  pub.poll();
  EXPECT_FALSE(done);  // worker 1 may still hold the old snapshot
  rte_rcu_qsbr_quiescent(shared_.qsbr, 1);
  pub.poll();
  EXPECT_TRUE(done);
  EXPECT_FALSE(pub.busy());
}

TEST_F(PublisherTest, GenerationsGrowAndSkipZero) {
  Publisher pub(&shared_);
  EXPECT_EQ(pub.publish(std::make_unique<dp::Snapshot>()), 1u);
  EXPECT_EQ(pub.publish(std::make_unique<dp::Snapshot>()), 2u);
  EXPECT_EQ(shared_.snapshot.load()->generation, 2u);
  EXPECT_EQ(pub.current(), shared_.snapshot.load());
}

TEST_F(PublisherTest, OfflineWorkerDoesNotHoldGracePeriods) {
  Publisher pub(&shared_);
  pub.publish(std::make_unique<dp::Snapshot>());
  rte_rcu_qsbr_thread_offline(shared_.qsbr, 1);  // asleep (idle_sleep_us)
  bool done = false;
  pub.after_grace([&] { done = true; });
  rte_rcu_qsbr_quiescent(shared_.qsbr, 0);
  pub.poll();
  EXPECT_TRUE(done);
}

// Issue 22: a snapshot that changes only the rules of some ports keeps the
// flow caches' generation, and the rules generation of every other port;
// any other change starts the cache and every connection's check afresh.
TEST_F(PublisherTest, ARulesOnlyChangeKeepsTheCacheAndTheOtherPortsRules) {
  // Classifiers are compared by address only (never read here).
  const auto* web = reinterpret_cast<const dp::SgClassifier*>(uintptr_t{0x1000});
  const auto* web2 = reinterpret_cast<const dp::SgClassifier*>(uintptr_t{0x2000});
  const auto* other = reinterpret_cast<const dp::SgClassifier*>(uintptr_t{0x3000});
  auto snapshot = [](const dp::SgClassifier* a, const dp::SgClassifier* b, uint16_t lvlan_b) {
    auto s = std::make_unique<dp::Snapshot>();
    for (uint16_t i : {1, 2}) {
      auto sec = std::make_unique<dp::PortSecurity>();
      sec->sg = i == 1 ? a : b;
      s->ports[i].present = true;
      s->ports[i].lvlan = i == 1 ? 5 : lvlan_b;
      s->ports[i].security = sec.get();
      s->security.push_back(std::move(sec));
    }
    return s;
  };
  Publisher pub(&shared_);
  pub.publish(snapshot(web, other, 5));
  pub.publish(snapshot(web, web2, 5));  // port 2's rules changed
  const dp::Snapshot* s = pub.current();
  EXPECT_EQ(s->generation, 2u);
  EXPECT_EQ(s->cache_generation, 1u) << "flows stay cached";
  EXPECT_EQ(s->verify_generation, 1u);
  EXPECT_EQ(s->ports[1].rules_gen, 1u) << "port 1's connections are not checked again";
  EXPECT_EQ(s->ports[2].rules_gen, 2u);
  EXPECT_EQ(dp::rules_floor(*s, 1, dp::kNoPort), 1u);
  EXPECT_EQ(dp::rules_floor(*s, 1, 2), 2u);

  pub.publish(snapshot(web, web2, 6));  // port 2 moved to another network
  s = pub.current();
  EXPECT_EQ(s->cache_generation, 3u);
  EXPECT_EQ(s->verify_generation, 3u);
  EXPECT_EQ(dp::rules_floor(*s, 1, dp::kNoPort), 3u) << "every connection is checked";
}

}  // namespace
}  // namespace strait::ctl
