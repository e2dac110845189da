#include <algorithm>
#include <nlohmann/json.hpp>
#include <string_view>

#include "control/api/json_fields.h"
#include "control/model/model.h"

// Parsing and serialising a port's spec (model.h): field validation only, no
// state consulted.
namespace strait::ctl {
namespace {

using json = nlohmann::json;

// ---- parse_port parts ----------------------------------------------------

// A port's own address: unicast, not zero.
Result<Mac> parse_unicast_mac(const std::string& s, const std::string& field) {
  auto m = parse_mac(s);
  if (!m) return field_error(field, m.error().message);
  if ((*m)[0] & 1) return field_error(field, mac_to_string(*m) + " is a multicast address");
  if (*m == Mac{}) return field_error(field, "00:00:00:00:00:00 is not a port address");
  return m;
}

Result<std::vector<IpAddr>> parse_fixed_ips(const json* v) {
  std::vector<IpAddr> ips;
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
  if (p->empty() || (*p)[0] != '/')
    return field_error("attach.path", json_quoted(*p) + " is not an absolute path");
  if (has_space_or_control(*p))
    return field_error("attach.path",
                       json_quoted(*p) + " contains whitespace or a control character");
  // Stored and compared in one spelling: "/dir//vm1.sock" was a second port
  // on /dir/vm1.sock. Saved rows of older straitd come through here too.
  std::string normal = normal_socket_path(*p);
  if (normal == "/")
    return field_error("attach.path", json_quoted(*p) + " names a directory, not a socket");
  if (normal.size() >= 108)
    return field_error("attach.path", "longer than 107 bytes (a Unix socket path)");
  Attachment a;
  a.kind = Attachment::Kind::kVhost;
  a.path = std::move(normal);
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

// A port id field: a UUID, canonical (lower case).
Result<std::string> parse_port_id_field(const json& v, const std::string& field) {
  auto id_s = get_string(v, field);
  if (!id_s) return id_s.error();
  std::string uuid = canonical_uuid(*id_s);
  if (uuid.empty())
    return field_error(field, json_quoted(*id_s) + " is not a UUID (8-4-4-4-12 hex digits)");
  return uuid;
}

// {"type": "subport", "parent": UUID, "segmentation_type": "vlan", "segmentation_id": 1..4094}
Result<Attachment> parse_subport_attach(const json& v) {
  if (auto s = check_known_keys(v, {"type", "parent", "segmentation_type", "segmentation_id"},
                                "attach.");
      !s)
    return s.error();
  const json* parent = find_field(v, "parent");
  if (!parent) return field_error("attach.parent", "missing (the trunk's parent port)");
  auto id = parse_port_id_field(*parent, "attach.parent");
  if (!id) return id.error();
  if (const json* type = find_field(v, "segmentation_type")) {
    auto t = get_string(*type, "attach.segmentation_type");
    if (!t) return t.error();
    if (*t != "vlan")
      return field_error("attach.segmentation_type",
                         json_quoted(*t) + " is not vlan (the only type of neutron's trunk subports)");
  }
  const json* seg = find_field(v, "segmentation_id");
  if (!seg) return field_error("attach.segmentation_id", "missing (the subport's VLAN on the parent)");
  auto vid = get_int(*seg, "attach.segmentation_id", 1, 4094);
  if (!vid) return vid.error();
  Attachment a;
  a.kind = Attachment::Kind::kSubport;
  a.parent = std::move(*id);
  a.vid = static_cast<uint16_t>(*vid);
  return a;
}

// {"type": "ethdev", "devargs": ...}, {"type": "vhost", "path": ..., "mode": client|server}
// or a subport's (parse_subport_attach)
Result<Attachment> parse_attach(const json& params) {
  const json* v = find_field(params, "attach");
  if (!v)
    return field_error("attach", R"(missing (e.g. {"type": "vhost", "path": "/run/vhu0.sock"}))");
  if (!v->is_object()) return field_error("attach", "expected an object, " + got(*v));
  const json* type = find_field(*v, "type");
  if (!type) return field_error("attach.type", "missing (ethdev, vhost or subport)");
  auto type_s = get_string(*type, "attach.type");
  if (!type_s) return type_s.error();
  if (*type_s == "vhost") return parse_vhost_attach(*v);
  if (*type_s == "subport") return parse_subport_attach(*v);
  if (*type_s != "ethdev")
    return field_error("attach.type", json_quoted(*type_s) + " is not one of ethdev, vhost, subport");
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

// ---- port security fields ----------------------------------------------------

Result<std::vector<std::string>> parse_group_ids(const json& v) {
  if (!v.is_array()) return field_error("security_groups", "expected a list of ids, " + got(v));
  std::vector<std::string> ids;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string field = "security_groups[" + std::to_string(i) + "]";
    auto s = get_string(v[i], field);
    if (!s) return s.error();
    if (!is_valid_id(*s)) return field_error(field, json_quoted(*s) + " is not a valid group id");
    if (std::find(ids.begin(), ids.end(), *s) != ids.end())
      return field_error(field, json_quoted(*s) + " is listed twice");
    ids.push_back(std::move(*s));
  }
  return ids;
}

// A pair without "mac_address" gets a zero MAC here: the port's, filled in by
// whoever knows the port (parse_port, Model::updated_port).
Result<std::vector<AddressPair>> parse_address_pairs(const json& v) {
  if (!v.is_array())
    return field_error("allowed_address_pairs",
                       "expected a list of {\"ip_address\", \"mac_address\"}, " + got(v));
  std::vector<AddressPair> pairs;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string field = "allowed_address_pairs[" + std::to_string(i) + "]";
    if (!v[i].is_object()) return field_error(field, "expected an object, " + got(v[i]));
    if (auto s = check_known_keys(v[i], {"ip_address", "mac_address"}, field + "."); !s)
      return s.error();
    AddressPair pair;
    const json* ip = find_field(v[i], "ip_address");
    if (!ip) return field_error(field + ".ip_address", "missing (an address or a CIDR)");
    auto ip_s = get_string(*ip, field + ".ip_address");
    if (!ip_s) return ip_s.error();
    auto prefix = parse_prefix(*ip_s);
    if (!prefix) return field_error(field + ".ip_address", prefix.error().message);
    pair.ip_address = *prefix;
    if (const json* mac = find_field(v[i], "mac_address")) {
      auto mac_s = get_string(*mac, field + ".mac_address");
      if (!mac_s) return mac_s.error();
      auto m = parse_unicast_mac(*mac_s, field + ".mac_address");
      if (!m) return m.error();
      pair.mac_address = *m;
    }
    pairs.push_back(pair);
  }
  return pairs;
}

void fill_pair_macs(PortSpec& p) {
  for (AddressPair& pair : p.allowed_address_pairs)
    if (pair.mac_address == Mac{}) pair.mac_address = p.mac;
}

// The three fields of parse_port; port_security_enabled defaults to true
// when the port has groups or pairs.
Status parse_port_security(const json& params, PortSpec& p) {
  if (const json* v = find_field(params, "security_groups")) {
    auto ids = parse_group_ids(*v);
    if (!ids) return ids.error();
    p.security_groups = std::move(*ids);
  }
  if (const json* v = find_field(params, "allowed_address_pairs")) {
    auto pairs = parse_address_pairs(*v);
    if (!pairs) return pairs.error();
    p.allowed_address_pairs = std::move(*pairs);
    fill_pair_macs(p);
  }
  p.port_security_enabled = !p.security_groups.empty() || !p.allowed_address_pairs.empty();
  if (const json* v = find_field(params, "port_security_enabled")) {
    auto b = get_bool(*v, "port_security_enabled");
    if (!b) return b.error();
    p.port_security_enabled = *b;
  }
  return check_port_security(p);
}

Result<std::string> parse_port_id(const json& params) {
  const json* id = find_field(params, "id");
  if (!id) return field_error("id", "missing");
  return parse_port_id_field(*id, "id");
}

// A fixed IP of p that another port of its network has, as a conflict.
json pairs_json(const std::vector<AddressPair>& pairs) {
  json out = json::array();
  for (const AddressPair& pair : pairs) {
    const IpPrefix& ip = pair.ip_address;
    // A host prefix reads back as the address, as it was most likely given.
    const bool host = ip.len == (ip.addr.family == 4 ? 32 : 128);
    out.push_back({{"ip_address", host ? ip_to_string(ip.addr) : prefix_to_string(ip)},
                   {"mac_address", mac_to_string(pair.mac_address)}});
  }
  return out;
}

}  // namespace

// ---- QoS (issue 25) ------------------------------------------------------------

namespace {

// neutron's VALID_DSCP_MARKS.
constexpr uint8_t kDscpMarks[] = {0,  8,  10, 12, 14, 16, 18, 20, 22, 24, 26,
                                  28, 30, 32, 34, 36, 38, 40, 46, 48, 56};
constexpr int64_t kQosMax = 2147483647;  // neutron's largest max_kbps / max_kpps

const char* qos_type_name(QosRule::Type t) {
  switch (t) {
    case QosRule::Type::kBandwidthLimit: return "bandwidth_limit";
    case QosRule::Type::kPacketRateLimit: return "packet_rate_limit";
    case QosRule::Type::kDscpMarking: return "dscp_marking";
  }
  return "?";
}

Result<QosRule> parse_qos_rule(const json& r, const std::string& field) {
  if (!r.is_object()) return field_error(field, "expected an object, " + got(r));
  const json* type = find_field(r, "type");
  if (!type) return field_error(field + ".type", "missing (bandwidth_limit, packet_rate_limit or dscp_marking)");
  auto t = get_string(*type, field + ".type");
  if (!t) return t.error();
  QosRule q;
  const char* max_key = nullptr;
  const char* burst_key = nullptr;
  if (*t == "bandwidth_limit") {
    q.type = QosRule::Type::kBandwidthLimit;
    max_key = "max_kbps";
    burst_key = "max_burst_kbps";
  } else if (*t == "packet_rate_limit") {
    q.type = QosRule::Type::kPacketRateLimit;
    max_key = "max_kpps";
    burst_key = "max_burst_kpps";
  } else if (*t == "dscp_marking") {
    q.type = QosRule::Type::kDscpMarking;
  } else if (*t == "minimum_bandwidth" || *t == "minimum_packet_rate") {
    return field_error(field + ".type", json_quoted(*t) +
                                            " is not supported: Strait polices limits, it "
                                            "schedules no guarantee");
  } else {
    return field_error(field + ".type", json_quoted(*t) +
                                            " is not one of bandwidth_limit, packet_rate_limit, "
                                            "dscp_marking");
  }
  if (q.type == QosRule::Type::kDscpMarking) {
    if (auto s = check_known_keys(r, {"type", "dscp_mark", "id"}, field + "."); !s) return s.error();
    const json* mark = find_field(r, "dscp_mark");
    if (!mark) return field_error(field + ".dscp_mark", "missing");
    auto m = get_int(*mark, field + ".dscp_mark", 0, 56);
    if (!m) return m.error();
    if (std::find(std::begin(kDscpMarks), std::end(kDscpMarks), *m) == std::end(kDscpMarks))
      return field_error(field + ".dscp_mark",
                         std::to_string(*m) + " is not a valid DSCP mark (neutron's: 0, 8-40 even, 46, 48, 56)");
    q.dscp = uint8_t(*m);
    return q;
  }
  if (auto s = check_known_keys(r, {"type", "direction", max_key, burst_key, "id"}, field + ".");
      !s)
    return s.error();
  if (const json* d = find_field(r, "direction")) {
    auto dir = get_string(*d, field + ".direction");
    if (!dir) return dir.error();
    if (*dir == "ingress") {
      q.direction = dp::QosDir::kIngress;
    } else if (*dir != "egress") {
      return field_error(field + ".direction", json_quoted(*dir) + " is not egress or ingress");
    }
  }
  const json* max = find_field(r, max_key);
  if (!max) return field_error(field + "." + max_key, "missing");
  // 0: no limit (neutron accepts it; OVS then polices nothing).
  auto m = get_int(*max, field + "." + max_key, 0, kQosMax);
  if (!m) return m.error();
  q.max = uint32_t(*m);
  if (const json* burst = find_field(r, burst_key)) {
    auto b = get_int(*burst, field + "." + burst_key, 0, kQosMax);
    if (!b) return b.error();
    q.burst = uint32_t(*b);
  }
  return q;
}

}  // namespace

Result<std::vector<QosRule>> parse_qos_rules(const json& v) {
  if (!v.is_array()) return field_error("qos", "expected a list of QoS rules, " + got(v));
  std::vector<QosRule> rules;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string field = "qos[" + std::to_string(i) + "]";
    auto q = parse_qos_rule(v[i], field);
    if (!q) return q.error();
    for (const QosRule& o : rules)
      if (o.type == q->type && (q->type == QosRule::Type::kDscpMarking || o.direction == q->direction))
        return field_error(field, std::string("a second ") + qos_type_name(q->type) + " rule" +
                                      (q->type == QosRule::Type::kDscpMarking
                                           ? ""
                                           : q->direction == dp::QosDir::kEgress ? " for egress"
                                                                                  : " for ingress"));
    rules.push_back(*q);
  }
  return rules;
}

