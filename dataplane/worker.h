#pragma once
// A poll-mode worker: owns the (port, rx queue) pairs the snapshot gives it
// and runs to completion: rx burst -> parse -> flow cache -> (miss: pipeline)
// -> actions -> tx batched per output port. It never waits on the control
// thread and takes no lock, except a per-burst lock on a tx queue that more
// workers than queues share.
#include <atomic>
#include <cstdint>
#include <memory>

#include <boost/lockfree/spsc_queue.hpp>
#include <rte_cycles.h>
#include <rte_mempool.h>
#include <rte_rcu_qsbr.h>
#include <rte_spinlock.h>

#include "dataplane/cache_dump.h"
#include "dataplane/conntrack.h"
#include "dataplane/flow_cache.h"
#include "dataplane/learned_fdb.h"
#include "dataplane/qos.h"
#include "dataplane/sg_stage.h"
#include "dataplane/snapshot.h"
#include "dataplane/stats.h"

struct rte_mbuf;

namespace strait::dp {

inline constexpr uint16_t kBurst = 32;
inline constexpr uint16_t kMaxLearned = 8192;  // learned-MAC slots, switch-wide
inline constexpr uint16_t kMaxTxQueues = 64;

// Conntrack's clock (milliseconds from the TSC): workers read it once per
// loop iteration, the control thread passes the same to Conntrack::expire().
inline uint64_t ct_now_ms() { return rte_rdtsc() / (rte_get_tsc_hz() / 1000); }

// Worker -> control: "this source MAC appeared behind this uplink" (port: a
// datapath port, or kVtepPortBase + VTEP index for a MAC learned from a
// decapsulated frame of a VXLAN network with learning on).
struct LearnEvent {
  uint16_t lvlan;
  uint16_t port;
  uint8_t mac[6];
};
using LearnQueue = boost::lockfree::spsc_queue<LearnEvent, boost::lockfree::capacity<1024>>;

// Worker -> control: an ARP reply (or request) on the underlay told that
// IPv4 address `ip` (network order) is at `mac`: resolves remote VTEPs' next
// hops.
struct ArpEvent {
  uint32_t ip;
  uint8_t mac[6];
};
using ArpQueue = boost::lockfree::spsc_queue<ArpEvent, boost::lockfree::capacity<256>>;

// State every worker reads; owned by the control thread, outlives the workers.
struct DataplaneShared {
  // The live snapshot. Control: store(release) after building it completely;
  // workers: load(acquire) once per iteration and use nothing else until
  // their next quiescent report (rte_rcu_qsbr), which is what lets the
  // control thread free the old one after a grace period.
  std::atomic<const Snapshot*> snapshot{nullptr};
  rte_rcu_qsbr* qsbr = nullptr;
  rte_mempool* pool = nullptr;  // flood replicas
  std::atomic<bool> stop{false};
  // One lock per tx queue that several workers share; taken per burst.
  rte_spinlock_t txq_lock[RTE_MAX_ETHPORTS][kMaxTxQueues];      // by ethdev id
  rte_spinlock_t vhost_txq_lock[kMaxPorts][kMaxVhostQueues];    // by datapath port
  // Coarse clock for learned-MAC aging: seconds since start, written by the
  // control thread, read by workers (relaxed: a second off is harmless).
  std::atomic<uint32_t> now_sec{0};
  // Connection tracking for stateful security groups: one table, every
  // worker (owned by the control thread, which expires and flushes it).
  Conntrack* ct = nullptr;
  // MACs learned from traffic, published apart from the snapshot (its
  // pointer follows the snapshot's rules; learned_fdb.h).
  LearnedState learned;
  // The QoS meters of every port (qos.h), by datapath index: shared, so a
  // port's limits hold across workers.
  std::unique_ptr<QosPortState[]> qos;

  DataplaneShared();
};

class Worker {
 public:
  Worker(uint16_t id, unsigned lcore, DataplaneShared* shared, uint32_t cache_entries,
         uint32_t idle_sleep_us);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // The worker's loop; returns once shared->stop is set. `arg` is the Worker.
  static int lcore_main(void* arg);

  uint16_t id() const { return id_; }
  unsigned lcore() const { return lcore_; }
  const WorkerStats& stats() const { return *stats_; }
  LearnQueue& learn_queue() { return learn_q_; }
  ArpQueue& arp_queue() { return arp_q_; }
  // Last second (DataplaneShared::now_sec) traffic refreshed learned slot i.
  uint32_t learn_seen(uint16_t slot) const {
    return learn_seen_[slot].load(std::memory_order_relaxed);
  }
  // Entries of the live generation (control thread, racy by design: a
  // diagnostic snapshot of a cache the worker keeps changing).
  const FlowCache& cache() const { return cache_; }
  // The snapshot cache generation (Snapshot::cache_generation) the cache
  // was last used with (control thread: read once the worker stopped).
  uint32_t cache_generation() const { return cache_gen_.load(std::memory_order_relaxed); }
  // Copies of the cache made by the worker on request (straitctl cache dump).
  CacheDumpSlot& cache_dump() { return dump_; }

