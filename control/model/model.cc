#include "control/model/model.h"

#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <random>
#include <string_view>

#include "control/api/json_fields.h"

namespace strait::ctl {
namespace {

using json = nlohmann::json;
using dp::NetType;

// [A-Za-z0-9_.-]{1,64}, as in the config's [physnets.NAME].
bool is_valid_physnet_name(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return is_alnum(c) || c == '_' || c == '.' || c == '-'; });
}

// ---- parse_network parts -------------------------------------------------

Result<NetType> parse_net_type(const json& params) {
  const json* v = find_field(params, "type");
  if (!v) return field_error("type", "missing (vlan, vxlan, flat or local)");
  auto s = get_string(*v, "type");
  if (!s) return s.error();
  if (*s == "vlan") return NetType::kVlan;
  if (*s == "flat") return NetType::kFlat;
  if (*s == "local") return NetType::kLocal;
  if (*s == "vxlan") return NetType::kVxlan;
  return field_error("type", json_quoted(*s) + " is not one of vlan, vxlan, flat, local");
}

Status parse_segment(const json& params, NetworkSpec& n) {
  const json* physnet = find_field(params, "physnet");
  const json* seg = find_field(params, "segmentation_id");
  if (n.type == NetType::kLocal || n.type == NetType::kVxlan) {
    // A vxlan network's underlay is the config's [vtep] physnet.
    if (physnet)
      return field_error("physnet",
                         std::string("not allowed for a ") + net_type_name(n.type) + " network");
  } else {
    if (!physnet)
      return field_error(
          "physnet", std::string("missing (required for a ") + net_type_name(n.type) + " network)");
    auto s = get_string(*physnet, "physnet");
    if (!s) return s.error();
    if (!is_valid_physnet_name(*s)) {
      return field_error("physnet",
                         json_quoted(*s) + " is not a physnet name ([A-Za-z0-9_.-]{1,64})");
    }
    n.physnet = std::move(*s);
  }
  if (n.type == NetType::kVlan) {
    if (!seg) return field_error("segmentation_id", "missing (required for a vlan network)");
    auto id = get_int(*seg, "segmentation_id", 1, 4094);
    if (!id) return id.error();
    n.seg_id = static_cast<uint32_t>(*id);
  } else if (n.type == NetType::kVxlan) {
    if (!seg) return field_error("segmentation_id", "missing (the VNI of a vxlan network)");
    auto vni = get_int(*seg, "segmentation_id", 1, kMaxVni);
    if (!vni) return vni.error();
    n.seg_id = static_cast<uint32_t>(*vni);
  } else if (seg) {
    return field_error("segmentation_id",
                       std::string("not allowed for a ") + net_type_name(n.type) + " network");
  }
  return ok();
}

// What no two ports may share: a vhost socket, or an ethdev. A socket is
// keyed by its directory's real path where the directory exists, so that
// "/dir/sub/../vm1.sock" or a path through a symlink is the socket it names
// (dropping ".." from the path itself would name another file after a
// symlink).
std::string attach_key(const Attachment& a) {
  // One subport per VLAN of a parent.
  if (a.kind == Attachment::Kind::kSubport)
    return "subport " + a.parent + " " + std::to_string(a.vid);
  if (a.kind != Attachment::Kind::kVhost) return "ethdev " + devargs_name(a.devargs);
  const size_t slash = a.path.rfind('/');  // parse_port: absolute
  const std::string dir = slash == 0 ? "/" : a.path.substr(0, slash);
  char real[PATH_MAX];
  if (slash == std::string::npos || !realpath(dir.c_str(), real)) return "vhost " + a.path;
  const std::string_view root(real);
  return "vhost " + std::string(root == "/" ? "" : root) + a.path.substr(slash);
}

// The addresses a port adds to each of its groups' address sets (counted
// per port: an address two members share counts twice).
size_t member_addresses(const PortSpec& p) {
  return p.fixed_ips.size() + p.allowed_address_pairs.size();
}

Status check_groups_exist(const PortSpec& p, const std::map<std::string, SecurityGroup>& groups) {
  for (size_t i = 0; i < p.security_groups.size(); ++i) {
    if (!groups.count(p.security_groups[i]))
      return not_found("security_groups[" + std::to_string(i) + "]: no security group " +
                       json_quoted(p.security_groups[i]));
  }
  return ok();
}

}  // namespace

// ---- helpers of model.h --------------------------------------------------

const char* net_type_name(dp::NetType t) {
  switch (t) {
    case NetType::kLocal:
      return "local";
    case NetType::kFlat:
      return "flat";
    case NetType::kVlan:
      return "vlan";
    case NetType::kVxlan:
      return "vxlan";
  }
  return "?";
}

