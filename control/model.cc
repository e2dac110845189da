#include "control/model.h"

#include "control/json_fields.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string_view>

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

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// 8-4-4-4-12 hex digits, any case; the lowercase form, or "" when not a UUID.
std::string canonical_uuid(std::string_view s) {
  if (s.size() != 36) return "";
  std::string out(s);
  for (size_t i = 0; i < out.size(); ++i) {
    bool dash_pos = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash_pos != (out[i] == '-')) return "";
    if (dash_pos) continue;
    if (hex_value(out[i]) < 0) return "";
    if (out[i] >= 'A' && out[i] <= 'F') out[i] = static_cast<char>(out[i] - 'A' + 'a');
  }
  return out;
}

// ---- parse_network parts -------------------------------------------------

Result<NetType> parse_net_type(const json& params) {
  const json* v = find_field(params, "type");
  if (!v) return field_error("type", "missing (vlan, flat or local)");
  auto s = get_string(*v, "type");
  if (!s) return s.error();
  if (*s == "vlan") return NetType::kVlan;
  if (*s == "flat") return NetType::kFlat;
  if (*s == "local") return NetType::kLocal;
  return field_error("type", json_quoted(*s) + " is not one of vlan, flat, local");
}

Status parse_segment(const json& params, NetworkSpec& n) {
  const json* physnet = find_field(params, "physnet");
  const json* seg = find_field(params, "segmentation_id");
  if (n.type == NetType::kLocal) {
    if (physnet) return field_error("physnet", "not allowed for a local network");
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
    n.seg_id = static_cast<uint16_t>(*id);
  } else if (seg) {
    return field_error("segmentation_id",
                       std::string("not allowed for a ") + net_type_name(n.type) + " network");
  }
  return ok();
}

// ---- parse_port parts ----------------------------------------------------

Result<std::vector<IpAddr>> parse_fixed_ips(const json& params) {
  std::vector<IpAddr> ips;
  const json* v = find_field(params, "fixed_ips");
  if (!v) return ips;
  if (!v->is_array()) return field_error("fixed_ips", "expected a list of addresses, " + got(*v));
  for (size_t i = 0; i < v->size(); ++i) {
    std::string field = "fixed_ips[" + std::to_string(i) + "]";
    auto s = get_string((*v)[i], field);
    if (!s) return s.error();
    auto ip = parse_ip(*s);
    if (!ip) return field_error(field, ip.error().message);
    if (std::find(ips.begin(), ips.end(), *ip) != ips.end()) {
      return field_error(field, ip_to_string(*ip) + " is listed twice");
    }
    ips.push_back(*ip);
  }
  return ips;
}

bool has_space_or_control(const std::string& s) {
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; });
}

Result<Attachment> parse_vhost_attach(const json& v) {
  if (auto s = check_known_keys(v, {"type", "path", "mode"}, "attach."); !s) return s.error();
  const json* path = find_field(v, "path");
  if (!path) return field_error("attach.path", "missing (the vhost-user socket)");
  auto p = get_string(*path, "attach.path");
  if (!p) return p.error();
  if (p->empty() || (*p)[0] != '/') return field_error("attach.path", json_quoted(*p) + " is not an absolute path");
  if (p->size() >= 108) return field_error("attach.path", "longer than 107 bytes (a Unix socket path)");
  if (has_space_or_control(*p))
    return field_error("attach.path", json_quoted(*p) + " contains whitespace or a control character");
  Attachment a;
  a.kind = Attachment::Kind::kVhost;
  a.path = std::move(*p);
  if (const json* mode = find_field(v, "mode")) {
    auto m = get_string(*mode, "attach.mode");
    if (!m) return m.error();
    if (*m == "server") {
      a.mode = Attachment::Mode::kServer;
    } else if (*m != "client") {
      return field_error("attach.mode", json_quoted(*m) + " is not one of client, server");
    }
  }
  return a;
}

