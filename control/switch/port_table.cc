#include "control/switch/port_table.h"

namespace strait::ctl {

void PortTable::release_rx_queues(DpPort& p) {
  slots_.release_rx_queues(p.rxq_worker);
  p.rxq_worker.clear();
}

PortRuntime* PortTable::find(const std::string& id) {
  auto it = ports_.find(id);
  return it == ports_.end() ? nullptr : &it->second;
}

const PortRuntime* PortTable::find(const std::string& id) const {
  auto it = ports_.find(id);
  return it == ports_.end() ? nullptr : &it->second;
}

void PortTable::add(const std::string& id, PortRuntime rt) { ports_.insert_or_assign(id, std::move(rt)); }

PortRuntime PortTable::take(const std::string& id) {
  auto it = ports_.find(id);
  if (it == ports_.end()) return {};
  PortRuntime rt = std::move(it->second);
  ports_.erase(it);
  slots_.release_rx_queues(rt.dp.rxq_worker);
  return rt;
}

PortRuntime* PortTable::by_vhost_path(const std::string& path, std::string* id) {
  for (auto& [pid, p] : ports_) {
    if (p.dp.kind == dp::PortKind::kVhost && p.vhost_path == path) {
      *id = pid;
      return &p;
    }
  }
  return nullptr;
}

PortRuntime* PortTable::by_vid(int vid, std::string* id) {
  for (auto& [pid, p] : ports_) {
    if (p.dp.kind == dp::PortKind::kVhost && vid >= 0 && p.dp.vid == vid) {
      *id = pid;
      return &p;
    }
  }
  return nullptr;
}

void PortTable::vhost_ready(PortRuntime& p, int vid, uint16_t nq) {
  if (p.dp.vid >= 0) slots_.release_rx_queues(p.dp.rxq_worker);  // a stale device: replaced
  p.dp.vid = vid;
  p.dp.n_txq = nq;
  p.dp.rxq_worker = slots_.assign_rx_queues(nq);
  p.dp.rxq_paused = 0;
  p.dp.live = true;
}

void PortTable::vhost_gone(PortRuntime& p) {
  release_rx_queues(p.dp);
  p.dp.vid = -1;
  p.dp.live = false;
}

Status PortTable::add_uplink(const std::string& physnet, const Ethdev& dev) {
  auto idx = slots_.alloc_index();
  if (!idx) return exhausted("physnet " + physnet + ": no free datapath port index");
  Uplink u{DpPort{*idx, dev.port_id, slots_.assign_rx_queues(dev.n_rxq), dev.n_txq, true}, dev};
  uplinks_.insert_or_assign(physnet, std::move(u));
  return ok();
}

Uplink* PortTable::uplink(const std::string& physnet) {
  auto it = uplinks_.find(physnet);
  return it == uplinks_.end() ? nullptr : &it->second;
}

void PortTable::for_each_dp(const std::function<void(const std::string&, DpPort&)>& fn) {
  for (auto& [name, u] : uplinks_) fn("physnet:" + name, u.dp);
  for (auto& [id, p] : ports_) fn(id, p.dp);
}

void PortTable::for_each_dp(const std::function<void(const std::string&, const DpPort&)>& fn) const {
  for (const auto& [name, u] : uplinks_) fn("physnet:" + name, u.dp);
  for (const auto& [id, p] : ports_) fn(id, p.dp);
}

std::string PortTable::name_of(uint16_t dp) const {
  std::string name;
  for_each_dp([&](const std::string& n, const DpPort& p) {
    if (p.dp == dp) name = n;
  });
  return name;
}

void PortTable::fill(BuildInput& in) const {
  for (const auto& [id, p] : ports_) in.ports.emplace(id, p.dp);
  for (const auto& [name, u] : uplinks_) in.uplinks.emplace(name, u.dp);
}

void PortTable::move_rx_queue(DpPort& p, uint16_t q, uint16_t to) {
  const uint16_t from = p.rxq_worker.at(q);
  if (from == to) return;
  p.rxq_worker[q] = to;
  p.rxq_paused |= 1u << q;
  slots_.move_rx_queue(from, to);
}

void PortTable::unpause_all() {
  for (auto& [name, u] : uplinks_) u.dp.rxq_paused = 0;
  for (auto& [id, p] : ports_) p.dp.rxq_paused = 0;
}

void PortTable::clear() {
  ports_.clear();
  uplinks_.clear();
}

}  // namespace strait::ctl
