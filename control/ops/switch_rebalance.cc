// workers.rebalance: rx queues moved between workers by the load measured on
// them (control/ops/rxq_balance.h), and the automatic rebalance of the control
// tick. A queue being moved is polled by nobody for one grace period: the
// snapshot that takes it from its old worker is live everywhere before the
// one that gives it to its new worker is published, so two workers never
// read one queue, and its frames wait in its ring meanwhile (none is lost).
#include <algorithm>

#include <spdlog/spdlog.h>

#include "control/api/api_reply.h"
#include "control/ops/rxq_balance.h"
#include "control/switch/switch.h"

namespace strait::ctl {

using nlohmann::json;

namespace {

uint64_t rxq_key(uint16_t dp, uint16_t q) { return uint64_t(dp) << 16 | q; }

}  // namespace

uint64_t Switch::rxq_cycles(uint16_t dp, uint16_t q) const {
  uint64_t sum = 0;
  for (const auto& w : workers_) sum += dp::read(w->stats().ports[dp].rxq_cycles[q]);
  return sum;
}

uint64_t Switch::rxq_packets(uint16_t dp, uint16_t q) const {
  uint64_t sum = 0;
  for (const auto& w : workers_) sum += dp::read(w->stats().ports[dp].rxq_packets[q]);
  return sum;
}

std::vector<Switch::RxqRef> Switch::live_rx_queues() {
  std::vector<RxqRef> out;
  ports_.for_each_dp([&](const std::string& name, DpPort& p) {
    if (!p.live) return;
    for (uint16_t q = 0; q < p.rxq_worker.size(); q++) {
      const uint64_t now = rxq_cycles(p.dp, q);
      auto it = rebalance_.base.find(rxq_key(p.dp, q));
      const uint64_t base = it == rebalance_.base.end() || it->second > now ? 0 : it->second;
      out.push_back({name, &p, RxqLoad{p.dp, q, p.rxq_worker[q], now - base}});
    }
  });
  return out;
}

void Switch::reset_rxq_window() {
  rebalance_.base.clear();
  for (const RxqRef& r : live_rx_queues())
    rebalance_.base[rxq_key(r.load.port, r.load.queue)] = rxq_cycles(r.load.port, r.load.queue);
}

Switch::RebalancePlan Switch::plan_rebalance() {
  RebalancePlan plan;
  plan.queues = live_rx_queues();
  std::vector<RxqLoad> loads;
  std::vector<uint16_t> current;
  for (const RxqRef& r : plan.queues) {
    loads.push_back(r.load);
    current.push_back(r.load.worker);
  }
  const auto n_workers = static_cast<uint16_t>(workers_.size());
  plan.owner = plan_rx_queues(loads, n_workers);
  plan.load_before = worker_loads(loads, current, n_workers);
  plan.load_after = worker_loads(loads, plan.owner, n_workers);
  auto busiest = [](const std::vector<uint64_t>& v) {
    return v.empty() ? uint64_t(0) : *std::max_element(v.begin(), v.end());
  };
  if (busiest(plan.load_after) >= busiest(plan.load_before)) {  // no better: stay
    plan.owner = current;
    plan.load_after = plan.load_before;
  }
  return plan;
}

// params: {"dry_run": bool} (optional). The load of each queue is what it
// cost since the last rebalance (or start). Answers with the moves once the
// queues are polled by their new workers.
void Switch::workers_rebalance(const json& params, Done done) {
  if (!params.is_null() && !params.is_object())
    return done(error_reply(invalid("params: an object")));
  bool dry_run = false;
  if (params.is_object() && params.contains("dry_run")) {
    if (!params["dry_run"].is_boolean()) return done(error_reply(invalid("dry_run: a boolean")));
    dry_run = params["dry_run"].get<bool>();
  }
  if (rebalance_.moving) return done(error_reply(conflict("a rebalance is already moving queues")));
  RebalancePlan plan = plan_rebalance();
  json moved = json::array();
  for (size_t i = 0; i < plan.queues.size(); i++) {
    const RxqLoad& l = plan.queues[i].load;
    if (plan.owner[i] == l.worker) continue;
    moved.push_back({{"port", plan.queues[i].name}, {"dp_port", l.port}, {"queue", l.queue},
                     {"from", l.worker}, {"to", plan.owner[i]}, {"cycles", l.cycles}});
  }
  json result = {{"moved", moved}, {"load_before", plan.load_before},
                 {"load_after", plan.load_after}, {"dry_run", dry_run}};
  if (dry_run) return done(ok_reply(result));
  move_rx_queues(plan, [result, done = std::move(done)] { done(ok_reply(result)); });
}

void Switch::move_rx_queues(const RebalancePlan& plan, std::function<void()> then) {
  bool any = false;
  for (size_t i = 0; i < plan.queues.size(); i++) {
    const RxqLoad& l = plan.queues[i].load;
    const uint16_t to = plan.owner[i];
    if (to == l.worker) continue;
    ports_.move_rx_queue(*plan.queues[i].port, l.queue, to);
    spdlog::info("rx queue {} of {}: worker {} -> {}", l.queue, plan.queues[i].name, l.worker, to);
    any = true;
  }
  reset_rxq_window();
  if (!any) return then();
  rebalance_.moving = true;
  republish();  // the moved queues are polled by nobody
  publisher_.after_grace([this, then = std::move(then)]() mutable {
    // Only a rebalance pauses queues, and only one runs at a time.
    ports_.unpause_all();
    republish();  // ... and now by their new workers
    publisher_.after_grace([this, then = std::move(then)] {
      rebalance_.moving = false;
      then();
    });
  });
}

// The automatic rebalance ([datapath] rebalance_interval_s): every interval,
// the plan for the load of the interval is applied when it lowers the
// busiest worker's load by rebalance_improvement_pct or more.
void Switch::poll_rebalance(uint32_t now_sec) {
  if (cfg_.rebalance_interval_s == 0 || rebalance_.moving) return;
  if (now_sec < rebalance_.last_sec + cfg_.rebalance_interval_s) return;
  rebalance_.last_sec = now_sec;
  RebalancePlan plan = plan_rebalance();
  const auto& before = plan.load_before;
  const auto& after = plan.load_after;
  const uint64_t max_before = before.empty() ? 0 : *std::max_element(before.begin(), before.end());
  const uint64_t max_after = after.empty() ? 0 : *std::max_element(after.begin(), after.end());
  if (max_before == 0 ||
      (max_before - max_after) * 100 < max_before * cfg_.rebalance_improvement_pct) {
    reset_rxq_window();
    return;
  }
  spdlog::info("automatic rebalance: busiest worker's load {} -> {} cycles", max_before,
               max_after);
  rebalance_.automatic++;
  move_rx_queues(plan, [] {});
}

}  // namespace strait::ctl
