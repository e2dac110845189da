#pragma once
// Per-worker counters. Each WorkerStats is written by its worker only and
// read by the control thread: relaxed atomics, so reading never slows a
// worker (no shared cache line is written by two threads) and no read tears.
#include <atomic>
#include <cstdint>

#include "dataplane/drop_reasons.h"
#include "dataplane/snapshot.h"

namespace strait::dp {

using Counter = std::atomic<uint64_t>;

// Single-writer increment: a plain load/add/store, no locked instruction.
inline void bump(Counter& c, uint64_t n = 1) {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}
inline uint64_t read(const Counter& c) { return c.load(std::memory_order_relaxed); }

// Where a worker's busy cycles go, burst by burst: the rx burst call; parsing;
// flow-cache lookups; the pipeline on misses; actions (conntrack, rewrites,
// copies, tx buffering, and a tx burst when a buffer fills); the tx bursts
// that flush after each rx burst.
enum class Stage : uint8_t { kRx, kParse, kLookup, kPipeline, kActions, kTx };
inline constexpr unsigned kNumStages = 6;
inline constexpr const char* kStageNames[kNumStages] = {"rx",       "parse",   "lookup",
                                                        "pipeline", "actions", "tx"};

struct PortCounters {
  Counter rx_packets{0}, rx_bytes{0}, tx_packets{0}, tx_bytes{0};
  Counter drops[kNumDropReasons] = {};
  // Per rx queue of the port: the cycles of the bursts read from it (rx to
  // tx flush) and their packets: the load a queue puts on whoever polls it.
  Counter rxq_cycles[kMaxRxQueues] = {};
  Counter rxq_packets[kMaxRxQueues] = {};
};

struct alignas(64) WorkerStats {
  Counter iterations{0};
  Counter busy_cycles{0};   // TSC cycles of iterations that moved packets
  Counter idle_cycles{0};   // TSC cycles of empty iterations
  // The longest iteration since start (naps excluded): the longest time the
  // worker's rx queues went unpolled, and how many iterations took over a
  // millisecond. A worker never waits for the control thread (F16), so these
  // stay at a burst's worth of work whatever the control plane does.
  Counter max_iteration_cycles{0};
  Counter iterations_over_1ms{0};
  Counter packets{0};       // received
  Counter cache_hits{0}, cache_misses{0}, cache_evictions{0};
  // Misses on an entry a change of a learned MAC it was decided by made
  // stale (learned_fdb.h); counted in cache_misses too.
  Counter cache_stale{0};
  Counter learn_events_lost{0};  // up-queue full
  Counter arp_responder_replies{0};  // ARP requests of local VMs answered for remote ports
  Counter generation{0};    // last snapshot generation this worker forwarded by
  Counter stage_cycles[kNumStages] = {};  // busy_cycles by Stage (the rest: loop overhead)
  Counter drops[kNumDropReasons] = {};
  PortCounters ports[kMaxPorts];  // by datapath port index
};

}  // namespace strait::dp
