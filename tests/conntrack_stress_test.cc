// Conntrack under real threads, as the Switch drives it (conntrack.h
// "Concurrency"): workers look up, create, update and end connections in the
// one shared table and hold what they found until their next quiescent
// report, while the control thread advances the clock, expires in slices,
// flushes zones and addresses, reads the counters, and recycles removed
// entries after an rte_rcu_qsbr grace period. Checked: one entry per
// connection, an entry never changes identity while a worker holds it, the
// counters add up to what the workers were told, and every entry comes back
// to the free list. `make tsan` runs it under ThreadSanitizer, which also
// sees any access the contract's orderings do not cover (tests/README.md).
// No EAL: the table is mmap'd memory, rte_rcu_qsbr works on plain memory.
#include <gtest/gtest.h>
#include <rte_rcu_qsbr.h>

#include <array>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "dataplane/conntrack.h"
#include "tests/ct_tuple.h"

namespace strait::dp {
namespace {

constexpr uint8_t kFin = 0x01, kSyn = 0x02, kRst = 0x04, kAck = 0x10;
constexpr uint8_t kIpProtoGre = 47;
constexpr uint64_t kSec = 1000;
constexpr uint32_t kA = 0x0a000001, kB = 0x0a000101;

using test::reversed;
using test::v4;

CtPacket pkt(const CtTuple& t, uint8_t tcp_flags = 0) {
  CtPacket p;
  p.tuple = t;
  p.kind = CtPacketKind::kConn;
  p.tcp_flags = tcp_flags;
  return p;
}

CtConfig config(uint32_t capacity, uint16_t workers) {
  CtConfig c;
  c.capacity = capacity;
  c.n_workers = workers;
  return c;
}

std::array<uint8_t, 16> addr16(uint32_t a) {
  std::array<uint8_t, 16> r{};
  for (int i = 0; i < 4; i++) r[i] = uint8_t(a >> (24 - 8 * i));
  return r;
}

struct QsbrFree {
  void operator()(rte_rcu_qsbr* q) const { std::free(q); }
};
std::unique_ptr<rte_rcu_qsbr, QsbrFree> make_qsbr(uint16_t threads) {
  const size_t sz = (rte_rcu_qsbr_get_memsize(threads) + 63) / 64 * 64;
  std::unique_ptr<rte_rcu_qsbr, QsbrFree> q(static_cast<rte_rcu_qsbr*>(std::aligned_alloc(64, sz)));
  if (q && rte_rcu_qsbr_init(q.get(), threads) != 0) q.reset();
  return q;
}

// ---- the reopen-in-place path against the control thread's expiry ---------------

// Who waits before acting in a round, and how long (drawn around the time a
// thread takes to wake from the barrier): a third of the rounds the workers
// come first, a third the control thread, and a third nobody waits, where
// now and then both reach the entry within nanoseconds.
struct Stagger {
  enum Who { kNobody, kWorkers, kControl } who = kNobody;
  std::chrono::nanoseconds delay{0};
  void wait_if(Who me) const {
    const auto until = std::chrono::steady_clock::now() + delay;
    if (me == who)  // yielding: a spinning waiter would starve the other side
      while (std::chrono::steady_clock::now() < until) std::this_thread::yield();
  }
};

// A connection's entry has just timed out but is still linked. Every worker
// gets a packet of it at once (create() re-opens it in place) while the
// control thread's expire() sweeps its bucket: the expire CAS and a re-open
// CAS cannot both win, so each round ends with exactly one worker told
// "created" and everyone holding the one live entry of the connection.
TEST(ConntrackStress, ReopenRacingExpiryLeavesOneLiveEntry) {
  constexpr uint16_t kWorkers = 3;
  constexpr int kRounds = 4000;
  // 2 buckets: expire() reaches the round's entry as soon as it starts.
  Conntrack ct(config(8, kWorkers + 1));
  std::barrier sync(kWorkers + 1);
  std::vector<CtCreate> got(kWorkers);
  // The round's connection, when it timed out, and who waits: written by the
  // control thread between rounds.
  CtTuple conn{};
  uint64_t now = 0;
  Stagger stagger;
  auto worker = [&](uint16_t id) {
    for (int r = 0; r < kRounds; r++) {
      sync.arrive_and_wait();
      stagger.wait_if(Stagger::kWorkers);
      got[id] = ct.create(pkt(id % 2 ? reversed(conn) : conn), 1, now, id);
      sync.arrive_and_wait();
    }
  };
  std::vector<std::thread> ts;
  for (uint16_t i = 0; i < kWorkers; i++) ts.emplace_back(worker, i);
  std::mt19937 rng(1);
  int reopened = 0, replaced = 0;
  for (int r = 0; r < kRounds; r++) {
    conn = v4(kA + uint32_t(r), uint16_t(r), kB, 53, kIpProtoUdp, 1);
    const uint64_t opened = uint64_t(r) * 100 * kSec;
    ASSERT_EQ(ct.create(pkt(conn), 1, opened, kWorkers).status, CtCreateStatus::kCreated);
    now = opened + 30 * kSec;  // the UDP timeout: expired, not yet removed
    stagger = {Stagger::Who(rng() % 3), std::chrono::nanoseconds(rng() % 100000)};
    sync.arrive_and_wait();
    stagger.wait_if(Stagger::kControl);
    const uint32_t removed = ct.expire(now);
    sync.arrive_and_wait();
    int created = 0;
    for (const CtCreate& c : got) {
      created += c.status == CtCreateStatus::kCreated;
      EXPECT_EQ(c.entry, got[0].entry) << "round " << r;
    }
    EXPECT_EQ(created, 1) << "round " << r;  // the others: kExisting
    EXPECT_EQ(ct.lookup(conn, now).entry, got[0].entry) << "round " << r;
    (removed ? replaced : reopened)++;
    // Workers hold nothing between rounds: recycle everything now.
    ct.expire(now + 1000 * kSec);
    if (ct.retire_begin()) ct.retire_end();
  }
  for (auto& t : ts) t.join();
  const CtStats s = ct.stats();
  EXPECT_EQ(s.reopened, uint64_t(reopened));
  EXPECT_EQ(s.created, uint64_t(kRounds + replaced));
  EXPECT_EQ(s.entries, 0u);
  // Both outcomes came up, or the race was not run.
  EXPECT_GT(reopened, 0);
  EXPECT_GT(replaced, 0);
  std::printf("reopen vs expiry: %d re-opened in place, %d expired then created anew\n", reopened,
              replaced);
}

// ---- churn: workers and the control thread as in the Switch -----------------------

constexpr uint16_t kWorkers = 4;
constexpr uint32_t kCap = 256;  // 64 buckets: full now and then
constexpr uint32_t kKeys = 4096;
constexpr uint16_t kZones = 4;
constexpr int kBurst = 32;
constexpr int kRounds = 3000;
constexpr int kBurstsPerRound = 2;    // control paces itself to the workers
constexpr uint64_t kStep = 1 * kSec;  // clock advance per control round

class ConntrackChurn : public ::testing::Test {
 protected:
  static CtConfig churn_config() {
    // Timeouts of a few rounds: idle connections expire while the workers
    // still hold entries they found a round ago, and entries come back to
    // the free list fast.
    CtConfig c = config(kCap, kWorkers);
    c.timeouts = CtTimeouts{.tcp_syn_sent = 3,
                            .tcp_syn_recv = 3,
                            .tcp_established = 4,
                            .tcp_fin_wait = 2,
                            .tcp_close_wait = 2,
                            .tcp_last_ack = 2,
                            .tcp_time_wait = 2,
                            .tcp_close = 1,
                            .udp = 2,
                            .udp_stream = 4,
                            .icmp = 2,
                            .generic = 3};
    return c;
  }
  void SetUp() override {
    qsbr_ = make_qsbr(kWorkers);
    ASSERT_NE(qsbr_, nullptr);
    for (uint32_t i = 0; i < kKeys; i++) {
      const uint8_t proto = i % 3 == 0 ? kIpProtoTcp : i % 3 == 1 ? kIpProtoUdp : kIpProtoGre;
      const bool ports = proto != kIpProtoGre;
      keys_.push_back(v4(kA + i % 61, ports ? uint16_t(1000 + i) : 0, kB + i % 7,
                         ports ? uint16_t(80 + i % 3) : 0, proto, uint16_t(1 + i % kZones)));
    }
  }

