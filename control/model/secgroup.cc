#include "control/model/secgroup.h"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "control/api/json_fields.h"

namespace strait::ctl {
namespace {

using json = nlohmann::json;
using dp::SgDirection;
using dp::SgFamily;

Result<std::string> get_id(const json& obj, const char* key, const std::string& field) {
  const json* v = find_field(obj, key);
  if (!v) return field_error(field, "missing");
  auto s = get_string(*v, field);
  if (!s) return s.error();
  if (!is_valid_id(*s))
    return field_error(field, json_quoted(*s) +
                                  " is not a valid id (1..64 of A-Z a-z 0-9 _ . : -, " +
                                  "starting with a letter or digit)");
  return s;
}

// ---- protocols --------------------------------------------------------------------

struct ProtoName {
  const char* name;
  uint8_t num;
};
// neutron-lib's IP_PROTOCOL_MAP; the first name of a number is its canonical one.
// clang-format off
constexpr std::array<ProtoName, 24> kProtoNames = {{
    {"hopopt", 0},       {"icmp", 1},         {"igmp", 2},       {"ipip", 4},
    {"tcp", 6},          {"egp", 8},          {"udp", 17},       {"dccp", 33},
    {"ipv6-encap", 41},  {"ipv6-route", 43},  {"ipv6-frag", 44}, {"rsvp", 46},
    {"gre", 47},         {"esp", 50},         {"ah", 51},        {"ipv6-icmp", 58},
    {"icmpv6", 58},      {"ipv6-nonxt", 59},  {"ipv6-opts", 60}, {"ospf", 89},
    {"vrrp", 112},       {"pgm", 113},        {"sctp", 132},     {"udplite", 136},
}};
// clang-format on

// neutron refuses these with ethertype IPv4 (SecurityGroupEthertypeConflictWithProtocol).
bool is_ipv6_only(uint8_t p) {
  return p == 41 || p == 43 || p == 44 || p == 58 || p == 59 || p == 60;
}

std::string proto_list() {
  std::string s;
  for (const ProtoName& p : kProtoNames) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

// nullopt in the value: "any".
Result<std::optional<uint8_t>> parse_protocol(const json& params, const std::string& field,
                                              SgFamily ethertype) {
  const json* v = find_field(params, "protocol");
  if (!v) return std::optional<uint8_t>{};
  if (v->is_number_integer()) {
    auto n = get_int(*v, field, 0, 255);
    if (!n) return n.error();
    return std::optional<uint8_t>(static_cast<uint8_t>(*n));
  }
  auto s = get_string(*v, field);
  if (!s) return s.error();
  const std::string name = to_lower(*s);
  if (name == "any") return std::optional<uint8_t>{};
  // neutron turns the legacy IPv6 names into ipv6-icmp for IPv6 rules.
  if (ethertype == SgFamily::kIpv6 && (name == "icmp" || name == "icmpv6"))
    return std::optional<uint8_t>(58);
  for (const ProtoName& p : kProtoNames)
    if (name == p.name) return std::optional<uint8_t>(p.num);
  if (!name.empty() && name.size() <= 3 &&
      std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    int n = std::stoi(name);
    if (n <= 255) return std::optional<uint8_t>(static_cast<uint8_t>(n));
  }
  return field_error(
      field,
      json_quoted(*s) + " is not a protocol: any, a number 0..255 or one of " + proto_list());
}

// ---- ports / ICMP type and code ---------------------------------------------------

Status check_port_fields(SecurityGroupRule& r, const json* min, const json* max,
                         const std::string& pfx) {
  const std::string fmin = pfx + "port_range_min", fmax = pfx + "port_range_max";
  if (!min && !max) return ok();
  if (!r.protocol)
    return field_error(min ? fmin : fmax,
                       "needs a protocol (tcp, udp, sctp, dccp or udplite for ports; icmp or "
                       "ipv6-icmp for type and code)");
  const uint8_t proto = *r.protocol;
  if (!proto_has_ports(proto) && !proto_is_icmp(proto))
    return field_error(min ? fmin : fmax,
                       "protocol " + protocol_name(proto) +
                           " has no ports (only tcp, udp, sctp, dccp and udplite have ports; icmp "
                           "and ipv6-icmp take type and code)");
  const int64_t hi = proto_is_icmp(proto) ? 255 : 65535;
  std::optional<int64_t> lo_v, hi_v;
  if (min) {
    auto v = get_int(*min, fmin, 0, 65535);
    if (!v) return v.error();
    lo_v = *v;
  }
  if (max) {
    auto v = get_int(*max, fmax, 0, 65535);
    if (!v) return v.error();
    hi_v = *v;
  }
  if (proto_is_icmp(proto)) {
    if (lo_v && *lo_v > hi)
      return field_error(fmin, std::to_string(*lo_v) + " is not an ICMP type (0..255)");
    if (hi_v && *hi_v > hi)
      return field_error(fmax, std::to_string(*hi_v) + " is not an ICMP code (0..255)");
    if (!lo_v) return field_error(fmax, "an ICMP code needs an ICMP type (port_range_min)");
  } else {
    if (lo_v && *lo_v == 0) return field_error(fmin, "0 is not a valid port (1..65535)");
    if (hi_v && *hi_v == 0) return field_error(fmax, "0 is not a valid port (1..65535)");
    if (!hi_v)
      return field_error(fmax, "missing (port_range_min is " + std::to_string(*lo_v) +
                                   "; a single port has both equal)");
    if (!lo_v)
      return field_error(fmin, "missing (port_range_max is " + std::to_string(*hi_v) +
                                   "; a single port has both equal)");
    if (*lo_v > *hi_v)
      return field_error(fmin, std::to_string(*lo_v) + " is greater than port_range_max (" +
                                   std::to_string(*hi_v) + ")");
  }
  if (lo_v) r.port_range_min = static_cast<uint16_t>(*lo_v);
  if (hi_v) r.port_range_max = static_cast<uint16_t>(*hi_v);
  return ok();
}

// ---- remote side ------------------------------------------------------------------

Status parse_remote(const json& params, SecurityGroupRule& r, const std::string& pfx) {
  const json* prefix = find_field(params, "remote_ip_prefix");
  const json* group = find_field(params, "remote_group_id");
  if (prefix && group)
    return field_error(pfx + "remote_group_id", "not allowed together with remote_ip_prefix");
  if (group) {
    auto id = get_id(params, "remote_group_id", pfx + "remote_group_id");
    if (!id) return id.error();
    r.remote_group_id = std::move(*id);
  }
  if (prefix) {
    const std::string field = pfx + "remote_ip_prefix";
    auto s = get_string(*prefix, field);
    if (!s) return s.error();
    auto p = parse_prefix(*s);
    if (!p) return field_error(field, p.error().message);
    const SgFamily fam = p->addr.family == 4 ? SgFamily::kIpv4 : SgFamily::kIpv6;
    if (fam != r.ethertype)
      return field_error(field, prefix_to_string(*p) + " is an " +
                                    (fam == SgFamily::kIpv4 ? "IPv4" : "IPv6") +
                                    " prefix but ethertype is " +
                                    (r.ethertype == SgFamily::kIpv4 ? "IPv4" : "IPv6"));
    r.remote_ip_prefix = *p;
  }
  return ok();
}


}  // namespace

dp::SgPrefix to_dp(const IpPrefix& p) {
  dp::SgPrefix d;
  d.family = p.addr.family == 4 ? dp::SgFamily::kIpv4 : dp::SgFamily::kIpv6;
  d.len = p.len;
  d.addr = p.addr.bytes;
  return d;
}

bool proto_has_ports(uint8_t p) { return p == 6 || p == 17 || p == 33 || p == 132 || p == 136; }
bool proto_is_icmp(uint8_t p) { return p == 1 || p == 58; }

std::string protocol_name(uint8_t proto) {
  for (const ProtoName& p : kProtoNames)
    if (p.num == proto) return p.name;
  return std::to_string(proto);
}

// ---- rules and groups -------------------------------------------------------------

bool SecurityGroupRule::same_match(const SecurityGroupRule& o) const {
  return direction == o.direction && ethertype == o.ethertype && protocol == o.protocol &&
         port_range_min == o.port_range_min && port_range_max == o.port_range_max &&
         remote_ip_prefix == o.remote_ip_prefix && remote_group_id == o.remote_group_id;
}

namespace {

// The fields of a rule; `extra` is the one more key its context allows
// (security_group_id), "" for none.
Result<SecurityGroupRule> parse_rule(const json& params, const std::string& pfx, bool id_optional,
                                     std::string_view extra) {
  if (!params.is_object())
    return field_error(pfx.empty() ? "params" : pfx.substr(0, pfx.size() - 1),
                       "expected an object, " + got(params));
  Status known =
      extra.empty()
          ? check_known_keys(params,
                             {"id", "direction", "ethertype", "protocol", "port_range_min",
                              "port_range_max", "remote_ip_prefix", "remote_group_id"},
                             pfx)
          : check_known_keys(params,
                             {"id", extra, "direction", "ethertype", "protocol", "port_range_min",
                              "port_range_max", "remote_ip_prefix", "remote_group_id"},
                             pfx);
  if (!known) return known.error();
  SecurityGroupRule r;
  if (!id_optional || find_field(params, "id")) {
    auto id = get_id(params, "id", pfx + "id");
    if (!id) return id.error();
    r.id = std::move(*id);
  }

  const json* dir = find_field(params, "direction");
  if (!dir) return field_error(pfx + "direction", "missing (ingress or egress)");
  auto d = get_string(*dir, pfx + "direction");
  if (!d) return d.error();
  if (*d == "ingress")
    r.direction = SgDirection::kIngress;
  else if (*d == "egress")
    r.direction = SgDirection::kEgress;
  else
    return field_error(pfx + "direction", json_quoted(*d) + " is not one of ingress, egress");

  if (const json* et = find_field(params, "ethertype")) {  // neutron's default: IPv4
    auto e = get_string(*et, pfx + "ethertype");
    if (!e) return e.error();
    const std::string l = to_lower(*e);
    if (l == "ipv4")
      r.ethertype = SgFamily::kIpv4;
    else if (l == "ipv6")
      r.ethertype = SgFamily::kIpv6;
    else
      return field_error(pfx + "ethertype", json_quoted(*e) + " is not one of IPv4, IPv6");
  }

  auto proto = parse_protocol(params, pfx + "protocol", r.ethertype);
  if (!proto) return proto.error();
  r.protocol = *proto;
  if (r.protocol && r.ethertype == SgFamily::kIpv4 && is_ipv6_only(*r.protocol))
    return field_error(pfx + "protocol",
                       protocol_name(*r.protocol) + " is an IPv6 protocol but ethertype is IPv4");

  if (auto s = check_port_fields(r, find_field(params, "port_range_min"),
                                 find_field(params, "port_range_max"), pfx);
      !s)
    return s.error();
  if (auto s = parse_remote(params, r, pfx); !s) return s.error();
  return r;
}

// A group's display name: neutron's limit, and nothing that garbles a table.
Result<std::string> parse_group_name(const json& params) {
  const json* v = find_field(params, "name");
  if (!v) return std::string();
  auto s = get_string(*v, "name");
  if (!s) return s.error();
  if (s->size() > 255) return field_error("name", "longer than 255 bytes");
  if (std::any_of(s->begin(), s->end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
    return field_error("name", json_quoted(*s) + " contains a control character");
  return s;
}

}  // namespace

Result<SecurityGroupRule> parse_sg_rule(const json& params, const std::string& pfx) {
  return parse_rule(params, pfx, /*id_optional=*/false, "");
}

Result<std::pair<std::string, SecurityGroupRule>> parse_sg_rule_create(const json& params) {
  if (!params.is_object()) return field_error("params", "expected an object, " + got(params));
  auto group = get_id(params, "security_group_id", "security_group_id");
  if (!group) return group.error();
  auto r = parse_rule(params, "", /*id_optional=*/true, "security_group_id");
  if (!r) return r.error();
  return std::pair{std::move(*group), std::move(*r)};
}

namespace {

// A remote member's addresses: a list of IPs or CIDRs, at most
// kMaxMemberAddresses; returned sorted and without repeats.
Result<std::vector<IpPrefix>> parse_member_addresses(const json& v, const std::string& field) {
  if (!v.is_array()) return field_error(field, "expected a list of addresses, " + got(v));
  if (v.size() > kMaxMemberAddresses)
    return exhausted(field + ": " + std::to_string(v.size()) + " addresses, more than the " +
                     std::to_string(kMaxMemberAddresses) + " one member may give a group");
  std::vector<IpPrefix> out;
  for (size_t i = 0; i < v.size(); i++) {
    const std::string f = field + "[" + std::to_string(i) + "]";
    auto s = get_string(v[i], f);
    if (!s) return s.error();
    auto p = parse_prefix(*s);
    if (!p) return field_error(f, p.error().message);
    out.push_back(*p);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

Result<RemoteMember> parse_remote_member(const json& params) {
  if (!params.is_object()) return field_error("params", "expected an object, " + got(params));
  if (auto s = check_known_keys(params, {"id", "port", "addresses"}, ""); !s) return s.error();
  RemoteMember m;
  auto id = get_id(params, "id", "id");
  if (!id) return id.error();
  m.group = std::move(*id);
  const json* port = find_field(params, "port");
  if (!port) return field_error("port", "missing (the member port's UUID)");
  auto p = get_string(*port, "port");
  if (!p) return p.error();
  m.port = canonical_uuid(*p);
  if (m.port.empty()) return field_error("port", json_quoted(*p) + " is not a UUID (8-4-4-4-12 hex digits)");
  if (const json* a = find_field(params, "addresses")) {
    auto addrs = parse_member_addresses(*a, "addresses");
    if (!addrs) return addrs.error();
    m.addresses = std::move(*addrs);
  }
  return m;
}

Result<SecurityGroup> parse_security_group(const json& params) {
  if (!params.is_object()) return field_error("params", "expected an object, " + got(params));
  if (auto s = check_known_keys(params, {"id", "name", "rules", "remote_members"}, ""); !s)
    return s.error();
  SecurityGroup g;
  auto id = get_id(params, "id", "id");
  if (!id) return id.error();
  g.id = std::move(*id);
  auto name = parse_group_name(params);
  if (!name) return name.error();
  g.name = std::move(*name);
  if (const json* members = find_field(params, "remote_members")) {
    if (!members->is_object())
      return field_error("remote_members", "expected an object of port -> addresses, " + got(*members));
    for (const auto& [port, addrs] : members->items()) {
      const std::string uuid = canonical_uuid(port);
      if (uuid.empty())
        return field_error("remote_members", json_quoted(port) + " is not a port UUID");
      auto a = parse_member_addresses(addrs, "remote_members." + port);
      if (!a) return a.error();
      if (!a->empty()) g.remote_members[uuid] = std::move(*a);
    }
  }
  const json* rules = find_field(params, "rules");
  if (!rules) return g;
  if (!rules->is_array()) return field_error("rules", "expected a list of rules, " + got(*rules));
  for (size_t i = 0; i < rules->size(); i++) {
    const std::string pfx = "rules[" + std::to_string(i) + "].";
    auto r = parse_rule((*rules)[i], pfx, /*id_optional=*/true, "security_group_id");
    if (!r) return r.error();
    // to_json(group) writes each rule's group id (neutron does): it must be this group.
    if (const json* gid = find_field((*rules)[i], "security_group_id"); gid && *gid != g.id)
      return field_error(
          pfx + "security_group_id",
          gid->dump(-1, ' ', false, json::error_handler_t::replace) + " is not this group's id");
    for (size_t j = 0; j < g.rules.size(); j++) {
      const std::string other = "rules[" + std::to_string(j) + "]";
      if (!r->id.empty() && g.rules[j].id == r->id)
        return field_error(pfx + "id", json_quoted(r->id) + " is also the id of " + other);
      if (g.rules[j].same_match(*r))
        return field_error("rules[" + std::to_string(i) + "]",
                           "duplicates " + other + " (same direction, ethertype, protocol, " +
                               "ports and remote)");
    }
    g.rules.push_back(std::move(*r));
  }
  return g;
}

json to_json(const SecurityGroupRule& r) {
  json j = {{"id", r.id},
            {"direction", r.direction == SgDirection::kIngress ? "ingress" : "egress"},
            {"ethertype", r.ethertype == SgFamily::kIpv4 ? "IPv4" : "IPv6"},
            {"protocol", nullptr},
            {"port_range_min", nullptr},
            {"port_range_max", nullptr},
            {"remote_ip_prefix", nullptr},
            {"remote_group_id", nullptr}};
  if (r.protocol) {
    // Protocol 1 in an IPv6 rule must not read back as "icmp" (parsed as ipv6-icmp).
    bool by_number = r.ethertype == SgFamily::kIpv6 && *r.protocol == 1;
    j["protocol"] = by_number ? std::to_string(*r.protocol) : protocol_name(*r.protocol);
  }
  if (r.port_range_min) j["port_range_min"] = *r.port_range_min;
  if (r.port_range_max) j["port_range_max"] = *r.port_range_max;
  if (r.remote_ip_prefix) j["remote_ip_prefix"] = prefix_to_string(*r.remote_ip_prefix);
  if (!r.remote_group_id.empty()) j["remote_group_id"] = r.remote_group_id;
  return j;
}

json to_json(const SecurityGroupRule& r, const std::string& group_id) {
  json j = to_json(r);
  j["security_group_id"] = group_id;
  return j;
}

json to_json(const SecurityGroup& g) {
  json rules = json::array();
  for (const SecurityGroupRule& r : g.rules) rules.push_back(to_json(r, g.id));
  json j = {{"id", g.id}, {"name", g.name}, {"rules", std::move(rules)}};
  if (!g.remote_members.empty()) {
    json members = json::object();
    for (const auto& [port, addrs] : g.remote_members) {
      json a = json::array();
      for (const IpPrefix& p : addrs) a.push_back(prefix_to_string(p));
      members[port] = std::move(a);
    }
    j["remote_members"] = std::move(members);
  }
  return j;
}

// ---- compilation ------------------------------------------------------------------

dp::SgRule normalise(const SecurityGroupRule& r, uint16_t remote_set) {
  dp::SgRule n;
  n.direction = r.direction;
  n.family = r.ethertype;
  n.remote.family = r.ethertype;  // len 0: any remote, one canonical form
  if (r.protocol) {
    n.any_proto = false;
    n.proto = *r.protocol;
    if (proto_has_ports(n.proto) && r.port_range_min && r.port_range_max) {
      n.tp_dst_lo = *r.port_range_min;
      n.tp_dst_hi = *r.port_range_max;
    } else if (proto_is_icmp(n.proto)) {  // the parser puts type in tp_src, code in tp_dst
      if (r.port_range_min) n.tp_src_lo = n.tp_src_hi = *r.port_range_min;
      if (r.port_range_max) n.tp_dst_lo = n.tp_dst_hi = *r.port_range_max;
    }
  }
  if (remote_set != dp::kSgNoSet)
    n.remote_set = remote_set;
  else if (r.remote_ip_prefix && r.remote_ip_prefix->len > 0)
    n.remote = to_dp(*r.remote_ip_prefix);
  return n;
}

std::vector<std::string> canonical_group_set(std::span<const std::string> group_ids) {
  std::vector<std::string> v(group_ids.begin(), group_ids.end());
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

std::vector<dp::SgAddressSet> address_sets_of(std::span<const std::string> remote_groups,
                                              const GroupMembers& members) {
  std::vector<dp::SgAddressSet> sets;
  for (const std::string& g : remote_groups) {
    dp::SgAddressSet set;
    if (auto it = members.find(g); it != members.end())
      for (const IpPrefix& p : it->second) set.push_back(to_dp(p));
    std::sort(set.begin(), set.end());
    set.erase(std::unique(set.begin(), set.end()), set.end());
    sets.push_back(std::move(set));
  }
  return sets;
}

Result<SgCompileInput> compile_group_set(std::span<const std::string> group_ids,
                                         const std::map<std::string, SecurityGroup>& groups,
                                         const GroupMembers& members) {
  SgCompileInput out;
  out.groups = canonical_group_set(group_ids);
  std::set<std::string> remote;
  for (const std::string& id : out.groups) {
    auto it = groups.find(id);
    if (it == groups.end())
      return not_found("security group " + json_quoted(id) + " does not exist");
    for (const SecurityGroupRule& r : it->second.rules)
      if (!r.remote_group_id.empty()) remote.insert(r.remote_group_id);
  }
  out.remote_groups.assign(remote.begin(), remote.end());

  std::map<dp::SgRule, std::vector<std::string>> origins;  // sorted, duplicates merged
  std::set<uint16_t> sets_named[2];
  for (const std::string& id : out.groups) {
    for (const SecurityGroupRule& r : groups.at(id).rules) {
      uint16_t set = dp::kSgNoSet;
      if (!r.remote_group_id.empty()) {
        set = static_cast<uint16_t>(std::lower_bound(out.remote_groups.begin(),
                                                     out.remote_groups.end(), r.remote_group_id) -
                                    out.remote_groups.begin());
        sets_named[static_cast<int>(r.ethertype)].insert(set);
      }
      origins[normalise(r, set)].push_back(id + "/" + r.id);
    }
  }
  for (int f = 0; f < 2; f++) {
    if (sets_named[f].size() > dp::SgClassifier::kMaxRemoteSets)
      return exhausted("the rules of security groups " + json(out.groups).dump() + " name " +
                       std::to_string(sets_named[f].size()) + " remote groups in " +
                       (f == 0 ? "IPv4" : "IPv6") + " rules; a port's groups may name at most " +
                       std::to_string(dp::SgClassifier::kMaxRemoteSets));
  }
  for (auto& [rule, from] : origins) {
    std::sort(from.begin(), from.end());
    out.rules.push_back(rule);
    out.origins.push_back(std::move(from));
  }
  out.address_sets = address_sets_of(out.remote_groups, members);
  return out;
}

}  // namespace strait::ctl
