// Publisher under real threads, as the Switch runs it (and, last, the learned
// FDB beside it): reader threads play
// workers (load the live snapshot, use it for an iteration, report
// quiescence, now and then go offline for a nap) while the control thread
// publishes 2000 snapshots (500 under TSan), polls grace periods and queues
// after_grace() callbacks. What the contract (publisher.h, worker.h
// DataplaneShared::snapshot, snapshot.h classifiers) promises and this
// checks: no snapshot, nor a classifier it shares with its neighbours, is
// freed while a reader holds it; frees happen on the control thread; a
// callback runs only once every reader has moved past what was published
// before it. `make tsan` runs it under ThreadSanitizer, which also sees any
// read of a snapshot racing with its free (tests/README.md).
#include <gtest/gtest.h>
#include <malloc.h>
#include <rte_rcu_qsbr.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "control/switch/publisher.h"

namespace strait::ctl {
namespace {

constexpr uint16_t kReaders = 3;
// A snapshot is ~1 MB to build and free; under TSan, which checks every byte
// of that, fewer of them keep the run near 15 s (the readers still see each).
#if defined(__SANITIZE_THREAD__)
constexpr uint32_t kSnapshots = 500;
#else
constexpr uint32_t kSnapshots = 2000;
#endif
constexpr uint32_t kShareSpan = 10;     // consecutive snapshots sharing one "classifier"
constexpr uint32_t kMaxRetired = 8;     // the control thread waits beyond this many
constexpr uint32_t kCallbackEvery = 7;  // an after_grace() per this many publishes
constexpr uint32_t kPatternLen = 16;
constexpr uint32_t kPoison = 0xdeadbeef;

enum : uint8_t { kUnborn, kLive, kFreed };

// What the free path leaves behind, in memory the test owns (it outlives every
// snapshot, so checking it is not itself a use after free). Indexed by
// generation (snapshots) or generation / kShareSpan (shared classifiers).
struct Canaries {
  std::array<std::atomic<uint8_t>, kSnapshots + 1> snapshot{};
  std::array<std::atomic<uint8_t>, kSnapshots / kShareSpan + 1> shared{};
  std::atomic<uint32_t> snapshots_freed{0};
  std::atomic<uint32_t> shared_freed{0};
  std::atomic<uint32_t> freed_off_control{0};  // frees not on the control thread
  std::thread::id control;
};

uint32_t pattern(uint32_t gen, uint32_t k) { return gen * kPatternLen + k; }

// The snapshot's destructor releases its classifiers; these stand-ins carry no
// classifier, only ownership, and poison what readers check when released.
std::shared_ptr<const dp::SgClassifier> canary_owner(
    Canaries& c, std::atomic<uint8_t>& state, std::atomic<uint32_t>& freed,
    std::vector<std::pair<uint32_t, uint16_t>>* content) {
  state.store(kLive, std::memory_order_relaxed);
  auto on_free = [&c, &state, &freed, content](int* p) {
    delete p;
    if (content)  // the snapshot being destroyed: its members are still there
      for (auto& e : *content) e.first = kPoison;
    state.store(kFreed, std::memory_order_relaxed);
    freed.fetch_add(1, std::memory_order_relaxed);
    if (std::this_thread::get_id() != c.control) c.freed_off_control.fetch_add(1);
  };
  return {std::shared_ptr<int>(new int(0), on_free), nullptr};
}

class PublisherStress : public ::testing::Test {
 protected:
  void SetUp() override {
    const size_t sz = rte_rcu_qsbr_get_memsize(kReaders);
    mem_ = std::aligned_alloc(RTE_CACHE_LINE_SIZE,
                              (sz + RTE_CACHE_LINE_SIZE - 1) & ~size_t(RTE_CACHE_LINE_SIZE - 1));
    shared_.qsbr = static_cast<rte_rcu_qsbr*>(mem_);
    ASSERT_EQ(rte_rcu_qsbr_init(shared_.qsbr, kReaders), 0);
    canaries_.control = std::this_thread::get_id();
    // Snapshots (~1 MB) from the heap, not from mmap: a snapshot freed too
    // early is then still readable, so a broken grace period shows as a
    // failed check rather than a crash (glibc; TSan has its own allocator).
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
  }
  void TearDown() override { std::free(mem_); }

