// VXLAN networks and their l2population state (issue 6): which remote VTEP
// each remote MAC is behind, and which VTEPs get flooded frames. Requests
// are parsed field by field, then checked against the model as a whole
// before anything changes.
#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "control/api/json_fields.h"
#include "control/model/model.h"

namespace strait::ctl {
namespace {

using json = nlohmann::json;

// Bounded per network (STYLE rule 10): neutron's l2population sends one
// entry per remote port, a few thousand in a large network.
constexpr size_t kMaxTunnelFdbPerNetwork = 65536;

Result<std::string> network_field(const json& params) {
  const json* v = find_field(params, "network");
  if (!v) return field_error("network", "missing");
  return get_string(*v, "network");
}

Result<Mac> unicast_mac(const json& v, const std::string& field) {
  auto s = get_string(v, field);
  if (!s) return s.error();
  auto mac = parse_mac(*s);
  if (!mac) return field_error(field, json_quoted(*s) + " is not a MAC address");
  if (((*mac)[0] & 1) || *mac == Mac{})
    return field_error(field, json_quoted(*s) + " is not a unicast MAC address");
  return *mac;
}

// A remote VTEP's address, or a remote port's (ARP is IPv4 only).
Result<IpAddr> unicast_ipv4(const json& v, const std::string& field) {
  auto s = get_string(v, field);
  if (!s) return s.error();
  auto ip = parse_ip(*s);
  if (!ip || ip->family != 4) return field_error(field, json_quoted(*s) + " is not an IPv4 address");
  const uint8_t a = ip->bytes[0];
  if (a == 0 || a == 127 || a >= 224)
    return field_error(field, json_quoted(*s) + " is not a unicast IPv4 address");
  return *ip;
}

}  // namespace

uint32_t ipv4_be32(const IpAddr& ip) {
  uint32_t v;
  std::memcpy(&v, ip.bytes.data(), 4);
  return v;
}

IpAddr ipv4_from_be32(uint32_t be) {
  IpAddr ip;
  ip.family = 4;
  std::memcpy(ip.bytes.data(), &be, 4);
  return ip;
}

Result<TunnelFdbRequest> parse_tunnel_fdb(const json& params, bool add) {
  if (!params.is_object()) return field_error("params", "expected an object, " + got(params));
  if (auto s = check_known_keys(params, {"network", "entries"}, ""); !s) return s.error();
  TunnelFdbRequest r;
  auto net = network_field(params);
  if (!net) return net.error();
  r.network = std::move(*net);
  const json* list = find_field(params, "entries");
  if (!list) return field_error("entries", "missing");
  if (!list->is_array() || list->empty())
    return field_error("entries", "expected a non-empty list, " + got(*list));
  for (size_t i = 0; i < list->size(); i++) {
    const std::string at = "entries[" + std::to_string(i) + "]";
    const json& e = (*list)[i];
    if (!e.is_object()) return field_error(at, "expected an object, " + got(e));
    if (auto s = check_known_keys(e, add ? std::initializer_list<std::string_view>{"mac", "vtep", "ip"}
                                         : std::initializer_list<std::string_view>{"mac"},
                                  at + ".");
        !s) {
      return s.error();
    }
    TunnelFdbEntry entry;
    const json* mac = find_field(e, "mac");
    if (!mac) return field_error(at + ".mac", "missing");
    auto m = unicast_mac(*mac, at + ".mac");
    if (!m) return m.error();
    entry.mac = *m;
    if (add) {
      const json* vtep = find_field(e, "vtep");
      if (!vtep) return field_error(at + ".vtep", "missing (the remote VTEP's IPv4 address)");
      auto ip = unicast_ipv4(*vtep, at + ".vtep");
      if (!ip) return ip.error();
      entry.vtep = *ip;
      if (const json* port_ip = find_field(e, "ip"); port_ip && !port_ip->is_null()) {
        auto pip = unicast_ipv4(*port_ip, at + ".ip");
        if (!pip) return pip.error();
        entry.ip = *pip;
      }
    }
    for (size_t k = 0; k < r.entries.size(); k++) {
      if (r.entries[k].mac == entry.mac)
        return field_error(at + ".mac", mac_to_string(entry.mac) + " is also entries[" +
                                            std::to_string(k) + "]");
      if (entry.ip && r.entries[k].ip == entry.ip)
        return field_error(at + ".ip", ip_to_string(*entry.ip) + " is also the ip of entries[" +
                                           std::to_string(k) + "]");
    }
    r.entries.push_back(entry);
  }
  return r;
}

Result<TunnelFloodRequest> parse_tunnel_flood(const json& params) {
  if (!params.is_object()) return field_error("params", "expected an object, " + got(params));
  if (auto s = check_known_keys(params, {"network", "vteps"}, ""); !s) return s.error();
  TunnelFloodRequest r;
  auto net = network_field(params);
  if (!net) return net.error();
  r.network = std::move(*net);
  const json* list = find_field(params, "vteps");
  if (!list) return field_error("vteps", "missing ([] clears the list)");
  if (!list->is_array()) return field_error("vteps", "expected a list, " + got(*list));
  for (size_t i = 0; i < list->size(); i++) {
    const std::string at = "vteps[" + std::to_string(i) + "]";
    auto ip = unicast_ipv4((*list)[i], at);
    if (!ip) return ip.error();
    if (std::find(r.vteps.begin(), r.vteps.end(), *ip) != r.vteps.end())
      return field_error(at, ip_to_string(*ip) + " is listed twice");
    r.vteps.push_back(*ip);
  }
  return r;
}

json to_json(const TunnelSpec& t) {
  json fdb = json::array(), flood = json::array();
  for (const auto& [mac, ip] : t.fdb) {
    json e = {{"mac", mac_to_string(mac)}, {"vtep", ip_to_string(ip)}};
    if (auto it = t.ips.find(mac); it != t.ips.end()) e["ip"] = ip_to_string(it->second);
    fdb.push_back(std::move(e));
  }
  for (const IpAddr& ip : t.flood) flood.push_back(ip_to_string(ip));
  return {{"fdb", fdb}, {"flood", flood}};
}

Result<TunnelSpec> parse_tunnel(const json& j) {
  if (!j.is_object()) return field_error("tunnel", "expected an object, " + got(j));
  if (auto s = check_known_keys(j, {"fdb", "flood"}, ""); !s) return s.error();
  TunnelSpec t;
  if (const json* fdb = find_field(j, "fdb"); fdb && !fdb->empty()) {
    auto r = parse_tunnel_fdb({{"network", "-"}, {"entries", *fdb}}, /*add=*/true);
    if (!r) return r.error();
    for (const TunnelFdbEntry& e : r->entries) {
      t.fdb[e.mac] = e.vtep;
      if (e.ip) t.ips[e.mac] = *e.ip;
    }
  }
  if (const json* flood = find_field(j, "flood")) {
    auto r = parse_tunnel_flood({{"network", "-"}, {"vteps", *flood}});
    if (!r) return r.error();
    t.flood.insert(r->vteps.begin(), r->vteps.end());
  }
  return t;
}

// ---- Model -----------------------------------------------------------------

Status Model::check_vxlan_network(const NetworkSpec& n) const {
  if (!vxlan_.enabled)
    return field_error("type", "vxlan needs a VXLAN tunnel endpoint: configure [vtep] in straitd's "
                               "config");
  if (!n.physnet.empty()) return field_error("physnet", "not allowed for a vxlan network");
  if (n.seg_id < 1 || n.seg_id > kMaxVni)
    return field_error("segmentation_id",
                       std::to_string(n.seg_id) + " is outside 1.." + std::to_string(kMaxVni));
  if (n.mtu < 68 || n.mtu > vxlan_.max_mtu())
    return field_error("mtu", std::to_string(n.mtu) + " is outside 68.." +
                                  std::to_string(vxlan_.max_mtu()) + " (underlay_mtu " +
                                  std::to_string(vxlan_.underlay_mtu) + " - 50 of VXLAN headers)");
  for (const auto& [id, other] : networks_)
    if (other.type == dp::NetType::kVxlan && other.seg_id == n.seg_id)
      return conflict("segmentation_id: VNI " + std::to_string(n.seg_id) +
                      " is already used by network " + id);
  return ok();
}

Status Model::check_tunnel_target(const std::string& network) const {
  const NetworkSpec* n = this->network(network);
  if (!n) return not_found("network: no network " + network);
  if (n->type != dp::NetType::kVxlan)
    return field_error("network", network + " is a " + net_type_name(n->type) +
                                      " network, not a vxlan network");
  return ok();
}

Status Model::check_remote_vtep(const IpAddr& ip, const std::string& field) const {
  if (ip.family != 4) return field_error(field, ip_to_string(ip) + " is not an IPv4 address");
  if (ip == vxlan_.local_ip)
    return field_error(field, ip_to_string(ip) + " is this host's own VTEP (vtep.local_ip)");
  return ok();
}

// Remote VTEPs are datapath ports kVtepPortBase + index: at most kMaxVteps.
namespace {
// The ARP responder answers an address with one MAC: a request's IP that
// another MAC of the network already has is refused, not moved.
Status check_unique_ips(const std::string& network, const TunnelSpec& t,
                        const std::vector<TunnelFdbEntry>& entries) {
  for (size_t i = 0; i < entries.size(); i++) {
    if (!entries[i].ip) continue;
    for (const auto& [mac, ip] : t.ips)
      if (ip == *entries[i].ip && mac != entries[i].mac)
        return conflict("entries[" + std::to_string(i) + "].ip: " + ip_to_string(ip) +
                        " is the ip of remote MAC " + mac_to_string(mac) + " in network " +
                        network + " (delete that entry first)");
  }
  return ok();
}

Status within_vtep_limit(const std::map<std::string, TunnelSpec>& tunnels) {
  std::set<IpAddr> all;
  for (const auto& [net, t] : tunnels) {
    for (const auto& [mac, ip] : t.fdb) all.insert(ip);
    all.insert(t.flood.begin(), t.flood.end());
  }
  if (all.size() > dp::kMaxVteps)
    return exhausted("remote VTEPs: more than " + std::to_string(dp::kMaxVteps) +
                     " distinct addresses across all networks");
  return ok();
}
}  // namespace

Status Model::add_tunnel_fdb(const std::string& network,
                             const std::vector<TunnelFdbEntry>& entries) {
  if (Status st = check_tunnel_target(network); !st) return st;
  std::map<std::string, TunnelSpec> next = tunnels_;
  TunnelSpec& t = next[network];
  for (size_t i = 0; i < entries.size(); i++) {
    if (Status st = check_remote_vtep(entries[i].vtep, "entries[" + std::to_string(i) + "].vtep");
        !st)
      return st;
    t.fdb[entries[i].mac] = entries[i].vtep;
    t.ips.erase(entries[i].mac);  // replaced whole: an entry without ip leaves none
  }
  for (const TunnelFdbEntry& e : entries)
    if (e.ip) t.ips[e.mac] = *e.ip;
  if (Status st = check_unique_ips(network, t, entries); !st) return st;
  if (t.fdb.size() > kMaxTunnelFdbPerNetwork)
    return exhausted("entries: network " + network + " would have more than " +
                     std::to_string(kMaxTunnelFdbPerNetwork) + " remote MACs");
  if (Status st = within_vtep_limit(next); !st) return st;
  tunnels_ = std::move(next);
  return ok();
}

Status Model::remove_tunnel_fdb(const std::string& network, const std::vector<Mac>& macs) {
  if (Status st = check_tunnel_target(network); !st) return st;
  auto it = tunnels_.find(network);
  for (size_t i = 0; i < macs.size(); i++)
    if (it == tunnels_.end() || !it->second.fdb.count(macs[i]))
      return not_found("entries[" + std::to_string(i) + "].mac: " + mac_to_string(macs[i]) +
                       " is not in the FDB of network " + network);
  for (const Mac& m : macs) {
    it->second.fdb.erase(m);
    it->second.ips.erase(m);
  }
  if (it->second.empty()) tunnels_.erase(it);
  return ok();
}

Status Model::set_tunnel_flood(const std::string& network, const std::vector<IpAddr>& vteps) {
  if (Status st = check_tunnel_target(network); !st) return st;
  for (size_t i = 0; i < vteps.size(); i++)
    if (Status st = check_remote_vtep(vteps[i], "vteps[" + std::to_string(i) + "]"); !st) return st;
  std::map<std::string, TunnelSpec> next = tunnels_;
  TunnelSpec& t = next[network];
  t.flood = std::set<IpAddr>(vteps.begin(), vteps.end());
  if (t.empty()) next.erase(network);
  if (Status st = within_vtep_limit(next); !st) return st;
  tunnels_ = std::move(next);
  return ok();
}

Status Model::restore_tunnel(const std::string& network, const TunnelSpec& t) {
  if (Status st = check_tunnel_target(network); !st) return st;
  if (tunnels_.count(network)) return exists("network " + network + " already has tunnel state");
  std::vector<TunnelFdbEntry> entries;
  for (const auto& [mac, ip] : t.fdb) {
    auto pip = t.ips.find(mac);
    entries.push_back({mac, ip, pip == t.ips.end() ? std::nullopt : std::optional(pip->second)});
  }
  Model scratch = *this;  // all or nothing
  if (Status st = scratch.add_tunnel_fdb(network, entries); !st) return st;
  if (Status st = scratch.set_tunnel_flood(network, {t.flood.begin(), t.flood.end()}); !st)
    return st;
  tunnels_ = std::move(scratch.tunnels_);
  return ok();
}

const TunnelSpec* Model::tunnel(const std::string& network) const {
  auto it = tunnels_.find(network);
  return it == tunnels_.end() ? nullptr : &it->second;
}

std::set<IpAddr> Model::remote_vteps() const {
  std::set<IpAddr> all;
  for (const auto& [net, t] : tunnels_) {
    for (const auto& [mac, ip] : t.fdb) all.insert(ip);
    all.insert(t.flood.begin(), t.flood.end());
  }
  return all;
}

}  // namespace strait::ctl