std::string devargs_name(const std::string& devargs) {
  return devargs.substr(0, devargs.find(','));
}

Result<NetworkSpec> parse_network(const json& params) {
  if (!params.is_object()) return field_error("params", "expected an object, " + got(params));
  if (auto s = check_known_keys(params,
                                {"id", "type", "physnet", "segmentation_id", "mtu", "arp_responder"}, "");
      !s) {
    return s.error();
  }
  NetworkSpec n;
  const json* id = find_field(params, "id");
  if (!id) return field_error("id", "missing");
  auto id_s = get_string(*id, "id");
  if (!id_s) return id_s.error();
  if (!is_valid_id(*id_s)) {
    return field_error("id", json_quoted(*id_s) +
                                 " is not a valid id (1..64 of A-Z a-z 0-9 _ . : -, " +
                                 "starting with a letter or digit)");
  }
  n.id = std::move(*id_s);
  auto type = parse_net_type(params);
  if (!type) return type.error();
  n.type = *type;
  if (auto s = parse_segment(params, n); !s) return s.error();
  if (n.type == NetType::kVxlan) n.mtu = 0;  // the model's default: underlay_mtu - 50
  if (const json* mtu = find_field(params, "mtu")) {
    auto m = get_int(*mtu, "mtu", 68, 9000);
    if (!m) return m.error();
    n.mtu = static_cast<uint16_t>(*m);
  }
  if (const json* arp = find_field(params, "arp_responder")) {
    if (n.type != NetType::kVxlan)
      return field_error("arp_responder", std::string("not allowed for a ") +
                                              net_type_name(n.type) + " network (vxlan only)");
    auto on = get_bool(*arp, "arp_responder");
    if (!on) return on.error();
    n.arp_responder = *on;
  }
  return n;
}

json to_json(const NetworkSpec& n) {
  json j = {{"id", n.id},
            {"type", net_type_name(n.type)},
            {"physnet", nullptr},
            {"segmentation_id", nullptr},
            {"mtu", n.mtu}};
  if (n.type == NetType::kFlat || n.type == NetType::kVlan) j["physnet"] = n.physnet;
  if (n.type == NetType::kVlan || n.type == NetType::kVxlan) j["segmentation_id"] = n.seg_id;
  if (n.type == NetType::kVxlan) j["arp_responder"] = n.arp_responder;
  return j;
}

std::string new_uuid() {
  static thread_local std::mt19937_64 gen{[] {
    std::random_device rd;
    return (uint64_t{rd()} << 32) ^ rd();
  }()};
  std::array<uint8_t, 16> b;
  for (size_t i = 0; i < b.size(); i += 8) {
    const uint64_t r = gen();
    for (size_t k = 0; k < 8; ++k) b[i + k] = static_cast<uint8_t>(r >> (8 * k));
  }
  b[6] = static_cast<uint8_t>((b[6] & 0x0f) | 0x40);  // version 4
  b[8] = static_cast<uint8_t>((b[8] & 0x3f) | 0x80);  // RFC 4122 variant
  char out[37];
  std::snprintf(out, sizeof out,
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                b[15]);
  return out;
}

// ---- Model -----------------------------------------------------------------

Model::Model(std::map<std::string, std::string> physnets) : physnets_(std::move(physnets)) {}

Status Model::check_vlan_range(const NetworkSpec& n) const {
  if (n.type != NetType::kVlan) return ok();
  auto r = vlan_ranges_.find(n.physnet);
  if (r == vlan_ranges_.end()) return ok();
  std::string carried;
  for (const VlanRange& v : r->second) {
    if (n.seg_id >= v.min && n.seg_id <= v.max) return ok();
    carried += (carried.empty() ? "" : ", ") + std::to_string(v.min) + ":" + std::to_string(v.max);
  }
  return field_error("segmentation_id", "VLAN " + std::to_string(n.seg_id) + " is outside physnet " +
                                            n.physnet + "'s vlan_ranges (" +
                                            (carried.empty() ? "none" : carried) + ")");
}

