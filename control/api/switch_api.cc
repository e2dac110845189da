// The API of Switch: the method table, and the methods of networks, port
// bindings and updates, and the switch as a whole (those of security groups,
// tunnels and rx queues are their components'). Each change goes through apply() and a
// refusal leaves no trace (docs/api.md).
#include <algorithm>

#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_mempool.h>
#include <spdlog/spdlog.h>

#include "control/api/api_reply.h"
#include "control/devices/eal_memory.h"
#include "control/model/recorded_config.h"
#include "control/switch/switch.h"
#include "vhost/vhost_port.h"

namespace strait::ctl {
namespace {

using nlohmann::json;

// A server-mode vhost socket named by a bare file name ("vhu1234.sock")
// lives in [vhost] socket_dir: the binding stores (and validates) the
// absolute path. Anything else is left for parse_port to judge.
json resolve_vhost_socket(const json& params, const std::string& socket_dir) {
  if (!params.is_object() || !params.contains("attach")) return params;
  const json& a = params["attach"];
  if (!a.is_object() || a.value("type", json()) != "vhost" || a.value("mode", json()) != "server")
    return params;
  const json path = a.value("path", json());
  if (!path.is_string()) return params;
  const std::string name = path.get<std::string>();
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos)
    return params;
  json resolved = params;
  const bool slash = !socket_dir.empty() && socket_dir.back() == '/';
  resolved["attach"]["path"] = socket_dir + (slash ? "" : "/") + name;
  return resolved;
}

json link_json(std::optional<bool> up) { return up ? json(*up ? "up" : "down") : json(nullptr); }

json drops_json(const std::vector<uint64_t>& v, size_t first) {
  json d = json::object();
  for (unsigned r = 1; r < dp::kNumDropReasons; r++)
    if (v[first + r]) d[std::string(dp::drop_reason_name(static_cast<dp::DropReason>(r)))] = v[first + r];
  return d;
}

}  // namespace

namespace {

// A handler of the table: a method of the switch, or of one of its components.
template <auto Fn>
void own(Switch& sw, const json& params, Done done) {
  (sw.*Fn)(params, std::move(done));
}
template <auto Part, auto Fn>
void in(Switch& sw, const json& params, Done done) {
  ((sw.*Part).*Fn)(params, std::move(done));
}

}  // namespace

const std::vector<Switch::Method>& Switch::methods() {
  static const std::vector<Method> kMethods = {
      {"network.create", own<&Switch::network_create>, Kind::kDesired},
      {"network.delete", own<&Switch::network_delete>, Kind::kDesired},
      {"network.list", own<&Switch::network_list>, Kind::kQuery},
      {"port.bind", own<&Switch::port_bind>, Kind::kDesired},
      {"port.unbind", own<&Switch::port_unbind>, Kind::kDesired},
      {"port.update", own<&Switch::port_update>, Kind::kDesired},
      {"security_group.create", in<&Switch::groups_, &SecurityGroups::create>, Kind::kDesired},
      {"security_group.delete", in<&Switch::groups_, &SecurityGroups::remove>, Kind::kDesired},
      {"security_group.update", in<&Switch::groups_, &SecurityGroups::update>, Kind::kDesired},
      {"security_group.list", in<&Switch::groups_, &SecurityGroups::list>, Kind::kQuery},
      {"security_group.show", in<&Switch::groups_, &SecurityGroups::show>, Kind::kQuery},
      {"security_group_rule.create", in<&Switch::groups_, &SecurityGroups::rule_create>,
       Kind::kDesired},
      {"security_group_rule.delete", in<&Switch::groups_, &SecurityGroups::rule_delete>,
       Kind::kDesired},
      {"security_group.remote_member", in<&Switch::groups_, &SecurityGroups::remote_member>,
       Kind::kDesired},
      {"port.list", own<&Switch::port_list>, Kind::kQuery},
      {"port.show", own<&Switch::port_show>, Kind::kQuery},
      {"port.capture", own<&Switch::port_capture>, Kind::kLive},
      {"show", own<&Switch::show_method>, Kind::kQuery},
      {"stats", own<&Switch::stats_method>, Kind::kQuery},
      {"trace", own<&Switch::trace>, Kind::kQuery},
      {"cache.dump", own<&Switch::cache_dump>, Kind::kQuery},
      {"tunnel.fdb.add", in<&Switch::tunnels_, &Tunnels::fdb_add>, Kind::kDesired},
      {"tunnel.fdb.delete", in<&Switch::tunnels_, &Tunnels::fdb_delete>, Kind::kDesired},
      {"tunnel.flood.set", in<&Switch::tunnels_, &Tunnels::flood_set>, Kind::kDesired},
      {"tunnel.show", in<&Switch::tunnels_, &Tunnels::show>, Kind::kQuery},
      {"workers.rebalance", in<&Switch::rebalancer_, &Rebalancer::request>, Kind::kLive},
      {"physnet.restart", own<&Switch::physnet_restart>, Kind::kLive},
      {"log.level", own<&Switch::log_level>, Kind::kLive},
  };
  return kMethods;
}

