#include "control/ops/rebalancer.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "control/api/api_reply.h"

namespace strait::ctl {

using nlohmann::json;

namespace {

uint64_t rxq_key(uint16_t dp, uint16_t q) { return uint64_t(dp) << 16 | q; }

uint64_t busiest(const std::vector<uint64_t>& v) {
  return v.empty() ? uint64_t(0) : *std::max_element(v.begin(), v.end());
}

}  // namespace

Rebalancer::Rebalancer(const std::vector<std::unique_ptr<dp::Worker>>& workers, PortTable& ports,
                       uint32_t interval_s, uint32_t improvement_pct, Publish publish)
    : workers_(workers),
      ports_(ports),
      interval_s_(interval_s),
      improvement_pct_(improvement_pct),
      publish_(std::move(publish)) {}

uint64_t Rebalancer::cycles(uint16_t dp, uint16_t q) const {
  uint64_t sum = 0;
  for (const auto& w : workers_) sum += dp::read(w->stats().ports[dp].rxq_cycles[q]);
  return sum;
}

uint64_t Rebalancer::packets(uint16_t dp, uint16_t q) const {
  uint64_t sum = 0;
  for (const auto& w : workers_) sum += dp::read(w->stats().ports[dp].rxq_packets[q]);
  return sum;
}

std::vector<Rebalancer::Queue> Rebalancer::live_queues() {
  std::vector<Queue> out;
  ports_.for_each_dp([&](const std::string& name, DpPort& p) {
    if (!p.live) return;
    for (uint16_t q = 0; q < p.rxq_worker.size(); q++) {
      const uint64_t now = cycles(p.dp, q);
      auto it = base_.find(rxq_key(p.dp, q));
      const uint64_t base = it == base_.end() || it->second > now ? 0 : it->second;
      out.push_back({name, &p, RxqLoad{p.dp, q, p.rxq_worker[q], now - base}});
    }
  });
  return out;
}

void Rebalancer::reset_window() {
  base_.clear();
  for (const Queue& r : live_queues())
    base_[rxq_key(r.load.port, r.load.queue)] = cycles(r.load.port, r.load.queue);
}

Rebalancer::Plan Rebalancer::plan() {
  Plan plan;
  plan.queues = live_queues();
  std::vector<RxqLoad> loads;
  std::vector<uint16_t> current;
  for (const Queue& r : plan.queues) {
    loads.push_back(r.load);
    current.push_back(r.load.worker);
  }
  const auto n_workers = static_cast<uint16_t>(workers_.size());
  plan.owner = plan_rx_queues(loads, n_workers);
  plan.load_before = worker_loads(loads, current, n_workers);
  plan.load_after = worker_loads(loads, plan.owner, n_workers);
  if (busiest(plan.load_after) >= busiest(plan.load_before)) {  // no better: stay
    plan.owner = current;
    plan.load_after = plan.load_before;
  }
  return plan;
}

void Rebalancer::request(const json& params, std::function<void(json reply)> done) {
  if (!params.is_null() && !params.is_object())
    return done(error_reply(invalid("params: an object")));
  bool dry_run = false;
  if (params.is_object() && params.contains("dry_run")) {
    if (!params["dry_run"].is_boolean()) return done(error_reply(invalid("dry_run: a boolean")));
    dry_run = params["dry_run"].get<bool>();
  }
  if (moving_) return done(error_reply(conflict("a rebalance is already moving queues")));
  Plan p = plan();
  json moved = json::array();
  for (size_t i = 0; i < p.queues.size(); i++) {
    const RxqLoad& l = p.queues[i].load;
    if (p.owner[i] == l.worker) continue;
    moved.push_back({{"port", p.queues[i].name}, {"dp_port", l.port}, {"queue", l.queue},
                     {"from", l.worker}, {"to", p.owner[i]}, {"cycles", l.cycles}});
  }
  json result = {{"moved", moved}, {"load_before", p.load_before},
                 {"load_after", p.load_after}, {"dry_run", dry_run}};
  if (dry_run) return done(ok_reply(result));
  move(p, [result, done = std::move(done)] { done(ok_reply(result)); });
}

void Rebalancer::move(const Plan& p, std::function<void()> then) {
  bool any = false;
  for (size_t i = 0; i < p.queues.size(); i++) {
    const RxqLoad& l = p.queues[i].load;
    const uint16_t to = p.owner[i];
    if (to == l.worker) continue;
    ports_.move_rx_queue(*p.queues[i].port, l.queue, to);
    spdlog::info("rx queue {} of {}: worker {} -> {}", l.queue, p.queues[i].name, l.worker, to);
    any = true;
  }
  reset_window();
  if (!any) return then();
  moving_ = true;
  publish_([this, then = std::move(then)]() mutable {  // the moved queues are polled by nobody
    // Only a rebalance pauses queues, and only one runs at a time.
    ports_.unpause_all();
    publish_([this, then = std::move(then)] {  // ... and now by their new workers
      moving_ = false;
      then();
    });
  });
}

void Rebalancer::poll(uint32_t now_sec) {
  if (interval_s_ == 0 || moving_) return;
  if (now_sec < last_sec_ + interval_s_) return;
  last_sec_ = now_sec;
  Plan p = plan();
  const uint64_t before = busiest(p.load_before), after = busiest(p.load_after);
  if (before == 0 || (before - after) * 100 < before * improvement_pct_) {
    reset_window();
    return;
  }
  spdlog::info("automatic rebalance: busiest worker's load {} -> {} cycles", before, after);
  automatic_++;
  move(p, [] {});
}

json Rebalancer::status() const {
  return {{"interval_s", interval_s_}, {"improvement_pct", improvement_pct_},
          {"automatic", automatic_}, {"in_progress", moving_}};
}

}  // namespace strait::ctl
