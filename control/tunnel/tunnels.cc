#include "control/tunnel/tunnels.h"

#include <rte_ethdev.h>

#include <algorithm>

#include "control/api/api_reply.h"

namespace strait::ctl {
namespace {

using nlohmann::json;

std::string be32_to_string(uint32_t ip) { return ip_to_string(ipv4_from_be32(ip)); }

}  // namespace

Tunnels::Tunnels(const std::optional<VtepSettings>& vtep, ChangePath& sw, const PortTable& ports,
                 const MacTable& learned, const std::vector<std::unique_ptr<dp::Worker>>& workers)
    : cfg_(vtep),
      sw_(sw),
      ports_(ports),
      learned_(learned),
      workers_(workers),
      vteps_(vtep && vtep->next_hop ? std::optional(ipv4_be32(*vtep->next_hop)) : std::nullopt,
             vtep ? vtep->next_hop_mac : std::nullopt) {}

void Tunnels::apply(const std::string& network, const std::function<Status(Model&)>& change,
                    Done done) {
  Status st = sw_.apply({.model = [&](Model& m) -> Status {
                           if (Status s = change(m); !s) return s;
                           return check_capacity(m);
                         },
                         .save =
                             [&](const Model& m) {
                               const TunnelSpec* t = m.tunnel(network);
                               return sw_.store().put_tunnel(network, t ? *t : TunnelSpec{});
                             }});
  if (!st) return done(error_reply(st.error()));
  sw_.after_grace([done = std::move(done)] { done(ok_reply(json::object())); });
}

void Tunnels::fdb_add(const json& params, Done done) {
  auto r = parse_tunnel_fdb(params, /*add=*/true);
  if (!r) return done(error_reply(r.error()));
  apply(
      r->network, [&](Model& m) { return m.add_tunnel_fdb(r->network, r->entries); },
      std::move(done));
}

void Tunnels::fdb_delete(const json& params, Done done) {
  auto r = parse_tunnel_fdb(params, /*add=*/false);
  if (!r) return done(error_reply(r.error()));
  std::vector<Mac> macs;
  for (const TunnelFdbEntry& e : r->entries) macs.push_back(e.mac);
  apply(
      r->network, [&](Model& m) { return m.remove_tunnel_fdb(r->network, macs); }, std::move(done));
}

void Tunnels::flood_set(const json& params, Done done) {
  auto r = parse_tunnel_flood(params);
  if (!r) return done(error_reply(r.error()));
  apply(
      r->network, [&](Model& m) { return m.set_tunnel_flood(r->network, r->vteps); },
      std::move(done));
}

Status Tunnels::check_capacity(const Model& m) const {
  std::set<uint32_t> ips;
  for (const IpAddr& ip : m.remote_vteps()) ips.insert(ipv4_be32(ip));
  return vteps_.check_capacity(ips);
}

std::set<uint32_t> Tunnels::wanted(const std::vector<LearnedMac>& learned) const {
  std::set<uint32_t> want;
  for (const IpAddr& ip : sw_.model().remote_vteps()) want.insert(ipv4_be32(ip));
  // A MAC learned behind a VTEP keeps its index until it ages out.
  for (const LearnedMac& l : learned)
    if (dp::is_vtep_port(l.port))
      if (auto ip = vteps_.ip_of(static_cast<uint16_t>(l.port - dp::kVtepPortBase)))
        want.insert(*ip);
  return want;
}

std::optional<VtepInput> Tunnels::sync(const std::vector<LearnedMac>& learned) {
  if (!cfg_) return std::nullopt;
  // Two grace periods before an unwanted VTEP's index is free: after the
  // first no worker runs a snapshot that names the VTEP; the learn events
  // such snapshots produced are drained by the next poll, so after the
  // second nothing can name the index any more.
  for (const auto& unwanted : vteps_.sync(wanted(learned)))
    sw_.after_grace([this, unwanted] {
      sw_.after_grace([this, unwanted] { vteps_.release(unwanted.first, unwanted.second); });
    });
  VtepInput in;
  in.physnet = cfg_->physnet;
  in.config.local_ip = ipv4_be32(cfg_->local_ip);
  in.config.udp_port = cfg_->udp_port;
  in.config.ttl = cfg_->ttl;
  in.config.learning = cfg_->learning;
  if (auto up = ports_.uplinks().find(cfg_->physnet); up != ports_.uplinks().end()) {
    rte_ether_addr mac;
    if (rte_eth_macaddr_get(up->second.dev.port_id, &mac) == 0)
      std::copy(mac.addr_bytes, mac.addr_bytes + 6, in.config.mac);
  }
  vteps_.fill(in);
  return in;
}

void Tunnels::poll() {
  bool changed = false;
  for (auto& w : workers_) {
    dp::ArpEvent ev;
    while (w->arp_queue().pop(ev)) {
      Mac mac;
      std::copy(ev.mac, ev.mac + 6, mac.begin());
      changed |= cfg_ && vteps_.on_arp(ev.ip, mac);
    }
  }
  if (changed) sw_.republish();
}

json Tunnels::network_json(const NetworkSpec& n, const std::vector<LearnedMac>& learned) const {
  const Model& model = sw_.model();
  const uint16_t lvlan = model.local_vlan(n.id);
  json fdb = json::array(), flood = json::array();
  if (const TunnelSpec* t = model.tunnel(n.id)) {
    for (const auto& [mac, ip] : t->fdb) {
      auto pip = t->ips.find(mac);
      fdb.push_back({{"mac", mac_to_string(mac)},
                     {"vtep", ip_to_string(ip)},
                     {"ip", pip == t->ips.end() ? json(nullptr) : json(ip_to_string(pip->second))},
                     {"learned", false}});
    }
    for (const IpAddr& ip : t->flood) flood.push_back(ip_to_string(ip));
  }
  for (const LearnedMac& l : learned) {
    if (lvlan == 0 || l.lvlan != lvlan || !dp::is_vtep_port(l.port)) continue;
    auto ip = vteps_.ip_of(static_cast<uint16_t>(l.port - dp::kVtepPortBase));
    const json vtep = ip ? json(be32_to_string(*ip)) : json(nullptr);
    fdb.push_back(
        {{"mac", mac_to_string(l.mac)}, {"vtep", vtep}, {"ip", nullptr}, {"learned", true}});
  }
  return {{"id", n.id},          {"vni", n.seg_id},
          {"local_vlan", lvlan}, {"arp_responder", n.arp_responder},
          {"fdb", fdb},          {"flood", flood}};
}

void Tunnels::show(const json& params, Done done) {
  if (!params.is_null() && !params.is_object())
    return done(error_reply(invalid("params: expected an object")));
  const Model& model = sw_.model();
  std::string only;
  if (params.is_object() && params.contains("network") && !params["network"].is_null()) {
    if (!params["network"].is_string())
      return done(error_reply(invalid("network: expected a string")));
    only = params["network"].get<std::string>();
    const NetworkSpec* n = model.network(only);
    if (!n) return done(error_reply(not_found("network " + only + " not found")));
    if (n->type != dp::NetType::kVxlan)
      return done(error_reply(invalid("network: " + only + " is not a vxlan network")));
  }
  json vtep = nullptr, remotes = json::array(), nets = json::array();
  const std::vector<LearnedMac> learned = learned_.entries();
  if (cfg_) {
    const VtepSettings& c = *cfg_;
    const dp::Snapshot* s = sw_.publisher().current();
    vtep = {{"local_ip", ip_to_string(c.local_ip)},
            {"physnet", c.physnet},
            {"udp_port", c.udp_port},
            {"ttl", c.ttl},
            {"next_hop", c.next_hop ? json(ip_to_string(*c.next_hop)) : json(nullptr)},
            {"next_hop_mac", c.next_hop_mac ? json(mac_to_string(*c.next_hop_mac)) : json(nullptr)},
            {"learning", c.learning},
            {"underlay_mtu", c.underlay_mtu},
            {"mac", mac_to_string(s->vtep.mac)}};
    // As the live snapshot has them, in address order.
    // (A network deleted since the last snapshot no longer names its VTEPs.)
    const std::set<uint32_t> want = wanted(learned);
    for (const auto [ip, index] : vteps_.live()) {
      if (!want.count(ip)) continue;
      const dp::RemoteVtep* r = s->vtep_of(static_cast<uint16_t>(dp::kVtepPortBase + index));
      if (!r || r->ip != ip) continue;
      remotes.push_back(
          json{{"ip", be32_to_string(ip)},
               {"index", index},
               {"next_hop", be32_to_string(r->arp_ip)},
               {"resolved", r->resolved},
               {"mac", r->resolved ? json(mac_to_string(r->next_hop_mac)) : json(nullptr)}});
    }
  }
  for (const auto& [id, n] : model.networks())
    if (n.type == dp::NetType::kVxlan && (only.empty() || id == only))
      nets.push_back(network_json(n, learned));
  done(ok_reply({{"vtep", vtep}, {"remote_vteps", remotes}, {"networks", nets}}));
}

}  // namespace strait::ctl