void Switch::call(const std::string& method, const json& params, Done done, Origin origin) {
  const auto& table = methods();
  auto m = std::find_if(table.begin(), table.end(), [&](const Method& x) { return method == x.name; });
  if (m == table.end()) return done(error_reply(invalid("method: unknown method '" + method + "'")));
  if (m->kind == Kind::kDesired && origin == Origin::kLocal && !desired_source_.empty())
    return done(error_reply(Error{"failed_precondition",
                                  std::string(m->name) + ": desired state on this host comes from " +
                                      desired_source_ + "; change it there (through neutron)"}));
  if (m->kind != Kind::kQuery) {
    // What changed the switch, and who it was about, in straitd's log: the
    // trail an operator reads after the fact. Refusals change nothing.
    const json* id = params.is_object() && params.contains("id") ? &params["id"] : nullptr;
    std::string about = id && id->is_string() ? " " + id->get<std::string>() : "";
    if (about.size() > 80) about = about.substr(0, 80) + "...";
    done = [name = m->name, about = std::move(about), done = std::move(done)](json reply) {
      if (reply.value("ok", false)) {
        spdlog::info("API {}{}: done", name, about);
      } else {
        spdlog::debug("API {}{}: refused: {}", name, about, reply.value("error", json()).dump());
      }
      done(std::move(reply));
    };
  }
  m->handler(*this, params, std::move(done));
}

void Switch::network_list(const json&, Done done) {
  json nets = json::array();
  for (const auto& [id, n] : model_.networks()) nets.push_back(network_json(n));
  done(ok_reply({{"networks", nets}}));
}

void Switch::port_list(const json&, Done done) {
  json ports = json::array();
  for (const auto& [id, p] : model_.ports()) ports.push_back(port_json(p));
  done(ok_reply({{"ports", ports}}));
}

void Switch::port_show(const json& params, Done done) {
  auto id = id_param(params);
  if (!id) return done(error_reply(id.error()));
  const PortSpec* p = model_.port(*id);
  if (!p) return done(error_reply(not_found("port " + *id + " is not bound")));
  done(ok_reply(port_json(*p)));
}

void Switch::show_method(const json&, Done done) { done(ok_reply(show())); }

bool Switch::port_up(const std::string& id) const {
  const PortRuntime* r = ports_.find(id);
  const dp::PortEntry* e = r ? publisher_.current()->port(r->dp.dp) : nullptr;
  if (!e || !e->enabled || !r->announced) return false;
  // A trunk's subport: while its parent is.
  const PortSpec* spec = model_.port(id);
  return !spec || spec->attach.kind != Attachment::Kind::kSubport || port_up(spec->attach.parent);
}
void Switch::stats_method(const json&, Done done) { done(ok_reply(stats())); }

