// The API methods of Switch: each validates everything before it changes
// anything, and a refusal leaves no trace (docs/api.md).
#include <rte_lcore.h>

#include "control/switch.h"
#include "vhost/vhost_port.h"

namespace strait::ctl {
namespace {

using nlohmann::json;

json error_reply(const Error& e) {
  return {{"ok", false}, {"error", {{"code", e.code}, {"message", e.message}}}};
}
json ok_reply(json result) { return {{"ok", true}, {"result", std::move(result)}}; }

Result<std::string> id_param(const json& params) {
  if (!params.is_object() || !params.contains("id") || !params["id"].is_string())
    return invalid("id: required string");
  return params["id"].get<std::string>();
}

json drops_json(const std::vector<uint64_t>& v, size_t first) {
  json d = json::object();
  for (unsigned r = 1; r < dp::kNumDropReasons; r++)
    if (v[first + r]) d[std::string(dp::drop_reason_name(static_cast<dp::DropReason>(r)))] = v[first + r];
  return d;
}

}  // namespace

void Switch::call(const std::string& method, const json& params, Done done) {
  if (method == "network.create") return network_create(params, std::move(done));
  if (method == "network.delete") return network_delete(params, std::move(done));
  if (method == "port.bind") return port_bind(params, std::move(done));
  if (method == "port.unbind") return port_unbind(params, std::move(done));
  if (method == "network.list") {
    json nets = json::array();
    for (const auto& [id, n] : model_.networks()) nets.push_back(network_json(n));
    return done(ok_reply({{"networks", nets}}));
  }
  if (method == "port.list") {
    json ports = json::array();
    for (const auto& [id, p] : model_.ports()) ports.push_back(port_json(p));
    return done(ok_reply({{"ports", ports}}));
  }
  if (method == "port.show") {
    auto id = id_param(params);
    if (!id) return done(error_reply(id.error()));
    const PortSpec* p = model_.port(*id);
    if (!p) return done(error_reply(not_found("port " + *id + " is not bound")));
    return done(ok_reply(port_json(*p)));
  }
  if (method == "show") return done(ok_reply(show()));
  if (method == "stats") return done(ok_reply(stats()));
  done(error_reply(invalid("method: unknown method '" + method + "'")));
}

void Switch::network_create(const json& params, Done done) {
  auto spec = parse_network(params);
  if (!spec) return done(error_reply(spec.error()));
  if (Status st = model_.add_network(*spec); !st) return done(error_reply(st.error()));
  if (Status st = store_->put_network(*spec); !st) {
    (void)model_.remove_network(spec->id);
    return done(error_reply(st.error()));
  }
  // A network with no port here is not in the datapath: nothing to publish.
  done(ok_reply(network_json(*spec)));
}

void Switch::network_delete(const json& params, Done done) {
  auto id = id_param(params);
  if (!id) return done(error_reply(id.error()));
  const NetworkSpec* net = model_.network(*id);
  const NetworkSpec saved = net ? *net : NetworkSpec{};
  if (Status st = model_.remove_network(*id); !st) return done(error_reply(st.error()));
  if (Status st = store_->delete_network(saved.id); !st) {
    (void)model_.add_network(saved);
    return done(error_reply(st.error()));
  }
  done(ok_reply(json::object()));
}

void Switch::port_bind(const json& params, Done done) {
  auto spec = parse_port(params);
  if (!spec) return done(error_reply(spec.error()));
  if (Status st = model_.check_add_port(*spec); !st) return done(error_reply(st.error()));
  auto idx = alloc_dp();
  if (!idx) return done(error_reply(exhausted("no free datapath port index")));
  auto rt = attach(*spec, *idx);
  if (!rt) {
    free_dp(*idx);
    return done(error_reply(rt.error()));
  }
  // Model, then disk, then datapath: a change that cannot be made durable
  // is undone and refused before any worker sees it.
  Status st = model_.add_port(*spec);
  if (st) {
    st = store_->put_port(*spec, model_.local_vlan(spec->network));
    if (!st) (void)model_.remove_port(spec->id);
  }
  if (!st) {
    for (uint16_t w : rt->dp.rxq_worker) rxq_load_[w]--;
    detach(*rt);
    free_dp(*idx);
    return done(error_reply(st.error()));
  }
  const bool live = rt->dp.live;
  ports_.emplace(spec->id, std::move(*rt));
  republish();
  if (live) announce_up_when_live(spec->id);
  // Rendered when the answer goes out: by then the port is live (and "up"
  // if its device is), unless another client unbound it meanwhile.
  publisher_.after_grace([this, id = spec->id, done = std::move(done),
                          bound = port_json(*model_.port(spec->id))]() {
    const PortSpec* p = model_.port(id);
    done(ok_reply(p ? port_json(*p) : bound));
  });
}

void Switch::port_unbind(const json& params, Done done) {
  auto id = id_param(params);
  if (!id) return done(error_reply(id.error()));
  // The model knows the canonical (lower-case) id; runtime state uses it too.
  const PortSpec* spec = model_.port(*id);
  auto it = spec ? ports_.find(spec->id) : ports_.end();
  if (it == ports_.end()) return done(error_reply(not_found("port " + *id + " is not bound")));
  *id = spec->id;
  const PortSpec saved = *spec;
  const uint16_t lvlan = model_.local_vlan(saved.network);
  if (Status st = model_.remove_port(*id); !st) return done(error_reply(st.error()));
  if (Status st = store_->delete_port(*id); !st) {
    (void)model_.restore_port(saved, lvlan);
    return done(error_reply(st.error()));
  }
  PortRuntime rt = std::move(it->second);
  ports_.erase(it);
  for (uint16_t w : rt.dp.rxq_worker) rxq_load_[w]--;
  forget_learned_of_released_vlans();
  republish();
  // The device and its index are released only once no worker can hold a
  // snapshot that polls or sends to it.
  const std::string port_id = *id;
  publisher_.after_grace([this, rt = std::move(rt), done = std::move(done), port_id]() {
    detach(rt);
    free_dp(rt.dp.dp);
    if (rt.dp.live) emit("port-down", port_id);
    emit("port-unbound", port_id);
    done(ok_reply(json::object()));
  });
}

json Switch::network_json(const NetworkSpec& n) const {
  json j = to_json(n);
  j["local_vlan"] = model_.local_vlan(n.id);
  j["ports"] = model_.ports_on(n.id);
  return j;
}

json Switch::port_json(const PortSpec& p) const {
  json j = to_json(p);
  j["local_vlan"] = model_.local_vlan(p.network);
  auto it = ports_.find(p.id);
  const dp::PortEntry* e = it == ports_.end() ? nullptr : publisher_.current()->port(it->second.dp.dp);
  // "up" once every worker forwards for it, which is when port-up went out.
  j["state"] = e && e->enabled && it->second.announced ? "up" : "down";
  j["dp_port"] = it == ports_.end() ? json(nullptr) : json(it->second.dp.dp);
  const bool ethdev = it != ports_.end() && it->second.has_device &&
                      it->second.dp.kind == dp::PortKind::kEthdev;
  j["ethdev"] = ethdev ? json(it->second.dev.port_id) : json(nullptr);
  if (it != ports_.end() && it->second.dp.kind == dp::PortKind::kVhost) {
    j["vhost"] = {{"vid", it->second.dp.vid}, {"queues", it->second.dp.rxq_worker.size()}};
  }
  return j;
}

json Switch::show() const {
  json workers = json::array();
  const dp::Snapshot* s = publisher_.current();
  for (const auto& w : workers_) {
    json rxq = json::array();
    for (const dp::RxQueue& q : s->rx_by_worker[w->id()])
      rxq.push_back({{"port", q.port}, {"queue", q.queue}});
    workers.push_back({{"id", w->id()}, {"lcore", w->lcore()}, {"rx_queues", rxq}});
  }
  json physnets = json::array();
  for (const auto& [name, u] : uplinks_)
    physnets.push_back({{"name", name}, {"device", u.dev.devargs}, {"dp_port", u.dp.dp},
                        {"ethdev", u.dev.port_id}, {"state", u.dp.live ? "up" : "down"}});
  json nets = json::array(), ports = json::array();
  for (const auto& [id, n] : model_.networks()) nets.push_back(network_json(n));
  for (const auto& [id, p] : model_.ports()) ports.push_back(port_json(p));
  return {{"version", STRAIT_VERSION}, {"generation", publisher_.generation()},
          {"workers", workers}, {"physnets", physnets}, {"networks", nets}, {"ports", ports},
          {"learned_macs", learned_.size()}};
}

json Switch::stats() const {
  json ports = json::array();
  auto port_entry = [&](const std::string& id, uint16_t dp, const std::vector<uint64_t>* base) {
    std::vector<uint64_t> v = port_counter_sums(dp);
    if (base)
      for (size_t i = 0; i < v.size(); i++) v[i] -= (*base)[i];
    ports.push_back({{"id", id}, {"dp_port", dp}, {"rx_packets", v[0]}, {"rx_bytes", v[1]},
                     {"tx_packets", v[2]}, {"tx_bytes", v[3]}, {"drops", drops_json(v, 4)}});
  };
  for (const auto& [name, u] : uplinks_) port_entry("physnet:" + name, u.dp.dp, nullptr);
  for (const auto& [id, p] : ports_) port_entry(id, p.dp.dp, &p.base);

  json workers = json::array();
  std::vector<uint64_t> total(dp::kNumDropReasons, 0);
  for (const auto& w : workers_) {
    const dp::WorkerStats& st = w->stats();
    std::vector<uint64_t> drops(dp::kNumDropReasons);
    for (unsigned r = 0; r < dp::kNumDropReasons; r++) {
      drops[r] = dp::read(st.drops[r]);
      total[r] += drops[r];
    }
    workers.push_back({{"id", w->id()}, {"lcore", w->lcore()}, {"packets", dp::read(st.packets)},
                       {"iterations", dp::read(st.iterations)},
                       {"busy_cycles", dp::read(st.busy_cycles)},
                       {"idle_cycles", dp::read(st.idle_cycles)},
                       {"cache_hits", dp::read(st.cache_hits)},
                       {"cache_misses", dp::read(st.cache_misses)},
                       {"cache_evictions", dp::read(st.cache_evictions)},
                       {"learn_events_lost", dp::read(st.learn_events_lost)},
                       {"generation", dp::read(st.generation)}, {"drops", drops_json(drops, 0)}});
  }
  return {{"generation", publisher_.generation()}, {"tsc_hz", rte_get_tsc_hz()},
          {"ports", ports}, {"workers", workers}, {"drops", drops_json(total, 0)}};
}

}  // namespace strait::ctl