// {"type": "ethdev", "devargs": ...} or {"type": "vhost", "path": ..., "mode": client|server}
Result<Attachment> parse_attach(const json& params) {
  const json* v = find_field(params, "attach");
  if (!v)
    return field_error("attach", R"(missing (e.g. {"type": "vhost", "path": "/run/vhu0.sock"}))");
  if (!v->is_object()) return field_error("attach", "expected an object, " + got(*v));
  const json* type = find_field(*v, "type");
  if (!type) return field_error("attach.type", "missing (ethdev or vhost)");
  auto type_s = get_string(*type, "attach.type");
  if (!type_s) return type_s.error();
  if (*type_s == "vhost") return parse_vhost_attach(*v);
  if (*type_s != "ethdev")
    return field_error("attach.type", json_quoted(*type_s) + " is not one of ethdev, vhost");
  if (auto s = check_known_keys(*v, {"type", "devargs"}, "attach."); !s) return s.error();
  const json* devargs = find_field(*v, "devargs");
  if (!devargs) return field_error("attach.devargs", "missing");
  auto d = get_string(*devargs, "attach.devargs");
  if (!d) return d.error();
  if (d->empty()) return field_error("attach.devargs", "is empty");
  // DPDK splits EAL arguments on whitespace; a control character is never meant.
  if (has_space_or_control(*d)) {
    return field_error("attach.devargs",
                       json_quoted(*d) + " contains whitespace or a control character");
  }
  if (devargs_name(*d).empty())
    return field_error("attach.devargs", json_quoted(*d) + " has no device name");
  Attachment a;
  a.kind = Attachment::Kind::kEthdev;
  a.devargs = std::move(*d);
  return a;
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
  }
  return "?";
}

std::string devargs_name(const std::string& devargs) {
  return devargs.substr(0, devargs.find(','));
}

std::string mac_to_string(const Mac& m) {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4],
                m[5]);
  return buf;
}