  // What one worker was told, to compare with the table's counters.
  struct Told {
    uint64_t created = 0, full = 0, invalid = 0, packets = 0;
  };

  void worker(uint16_t id, Told* told);
  CtLookup find(uint64_t n, const CtTuple& t, CtHint hint, uint64_t now);
  void control();
  uint32_t drain_and_refill();

  Conntrack ct_{churn_config()};
  std::unique_ptr<rte_rcu_qsbr, QsbrFree> qsbr_;
  std::vector<CtTuple> keys_;
  std::atomic<uint64_t> clock_ms_{0};
  std::atomic<uint64_t> bursts_{0};
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> changed_identity_{0};  // held entries whose key changed
  // Control thread only.
  uint64_t expired_ = 0, flushed_ = 0, recycled_ = 0, non_monotonic_ = 0;
};

// The three ways the datapath finds an entry, in turn: the flow's hint, a
// burst probe (with its entry prefetch), a plain lookup.
CtLookup ConntrackChurn::find(uint64_t n, const CtTuple& t, CtHint hint, uint64_t now) {
  switch (n % 3) {
    case 0: {
      CtLookup l = ct_.lookup(hint, now);
      return l.entry ? l : ct_.lookup(t, now);
    }
    case 1: {
      CtProbe p;
      ct_.probe(t, &p);
      ct_.prefetch_entries(p);
      return ct_.lookup(p, now);
    }
    default:
      return ct_.lookup(t, now);
  }
}

void ConntrackChurn::worker(uint16_t id, Told* told) {
  rte_rcu_qsbr_thread_register(qsbr_.get(), id);
  rte_rcu_qsbr_thread_online(qsbr_.get(), id);
  std::mt19937 rng(id);
  std::vector<CtHint> hints(2 * kKeys);  // by key and direction, kept across bursts
  static constexpr uint8_t kFlags[] = {kSyn, kAck, kAck, kSyn | kAck, kFin | kAck, kRst};
  struct Held {
    const CtEntry* e;
    CtKey key;
  } held[kBurst];
  for (uint64_t burst = 0; !stop_.load(std::memory_order_relaxed); burst++) {
    int n_held = 0;
    for (int b = 0; b < kBurst; b++, told->packets++) {
      const uint64_t now = clock_ms_.load(std::memory_order_relaxed);
      const uint32_t ki = rng() % kKeys;
      const bool rev = rng() & 1;
      const CtTuple t = rev ? reversed(keys_[ki]) : keys_[ki];
      const CtPacket p = pkt(t, t.proto == kIpProtoTcp ? kFlags[rng() % 6] : 0);
      CtHint& hint = hints[2 * ki + rev];
      CtLookup l = find(told->packets, t, hint, now);
      if (l.entry) {
        ct_.update(l, p, now);
        if (rng() % 500 == 0) Conntrack::end(l.entry);  // its rules stopped allowing it
      } else {
        const CtCreate c = ct_.create(p, 1, now, id);
        told->created += c.status == CtCreateStatus::kCreated;
        told->full += c.status == CtCreateStatus::kFull;
        told->invalid += c.status == CtCreateStatus::kInvalid;
        l = {c.entry, c.reply, c.src_hi};
      }
      if (l.entry == nullptr) continue;
      bool src_hi;
      const CtKey key = ct_make_key(t, &src_hi);
      if (!(l.entry->key == key) || l.src_hi != src_hi) changed_identity_++;
      held[n_held++] = {l.entry, key};
      hint = ct_.hint(l.entry, l.src_hi);
    }
    // The rest of the burst (actions, tx) still uses the entries: none may
    // have been recycled for another connection meanwhile, however long it
    // takes (a yield lets the control thread run in between).
    std::this_thread::yield();
    for (int i = 0; i < n_held; i++)
      if (!(held[i].e->key == held[i].key)) changed_identity_++;
    rte_rcu_qsbr_quiescent(qsbr_.get(), id);  // no CtEntry* past this point
    bursts_.fetch_add(1, std::memory_order_relaxed);
    if (burst % 64 == 63) {  // an idle nap, offline as Worker::run does
      rte_rcu_qsbr_thread_offline(qsbr_.get(), id);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      rte_rcu_qsbr_thread_online(qsbr_.get(), id);
    }
  }
  rte_rcu_qsbr_thread_offline(qsbr_.get(), id);
  rte_rcu_qsbr_thread_unregister(qsbr_.get(), id);
}

// Switch::poll_conntrack's work, a round at a time, plus flushes and the
// counters read as straitctl does.
void ConntrackChurn::control() {
  bool waiting = false;
  uint64_t token = 0;
  CtStats prev;
  for (int r = 1; r <= kRounds; r++) {
    while (bursts_.load(std::memory_order_relaxed) < uint64_t(r) * kBurstsPerRound)
      std::this_thread::yield();
    const uint64_t now = clock_ms_.fetch_add(kStep, std::memory_order_relaxed) + kStep;
    expired_ += ct_.expire(now, 16);  // all 64 buckets every 4 rounds
    if (r % 97 == 0) flushed_ += ct_.flush_zone(uint16_t(1 + r / 97 % kZones));
    if (r % 41 == 0) {  // a stopped VM's port
      const std::array<uint8_t, 16> addr[] = {addr16(kA + r % 61)};
      flushed_ += ct_.flush_addresses(uint16_t(1 + r % kZones), addr);
    }
    if (waiting && rte_rcu_qsbr_check(qsbr_.get(), token, false) == 1) {
      ct_.retire_end();
      waiting = false;
      recycled_++;
    }
    if (!waiting && ct_.retire_begin()) {
      token = rte_rcu_qsbr_start(qsbr_.get());
      waiting = true;
    }
    const CtStats s = ct_.stats();  // racy by design, but never going back
    if (s.created < prev.created || s.reopened < prev.reopened || s.invalid < prev.invalid ||
        s.refused_full < prev.refused_full)
      non_monotonic_++;
    prev = s;
    if (r % 256 == 0) ct_.count_states(now);  // a walk of the table beside the workers
  }
  stop_ = true;
  if (waiting) {
    rte_rcu_qsbr_check(qsbr_.get(), token, true);  // workers are going offline
    ct_.retire_end();
  }
}

// Removes everything, recycles it, then opens fresh connections until the
// free list runs dry: how many it held.
uint32_t ConntrackChurn::drain_and_refill() {
  const uint64_t later = clock_ms_.load() + 1000000 * kSec;
  ct_.expire(later);
  if (ct_.retire_begin()) ct_.retire_end();
  uint32_t opened = 0;
  for (uint32_t i = 0; i < 8 * kCap; i++) {
    const uint64_t bucket_refusals = ct_.stats().refused_bucket;
    const CtTuple t = v4(kA + i, uint16_t(i), kB, 443, kIpProtoUdp, 9);
    const CtCreate c = ct_.create(pkt(t), 1, later, 0);
    if (c.status == CtCreateStatus::kCreated) opened++;
    // Both buckets full is not the free list: try another key.
    if (c.status == CtCreateStatus::kFull && ct_.stats().refused_bucket == bucket_refusals) break;
  }
  return opened;
}

TEST_F(ConntrackChurn, WorkersHoldEntriesUntilQuiescentWhileControlExpiresFlushesAndRecycles) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Told> told(kWorkers);
  std::vector<std::thread> ts;
  for (uint16_t i = 0; i < kWorkers; i++)
    ts.emplace_back([this, i, &told] { worker(i, &told[i]); });
  control();
  for (auto& t : ts) t.join();