 private:
  struct TxBuffer {
    uint16_t n = 0;
    bool queued = false;  // listed in tx_dirty_ for this iteration's flush
    rte_mbuf* pkts[kBurst];
  };

  int run() noexcept;
  // tsc: the TSC when the poll began; set to when it ended (stage cycles
  // and the queue's load are counted between the two).
  uint16_t poll(const Snapshot& s, const RxQueue& q, uint64_t* tsc) noexcept;
  // tsc: when the burst was read; returns the TSC after its actions.
  uint64_t process(const Snapshot& s, const PortEntry& in, uint16_t in_idx, rte_mbuf** pkts,
                   uint16_t n, uint64_t tsc) noexcept;
  // ct: the packet's conntrack probe (sg_prepare) when a has kActTrack;
  // flow: its cache entry, which keeps the connection's hint (null: none).
  void execute(const Snapshot& s, rte_mbuf* m, const FlowKey& key, const PacketMeta& meta,
               const Action& a, const SgPrepared* ct, CachedFlow* flow) noexcept;
  // in_conn: -1 unknown (sender not tracked), else whether the packet belongs
  // to a live connection (flood targets with port security).
  void flood(const Snapshot& s, rte_mbuf* m, const FlowKey& key, const PacketMeta& meta,
             const Action& a, int in_conn) noexcept;
  bool flood_admits(const Snapshot& s, uint16_t port, const FlowKey& key, const PacketMeta& meta,
                    rte_mbuf* m, uint16_t lvlan, int* in_conn) noexcept;
  // Queues m for `port`; a port with an ingress QoS limit polices it first.
  void enqueue(const Snapshot& s, uint16_t port, rte_mbuf* m) noexcept;
  // QoS (qos.h): the drop reason of a verdict; DSCP marking of a VM's frame.
  static DropReason qos_drop(QosVerdict v) noexcept;
  static void mark_dscp(rte_mbuf* m, const FlowKey& key, const PacketMeta& meta,
                        uint8_t dscp) noexcept;
  void flush(const Snapshot& s, uint16_t port) noexcept;
  void flush_all(const Snapshot& s) noexcept;
  void drop(rte_mbuf* m, uint16_t port, DropReason r) noexcept;
  // Counts n drops of reason r against the worker and the port.
  void count_drop(uint16_t port, DropReason r, uint64_t n = 1) noexcept;
  void learn(const Snapshot& s, const FlowKey& key, const Action& a) noexcept;
  // VXLAN (issue 6): send m (consumed) encapsulated to remote VTEP port
  // `vport`; the remote VTEP of `vport` if its next hop is known, else null
  // after counting vtep_unresolved and asking ARP for it.
  void encap(const Snapshot& s, rte_mbuf* m, uint16_t vport, const FlowKey& key,
             const Action& a) noexcept;
  const RemoteVtep* resolve(const Snapshot& s, uint16_t vport, uint16_t in_port) noexcept;
  // Flood copies to the network's flood VTEPs; returns how many VTEPs were tried.
  uint32_t flood_vteps(const Snapshot& s, rte_mbuf* m, const FlowKey& key,
                       const Action& a) noexcept;
  void ask_arp(const Snapshot& s, uint16_t vtep_idx, const RemoteVtep& r) noexcept;
  void vtep_arp(const Snapshot& s, rte_mbuf* m, const FlowKey& key) noexcept;
  void arp_reply(const Snapshot& s, rte_mbuf* m, const FlowKey& key, const Action& a) noexcept;

  const uint16_t id_;
  const unsigned lcore_;
  DataplaneShared* const shared_;
  const uint32_t idle_sleep_us_;
  const uint64_t tsc_per_ms_;
  uint64_t now_ms_ = 0;  // ct_now_ms() at the start of this loop iteration
  uint64_t next_ms_tsc_ = 0;  // the TSC at which now_ms_ moves on
  uint64_t burst_tsc_ = 0;    // the TSC the burst being processed was received at (QoS meters)
  FlowCache cache_;
  std::atomic<uint32_t> cache_gen_{0};
  CacheDumpSlot dump_;
  std::unique_ptr<WorkerStats> stats_;
  std::unique_ptr<TxBuffer[]> tx_;          // by datapath port
  std::unique_ptr<uint16_t[]> tx_dirty_;    // ports with buffered frames
  uint16_t n_dirty_ = 0;
  LearnQueue learn_q_;
  ArpQueue arp_q_;
  std::unique_ptr<std::atomic<uint32_t>[]> learn_seen_;  // by learned slot
  // By VTEP index: 1 + the second (DataplaneShared::now_sec) this worker
  // last asked ARP for the VTEP's next hop; 0 = never. This worker's only.
  std::unique_ptr<uint32_t[]> arp_asked_;
  // process()'s per-frame decisions and conntrack probes: members, as
  // locals their default initialisers ran for every burst (a `rep stosq`
  // of 512 bytes and more); each is written before it is read.
  Action acts_[kBurst];
  SgPrepared ct_[kBurst];
  CachedFlow* flows_[kBurst];  // each frame's cache entry, while it is still its key's
};

}  // namespace strait::dp