  // Snapshot `gen`: a content pattern readers verify, its own canary, and the
  // classifier it shares with the snapshots of the same kShareSpan.
  std::unique_ptr<dp::Snapshot> make_snapshot(
      uint32_t gen, std::shared_ptr<const dp::SgClassifier>* span_classifier) {
    auto s = std::make_unique<dp::Snapshot>();
    for (uint32_t k = 0; k < kPatternLen; k++) s->vni_to_lvlan.push_back({pattern(gen, k), k});
    if (gen % kShareSpan == 0 || gen == 1)  // a new "classifier" every kShareSpan
      *span_classifier = canary_owner(canaries_, canaries_.shared[gen / kShareSpan],
                                      canaries_.shared_freed, nullptr);
    s->classifiers.push_back(*span_classifier);
    s->classifiers.push_back(canary_owner(canaries_, canaries_.snapshot[gen],
                                          canaries_.snapshots_freed, &s->vni_to_lvlan));
    return s;
  }

  // One worker: what it finds wrong in the snapshots it holds.
  void read_loop(uint16_t id) {
    rte_rcu_qsbr_thread_register(shared_.qsbr, id);
    rte_rcu_qsbr_thread_online(shared_.qsbr, id);
    uint32_t last_gen = 0;
    for (uint64_t it = 0; !stop_.load(std::memory_order_relaxed); it++) {
      const dp::Snapshot* s = shared_.snapshot.load(std::memory_order_acquire);
      if (s) {
        const uint32_t gen = s->generation;
        held_[id].store(gen, std::memory_order_relaxed);
        if (gen < last_gen) bad_.fetch_add(1);  // generations only grow
        if (gen != last_gen) seen_[id]++;
        last_gen = gen;
        // Check, use the snapshot a while (a burst), check again.
        for (int pass = 0; pass < 3; pass++) {
          if (!intact(*s, gen)) bad_.fetch_add(1);
          std::this_thread::yield();
        }
        held_[id].store(0, std::memory_order_relaxed);
      }
      rte_rcu_qsbr_quiescent(shared_.qsbr, id);  // nothing of s past here
      if (it % 64 == 63) {                       // an idle nap, offline as Worker::run does
        rte_rcu_qsbr_thread_offline(shared_.qsbr, id);
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        rte_rcu_qsbr_thread_online(shared_.qsbr, id);
      }
    }
    rte_rcu_qsbr_thread_offline(shared_.qsbr, id);
    rte_rcu_qsbr_thread_unregister(shared_.qsbr, id);
  }

  bool intact(const dp::Snapshot& s, uint32_t gen) const {
    if (s.generation != gen || gen > kSnapshots || s.vni_to_lvlan.size() != kPatternLen)
      return false;
    for (uint32_t k = 0; k < kPatternLen; k++)
      if (s.vni_to_lvlan[k].first != pattern(gen, k)) return false;
    return canaries_.snapshot[gen].load(std::memory_order_relaxed) == kLive &&
           canaries_.shared[gen / kShareSpan].load(std::memory_order_relaxed) == kLive;
  }

  // after_grace() for everything published up to `gen`: no reader may still
  // hold an older snapshot.
  void check_readers_past(uint32_t gen) {
    for (auto& h : held_) {
      const uint32_t g = h.load(std::memory_order_relaxed);
      if (g != 0 && g < gen) early_callbacks_++;
    }
    if (gen <= last_callback_) out_of_order_callbacks_++;
    last_callback_ = gen;
    callbacks_++;
  }

  void* mem_ = nullptr;
  dp::DataplaneShared shared_;
  Canaries canaries_;
  std::atomic<bool> stop_{false};
  std::atomic<uint32_t> held_[kReaders] = {};  // generation a reader holds, 0 = none
  uint32_t seen_[kReaders] = {};               // distinct generations each reader saw
  std::atomic<uint64_t> bad_{0};
  // Control thread only (callbacks run in poll()).
  uint32_t callbacks_ = 0, early_callbacks_ = 0, out_of_order_callbacks_ = 0, last_callback_ = 0;
};

TEST_F(PublisherStress, ReadersNeverHoldAFreedSnapshotAndCallbacksWaitForThem) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> readers;
  {
    Publisher pub(&shared_);
    for (uint16_t id = 0; id < kReaders; id++) readers.emplace_back([this, id] { read_loop(id); });
    std::shared_ptr<const dp::SgClassifier> shared_classifier;
    for (uint32_t gen = 1; gen <= kSnapshots; gen++) {
      ASSERT_EQ(pub.publish(make_snapshot(gen, &shared_classifier)), gen);
      if (gen % kCallbackEvery == 0) pub.after_grace([this, gen] { check_readers_past(gen); });
      pub.poll();
      // Bounded memory: wait for readers when too many snapshots are retired.
      while (gen - 1 - canaries_.snapshots_freed.load() > kMaxRetired) {
        std::this_thread::yield();
        pub.poll();
      }
    }
    shared_classifier.reset();  // the live snapshot still owns the last one
    stop_ = true;
    for (auto& r : readers) r.join();
    // Every reader is offline: every grace period is over.
    pub.poll();
    EXPECT_FALSE(pub.busy());
    EXPECT_EQ(canaries_.snapshots_freed.load(), kSnapshots - 1);  // all but the live one
    EXPECT_EQ(canaries_.snapshot[kSnapshots].load(), kLive);
    EXPECT_EQ(canaries_.shared_freed.load(), kSnapshots / kShareSpan);  // last span still live
  }  // ~Publisher drops the live snapshot's pointer; the snapshot was freed here