void Switch::network_create(const json& params, Done done) {
  auto spec = parse_network(params);
  if (!spec) return done(error_reply(spec.error()));
  NetworkSpec made;  // with the model's defaults (a vxlan network's MTU)
  Status st = apply({.model = [&](Model& m) -> Status {
                       if (Status s = m.check_vlan_range(*spec); !s) return s;
                       if (Status s = m.add_network(*spec); !s) return s;
                       made = *m.network(spec->id);
                       return ok();
                     },
                     .save = [&](const Model&) { return store_->put_network(made); }});
  if (!st) return done(error_reply(st.error()));
  // A network with no port here is not in the datapath: the snapshot is the
  // same; the answer still waits for it, as every change's does.
  publisher_.after_grace([out = network_json(made), done = std::move(done)] { done(ok_reply(out)); });
}

void Switch::network_delete(const json& params, Done done) {
  auto id = id_param(params);
  if (!id) return done(error_reply(id.error()));
  // With its tunnel state (VTEPs it alone named leave the snapshot).
  Status st = apply({.model = [&](Model& m) { return m.remove_network(*id); },
                     .save = [&](const Model&) { return store_->delete_network(*id); }});
  if (!st) return done(error_reply(st.error()));
  publisher_.after_grace([done = std::move(done)] { done(ok_reply(json::object())); });
}

// One port ({"id": ..}) or many ({"ports": [..]}): either way all of them
// are bound or none is, with one transaction and one snapshot (F5).
void Switch::port_bind(const json& params, Done done) {
  const bool bulk = params.is_object() && params.contains("ports");
  std::vector<PortSpec> specs;
  if (bulk) {
    const json& list = params["ports"];
    if (!list.is_array() || list.empty())
      return done(error_reply(invalid("ports: expected a non-empty list of ports")));
    for (size_t i = 0; i < list.size(); i++) {
      auto spec = parse_port(resolve_vhost_socket(list[i], cfg_.vhost_socket_dir));
      if (!spec) {
        const Error& e = spec.error();
        return done(error_reply({e.code, "ports[" + std::to_string(i) + "]: " + e.message}));
      }
      specs.push_back(std::move(*spec));
    }
  } else {
    auto spec = parse_port(resolve_vhost_socket(params, cfg_.vhost_socket_dir));
    if (!spec) return done(error_reply(spec.error()));
    specs.push_back(std::move(*spec));
  }
  if (Status st = bind_all(specs, bulk); !st) return done(error_reply(st.error()));
  // Rendered once, when the answer goes out: by then the ports are live (and
  // "up" if their device is). One another client unbound meanwhile is shown
  // as it was asked for, without datapath state.
  publisher_.after_grace([this, bulk, specs = std::move(specs), done = std::move(done)]() {
    json out = json::array();
    for (const PortSpec& s : specs) {
      const PortSpec* p = model_.port(s.id);
      out.push_back(port_json(p ? *p : s));
    }
    done(ok_reply(bulk ? json{{"ports", out}} : out[0]));
  });
}

Status Switch::bind_all(const std::vector<PortSpec>& specs, bool bulk) {
  auto where = [bulk](size_t i, const Error& e) -> Error {
    return bulk ? Error{e.code, "ports[" + std::to_string(i) + "]: " + e.message} : e;
  };
  std::vector<PortRuntime> made;  // by spec, while they are opened
  Status st = apply({
      .model = [&](Model& m) -> Status {
        for (size_t i = 0; i < specs.size(); i++)
          if (Status s = m.add_port(specs[i]); !s) return where(i, s.error());
        return ok();
      },
      .open = [&](const Model&) -> Status {
        for (size_t i = 0; i < specs.size(); i++) {
          auto idx = ports_.alloc_index();
          if (!idx) return where(i, exhausted("no free datapath port index"));
          auto rt = attach(specs[i], *idx);
          if (!rt) {
            ports_.free_index(*idx);
            return where(i, rt.error());
          }
          made.push_back(std::move(*rt));
        }
        return ok();
      },
      .close = [&] {
        for (auto it = made.rbegin(); it != made.rend(); ++it) {
          ports_.release_rx_queues(it->dp);
          detach(*it);
          ports_.free_index(it->dp.dp);
        }
        made.clear();
      },
      .save = [&](const Model& m) {
        std::vector<std::pair<PortSpec, uint16_t>> rows;
        for (const PortSpec& s : specs) rows.emplace_back(s, m.local_vlan(s.network));
        return store_->put_ports(rows);
      },
      .commit = [&] {
        for (size_t i = 0; i < specs.size(); i++) ports_.add(specs[i].id, std::move(made[i]));
      },
  });
  if (!st) return st;
  for (const PortSpec& s : specs)
    if (device_live(s.id)) announce_up_when_live(s.id);
  return ok();
}