json qos_json(const std::vector<QosRule>& rules) {
  json out = json::array();
  for (const QosRule& q : rules) {
    json r = {{"type", qos_type_name(q.type)}};
    if (q.type == QosRule::Type::kDscpMarking) {
      r["dscp_mark"] = q.dscp;
    } else {
      const bool bw = q.type == QosRule::Type::kBandwidthLimit;
      r["direction"] = q.direction == dp::QosDir::kEgress ? "egress" : "ingress";
      r[bw ? "max_kbps" : "max_kpps"] = q.max;
      r[bw ? "max_burst_kbps" : "max_burst_kpps"] = q.burst;
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::string normal_socket_path(const std::string& path) {
  std::string out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    const std::string_view part(path.data() + start, end - start);
    if (!part.empty() && part != ".") {
      out += '/';
      out += part;
    }
    start = end + 1;
  }
  return out.empty() ? "/" : out;
}

Status check_port_limits(const PortSpec& p) {
  auto over = [](const char* field, size_t n, size_t limit) -> Status {
    if (n <= limit) return ok();
    return exhausted(std::string(field) + ": " + std::to_string(n) + " given, at most " +
                     std::to_string(limit) + " per port");
  };
  if (auto s = over("fixed_ips", p.fixed_ips.size(), kMaxFixedIps); !s) return s;
  if (auto s = over("allowed_address_pairs", p.allowed_address_pairs.size(), kMaxAddressPairs); !s)
    return s;
  return over("security_groups", p.security_groups.size(), kMaxPortGroups);
}

Status check_port_security(const PortSpec& p) {
  const auto& pairs = p.allowed_address_pairs;
  for (size_t i = 0; i < pairs.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (pairs[j] == pairs[i])
        return field_error("allowed_address_pairs[" + std::to_string(i) + "]",
                           prefix_to_string(pairs[i].ip_address) + " with " +
                               mac_to_string(pairs[i].mac_address) + " is listed twice");
    }
  }
  if (p.port_security_enabled) return ok();
  if (!p.security_groups.empty())
    return field_error("port_security_enabled",
                       "false, but the port has security groups (port security must be enabled "
                       "for a port to have security groups)");
  if (!pairs.empty())
    return field_error("port_security_enabled",
                       "false, but the port has allowed address pairs (port security must be "
                       "enabled for a port to have allowed address pairs)");
  return ok();
}

Result<PortSpec> parse_port(const json& params) {
  if (!params.is_object()) return field_error("params", "expected an object, " + got(params));
  if (auto s = check_known_keys(params,
                                {"id", "network", "mac", "fixed_ips", "attach", "security_groups",
                                 "allowed_address_pairs", "port_security_enabled", "qos"},
                                "");
      !s) {
    return s.error();
  }
  PortSpec p;
  auto id = parse_port_id(params);
  if (!id) return id.error();
  p.id = std::move(*id);

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
  auto m = parse_unicast_mac(*mac_s, "mac");
  if (!m) return m.error();
  p.mac = *m;

  auto ips = parse_fixed_ips(find_field(params, "fixed_ips"));
  if (!ips) return ips.error();
  p.fixed_ips = std::move(*ips);
  auto attach = parse_attach(params);
  if (!attach) return attach.error();
  p.attach = std::move(*attach);
  if (auto s = parse_port_security(params, p); !s) return s.error();
  if (const json* v = find_field(params, "qos")) {
    auto q = parse_qos_rules(*v);
    if (!q) return q.error();
    p.qos = std::move(*q);
  }
  return p;
}

Result<PortUpdate> parse_port_update(const json& params) {
  if (!params.is_object()) return field_error("params", "expected an object, " + got(params));
  if (auto s = check_known_keys(
          params,
          {"id", "fixed_ips", "security_groups", "allowed_address_pairs", "port_security_enabled",
           "qos"},
          "");
      !s) {
    return s.error();
  }
  PortUpdate u;
  auto id = parse_port_id(params);
  if (!id) return id.error();
  u.id = std::move(*id);
  if (const json* v = find_field(params, "fixed_ips")) {
    auto ips = parse_fixed_ips(v);
    if (!ips) return ips.error();
    u.fixed_ips = std::move(*ips);
  }
  if (const json* v = find_field(params, "security_groups")) {
    auto ids = parse_group_ids(*v);
    if (!ids) return ids.error();
    u.security_groups = std::move(*ids);
  }
  if (const json* v = find_field(params, "allowed_address_pairs")) {
    auto pairs = parse_address_pairs(*v);
    if (!pairs) return pairs.error();
    u.allowed_address_pairs = std::move(*pairs);
  }
  if (const json* v = find_field(params, "port_security_enabled")) {
    auto b = get_bool(*v, "port_security_enabled");
    if (!b) return b.error();
    u.port_security_enabled = *b;
  }
  if (const json* v = find_field(params, "qos")) {
    auto q = parse_qos_rules(*v);
    if (!q) return q.error();
    u.qos = std::move(*q);
  }
  if (!u.fixed_ips && !u.security_groups && !u.allowed_address_pairs && !u.port_security_enabled &&
      !u.qos)
    return field_error("params",
                       "nothing to update (give fixed_ips, security_groups, "
                       "allowed_address_pairs, port_security_enabled or qos)");
  return u;
}

json attach_json(const Attachment& a) {
  if (a.kind == Attachment::Kind::kSubport)
    return {{"type", "subport"},
            {"parent", a.parent},
            {"segmentation_type", "vlan"},
            {"segmentation_id", a.vid}};
  if (a.kind == Attachment::Kind::kVhost)
    return {{"type", "vhost"},
            {"path", a.path},
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
          {"attach", attach_json(p.attach)},
          {"security_groups", p.security_groups},
          {"allowed_address_pairs", pairs_json(p.allowed_address_pairs)},
          {"port_security_enabled", p.port_security_enabled},
          {"qos", qos_json(p.qos)}};
}

}  // namespace strait::ctl
