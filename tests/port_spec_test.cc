// A port's port-security fields (issue 5): security_groups,
// allowed_address_pairs, port_security_enabled in parse_port, to_json and
// parse_port_update. The older fields are model_test.cc's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "control/model/model.h"
#include "tests/expect_refused.h"

namespace strait::ctl {
namespace {

using json = nlohmann::json;

constexpr const char* kUuid = "11111111-2222-3333-4444-555555555555";
constexpr const char* kMac = "02:00:00:00:00:01";

json port_json(json extra = json::object()) {
  json j = {{"id", kUuid},
            {"network", "net1"},
            {"mac", kMac},
            {"fixed_ips", {"10.0.0.1"}},
            {"attach", {{"type", "ethdev"}, {"devargs", "net_ring1"}}}};
  for (auto& [k, v] : extra.items()) j[k] = v;
  return j;
}

PortSpec must_parse(const json& j) {
  auto r = parse_port(j);
  EXPECT_TRUE(r.ok()) << j.dump() << ": " << (r.ok() ? "" : r.error().message);
  return r.ok() ? r.value() : PortSpec{};
}

IpPrefix prefix(const std::string& s) {
  auto p = parse_prefix(s);
  EXPECT_TRUE(p.ok()) << s;
  return p.ok() ? *p : IpPrefix{};
}

Mac mac(const std::string& s) {
  auto m = parse_mac(s);
  EXPECT_TRUE(m.ok()) << s;
  return m.ok() ? *m : Mac{};
}

// ---- parse_port ----------------------------------------------------------------

TEST(PortSecurity, PlainPortByDefault) {
  PortSpec p = must_parse(port_json());
  EXPECT_TRUE(p.security_groups.empty());
  EXPECT_TRUE(p.allowed_address_pairs.empty());
  EXPECT_FALSE(p.port_security_enabled);
  // Empty lists are not "given": still a plain port.
  p = must_parse(
      port_json({{"security_groups", json::array()}, {"allowed_address_pairs", json::array()}}));
  EXPECT_FALSE(p.port_security_enabled);
  // Port security alone: anti-spoofing without groups.
  p = must_parse(port_json({{"port_security_enabled", true}}));
  EXPECT_TRUE(p.port_security_enabled);
}

TEST(PortSecurity, GroupsOrPairsEnableItByDefault) {
  PortSpec p = must_parse(port_json({{"security_groups", {"web", "ssh"}}}));
  EXPECT_EQ(p.security_groups, (std::vector<std::string>{"web", "ssh"}));  // order kept
  EXPECT_TRUE(p.port_security_enabled);
  p = must_parse(port_json({{"allowed_address_pairs", {{{"ip_address", "10.0.0.100"}}}}}));
  EXPECT_TRUE(p.port_security_enabled);
  ASSERT_EQ(p.allowed_address_pairs.size(), 1u);
  EXPECT_EQ(p.allowed_address_pairs[0].ip_address, prefix("10.0.0.100/32"));
  EXPECT_EQ(p.allowed_address_pairs[0].mac_address, mac(kMac)) << "default: the port's MAC";
}

TEST(PortSecurity, AddressPairs) {
  PortSpec p = must_parse(
      port_json({{"allowed_address_pairs",
                  {{{"ip_address", "10.1.0.7/16"}, {"mac_address", "02:AA:00:00:00:09"}},
                   {{"ip_address", "2001:db8::/64"}},
                   {{"ip_address", "10.0.0.100"}, {"mac_address", "02:aa:00:00:00:09"}}}}}));
  ASSERT_EQ(p.allowed_address_pairs.size(), 3u);
  EXPECT_EQ(p.allowed_address_pairs[0].ip_address, prefix("10.1.0.0/16")) << "host bits cleared";
  EXPECT_EQ(p.allowed_address_pairs[0].mac_address, mac("02:aa:00:00:00:09"));
  EXPECT_EQ(p.allowed_address_pairs[1].ip_address, prefix("2001:db8::/64"));
  EXPECT_EQ(p.allowed_address_pairs[1].mac_address, mac(kMac));
  // The same address with another MAC is another pair (VRRP: one VIP, two MACs).
  EXPECT_TRUE(
      parse_port(
          port_json({{"allowed_address_pairs",
                      {{{"ip_address", "10.0.0.100"}},
                       {{"ip_address", "10.0.0.100"}, {"mac_address", "02:aa:00:00:00:09"}}}}}))
          .ok());
}

TEST(PortSecurity, AddressPairErrors) {
  auto pairs = [](json list) { return parse_port(port_json({{"allowed_address_pairs", list}})); };
  EXPECT_REFUSED(pairs("10.0.0.1"), "invalid_argument", "allowed_address_pairs: expected a list");
  EXPECT_REFUSED(pairs({"10.0.0.1"}), "invalid_argument",
                 "allowed_address_pairs[0]: expected an object");
  EXPECT_REFUSED(pairs({json::object()}), "invalid_argument",
                 "allowed_address_pairs[0].ip_address: missing");
  EXPECT_REFUSED(pairs({{{"ip_address", "10.0.0.300"}}}), "invalid_argument",
                 "allowed_address_pairs[0].ip_address: \"10.0.0.300\" is not a CIDR prefix");
  EXPECT_REFUSED(pairs({{{"ip_address", "10.0.0.0/40"}}}), "invalid_argument",
                 "has no valid prefix length (0..32)");
  EXPECT_REFUSED(pairs({{{"ip_address", 7}}}), "invalid_argument",
                 "allowed_address_pairs[0].ip_address: expected a string");
  EXPECT_REFUSED(pairs({{{"ip_address", "10.0.0.1"}, {"mac_address", "01:00:5e:00:00:01"}}}),
                 "invalid_argument",
                 "allowed_address_pairs[0].mac_address: 01:00:5e:00:00:01 is a multicast address");
  EXPECT_REFUSED(pairs({{{"ip_address", "10.0.0.1"}, {"mac_address", "00:00:00:00:00:00"}}}),
                 "invalid_argument", "allowed_address_pairs[0].mac_address: 00:00:00:00:00:00");
  EXPECT_REFUSED(pairs({{{"ip_address", "10.0.0.1"}, {"mac_address", "zz"}}}), "invalid_argument",
                 "allowed_address_pairs[0].mac_address: \"zz\" is not a MAC address");
  EXPECT_REFUSED(pairs({{{"ip_address", "10.0.0.1"}, {"vlan", 5}}}), "invalid_argument",
                 "allowed_address_pairs[0].vlan: unknown field");
  // Duplicates, also when one names the port's MAC and the other leaves it out.
  EXPECT_REFUSED(pairs({{{"ip_address", "10.0.0.0/24"}},
                        {{"ip_address", "10.0.0.9/24"}, {"mac_address", kMac}}}),
                 "invalid_argument",
                 "allowed_address_pairs[1]: 10.0.0.0/24 with 02:00:00:00:00:01 is listed twice");
}

TEST(PortSecurity, GroupErrors) {
  auto groups = [](json list) { return parse_port(port_json({{"security_groups", list}})); };
  EXPECT_REFUSED(groups("web"), "invalid_argument", "security_groups: expected a list of ids");
  EXPECT_REFUSED(groups({"web", 5}), "invalid_argument", "security_groups[1]: expected a string");
  EXPECT_REFUSED(groups({"web", "-x"}), "invalid_argument",
                 "security_groups[1]: \"-x\" is not a valid group id");
  EXPECT_REFUSED(groups({"web", "ssh", "web"}), "invalid_argument",
                 "security_groups[2]: \"web\" is listed twice");
}

TEST(PortSecurity, DisabledWithGroupsOrPairsIsRefused) {
  EXPECT_REFUSED(
      parse_port(port_json({{"security_groups", {"web"}}, {"port_security_enabled", false}})),
      "invalid_argument", "port_security_enabled: false, but the port has security groups");
  EXPECT_REFUSED(parse_port(port_json({{"allowed_address_pairs", {{{"ip_address", "10.0.0.9"}}}},
                                       {"port_security_enabled", false}})),
                 "invalid_argument",
                 "port_security_enabled: false, but the port has allowed address pairs");
  EXPECT_REFUSED(parse_port(port_json({{"port_security_enabled", "yes"}})), "invalid_argument",
                 "port_security_enabled: expected true or false");
  EXPECT_FALSE(
      must_parse(port_json({{"security_groups", json::array()}, {"port_security_enabled", false}}))
          .port_security_enabled);
}

// ---- to_json --------------------------------------------------------------------

TEST(PortSecurity, ToJsonWritesTheFieldsAndRoundTrips) {
  PortSpec p = must_parse(
      port_json({{"security_groups", {"web"}},
                 {"allowed_address_pairs",
                  {{{"ip_address", "10.0.0.100"}},
                   {{"ip_address", "10.2.0.0/16"}, {"mac_address", "02:aa:00:00:00:09"}}}}}));
  json j = to_json(p);
  EXPECT_EQ(j["security_groups"], json({"web"}));
  EXPECT_EQ(j["allowed_address_pairs"],
            json({{{"ip_address", "10.0.0.100"}, {"mac_address", kMac}},
                  {{"ip_address", "10.2.0.0/16"}, {"mac_address", "02:aa:00:00:00:09"}}}));
  EXPECT_EQ(j["port_security_enabled"], true);
  auto back = parse_port(j);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(to_json(*back), j);
  // Port security on without groups also reads back as on.
  PortSpec q = must_parse(port_json({{"port_security_enabled", true}}));
  EXPECT_TRUE(must_parse(to_json(q)).port_security_enabled);
}

TEST(PortSecurity, SchemaV1RowIsAPlainPort) {
  // A row saved before issue 5 has none of the three fields.
  json v1 = {{"id", kUuid},
             {"network", "net1"},
             {"mac", kMac},
             {"fixed_ips", {"10.0.0.1"}},
             {"attach", {{"type", "vhost"}, {"path", "/run/vhu0.sock"}, {"mode", "client"}}}};
  PortSpec p = must_parse(v1);
  EXPECT_FALSE(p.port_security_enabled);
  EXPECT_TRUE(p.security_groups.empty());
  EXPECT_TRUE(p.allowed_address_pairs.empty());
}

// ---- parse_port_update ------------------------------------------------------------

TEST(PortUpdateParse, FieldsPresentOrAbsent) {
  auto u = parse_port_update(
      {{"id", "11111111-2222-3333-4444-55555555555A"}, {"security_groups", {"web"}}});
  ASSERT_TRUE(u.ok()) << u.error().message;
  EXPECT_EQ(u->id, "11111111-2222-3333-4444-55555555555a");
  ASSERT_TRUE(u->security_groups);
  EXPECT_EQ(*u->security_groups, std::vector<std::string>{"web"});
  EXPECT_FALSE(u->fixed_ips);
  EXPECT_FALSE(u->allowed_address_pairs);
  EXPECT_FALSE(u->port_security_enabled);

  u = parse_port_update({{"id", kUuid},
                         {"fixed_ips", {"10.0.0.2", "2001:db8::2"}},
                         {"security_groups", json::array()},
                         {"allowed_address_pairs", {{{"ip_address", "10.0.0.0/24"}}}},
                         {"port_security_enabled", true}});
  ASSERT_TRUE(u.ok()) << u.error().message;
  ASSERT_TRUE(u->fixed_ips);
  EXPECT_EQ(u->fixed_ips->size(), 2u);
  ASSERT_TRUE(u->security_groups);
  EXPECT_TRUE(u->security_groups->empty()) << "[] clears the groups";
  ASSERT_TRUE(u->allowed_address_pairs);
  EXPECT_EQ((*u->allowed_address_pairs)[0].mac_address, Mac{}) << "the port's, filled in later";
  EXPECT_EQ(u->port_security_enabled, true);
}

TEST(PortUpdateParse, Errors) {
  EXPECT_REFUSED(parse_port_update(json::array()), "invalid_argument",
                 "params: expected an object");
  EXPECT_REFUSED(parse_port_update({{"security_groups", {"web"}}}), "invalid_argument",
                 "id: missing");
  EXPECT_REFUSED(parse_port_update({{"id", "port1"}, {"security_groups", {"web"}}}),
                 "invalid_argument", "id: \"port1\" is not a UUID");
  EXPECT_REFUSED(parse_port_update({{"id", kUuid}}), "invalid_argument", "nothing to update");
  EXPECT_REFUSED(parse_port_update({{"id", kUuid}, {"port_security_enabled", nullptr}}),
                 "invalid_argument", "nothing to update");
  EXPECT_REFUSED(parse_port_update({{"id", kUuid}, {"mac", kMac}}), "invalid_argument",
                 "mac: unknown field");
  EXPECT_REFUSED(parse_port_update({{"id", kUuid}, {"fixed_ips", {"10.0.0.1", "10.0.0.1"}}}),
                 "invalid_argument", "fixed_ips[1]: 10.0.0.1 is listed twice");
  EXPECT_REFUSED(parse_port_update({{"id", kUuid}, {"fixed_ips", {"nope"}}}), "invalid_argument",
                 "fixed_ips[0]: \"nope\" is not an IPv4 or IPv6 address");
  EXPECT_REFUSED(parse_port_update({{"id", kUuid}, {"security_groups", {"a", "a"}}}),
                 "invalid_argument", "security_groups[1]: \"a\" is listed twice");
  EXPECT_REFUSED(parse_port_update({{"id", kUuid}, {"allowed_address_pairs", {{{"ip", "1"}}}}}),
                 "invalid_argument", "allowed_address_pairs[0].ip: unknown field");
  EXPECT_REFUSED(parse_port_update({{"id", kUuid}, {"port_security_enabled", 1}}),
                 "invalid_argument", "port_security_enabled: expected true or false");
}

TEST(NewUuid, RandomVersion4Lowercase) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; i++) {
    std::string u = new_uuid();
    ASSERT_EQ(u.size(), 36u);
    // parse_port takes it as a port id unchanged: a canonical UUID.
    auto p = parse_port(port_json({{"id", u}}));
    ASSERT_TRUE(p.ok()) << u;
    EXPECT_EQ(p->id, u);
    EXPECT_EQ(u[14], '4') << u;
    EXPECT_NE(std::string("89ab").find(u[19]), std::string::npos) << u;
    seen.insert(u);
  }
  EXPECT_EQ(seen.size(), 1000u);
}

}  // namespace
}  // namespace strait::ctl
