// Security groups: neutron's validation rules (each refusal names its field),
// the JSON round trip, and compile_group_set — deterministic, and checked
// against neutron's semantics written out plainly on random groups, members
// and packets (the compiled side is evaluated as the dataplane defines it,
// without rte_acl: tests/sg_classifier_diff_eal_test.cc checks rte_acl
// against that same definition).
#include "control/model/secgroup.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

namespace strait::ctl {
namespace {

using json = nlohmann::json;
using dp::SgDirection;
using dp::SgFamily;
using ::testing::HasSubstr;

#define EXPECT_REFUSED(expr, words)                                       \
  do {                                                                    \
    auto r_ = (expr);                                                     \
    ASSERT_FALSE(r_.ok()) << #expr << " succeeded";                       \
    EXPECT_EQ(r_.error().code, "invalid_argument") << r_.error().message; \
    EXPECT_THAT(r_.error().message, HasSubstr(words)) << #expr;           \
  } while (0)

json rule_json(json extra = json::object()) {
  json j = {{"id", "r1"}, {"direction", "ingress"}};
  for (auto& [k, v] : extra.items()) j[k] = v;
  return j;
}

SecurityGroupRule must_parse(const json& j) {
  auto r = parse_sg_rule(j);
  EXPECT_TRUE(r.ok()) << j.dump() << ": " << (r.ok() ? "" : r.error().message);
  return r.ok() ? r.value() : SecurityGroupRule{};
}

// ---- parsing: what is accepted -------------------------------------------------

TEST(ParseSgRule, NeutronDefaults) {
  SecurityGroupRule r = must_parse(rule_json());
  EXPECT_EQ(r.id, "r1");
  EXPECT_EQ(r.direction, SgDirection::kIngress);
  EXPECT_EQ(r.ethertype, SgFamily::kIpv4);
  EXPECT_FALSE(r.protocol);
  EXPECT_FALSE(r.port_range_min);
  EXPECT_FALSE(r.remote_ip_prefix);
  EXPECT_EQ(r.remote_group_id, "");
}

TEST(ParseSgRule, AllFields) {
  SecurityGroupRule r = must_parse({{"id", "11111111-2222-3333-4444-555555555555"},
                                    {"direction", "egress"},
                                    {"ethertype", "IPv6"},
                                    {"protocol", "tcp"},
                                    {"port_range_min", 8000},
                                    {"port_range_max", 8080},
                                    {"remote_ip_prefix", "2001:db8::/32"}});
  EXPECT_EQ(r.direction, SgDirection::kEgress);
  EXPECT_EQ(r.ethertype, SgFamily::kIpv6);
  EXPECT_EQ(r.protocol, 6);
  EXPECT_EQ(r.port_range_min, 8000);
  EXPECT_EQ(r.port_range_max, 8080);
  EXPECT_EQ(prefix_to_string(*r.remote_ip_prefix), "2001:db8::/32");
}

TEST(ParseSgRule, ProtocolSpellings) {
  EXPECT_EQ(must_parse(rule_json({{"protocol", "UDP"}})).protocol, 17);
  EXPECT_EQ(must_parse(rule_json({{"protocol", "sctp"}})).protocol, 132);
  EXPECT_EQ(must_parse(rule_json({{"protocol", "6"}})).protocol, 6);
  EXPECT_EQ(must_parse(rule_json({{"protocol", 47}})).protocol, 47);
  EXPECT_EQ(must_parse(rule_json({{"protocol", 0}})).protocol, 0);
  EXPECT_EQ(must_parse(rule_json({{"protocol", "255"}})).protocol, 255);
  EXPECT_FALSE(must_parse(rule_json({{"protocol", "any"}})).protocol);
  EXPECT_FALSE(must_parse(rule_json({{"protocol", nullptr}})).protocol);
  EXPECT_EQ(must_parse(rule_json({{"ethertype", "ipv6"}})).ethertype, SgFamily::kIpv6);
}

// neutron converts the legacy names for IPv6 rules (with a log line).
TEST(ParseSgRule, IcmpNamesMeanIcmpv6InIpv6Rules) {
  for (const char* name : {"icmp", "icmpv6", "ipv6-icmp"})
    EXPECT_EQ(must_parse(rule_json({{"ethertype", "IPv6"}, {"protocol", name}})).protocol, 58)
        << name;
  EXPECT_EQ(must_parse(rule_json({{"protocol", "icmp"}})).protocol, 1);
}

TEST(ParseSgRule, IcmpTypeAndCode) {
  SecurityGroupRule r = must_parse(rule_json({{"protocol", "icmp"}, {"port_range_min", 8}}));
  EXPECT_EQ(r.port_range_min, 8);
  EXPECT_FALSE(r.port_range_max);
  r = must_parse(rule_json({{"protocol", "icmp"}, {"port_range_min", 3}, {"port_range_max", 4}}));
  EXPECT_EQ(r.port_range_max, 4);
  r = must_parse(rule_json({{"protocol", "icmp"}, {"port_range_min", 0}, {"port_range_max", 0}}));
  EXPECT_EQ(r.port_range_min, 0) << "echo reply is type 0";
}

TEST(ParseSgRule, PrefixesAreNormalised) {
  auto r = must_parse(rule_json({{"remote_ip_prefix", "10.1.2.3/8"}}));
  EXPECT_EQ(prefix_to_string(*r.remote_ip_prefix), "10.0.0.0/8");
  r = must_parse(rule_json({{"remote_ip_prefix", "192.0.2.7"}}));
  EXPECT_EQ(prefix_to_string(*r.remote_ip_prefix), "192.0.2.7/32");
  r = must_parse(rule_json({{"ethertype", "IPv6"}, {"remote_ip_prefix", "2001:db8::1:2/127"}}));
  EXPECT_EQ(prefix_to_string(*r.remote_ip_prefix), "2001:db8::1:2/127");
  r = must_parse(rule_json({{"ethertype", "IPv6"}, {"remote_ip_prefix", "2001:db8::1:3/127"}}));
  EXPECT_EQ(prefix_to_string(*r.remote_ip_prefix), "2001:db8::1:2/127");
  r = must_parse(rule_json({{"remote_ip_prefix", "0.0.0.0/0"}}));
  EXPECT_EQ(r.remote_ip_prefix->len, 0);
}

// ---- parsing: every refusal ----------------------------------------------------------

TEST(ParseSgRule, ShapeAndIds) {
  EXPECT_REFUSED(parse_sg_rule(json::array()), "params: expected an object");
  EXPECT_REFUSED(parse_sg_rule(rule_json({{"dst_port", 22}})), "dst_port: unknown field");
  EXPECT_REFUSED(parse_sg_rule({{"direction", "ingress"}}), "id: missing");
  EXPECT_REFUSED(parse_sg_rule(rule_json({{"id", "a b"}})), "id: \"a b\" is not a valid id");
  EXPECT_REFUSED(parse_sg_rule(rule_json({{"id", 5}})), "id: expected a string");
}

TEST(ParseSgRule, Direction) {
  EXPECT_REFUSED(parse_sg_rule({{"id", "r"}}), "direction: missing (ingress or egress)");
  EXPECT_REFUSED(parse_sg_rule(rule_json({{"direction", "in"}})),
                 "direction: \"in\" is not one of ingress, egress");
}

TEST(ParseSgRule, Ethertype) {
  EXPECT_REFUSED(parse_sg_rule(rule_json({{"ethertype", "IPv5"}})),
                 "ethertype: \"IPv5\" is not one of IPv4, IPv6");
  EXPECT_REFUSED(parse_sg_rule(rule_json({{"ethertype", 4}})), "ethertype: expected a string");
}

TEST(ParseSgRule, Protocol) {
  EXPECT_REFUSED(parse_sg_rule(rule_json({{"protocol", "foo"}})),
                 "protocol: \"foo\" is not a protocol: any, a number 0..255 or one of");
  EXPECT_REFUSED(parse_sg_rule(rule_json({{"protocol", 256}})), "protocol: 256 is outside 0..255");
  EXPECT_REFUSED(parse_sg_rule(rule_json({{"protocol", "256"}})), "protocol: \"256\" is not");
  EXPECT_REFUSED(parse_sg_rule(rule_json({{"protocol", -1}})), "protocol: -1 is outside 0..255");
  EXPECT_REFUSED(parse_sg_rule(rule_json({{"protocol", true}})), "protocol: expected a string");
}

TEST(ParseSgRule, Ipv6ProtocolInAnIpv4Rule) {
  for (json p : {json("icmpv6"), json("ipv6-icmp"), json("58"), json(58), json("ipv6-frag"),
                 json("ipv6-route"), json("ipv6-opts"), json("ipv6-nonxt"), json("ipv6-encap")})
    EXPECT_REFUSED(parse_sg_rule(rule_json({{"protocol", p}})),
                   "is an IPv6 protocol but ethertype is IPv4");
}

TEST(ParseSgRule, PortsNeedAProtocolWithPorts) {
  EXPECT_REFUSED(parse_sg_rule(rule_json({{"port_range_min", 22}, {"port_range_max", 22}})),
                 "port_range_min: needs a protocol");
  EXPECT_REFUSED(parse_sg_rule(rule_json({{"port_range_max", 22}})),
                 "port_range_max: needs a protocol");
  EXPECT_REFUSED(
      parse_sg_rule(rule_json({{"protocol", "gre"}, {"port_range_min", 1}, {"port_range_max", 2}})),
      "port_range_min: protocol gre has no ports");
  EXPECT_REFUSED(parse_sg_rule(rule_json({{"protocol", 200}, {"port_range_max", 2}})),
                 "port_range_max: protocol 200 has no ports");
}

TEST(ParseSgRule, PortRange) {
  auto tcp = [](json min, json max) {
    json j = rule_json({{"protocol", "tcp"}});
    if (!min.is_null()) j["port_range_min"] = min;
    if (!max.is_null()) j["port_range_max"] = max;
    return parse_sg_rule(j);
  };
  EXPECT_REFUSED(tcp(0, 10), "port_range_min: 0 is not a valid port (1..65535)");
  EXPECT_REFUSED(tcp(1, 0), "port_range_max: 0 is not a valid port");
  EXPECT_REFUSED(tcp(100, 80), "port_range_min: 100 is greater than port_range_max (80)");
  EXPECT_REFUSED(tcp(22, nullptr), "port_range_max: missing (port_range_min is 22");
  EXPECT_REFUSED(tcp(nullptr, 22), "port_range_min: missing (port_range_max is 22");
  EXPECT_REFUSED(tcp(1, 65536), "port_range_max: 65536 is outside 0..65535");
  EXPECT_REFUSED(tcp("22", 22), "port_range_min: expected an integer");
  EXPECT_TRUE(tcp(1, 65535).ok());
  EXPECT_TRUE(tcp(443, 443).ok());
  json numbered = rule_json({{"protocol", "132"}, {"port_range_min", 5}, {"port_range_max", 6}});
  EXPECT_TRUE(parse_sg_rule(numbered).ok()) << "ports go with protocol numbers too";
}

TEST(ParseSgRule, IcmpTypeCodeLimits) {
  auto icmp = [](json type, json code) {
    json j = rule_json({{"protocol", "icmp"}});
    if (!type.is_null()) j["port_range_min"] = type;
    if (!code.is_null()) j["port_range_max"] = code;
    return parse_sg_rule(j);
  };
  EXPECT_REFUSED(icmp(256, nullptr), "port_range_min: 256 is not an ICMP type (0..255)");
  EXPECT_REFUSED(icmp(3, 256), "port_range_max: 256 is not an ICMP code (0..255)");
  EXPECT_REFUSED(icmp(nullptr, 1), "port_range_max: an ICMP code needs an ICMP type");
}

TEST(ParseSgRule, Remote) {
  EXPECT_REFUSED(parse_sg_rule(rule_json({{"remote_ip_prefix", "10.0.0.0/33"}})),
                 "remote_ip_prefix: \"10.0.0.0/33\" has no valid prefix length (0..32)");
  EXPECT_REFUSED(parse_sg_rule(rule_json({{"remote_ip_prefix", "10.0.0/8"}})),
                 "remote_ip_prefix: \"10.0.0/8\" is not a CIDR prefix");
  EXPECT_REFUSED(parse_sg_rule(rule_json({{"remote_ip_prefix", "10.0.0.0/"}})),
                 "has no valid prefix length");
  EXPECT_REFUSED(parse_sg_rule(rule_json({{"remote_ip_prefix", "10.0.0.0/-1"}})),
                 "has no valid prefix length");
  EXPECT_REFUSED(parse_sg_rule(rule_json({{"ethertype", "IPv6"}, {"remote_ip_prefix", "::/129"}})),
                 "has no valid prefix length (0..128)");
  EXPECT_REFUSED(
      parse_sg_rule(rule_json({{"ethertype", "IPv6"}, {"remote_ip_prefix", "10.0.0.0/8"}})),
      "remote_ip_prefix: 10.0.0.0/8 is an IPv4 prefix but ethertype is IPv6");
  EXPECT_REFUSED(parse_sg_rule(rule_json({{"remote_ip_prefix", "::/0"}})),
                 "remote_ip_prefix: ::/0 is an IPv6 prefix but ethertype is IPv4");
  EXPECT_REFUSED(parse_sg_rule(rule_json({{"remote_ip_prefix", 10}})),
                 "remote_ip_prefix: expected a string");
  EXPECT_REFUSED(
      parse_sg_rule(rule_json({{"remote_ip_prefix", "10.0.0.0/8"}, {"remote_group_id", "g"}})),
      "remote_group_id: not allowed together with remote_ip_prefix");
  EXPECT_REFUSED(parse_sg_rule(rule_json({{"remote_group_id", "-g"}})),
                 "remote_group_id: \"-g\" is not a valid id");
}

TEST(ParseSecurityGroup, ErrorsNameTheRule) {
  EXPECT_REFUSED(parse_security_group({{"rules", json::array()}}), "id: missing");
  EXPECT_REFUSED(parse_security_group({{"id", "g"}, {"tenant", "x"}}), "tenant: unknown field");
  EXPECT_REFUSED(parse_security_group({{"id", "g"}, {"rules", json::object()}}),
                 "rules: expected a list of rules");
  EXPECT_REFUSED(
      parse_security_group(
          {{"id", "g"},
           {"rules",
            {rule_json(), rule_json({{"id", "r2"}, {"protocol", "tcp"}, {"port_range_min", 9}})}}}),
      "rules[1].port_range_max: missing");
  EXPECT_REFUSED(parse_security_group({{"id", "g"}, {"rules", {rule_json(), 7}}}),
                 "rules[1]: expected an object");
  EXPECT_REFUSED(
      parse_security_group({{"id", "g"}, {"rules", {rule_json(), rule_json({{"protocol", 6}})}}}),
      "rules[1].id: \"r1\" is also the id of rules[0]");
}

TEST(ParseSecurityGroup, DuplicateRulesAreRefusedAsNeutronDoes) {
  json a = rule_json({{"protocol", "tcp"}, {"port_range_min", 22}, {"port_range_max", 22}});
  json b = a;
  b["id"] = "r2";
  b["protocol"] = "6";  // same protocol by number
  EXPECT_REFUSED(parse_security_group({{"id", "g"}, {"rules", {a, b}}}),
                 "rules[1]: duplicates rules[0]");
  b["port_range_max"] = 23;
  EXPECT_TRUE(parse_security_group({{"id", "g"}, {"rules", {a, b}}}).ok());
}

TEST(ParseSecurityGroup, Name) {
  auto g = parse_security_group({{"id", "g"}});
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->name, "");
  g = parse_security_group({{"id", "g"}, {"name", "web servers \u00e9"}});
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->name, "web servers \u00e9");
  EXPECT_TRUE(parse_security_group({{"id", "g"}, {"name", std::string(255, 'n')}}).ok());
  EXPECT_REFUSED(parse_security_group({{"id", "g"}, {"name", std::string(256, 'n')}}),
                 "name: longer than 255 bytes");
  EXPECT_REFUSED(parse_security_group({{"id", "g"}, {"name", "a\nb"}}),
                 "name: \"a\\nb\" contains a control character");
  EXPECT_REFUSED(parse_security_group({{"id", "g"}, {"name", 5}}), "name: expected a string");
}