void Switch::port_unbind(const json& params, Done done) {
  auto id = id_param(params);
  if (!id) return done(error_reply(id.error()));
  // The model knows the canonical (lower-case) id; runtime state uses it too.
  const PortSpec* spec = model_.port(*id);
  if (!spec || !ports_.find(spec->id))
    return done(error_reply(not_found("port " + *id + " is not bound")));
  const PortSpec saved = *spec;
  const uint16_t lvlan = model_.local_vlan(saved.network);
  const bool was_up = port_up(saved.id);
  PortRuntime rt;
  Status st = apply({
      .model = [&](Model& m) { return m.remove_port(saved.id); },  // and from its groups' sets
      .save = [&](const Model&) { return store_->delete_port(saved.id); },
      .commit = [&] {
        // Its connections go with it; the whole zone when the network leaves.
        if (model_.local_vlan(saved.network) == 0) {
          ct_->flush_zone_after_grace(lvlan);
        } else {
          ct_->flush_port_after_grace(saved, lvlan);
        }
        rt = ports_.take(saved.id);
        forget_learned_of_released_vlans();
      },
  });
  if (!st) return done(error_reply(st.error()));
  // The device and its index are released only once no worker can hold a
  // snapshot that polls or sends to it.
  publisher_.after_grace([this, rt = std::move(rt), done = std::move(done), port_id = saved.id,
                          was_up]() {
    detach(rt);
    ports_.free_index(rt.dp.dp);
    if (rt.dp.live || was_up) emit("port-down", port_id);
    emit("port-unbound", port_id);
    done(ok_reply(json::object()));
  });
}

void Switch::port_update(const json& params, Done done) {
  auto u = parse_port_update(params);
  if (!u) return done(error_reply(u.error()));
  auto spec = model_.updated_port(*u);
  if (!spec) return done(error_reply(spec.error()));
  const PortSpec before = *model_.port(spec->id);
  const uint16_t lvlan = model_.local_vlan(spec->network);
  Status st = apply({.model = [&](Model& m) { return m.update_port(*spec); },
                     .save = [&](const Model&) { return store_->put_port(*spec, lvlan); }});
  if (!st) return done(error_reply(st.error()));
  // Connections of addresses the port no longer has end with them.
  std::vector<IpAddr> gone;
  for (const IpAddr& a : before.fixed_ips)
    if (std::find(spec->fixed_ips.begin(), spec->fixed_ips.end(), a) == spec->fixed_ips.end())
      gone.push_back(a);
  if (!gone.empty()) ct_->flush_port_after_grace(before, lvlan, std::move(gone));
  const std::string id = spec->id;
  publisher_.after_grace([this, id, done = std::move(done)] {
    const PortSpec* p = model_.port(id);
    done(p ? ok_reply(port_json(*p)) : error_reply(not_found("port " + id + " was unbound")));
  });
}