Status Model::add_network(const NetworkSpec& spec) {
  if (networks_.count(spec.id)) return exists("network " + spec.id + " already exists");
  NetworkSpec n = spec;
  if (n.type == NetType::kVxlan) {
    if (n.mtu == 0) n.mtu = vxlan_.max_mtu();
    if (Status st = check_vxlan_network(n); !st) return st;
    networks_.emplace(n.id, n);
    return ok();
  }
  if (n.mtu < 68 || n.mtu > 9000)
    return field_error("mtu", std::to_string(n.mtu) + " is outside 68..9000");
  if (n.type == NetType::kLocal) {
    if (!n.physnet.empty()) return field_error("physnet", "not allowed for a local network");
  } else if (n.physnet.empty()) {
    return field_error(
        "physnet", std::string("missing (required for a ") + net_type_name(n.type) + " network)");
  } else if (!physnets_.count(n.physnet)) {
    std::string known;
    for (const auto& [name, dev] : physnets_) known += (known.empty() ? "" : ", ") + name;
    return not_found("physnet: " + n.physnet + " is not in the config (configured: " +
                     (known.empty() ? "none" : known) + ")");
  }
  if (n.type == NetType::kVlan && (n.seg_id < 1 || n.seg_id > 4094)) {
    return field_error("segmentation_id", std::to_string(n.seg_id) + " is outside 1..4094");
  }
  for (const auto& [id, other] : networks_) {
    if (other.physnet != n.physnet || other.type != n.type) continue;
    if (n.type == NetType::kVlan && other.seg_id == n.seg_id) {
      return conflict("segmentation_id: VLAN " + std::to_string(n.seg_id) + " of physnet " +
                      n.physnet + " is already used by network " + id);
    }
    if (n.type == NetType::kFlat) {
      return conflict("physnet: " + n.physnet + " already carries flat network " + id +
                      " (one flat network per physnet)");
    }
  }
  networks_.emplace(n.id, n);
  return ok();
}

Status Model::remove_network(const std::string& id) {
  auto it = networks_.find(id);
  if (it == networks_.end()) return not_found("network " + id + " not found");
  if (size_t n = ports_on(id)) {
    return conflict("network " + id + " has " + std::to_string(n) + " bound port" +
                    (n == 1 ? "" : "s") + "; unbind them first");
  }
  networks_.erase(it);
  tunnels_.erase(id);  // its FDB and flood list go with it
  return ok();
}

Status Model::check_add_port(const PortSpec& p) const { return check_port_fits(p, false); }

Status Model::check_port_fits(const PortSpec& p, bool restoring) const {
  if (ports_.count(p.id)) return exists("port " + p.id + " already exists");
  if (!networks_.count(p.network)) return not_found("network: no network " + p.network);
  // A port saved past a limit (an older straitd had none) is restored as it was.
  if (!restoring) {
    if (auto s = check_port_limits(p); !s) return s;
  }
  if (auto s = check_port_security(p); !s) return s;
  if (auto s = check_groups_exist(p, groups_); !s) return s;
  if (auto s = check_subport(p); !s) return s;
  const bool vhost = p.attach.kind == Attachment::Kind::kVhost;
  const bool ethdev = p.attach.kind == Attachment::Kind::kEthdev;
  const std::string dev = ethdev ? devargs_name(p.attach.devargs) : "";
  for (const auto& [name, devargs] : physnets_) {
    if (ethdev && devargs_name(devargs) == dev) {
      return conflict("attach.devargs: ethdev " + dev + " is the device of physnet " + name);
    }
  }
  // Restoring: rows saved before socket paths were normalised may spell one
  // socket twice. The later port is bound but its attach fails (down until
  // re-bound): refusing it would stop straitd from starting at all.
  auto holder = holders_.attach.find(attach_key(p.attach));
  if (holder != holders_.attach.end() && !(restoring && vhost)) {
    const std::string& id = holder->second;
    if (p.attach.kind == Attachment::Kind::kSubport)
      return conflict("attach.segmentation_id: VLAN " + std::to_string(p.attach.vid) +
                      " of trunk parent " + p.attach.parent + " is already subport " + id);
    return conflict(vhost
                        ? "attach.path: socket " + p.attach.path + " is already attached to port " + id
                        : "attach.devargs: ethdev " + dev + " is already attached to port " + id);
  }
  if (auto h = holders_.mac.find({p.network, p.mac}); h != holders_.mac.end()) {
    return conflict("mac: " + mac_to_string(p.mac) + " is already used by port " + h->second +
                    " in network " + p.network);
  }
  if (auto s = check_fixed_ips_free(p); !s) return s;
  // A saved group past the limit (an older straitd had none) is restored as it was.
  if (!restoring) {
    if (auto s = check_group_addresses(p); !s) return s;
  }
  if (!lvlan_.count(p.network) && vlans_.count() >= VlanAllocator::kMax - VlanAllocator::kMin + 1) {
    return exhausted("no free local VLAN: all 4094 are used by networks with ports on this host");
  }
  return ok();
}

