#pragma once
// Rx queues to workers by measured load (OVS's pmd-rxq-assign=cycles): the
// plan only; the Switch moves queues without two workers ever polling one.
#include <cstdint>
#include <vector>

namespace strait::ctl {

struct RxqLoad {
  uint16_t port;    // datapath port index
  uint16_t queue;
  uint16_t worker;  // polls it now
  uint64_t cycles;  // the load measured on it
};

// The worker each queue should have, in input order: heaviest queue first,
// each to the worker with the least load so far (ties: the queue's own
// worker, then the lowest id). Queues that carry nothing stay where they are.
std::vector<uint16_t> plan_rx_queues(const std::vector<RxqLoad>& queues, uint16_t n_workers);

// Each worker's load (cycles of the queues it owns) under `owner`.
std::vector<uint64_t> worker_loads(const std::vector<RxqLoad>& queues,
                                   const std::vector<uint16_t>& owner, uint16_t n_workers);

}  // namespace strait::ctl