// straitd's log level, and DPDK's with it, changed at run time (an
// operator chasing a problem at 3 a.m. must not restart the switch).
void Switch::log_level(const json& params, Done done) {
  if (!params.is_object() || !params.contains("level"))
    return done(ok_reply({{"level", spdlog::level::to_string_view(spdlog::get_level()).data()}}));
  const json& v = params["level"];
  static const std::map<std::string, std::pair<spdlog::level::level_enum, uint32_t>> kLevels = {
      {"debug", {spdlog::level::debug, RTE_LOG_DEBUG}}, {"info", {spdlog::level::info, RTE_LOG_INFO}},
      {"warning", {spdlog::level::warn, RTE_LOG_WARNING}}, {"error", {spdlog::level::err, RTE_LOG_ERR}}};
  auto it = v.is_string() ? kLevels.find(v.get<std::string>()) : kLevels.end();
  if (it == kLevels.end())
    return done(error_reply(invalid("level: expected one of debug, info, warning, error")));
  spdlog::set_level(it->second.first);
  rte_log_set_global_level(it->second.second);
  spdlog::log(it->second.first, "log level set to {}", it->first);
  done(ok_reply({{"level", it->first}}));
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
  const PortRuntime* r = ports_.find(p.id);
  // "up" once every worker forwards for it, which is when port-up went out.
  j["state"] = port_up(p.id) ? "up" : "down";
  j["dp_port"] = r ? json(r->dp.dp) : json(nullptr);
  const bool ethdev = r && r->has_device && r->dp.kind == dp::PortKind::kEthdev;
  j["ethdev"] = ethdev ? json(r->dev.port_id) : json(nullptr);
  // `state` says the switch forwards for the port; `link` what its device
  // says of its wire: an ethdev's link, a vhost port's guest driver.
  j["link"] = ethdev ? link_json(link_up(r->dev.port_id)) : json(nullptr);
  j["rx_queues"] = ethdev ? json(r->dev.n_rxq) : json(nullptr);
  j["tx_queues"] = ethdev ? json(r->dev.n_txq) : json(nullptr);
  if (r && r->dp.kind == dp::PortKind::kVhost) {
    j["vhost"] = {{"vid", r->dp.vid}, {"queues", r->dp.rxq_worker.size()},
                  {"attached", r->has_device}};
    if (r->has_device) j["link"] = r->dp.vid >= 0 ? "up" : "down";
    j["capture"] = capture_json(*r);
  }
  // A trunk's parent: its subports, by VLAN.
  json subs = json::array();
  for (const auto& [vid, sub] : model_.subports_of(p.id))
    subs.push_back({{"port", sub}, {"segmentation_id", vid}});
  j["subports"] = std::move(subs);
  j["domain"] = nullptr;
  if (r && r->domain_state)
    j["domain"] = {{"uuid", r->domain_uuid}, {"name", r->domain_name}, {"state", r->domain_state}};
  return j;
}

json Switch::show() const {
  json out = show_switch();
  if (status_) out[status_key_] = status_();
  return out;
}

json Switch::show_switch() const {
  json workers = json::array();
  const dp::Snapshot* s = publisher_.current();
  for (const auto& w : workers_) {
    json rxq = json::array();
    for (const dp::RxQueue& q : s->rx_by_worker[w->id()])
      rxq.push_back({{"port", q.port}, {"queue", q.queue}, {"cycles", rebalancer_.cycles(q.port, q.queue)},
                     {"packets", rebalancer_.packets(q.port, q.queue)}});
    workers.push_back({{"id", w->id()}, {"lcore", w->lcore()}, {"rx_queues", rxq}});
  }
  json physnets = json::array();
  for (const auto& [name, u] : ports_.uplinks())
    physnets.push_back({{"name", name}, {"device", u.dev.devargs}, {"dp_port", u.dp.dp},
                        {"ethdev", u.dev.port_id}, {"rx_queues", u.dev.n_rxq},
                        {"tx_queues", u.dev.n_txq}, {"state", u.dp.live ? "up" : "down"},
                        {"link", link_json(link_up(u.dev.port_id))},
                        {"flow_offload", offload_.json(name)}});
  json nets = json::array(), ports = json::array();
  for (const auto& [id, n] : model_.networks()) nets.push_back(network_json(n));
  for (const auto& [id, p] : model_.ports()) ports.push_back(port_json(p));
  return {{"version", STRAIT_VERSION}, {"generation", publisher_.generation()},
          {"workers", workers}, {"physnets", physnets}, {"networks", nets}, {"ports", ports},
          {"learned_macs", learned_.size()}, {"libvirt", lifecycle_.status()},
          {"mempool", mempool_json()}, {"memory", eal_memory_json()},
          {"conntrack", ct_->json()},
          {"security_groups", groups_.status()},
          {"recorded_config", recorded_config_json(recorded_)},
          {"rebalance", rebalancer_.status()}};
}

