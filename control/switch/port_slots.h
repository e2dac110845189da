#pragma once
// What the datapath has room for: its port indexes (dp::kMaxPorts, reused
// once a port is gone and no worker can see it) and how many rx queues each
// worker polls, from which new queues are placed. Bookkeeping only: no DPDK.
#include <cstdint>
#include <optional>
#include <vector>

namespace strait::ctl {

class PortSlots {
 public:
  PortSlots(uint16_t n_indexes, uint16_t n_workers);

  // The lowest free datapath port index, if any.
  std::optional<uint16_t> alloc_index();
  void free_index(uint16_t index);

  // The worker of each of n new rx queues: each to the worker polling the
  // fewest. A queue stays with its worker until its port goes (or a
  // rebalance moves it): two workers must never poll one queue.
  std::vector<uint16_t> assign_rx_queues(uint16_t n);
  // The queues (their workers) of a port that goes.
  void release_rx_queues(const std::vector<uint16_t>& workers);
  void move_rx_queue(uint16_t from, uint16_t to);
  // Rx queues each worker polls.
  const std::vector<uint32_t>& rx_queues() const { return rxq_load_; }

 private:
  std::vector<bool> used_;
  std::vector<uint32_t> rxq_load_;
};

}  // namespace strait::ctl