// Rules inside security_group.create may come without ids (the switch gives
// them one); the Model refuses a rule that still has none.
TEST(ParseSecurityGroup, RuleIdsOptionalAndGroupIdChecked) {
  json no_id = {{"direction", "egress"}};
  auto g = parse_security_group({{"id", "g"}, {"rules", {no_id, rule_json()}}});
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->rules[0].id, "");
  EXPECT_EQ(g->rules[1].id, "r1");
  EXPECT_TRUE(
      parse_security_group({{"id", "g"}, {"rules", {rule_json({{"security_group_id", "g"}})}}})
          .ok());
  EXPECT_REFUSED(
      parse_security_group({{"id", "g"}, {"rules", {rule_json({{"security_group_id", "h"}})}}}),
      "rules[0].security_group_id: \"h\" is not this group's id");
  EXPECT_REFUSED(parse_sg_rule(rule_json({{"security_group_id", "g"}})),
                 "security_group_id: unknown field");
}

TEST(ParseSgRuleCreate, GroupIdAndOptionalRuleId) {
  auto r = parse_sg_rule_create({{"security_group_id", "web"},
                                 {"direction", "ingress"},
                                 {"protocol", "tcp"},
                                 {"port_range_min", 22},
                                 {"port_range_max", 22}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->first, "web");
  EXPECT_EQ(r->second.id, "");
  EXPECT_EQ(r->second.protocol, 6);
  EXPECT_EQ(r->second.port_range_min, 22);
  r = parse_sg_rule_create({{"security_group_id", "web"}, {"id", "r9"}, {"direction", "egress"}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->second.id, "r9");
  EXPECT_EQ(r->second.direction, SgDirection::kEgress);
  EXPECT_REFUSED(parse_sg_rule_create({{"direction", "egress"}}), "security_group_id: missing");
  EXPECT_REFUSED(parse_sg_rule_create({{"security_group_id", "-x"}, {"direction", "egress"}}),
                 "security_group_id: \"-x\" is not a valid id");
  EXPECT_REFUSED(
      parse_sg_rule_create({{"security_group_id", "g"}, {"id", "a b"}, {"direction", "egress"}}),
      "id: \"a b\" is not a valid id");
  EXPECT_REFUSED(parse_sg_rule_create({{"security_group_id", "g"}}), "direction: missing");
  EXPECT_REFUSED(
      parse_sg_rule_create({{"security_group_id", "g"}, {"direction", "egress"}, {"x", 1}}),
      "x: unknown field (expected id, security_group_id, direction");
  EXPECT_REFUSED(parse_sg_rule_create(json::array()), "params: expected an object");
}

TEST(ParseSecurityGroup, RuleJsonNamesItsGroup) {
  SecurityGroupRule r = must_parse(rule_json({{"protocol", "udp"}}));
  json j = to_json(r);
  EXPECT_FALSE(j.contains("security_group_id"));
  EXPECT_EQ(j["id"], "r1");
  json k = to_json(r, "web");
  EXPECT_EQ(k["security_group_id"], "web");
  k.erase("security_group_id");
  EXPECT_EQ(k, j);
}

TEST(ParseSecurityGroup, JsonRoundTrip) {
  json g = {
      {"id", "web"},
      {"name", "web servers"},
      {"rules",
       {rule_json({{"protocol", "tcp"}, {"port_range_min", 80}, {"port_range_max", 443}}),
        rule_json(
            {{"id", "r2"}, {"ethertype", "IPv6"}, {"protocol", "icmp"}, {"port_range_min", 128}}),
        rule_json({{"id", "r3"}, {"ethertype", "IPv6"}, {"protocol", 1}}),
        rule_json({{"id", "r4"}, {"direction", "egress"}, {"remote_group_id", "web"}}),
        rule_json({{"id", "r5"}, {"protocol", 99}, {"remote_ip_prefix", "10.9.0.0/16"}})}}};
  auto parsed = parse_security_group(g);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  json out = to_json(*parsed);
  EXPECT_EQ(out["name"], "web servers");
  EXPECT_EQ(out["rules"][0]["security_group_id"], "web");
  EXPECT_EQ(out["rules"][1]["protocol"], "ipv6-icmp");
  EXPECT_EQ(out["rules"][2]["protocol"], "1") << "IPv6 protocol 1 must not read back as icmpv6";
  auto again = parse_security_group(out);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(to_json(*again), out);
}

// ---- compile_group_set --------------------------------------------------------------

SecurityGroup group(const std::string& id, std::vector<json> rules) {
  auto g = parse_security_group({{"id", id}, {"rules", rules}});
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
  return g.ok() ? *g : SecurityGroup{};
}

IpPrefix prefix(const std::string& s) {
  auto p = parse_prefix(s);
  EXPECT_TRUE(p.ok()) << s;
  return p.ok() ? *p : IpPrefix{};
}

TEST(CompileGroupSet, NormalisesEachRuleKind) {
  std::map<std::string, SecurityGroup> groups;
  groups["g"] =
      group("g", {rule_json({{"id", "any"}, {"direction", "egress"}}),
                  rule_json({{"id", "ssh"},
                             {"protocol", "tcp"},
                             {"port_range_min", 22},
                             {"port_range_max", 22},
                             {"remote_ip_prefix", "192.0.2.0/24"}}),
                  rule_json({{"id", "ping"}, {"protocol", "icmp"}, {"port_range_min", 8}}),
                  rule_json({{"id", "unreach"},
                             {"ethertype", "IPv6"},
                             {"protocol", "icmp"},
                             {"port_range_min", 1},
                             {"port_range_max", 4}}),
                  rule_json({{"id", "peers"}, {"protocol", "udp"}, {"remote_group_id", "g"}})});
  GroupMembers members = {{"g", {prefix("10.0.0.5"), prefix("10.0.0.4"), prefix("fd00::5")}}};
  auto in = compile_group_set(std::vector<std::string>{"g"}, groups, members);
  ASSERT_TRUE(in.ok()) << in.error().message;
  ASSERT_EQ(in->rules.size(), 5u);
  EXPECT_EQ(in->remote_groups, std::vector<std::string>{"g"});
  ASSERT_EQ(in->address_sets.size(), 1u);
  EXPECT_EQ(in->address_sets[0].size(), 3u);
  EXPECT_TRUE(std::is_sorted(in->address_sets[0].begin(), in->address_sets[0].end()));
  auto find = [&](const std::string& origin) -> const dp::SgRule& {
    for (size_t i = 0; i < in->rules.size(); i++)
      if (in->origins[i] == std::vector<std::string>{origin}) return in->rules[i];
    ADD_FAILURE() << origin << " not compiled";
    return in->rules[0];
  };
  const dp::SgRule& any = find("g/any");
  EXPECT_EQ(any.direction, SgDirection::kEgress);
  EXPECT_TRUE(any.any_proto);
  EXPECT_EQ(any.remote.len, 0);
  const dp::SgRule& ssh = find("g/ssh");
  EXPECT_EQ(ssh.proto, 6);
  EXPECT_EQ(ssh.tp_dst_lo, 22);
  EXPECT_EQ(ssh.tp_dst_hi, 22);
  EXPECT_EQ(ssh.tp_src_lo, 0);
  EXPECT_EQ(ssh.tp_src_hi, 65535);
  EXPECT_EQ(ssh.remote.len, 24);
  const dp::SgRule& ping = find("g/ping");
  EXPECT_EQ(ping.tp_src_lo, 8);  // type
  EXPECT_EQ(ping.tp_src_hi, 8);
  EXPECT_EQ(ping.tp_dst_lo, 0);  // any code
  EXPECT_EQ(ping.tp_dst_hi, 65535);
  const dp::SgRule& unreach = find("g/unreach");
  EXPECT_EQ(unreach.proto, 58);
  EXPECT_EQ(unreach.family, SgFamily::kIpv6);
  EXPECT_EQ(unreach.tp_dst_lo, 4);
  EXPECT_EQ(unreach.tp_dst_hi, 4);
  EXPECT_EQ(find("g/peers").remote_set, 0);
}

TEST(CompileGroupSet, UnionIsDeterministicAndDeduplicated) {
  std::map<std::string, SecurityGroup> groups;
  json web = rule_json(
      {{"id", "web"}, {"protocol", "tcp"}, {"port_range_min", 80}, {"port_range_max", 80}});
  groups["a"] = group("a", {web, rule_json({{"id", "all"}, {"remote_ip_prefix", "0.0.0.0/0"}}),
                            rule_json({{"id", "z"}, {"remote_group_id", "c"}})});
  groups["b"] = group("b", {web, rule_json({{"id", "any"}}),  // same as a/all: /0 is any
                            rule_json({{"id", "y"}, {"remote_group_id", "b"}})});
  GroupMembers members = {{"b", {prefix("10.0.0.2"), prefix("10.0.0.1"), prefix("10.0.0.1")}}};
  auto ab = compile_group_set(std::vector<std::string>{"a", "b"}, groups, members);
  auto ba = compile_group_set(std::vector<std::string>{"b", "a", "b"}, groups, members);
  ASSERT_TRUE(ab.ok() && ba.ok());
  EXPECT_TRUE(*ab == *ba);
  EXPECT_EQ(ab->groups, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ab->rules.size(), 4u);  // web, any, remote b, remote c
  EXPECT_TRUE(std::is_sorted(ab->rules.begin(), ab->rules.end()));
  EXPECT_EQ(ab->remote_groups, (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(ab->address_sets[0].size(), 2u) << "duplicate members merged";
  EXPECT_TRUE(ab->address_sets[1].empty()) << "a group without members matches nobody";
  bool merged_web = false, merged_any = false;
  for (const auto& o : ab->origins) {
    merged_web |= o == std::vector<std::string>{"a/web", "b/web"};
    merged_any |= o == std::vector<std::string>{"a/all", "b/any"};
  }
  EXPECT_TRUE(merged_web);
  EXPECT_TRUE(merged_any);
  EXPECT_EQ(canonical_group_set(std::vector<std::string>{"b", "a", "b"}),
            (std::vector<std::string>{"a", "b"}));
  // Members change, rules do not: only the address sets differ.
  members["c"] = {prefix("10.0.0.9")};
  auto later = compile_group_set(std::vector<std::string>{"a", "b"}, groups, members);
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(later->rules, ab->rules);
  EXPECT_EQ(later->address_sets, address_sets_of(ab->remote_groups, members));
}

TEST(CompileGroupSet, UnknownGroupAndTooManyRemoteGroups) {
  std::map<std::string, SecurityGroup> groups;
  groups["a"] = group("a", {rule_json()});
  auto missing = compile_group_set(std::vector<std::string>{"a", "nope"}, groups, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, "not_found");
  EXPECT_THAT(missing.error().message, HasSubstr("security group \"nope\" does not exist"));

  std::vector<json> rules;
  for (int i = 0; i < 65; i++)
    rules.push_back(
        rule_json({{"id", "r" + std::to_string(i)}, {"remote_group_id", "g" + std::to_string(i)}}));
  groups["wide"] = group("wide", rules);
  auto wide = compile_group_set(std::vector<std::string>{"wide"}, groups, {});
  ASSERT_FALSE(wide.ok());
  EXPECT_EQ(wide.error().code, "resource_exhausted");
  EXPECT_THAT(wide.error().message, HasSubstr("65 remote groups in IPv4 rules"));
  rules.pop_back();
  for (int i = 0; i < 64; i++)  // the limit is per family
    rules.push_back(rule_json({{"id", "s" + std::to_string(i)},
                               {"ethertype", "IPv6"},
                               {"remote_group_id", "g" + std::to_string(i)}}));
  groups["wide"] = group("wide", rules);
  EXPECT_TRUE(compile_group_set(std::vector<std::string>{"wide"}, groups, {}).ok());
}

// ---- compile vs neutron semantics, on random input --------------------------------

struct Pkt {
  SgDirection dir;
  IpAddr remote;
  uint8_t proto;
  uint16_t tp_src, tp_dst;  // TCP/UDP ports; ICMP type, code
};

bool contains(const IpPrefix& p, const IpAddr& a) {
  if (p.addr.family != a.family) return false;
  for (int i = 0; i < p.len; i++)
    if (((p.addr.bytes[i / 8] ^ a.bytes[i / 8]) >> (7 - i % 8)) & 1) return false;
  return true;
}

// neutron, read off its documentation: the union of the groups' rules.
bool neutron_allows(const std::vector<std::string>& port_groups,
                    const std::map<std::string, SecurityGroup>& groups, const GroupMembers& members,
                    const Pkt& p) {
  const SgFamily fam = p.remote.family == 4 ? SgFamily::kIpv4 : SgFamily::kIpv6;
  for (const std::string& g : port_groups) {
    for (const SecurityGroupRule& r : groups.at(g).rules) {
      if (r.direction != p.dir || r.ethertype != fam) continue;
      if (r.protocol) {
        if (*r.protocol != p.proto) continue;
        if (proto_has_ports(p.proto) && r.port_range_min &&
            (p.tp_dst < *r.port_range_min || p.tp_dst > *r.port_range_max))
          continue;
        if (proto_is_icmp(p.proto)) {
          if (r.port_range_min && p.tp_src != *r.port_range_min) continue;  // type
          if (r.port_range_max && p.tp_dst != *r.port_range_max) continue;  // code
        }
      }
      if (r.remote_ip_prefix && !contains(*r.remote_ip_prefix, p.remote)) continue;
      if (!r.remote_group_id.empty()) {
        auto it = members.find(r.remote_group_id);
        bool member = false;
        if (it != members.end())
          for (const IpPrefix& m : it->second) member |= contains(m, p.remote);
        if (!member) continue;
      }
      return true;
    }
  }
  return false;
}

// The compiled rules as sg_classifier.h defines them.
bool compiled_allows(const SgCompileInput& in, const Pkt& p) {
  const SgFamily fam = p.remote.family == 4 ? SgFamily::kIpv4 : SgFamily::kIpv6;
  auto in_prefix = [&](const dp::SgPrefix& d) {
    IpPrefix q{IpAddr{static_cast<uint8_t>(d.family == SgFamily::kIpv4 ? 4 : 6), d.addr}, d.len};
    return contains(q, p.remote);
  };
  for (const dp::SgRule& r : in.rules) {
    if (r.direction != p.dir || r.family != fam) continue;
    if (!r.any_proto && r.proto != p.proto) continue;
    if (p.tp_src < r.tp_src_lo || p.tp_src > r.tp_src_hi) continue;
    if (p.tp_dst < r.tp_dst_lo || p.tp_dst > r.tp_dst_hi) continue;
    if (r.remote_set != dp::kSgNoSet) {
      bool member = false;
      for (const dp::SgPrefix& m : in.address_sets[r.remote_set]) member |= in_prefix(m);
      if (!member) continue;
    } else if (r.remote.len > 0 && !in_prefix(r.remote)) {
      continue;
    }
    return true;
  }
  return false;
}

// Random groups of random valid rules over a few small networks, so that
// prefixes, members and packets meet.
class RandomPolicy {
 public:
  explicit RandomPolicy(uint64_t seed) : rng_(seed) {}

  uint32_t below(uint32_t n) { return static_cast<uint32_t>(rng_() % n); }

  IpAddr addr(bool v6) {
    static const char* kNets4[] = {"10.0.0.0", "10.0.1.0", "192.0.2.0"};
    static const char* kNets6[] = {"fd00::", "fd00:0:0:1::", "2001:db8::"};
    IpPrefix base = prefix(v6 ? kNets6[below(3)] : kNets4[below(3)]);
    base.addr.bytes[v6 ? 15 : 3] = static_cast<uint8_t>(below(8));
    return base.addr;
  }

  json rule(int id) {
    const bool v6 = below(2);
    json j = rule_json({{"id", "r" + std::to_string(id)},
                        {"direction", below(2) ? "ingress" : "egress"},
                        {"ethertype", v6 ? "IPv6" : "IPv4"}});
    switch (below(4)) {
      case 0:
        break;
      case 1:
        j["protocol"] = below(2) ? "tcp" : "udp";
        if (below(2)) {
          uint16_t a = kPorts[below(6)], b = kPorts[below(6)];
          j["port_range_min"] = std::min(a, b);
          j["port_range_max"] = std::max(a, b);
        }
        break;
      case 2:
        j["protocol"] = "icmp";  // ipv6-icmp in IPv6 rules
        if (below(2)) j["port_range_min"] = below(3);
        if (j.contains("port_range_min") && below(2)) j["port_range_max"] = below(2);
        break;
      default:
        j["protocol"] = below(2) ? 47 : 132;
    }
    if (below(3) == 0)
      j["remote_ip_prefix"] = ip_to_string(addr(v6)) + "/" + std::to_string(below(v6 ? 129 : 33));
    else if (below(2) == 0)
      j["remote_group_id"] = "g" + std::to_string(below(5));  // g4: no such group, no members
    return j;
  }

  // Groups g0..g3 (less the ones a random duplicate rule made invalid) and members.
  void groups(std::map<std::string, SecurityGroup>& groups, GroupMembers& members) {
    for (int gi = 0; gi < 4; gi++) {
      const std::string gid = "g" + std::to_string(gi);
      std::vector<json> rules;
      for (int ri = 0, n = below(6); ri < n; ri++) rules.push_back(rule(ri));
      auto g = parse_security_group({{"id", gid}, {"rules", rules}});
      if (!g.ok()) continue;
      groups[gid] = *g;
      for (int m = 0, n = below(4); m < n; m++) {
        const bool v6 = below(2);
        const uint8_t len = below(4) ? (v6 ? 128 : 32) : 30;  // an allowed-address-pair CIDR
        members[gid].push_back({addr(v6), len});
      }
    }
  }

  Pkt packet() {
    static const uint8_t kProtos[] = {6, 17, 1, 58, 47, 132};
    Pkt p;
    p.dir = below(2) ? SgDirection::kIngress : SgDirection::kEgress;
    p.remote = addr(below(2));
    p.proto = kProtos[below(6)];
    p.tp_src = proto_is_icmp(p.proto) ? below(3) : kPorts[below(6)];
    p.tp_dst = proto_is_icmp(p.proto) ? below(2) : kPorts[below(6)] + below(3) - 1;
    return p;
  }

 private:
  static constexpr uint16_t kPorts[] = {1, 22, 80, 443, 1024, 65535};
  std::mt19937_64 rng_;
};

TEST(CompileGroupSet, MatchesNeutronSemanticsOnRandomInput) {
  RandomPolicy gen(7);
  uint64_t packets = 0, allowed = 0;
  for (int round = 0; round < 300; round++) {
    std::map<std::string, SecurityGroup> groups;
    GroupMembers members;
    gen.groups(groups, members);
    std::vector<std::string> port_groups;
    for (const auto& [id, g] : groups)
      if (gen.below(2)) port_groups.push_back(id);
    auto in = compile_group_set(port_groups, groups, members);
    ASSERT_TRUE(in.ok()) << in.error().message;
    for (int k = 0; k < 200; k++) {
      const Pkt p = gen.packet();
      const bool want = neutron_allows(in->groups, groups, members, p);
      ASSERT_EQ(compiled_allows(*in, p), want)
          << "round " << round << " packet " << k << " groups " << json(in->groups).dump();
      packets++;
      allowed += want;
    }
  }
  std::printf("compile vs neutron: %llu packets, %llu allowed\n",
              static_cast<unsigned long long>(packets), static_cast<unsigned long long>(allowed));
  EXPECT_GT(allowed, packets / 20);
  EXPECT_LT(allowed, packets * 19 / 20);
}

}  // namespace
}  // namespace strait::ctl