// The packet buffers (not OVS's fixed 788 MB per NUMA node per MTU): the
// shared pool, sized at start from workers and physnets, and one pool per
// ethdev port, sized from its queues when it is opened and gone after it
// closes; the totals, and each pool.
json Switch::mempool_json() const {
  json pools = json::array();
  uint64_t buffers = 0, in_use = 0, bytes = 0;
  auto add = [&](const rte_mempool* mp, const std::string& owner) {
    if (!mp) return;
    const size_t obj = mp->header_size + mp->elt_size + mp->trailer_size;
    const uint64_t used = rte_mempool_in_use_count(mp);
    pools.push_back({{"name", mp->name}, {"owner", owner}, {"buffers", mp->size},
                     {"in_use", used}, {"memory_bytes", obj * mp->populated_size}});
    buffers += mp->size;
    in_use += used;
    bytes += obj * mp->populated_size;
  };
  add(pool_, "shared");
  for (const auto& [name, u] : ports_.uplinks()) add(u.dev.pool, "physnet:" + name);
  for (const auto& [id, p] : ports_.ports())
    if (p.has_device && p.dp.kind == dp::PortKind::kEthdev) add(p.dev.pool, id);
  for (const rte_mempool* mp : retired_pools_) add(mp, "closed");
  return {{"buffers", buffers}, {"in_use", in_use}, {"memory_bytes", bytes},
          {"buffer_bytes", pool_->header_size + pool_->elt_size + pool_->trailer_size},
          {"pools", pools}};
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
  for (const auto& [name, u] : ports_.uplinks()) port_entry("physnet:" + name, u.dp.dp, nullptr);
  for (const auto& [id, p] : ports_.ports()) port_entry(id, p.dp.dp, &p.base);

  json workers = json::array();
  std::vector<uint64_t> total(dp::kNumDropReasons, 0);
  for (const auto& w : workers_) {
    const dp::WorkerStats& st = w->stats();
    std::vector<uint64_t> drops(dp::kNumDropReasons);
    for (unsigned r = 0; r < dp::kNumDropReasons; r++) {
      drops[r] = dp::read(st.drops[r]);
      total[r] += drops[r];
    }
    // Cycles by stage, and per received frame (what OVS's pmd-perf-show
    // and VPP's `show runtime` tell: where a frame's cycles go).
    const uint64_t packets = dp::read(st.packets);
    json stages = json::object(), per_packet = json::object();
    for (unsigned i = 0; i < dp::kNumStages; i++) {
      const uint64_t c = dp::read(st.stage_cycles[i]);
      stages[dp::kStageNames[i]] = c;
      per_packet[dp::kStageNames[i]] = packets ? double(c) / double(packets) : 0.0;
    }
    per_packet["busy"] = packets ? double(dp::read(st.busy_cycles)) / double(packets) : 0.0;
    workers.push_back({{"id", w->id()}, {"lcore", w->lcore()}, {"packets", packets},
                       {"stage_cycles", stages}, {"cycles_per_packet", per_packet},
                       {"iterations", dp::read(st.iterations)},
                       {"busy_cycles", dp::read(st.busy_cycles)},
                       {"idle_cycles", dp::read(st.idle_cycles)},
                       {"max_iteration_cycles", dp::read(st.max_iteration_cycles)},
                       {"iterations_over_1ms", dp::read(st.iterations_over_1ms)},
                       {"cache_hits", dp::read(st.cache_hits)},
                       {"cache_misses", dp::read(st.cache_misses)},
                       {"cache_evictions", dp::read(st.cache_evictions)},
                       {"cache_stale", dp::read(st.cache_stale)},
                       {"learn_events_lost", dp::read(st.learn_events_lost)},
                       {"arp_responder_replies", dp::read(st.arp_responder_replies)},
                       {"generation", dp::read(st.generation)}, {"drops", drops_json(drops, 0)}});
  }
  return {{"generation", publisher_.generation()}, {"tsc_hz", rte_get_tsc_hz()},
          {"ports", ports}, {"workers", workers}, {"drops", drops_json(total, 0)},
          {"conntrack", ct_->json()}};
}

}  // namespace strait::ctl
