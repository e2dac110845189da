#include "control/ops/rxq_balance.h"

#include <algorithm>
#include <numeric>
#include <tuple>

namespace strait::ctl {

std::vector<uint16_t> plan_rx_queues(const std::vector<RxqLoad>& queues, uint16_t n_workers) {
  std::vector<uint16_t> owner(queues.size());
  for (size_t i = 0; i < queues.size(); i++) owner[i] = queues[i].worker;
  if (n_workers < 2) return owner;
  std::vector<size_t> order(queues.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const RxqLoad &x = queues[a], &y = queues[b];
    return std::tuple(y.cycles, x.port, x.queue) < std::tuple(x.cycles, y.port, y.queue);
  });
  std::vector<uint64_t> load(n_workers, 0);
  for (size_t i : order) {
    const RxqLoad& q = queues[i];
    if (q.cycles == 0) continue;  // idle: a move would gain nothing
    uint16_t best = q.worker < n_workers ? q.worker : 0;
    for (uint16_t w = 0; w < n_workers; w++)
      if (load[w] < load[best]) best = w;
    owner[i] = best;
    load[best] += q.cycles;
  }
  return owner;
}

std::vector<uint64_t> worker_loads(const std::vector<RxqLoad>& queues,
                                   const std::vector<uint16_t>& owner, uint16_t n_workers) {
  std::vector<uint64_t> load(n_workers, 0);
  for (size_t i = 0; i < queues.size(); i++)
    if (owner[i] < n_workers) load[owner[i]] += queues[i].cycles;
  return load;
}

}  // namespace strait::ctl