Status Model::check_subport(const PortSpec& p) const {
  if (p.attach.kind != Attachment::Kind::kSubport) return ok();
  const PortSpec* parent = port(p.attach.parent);
  if (!parent) return not_found("attach.parent: port " + p.attach.parent + " is not bound");
  // neutron: a subport is no trunk's parent, and a trunk no subport.
  if (parent->attach.kind == Attachment::Kind::kSubport)
    return invalid("attach.parent: port " + parent->id + " is itself a subport of " +
                   parent->attach.parent + " (trunks do not nest)");
  return ok();
}

Status Model::check_fixed_ips_free(const PortSpec& p) const {
  for (const IpAddr& ip : p.fixed_ips) {
    auto h = holders_.ip.find({p.network, ip});
    if (h != holders_.ip.end() && h->second != p.id) {
      return conflict("fixed_ips: " + ip_to_string(ip) + " is already used by port " + h->second +
                      " in network " + p.network);
    }
  }
  return ok();
}

size_t Model::group_addresses(const std::string& id, const std::string& except) const {
  auto have = holders_.group_addresses.find(id);
  size_t n = have == holders_.group_addresses.end() ? 0 : have->second;
  if (const SecurityGroup* g = security_group(id))
    for (const auto& [port, addrs] : g->remote_members)
      if (port != except) n += addrs.size();
  return n;
}

Status Model::check_group_addresses(const PortSpec& p) const {
  for (size_t i = 0; i < p.security_groups.size(); ++i) {
    const size_t n = group_addresses(p.security_groups[i]);
    if (n + member_addresses(p) > kMaxGroupAddresses)
      return exhausted("security_groups[" + std::to_string(i) + "]: security group " +
                       p.security_groups[i] + " would have more than " +
                       std::to_string(kMaxGroupAddresses) +
                       " member addresses (fixed IPs and allowed address pairs of its ports, and "
                       "its remote members'; it has " + std::to_string(n) + ", the port " +
                       std::to_string(member_addresses(p)) + ")");
  }
  return ok();
}

void Model::index(const PortSpec& p) {
  const std::string key = attach_key(p.attach);
  holders_.attach.emplace(key, p.id);  // a restored second spelling keeps the first holder
  holders_.attach_of[p.id] = key;
  holders_.mac.emplace(std::pair{p.network, p.mac}, p.id);
  for (const IpAddr& ip : p.fixed_ips) holders_.ip.emplace(std::pair{p.network, ip}, p.id);
  holders_.per_network[p.network]++;
  for (const std::string& g : p.security_groups)
    holders_.group_addresses[g] += member_addresses(p);
  if (p.attach.kind == Attachment::Kind::kSubport)
    holders_.subports[p.attach.parent][p.attach.vid] = p.id;
}

void Model::unindex(const PortSpec& p) {
  // The key it was indexed under: its directory may have come or gone since.
  if (auto key = holders_.attach_of.find(p.id); key != holders_.attach_of.end()) {
    if (auto h = holders_.attach.find(key->second); h != holders_.attach.end() && h->second == p.id)
      holders_.attach.erase(h);
    holders_.attach_of.erase(key);
  }
  for (const std::string& g : p.security_groups) {
    auto n = holders_.group_addresses.find(g);
    if (n != holders_.group_addresses.end() && (n->second -= member_addresses(p)) == 0)
      holders_.group_addresses.erase(n);
  }
  holders_.mac.erase({p.network, p.mac});
  for (const IpAddr& ip : p.fixed_ips) holders_.ip.erase({p.network, ip});
  if (auto n = holders_.per_network.find(p.network); n != holders_.per_network.end() && --n->second == 0)
    holders_.per_network.erase(n);
  if (p.attach.kind == Attachment::Kind::kSubport) {
    auto t = holders_.subports.find(p.attach.parent);
    if (t != holders_.subports.end() && t->second.erase(p.attach.vid) && t->second.empty())
      holders_.subports.erase(t);
  }
}

Status Model::add_port(const PortSpec& p) {
  if (auto s = check_add_port(p); !s) return s;
  if (!lvlan_.count(p.network)) {
    std::optional<uint16_t> vlan = vlans_.allocate();  // check_add_port saw one free
    lvlan_.emplace(p.network, *vlan);
  }
  ports_.emplace(p.id, p);
  index(p);
  return ok();
}

