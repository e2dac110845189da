#include "control/switch/port_slots.h"

#include <algorithm>

namespace strait::ctl {

PortSlots::PortSlots(uint16_t n_indexes, uint16_t n_workers)
    : used_(n_indexes, false), rxq_load_(n_workers, 0) {}

std::optional<uint16_t> PortSlots::alloc_index() {
  auto it = std::find(used_.begin(), used_.end(), false);
  if (it == used_.end()) return std::nullopt;
  *it = true;
  return static_cast<uint16_t>(it - used_.begin());
}

void PortSlots::free_index(uint16_t index) { used_[index] = false; }

std::vector<uint16_t> PortSlots::assign_rx_queues(uint16_t n) {
  std::vector<uint16_t> owner;
  for (uint16_t q = 0; q < n; q++) {
    auto w = static_cast<uint16_t>(std::min_element(rxq_load_.begin(), rxq_load_.end()) -
                                   rxq_load_.begin());
    rxq_load_[w]++;
    owner.push_back(w);
  }
  return owner;
}

void PortSlots::release_rx_queues(const std::vector<uint16_t>& workers) {
  for (uint16_t w : workers) rxq_load_[w]--;
}

void PortSlots::move_rx_queue(uint16_t from, uint16_t to) {
  rxq_load_[from]--;
  rxq_load_[to]++;
}

}  // namespace strait::ctl