  EXPECT_EQ(bad_.load(), 0u) << "a reader saw a freed or changed snapshot";
  EXPECT_EQ(canaries_.freed_off_control.load(), 0u) << "something was freed off the control thread";
  EXPECT_EQ(early_callbacks_, 0u) << "after_grace ran while a reader held an older snapshot";
  EXPECT_EQ(out_of_order_callbacks_, 0u);
  EXPECT_EQ(callbacks_, kSnapshots / kCallbackEvery);
  // The readers really ran alongside: each saw many generations come and go.
  for (uint16_t id = 0; id < kReaders; id++) EXPECT_GT(seen_[id], 20u) << "reader " << id;
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  std::printf(
      "publisher stress: %u snapshots, %u callbacks, %u readers saw %u/%u/%u generations, %lld "
      "ms\n",
      kSnapshots, callbacks_, kReaders, seen_[0], seen_[1], seen_[2], (long long)ms.count());
}

// The learned FDB (learned_fdb.h): the control thread moves one MAC to port
// v in table v and bumps the MAC's epoch after publishing it, as
// Publisher::publish_learned does; readers read the epoch, then the table,
// as the worker does on a miss. A reader that saw epoch e must find a table
// at least as new as e (the port is >= e), and never one freed while held.
TEST_F(PublisherStress, LearnedFdbIsAtLeastAsNewAsTheEpochAReaderSaw) {
  constexpr uint32_t kTables = kSnapshots * 4;
  const Mac mac{0x02, 0, 0, 0, 0x99, 0x01};
  const uint16_t lvlan = 7;
  const std::atomic<uint32_t>& epoch = shared_.learned.epoch[dp::learn_epoch_index(mac.data())];
  std::atomic<uint64_t> stale{0}, checks{0};
  std::vector<std::thread> readers;
  {
    Publisher pub(&shared_);
    for (uint16_t id = 0; id < kReaders; id++)
      readers.emplace_back([&, id] {
        rte_rcu_qsbr_thread_register(shared_.qsbr, id);
        rte_rcu_qsbr_thread_online(shared_.qsbr, id);
        while (!stop_.load(std::memory_order_relaxed)) {
          const uint32_t e = epoch.load(std::memory_order_acquire);
          const dp::Fdb* fdb = shared_.learned.fdb.load(std::memory_order_acquire);
          if (fdb) {
            for (int pass = 0; pass < 3; pass++) {  // held a while, as a burst does
              const dp::FdbEntry* f = fdb->find(lvlan, mac.data());
              if (!f || f->port < e) stale.fetch_add(1);
              checks.fetch_add(1, std::memory_order_relaxed);
              std::this_thread::yield();
            }
          }
          rte_rcu_qsbr_quiescent(shared_.qsbr, id);
        }
        rte_rcu_qsbr_thread_offline(shared_.qsbr, id);
        rte_rcu_qsbr_thread_unregister(shared_.qsbr, id);
      });
    for (uint32_t v = 1; v <= kTables; v++) {
      std::vector<dp::FdbEntry> entries = {{dp::Fdb::make_key(lvlan, mac.data()), uint16_t(v), 3}};
      for (uint16_t k = 0; k < 64; k++)  // other MACs: a table of some size
        entries.push_back({dp::Fdb::make_key(lvlan, Mac{0x02, 1, 0, 0, 0, uint8_t(k)}.data()),
                           uint16_t(k), uint16_t(k)});
      pub.publish_learned(std::make_unique<dp::Fdb>(entries), {mac});
      pub.poll();
      while (pub.busy() && v % 16 == 0) {  // bounded memory
        std::this_thread::yield();
        pub.poll();
      }
    }
    stop_ = true;
    for (auto& r : readers) r.join();
    pub.poll();
    EXPECT_FALSE(pub.busy());
    EXPECT_EQ(epoch.load(), kTables);
  }
  EXPECT_EQ(stale.load(), 0u) << "a reader found a table older than the epoch it saw";
  EXPECT_GT(checks.load(), 1000u);
}

}  // namespace
}  // namespace strait::ctl