Status Model::restore_port(const PortSpec& p, uint16_t local_vlan) {
  if (auto s = check_port_fits(p, true); !s) return s;
  auto have = lvlan_.find(p.network);
  if (have != lvlan_.end()) {
    if (have->second != local_vlan) {
      return conflict("local_vlan: network " + p.network + " already has local VLAN " +
                      std::to_string(have->second) + ", not " + std::to_string(local_vlan));
    }
  } else {
    if (local_vlan < VlanAllocator::kMin || local_vlan > VlanAllocator::kMax) {
      return field_error("local_vlan", std::to_string(local_vlan) + " is outside 1..4094");
    }
    if (!vlans_.reserve(local_vlan)) {
      std::string owner = "?";
      for (const auto& [net, v] : lvlan_) {
        if (v == local_vlan) owner = net;
      }
      return conflict("local_vlan: " + std::to_string(local_vlan) +
                      " is already the local VLAN of network " + owner);
    }
    lvlan_.emplace(p.network, local_vlan);
  }
  ports_.emplace(p.id, p);
  index(p);
  return ok();
}

Status Model::remove_port(const std::string& id) {
  auto it = ports_.find(to_lower(id));
  if (it == ports_.end()) return not_found("port " + id + " not found");
  if (auto t = holders_.subports.find(it->first); t != holders_.subports.end()) {
    std::string ids;
    for (const auto& [vid, sub] : t->second) ids += (ids.empty() ? "" : ", ") + sub;
    return conflict("port " + it->first + " is the parent of a trunk with " +
                    std::to_string(t->second.size()) + " subport(s) (" + ids +
                    "); unbind them first");
  }
  const std::string network = it->second.network;
  unindex(it->second);
  ports_.erase(it);
  if (ports_on(network) == 0) {
    if (auto l = lvlan_.find(network); l != lvlan_.end()) {
      vlans_.release(l->second);
      lvlan_.erase(l);
    }
  }
  return ok();
}

Result<PortSpec> Model::updated_port(const PortUpdate& u) const {
  const PortSpec* cur = port(u.id);
  if (!cur) return not_found("port " + u.id + " not found");
  PortSpec p = *cur;
  if (u.fixed_ips) p.fixed_ips = *u.fixed_ips;
  if (u.security_groups) p.security_groups = *u.security_groups;
  if (u.allowed_address_pairs) {
    p.allowed_address_pairs = *u.allowed_address_pairs;
    for (AddressPair& pair : p.allowed_address_pairs)
      if (pair.mac_address == Mac{}) pair.mac_address = p.mac;  // none given: the port's
  }
  if (u.port_security_enabled) p.port_security_enabled = *u.port_security_enabled;
  if (u.qos) p.qos = *u.qos;
  if (auto s = check_port_limits(p); !s) return s.error();
  if (auto s = check_port_security(p); !s) return s.error();
  if (auto s = check_groups_exist(p, groups_); !s) return s.error();
  if (auto s = check_fixed_ips_free(p); !s) return s.error();
  return p;
}

Status Model::update_port(const PortSpec& p) {
  auto it = ports_.find(p.id);
  if (it == ports_.end()) return not_found("port " + p.id + " not found");
  const PortSpec& cur = it->second;
  const bool same_attach = cur.attach.kind == p.attach.kind && cur.attach.path == p.attach.path &&
                           cur.attach.devargs == p.attach.devargs &&
                           cur.attach.mode == p.attach.mode && cur.attach.parent == p.attach.parent &&
                           cur.attach.vid == p.attach.vid;
  if (cur.network != p.network || cur.mac != p.mac || !same_attach)
    return invalid("port " + p.id +
                   ": network, mac and attach of a bound port do not change (unbind and bind)");
  if (auto s = check_port_security(p); !s) return s;
  if (auto s = check_groups_exist(p, groups_); !s) return s;
  if (auto s = check_fixed_ips_free(p); !s) return s;
  // Its own addresses leave its groups for the check of the new ones.
  unindex(it->second);
  if (auto s = check_group_addresses(p); !s) {
    index(it->second);
    return s;
  }
  it->second = p;
  index(it->second);
  return ok();
}

const NetworkSpec* Model::network(const std::string& id) const {
  auto it = networks_.find(id);
  return it == networks_.end() ? nullptr : &it->second;
}

const PortSpec* Model::port(const std::string& id) const {
  auto it = ports_.find(to_lower(id));
  return it == ports_.end() ? nullptr : &it->second;
}

uint16_t Model::local_vlan(const std::string& network_id) const {
  auto it = lvlan_.find(network_id);
  return it == lvlan_.end() ? 0 : it->second;
}

std::map<uint16_t, std::string> Model::subports_of(const std::string& parent) const {
  auto t = holders_.subports.find(parent);
  return t == holders_.subports.end() ? std::map<uint16_t, std::string>{} : t->second;
}

size_t Model::ports_on(const std::string& network_id) const {
  auto n = holders_.per_network.find(network_id);
  return n == holders_.per_network.end() ? 0 : n->second;
}

}  // namespace strait::ctl