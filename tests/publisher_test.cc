// Publisher: snapshots are freed, and callbacks run, only after every
// worker has reported quiescence since the publish.
#include "control/switch/publisher.h"

#include <cstdlib>

#include <gtest/gtest.h>
#include <rte_rcu_qsbr.h>

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

}  // namespace
}  // namespace strait::ctl