  EXPECT_EQ(changed_identity_.load(), 0u) << "an entry was recycled while a worker held it";
  EXPECT_EQ(non_monotonic_, 0u);
  Told sum;
  for (const Told& t : told) {
    sum.created += t.created;
    sum.full += t.full;
    sum.invalid += t.invalid;
    sum.packets += t.packets;
  }
  const CtStats s = ct_.stats();
  EXPECT_EQ(s.created + s.reopened, sum.created);
  EXPECT_EQ(s.refused_full, sum.full);
  EXPECT_EQ(s.invalid, sum.invalid);
  EXPECT_EQ(s.expired + s.flushed, expired_ + flushed_);
  // It really churned: entries timed out, were flushed, re-opened, and came
  // back through grace periods to be used again (more opened than fit).
  EXPECT_GT(expired_, 0u);
  EXPECT_GT(flushed_, 0u);
  EXPECT_GT(s.reopened, 0u);
  EXPECT_GT(recycled_, 10u);
  EXPECT_GT(s.created, uint64_t(2 * kCap));

  // After a sweep at the final time: the live entries are those the counters
  // say, and no connection has two.
  const uint64_t now = clock_ms_.load();
  ct_.expire(now);
  uint64_t live = 0;
  for (uint64_t n : ct_.count_states(now)) live += n;
  std::set<const CtEntry*> found;
  for (const CtTuple& t : keys_)
    if (const CtEntry* e = ct_.lookup(t, now).entry) found.insert(e);
  EXPECT_EQ(live, ct_.stats().entries);
  EXPECT_EQ(found.size(), live);
  // No entry was lost on the way: all of them can be opened again.
  EXPECT_EQ(drain_and_refill(), kCap);
  EXPECT_EQ(ct_.stats().parked, 0u);

  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  std::printf(
      "conntrack churn: %llu packets by %u workers, created %llu, reopened %llu, refused %llu, "
      "expired %llu, flushed %llu, %llu grace periods, %lld ms\n",
      (unsigned long long)sum.packets, kWorkers, (unsigned long long)s.created,
      (unsigned long long)s.reopened, (unsigned long long)s.refused_full,
      (unsigned long long)expired_, (unsigned long long)flushed_, (unsigned long long)recycled_,
      (long long)ms.count());
}

}  // namespace
}  // namespace strait::dp