// Syntax only: multicast and zero addresses parse (an FDB holds them); the
// port rules (unicast, not zero) are parse_port's.
Result<Mac> parse_mac(const std::string& s) {
  Error bad = invalid(json_quoted(s) + " is not a MAC address (aa:bb:cc:dd:ee:ff)");
  if (s.size() != 17) return bad;
  Mac m{};
  for (size_t i = 0; i < 6; ++i) {
    int hi = hex_value(s[3 * i]), lo = hex_value(s[3 * i + 1]);
    if (hi < 0 || lo < 0 || (i < 5 && s[3 * i + 2] != ':')) return bad;
    m[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return m;
}

std::string ip_to_string(const IpAddr& ip) {
  char buf[INET6_ADDRSTRLEN];
  if (!inet_ntop(ip.family == 6 ? AF_INET6 : AF_INET, ip.bytes.data(), buf, sizeof buf)) return "?";
  return buf;
}

Result<IpAddr> parse_ip(const std::string& s) {
  IpAddr ip;
  if (inet_pton(AF_INET, s.c_str(), ip.bytes.data()) == 1) {
    ip.family = 4;
    return ip;
  }
  if (inet_pton(AF_INET6, s.c_str(), ip.bytes.data()) == 1) {
    ip.family = 6;
    return ip;
  }
  return invalid(json_quoted(s) + " is not an IPv4 or IPv6 address");
}

Result<NetworkSpec> parse_network(const json& params) {
  if (!params.is_object()) return field_error("params", "expected an object, " + got(params));
  if (auto s = check_known_keys(params, {"id", "type", "physnet", "segmentation_id", "mtu"}, "");
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
  if (const json* mtu = find_field(params, "mtu")) {
    auto m = get_int(*mtu, "mtu", 68, 9000);
    if (!m) return m.error();
    n.mtu = static_cast<uint16_t>(*m);
  }
  return n;
}

Result<PortSpec> parse_port(const json& params) {
  if (!params.is_object()) return field_error("params", "expected an object, " + got(params));
  if (auto s = check_known_keys(params, {"id", "network", "mac", "fixed_ips", "attach"}, ""); !s) {
    return s.error();
  }
  PortSpec p;
  const json* id = find_field(params, "id");
  if (!id) return field_error("id", "missing");
  auto id_s = get_string(*id, "id");
  if (!id_s) return id_s.error();
  p.id = canonical_uuid(*id_s);
  if (p.id.empty())
    return field_error("id", json_quoted(*id_s) + " is not a UUID (8-4-4-4-12 hex digits)");

  const json* network = find_field(params, "network");
  if (!network) return field_error("network", "missing");
  auto net_s = get_string(*network, "network");
  if (!net_s) return net_s.error();
  if (!is_valid_id(*net_s))
    return field_error("network", json_quoted(*net_s) + " is not a valid network id");
  p.network = std::move(*net_s);

  const json* mac = find_field(params, "mac");
  if (!mac) return field_error("mac", "missing");
  auto mac_s = get_string(*mac, "mac");
  if (!mac_s) return mac_s.error();
  auto m = parse_mac(*mac_s);
  if (!m) return field_error("mac", m.error().message);
  if ((*m)[0] & 1) return field_error("mac", mac_to_string(*m) + " is a multicast address");
  if (*m == Mac{}) return field_error("mac", "00:00:00:00:00:00 is not a port address");
  p.mac = *m;

  auto ips = parse_fixed_ips(params);
  if (!ips) return ips.error();
  p.fixed_ips = std::move(*ips);
  auto attach = parse_attach(params);
  if (!attach) return attach.error();
  p.attach = std::move(*attach);
  return p;
}

json to_json(const NetworkSpec& n) {
  json j = {{"id", n.id},
            {"type", net_type_name(n.type)},
            {"physnet", nullptr},
            {"segmentation_id", nullptr},
            {"mtu", n.mtu}};
  if (n.type != NetType::kLocal) j["physnet"] = n.physnet;
  if (n.type == NetType::kVlan) j["segmentation_id"] = n.seg_id;
  return j;
}

json attach_json(const Attachment& a) {
  if (a.kind == Attachment::Kind::kVhost)
    return {{"type", "vhost"}, {"path", a.path},
            {"mode", a.mode == Attachment::Mode::kServer ? "server" : "client"}};
  return {{"type", "ethdev"}, {"devargs", a.devargs}};
}

json to_json(const PortSpec& p) {
  json ips = json::array();
  for (const IpAddr& ip : p.fixed_ips) ips.push_back(ip_to_string(ip));
  return {{"id", p.id},
          {"network", p.network},
          {"mac", mac_to_string(p.mac)},
          {"fixed_ips", std::move(ips)},
          {"attach", attach_json(p.attach)}};
}

// ---- Model -----------------------------------------------------------------

Model::Model(std::map<std::string, std::string> physnets) : physnets_(std::move(physnets)) {}

Status Model::add_network(const NetworkSpec& n) {
  if (networks_.count(n.id)) return exists("network " + n.id + " already exists");
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
  return ok();
}

Status Model::check_add_port(const PortSpec& p) const {
  if (ports_.count(p.id)) return exists("port " + p.id + " already exists");
  if (!networks_.count(p.network)) return not_found("network: no network " + p.network);
  const bool vhost = p.attach.kind == Attachment::Kind::kVhost;
  const std::string dev = vhost ? "" : devargs_name(p.attach.devargs);
  for (const auto& [name, devargs] : physnets_) {
    if (!vhost && devargs_name(devargs) == dev) {
      return conflict("attach.devargs: ethdev " + dev + " is the device of physnet " + name);
    }
  }
  for (const auto& [id, other] : ports_) {
    if (other.attach.kind == p.attach.kind &&
        (vhost ? other.attach.path == p.attach.path : devargs_name(other.attach.devargs) == dev)) {
      return conflict(vhost ? "attach.path: socket " + p.attach.path + " is already attached to port " + id
                            : "attach.devargs: ethdev " + dev + " is already attached to port " + id);
    }
    if (other.network != p.network) continue;
    if (other.mac == p.mac) {
      return conflict("mac: " + mac_to_string(p.mac) + " is already used by port " + id +
                      " in network " + p.network);
    }
    for (const IpAddr& ip : p.fixed_ips) {
      if (std::find(other.fixed_ips.begin(), other.fixed_ips.end(), ip) != other.fixed_ips.end()) {
        return conflict("fixed_ips: " + ip_to_string(ip) + " is already used by port " + id +
                        " in network " + p.network);
      }
    }
  }
  if (!lvlan_.count(p.network) && vlans_.count() >= VlanAllocator::kMax - VlanAllocator::kMin + 1) {
    return exhausted("no free local VLAN: all 4094 are used by networks with ports on this host");
  }
  return ok();
}

Status Model::add_port(const PortSpec& p) {
  if (auto s = check_add_port(p); !s) return s;
  if (!lvlan_.count(p.network)) {
    std::optional<uint16_t> vlan = vlans_.allocate();  // check_add_port saw one free
    lvlan_.emplace(p.network, *vlan);
  }
  ports_.emplace(p.id, p);
  return ok();
}

Status Model::restore_port(const PortSpec& p, uint16_t local_vlan) {
  if (auto s = check_add_port(p); !s) return s;
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
  return ok();
}

Status Model::remove_port(const std::string& id) {
  auto it = ports_.find(to_lower(id));
  if (it == ports_.end()) return not_found("port " + id + " not found");
  const std::string network = it->second.network;
  ports_.erase(it);
  if (ports_on(network) == 0) {
    if (auto l = lvlan_.find(network); l != lvlan_.end()) {
      vlans_.release(l->second);
      lvlan_.erase(l);
    }
  }
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

size_t Model::ports_on(const std::string& network_id) const {
  return static_cast<size_t>(std::count_if(ports_.begin(), ports_.end(), [&](const auto& kv) {
    return kv.second.network == network_id;
  }));
}

}  // namespace strait::ctl
