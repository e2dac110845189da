// The Model's security groups (issue 5): groups and rules and the relations
// neutron enforces between them and ports; port.update; remote-group members.
// Every refusal is checked to change nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "control/model/model.h"
#include "tests/expect_refused.h"
#include "tests/model_dump.h"

namespace strait::ctl {
namespace {

using json = nlohmann::json;
using test::dump;

constexpr const char* kUuidA = "11111111-2222-3333-4444-555555555555";
constexpr const char* kUuidB = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
constexpr const char* kUuidC = "01234567-89ab-cdef-0123-456789abcdef";

SecurityGroup group(json j) {
  auto g = parse_security_group(j);
  EXPECT_TRUE(g.ok()) << j.dump() << ": " << (g.ok() ? "" : g.error().message);
  return g.ok() ? *g : SecurityGroup{};
}

SecurityGroupRule rule(json j) {
  auto r = parse_sg_rule(j);
  EXPECT_TRUE(r.ok()) << j.dump() << ": " << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : SecurityGroupRule{};
}

json ssh(const std::string& id = "r-ssh") {
  return {{"id", id},
          {"direction", "ingress"},
          {"protocol", "tcp"},
          {"port_range_min", 22},
          {"port_range_max", 22}};
}

json from_group(const std::string& id, const std::string& remote) {
  return {{"id", id}, {"direction", "ingress"}, {"remote_group_id", remote}};
}

PortSpec port(const std::string& id, const std::string& mac, json extra) {
  json j = {{"id", id},
            {"network", "net1"},
            {"mac", mac},
            {"attach", {{"type", "vhost"}, {"path", "/run/" + std::string(id) + ".sock"}}}};
  for (auto& [k, v] : extra.items()) j[k] = v;
  auto p = parse_port(j);
  EXPECT_TRUE(p.ok()) << j.dump() << ": " << (p.ok() ? "" : p.error().message);
  return p.ok() ? *p : PortSpec{};
}

PortUpdate update(json j) {
  auto u = parse_port_update(j);
  EXPECT_TRUE(u.ok()) << j.dump() << ": " << (u.ok() ? "" : u.error().message);
  return u.ok() ? *u : PortUpdate{};
}

IpPrefix prefix(const std::string& s) { return *parse_prefix(s); }

// n rules that differ in their port: no two match alike.
json port_rules(size_t n, const std::string& id_prefix) {
  json rules = json::array();
  for (size_t i = 0; i < n; ++i)
    rules.push_back({{"id", id_prefix + std::to_string(i)},
                     {"direction", "ingress"},
                     {"protocol", "tcp"},
                     {"port_range_min", i + 1},
                     {"port_range_max", i + 1}});
  return rules;
}


class ModelGroups : public ::testing::Test {
 protected:
  void SetUp() override {
    auto n = parse_network({{"id", "net1"}, {"type", "local"}});
    ASSERT_TRUE(m.add_network(*n).ok());
  }
  void add_group(json j) {
    auto s = m.add_security_group(group(j));
    ASSERT_TRUE(s.ok()) << s.error().message;
  }
  void add_port(const PortSpec& p) {
    auto s = m.add_port(p);
    ASSERT_TRUE(s.ok()) << s.error().message;
  }
  Model m{{}};
};

// ---- groups ---------------------------------------------------------------------

TEST_F(ModelGroups, AddAndLookUp) {
  add_group({{"id", "web"}, {"name", "Web"}, {"rules", {ssh()}}});
  add_group({{"id", "db"}, {"rules", {from_group("r-db", "web"), from_group("r-self", "db")}}});
  ASSERT_NE(m.security_group("web"), nullptr);
  EXPECT_EQ(m.security_group("web")->name, "Web");
  EXPECT_EQ(m.security_group("nope"), nullptr);
  EXPECT_EQ(m.security_groups().size(), 2u);
  EXPECT_EQ(m.group_of_rule("r-ssh"), "web");
  EXPECT_EQ(m.group_of_rule("r-self"), "db");
  EXPECT_EQ(m.group_of_rule("r-none"), "");
}

TEST_F(ModelGroups, AddRefusals) {
  add_group({{"id", "web"}, {"rules", {ssh()}}});
  const json before = dump(m);
  EXPECT_REFUSED(m.add_security_group(group({{"id", "web"}})), "conflict",
                 "security group web already exists");
  EXPECT_REFUSED(m.add_security_group(group({{"id", "g2"}, {"rules", {from_group("r1", "nope")}}})),
                 "not_found", "rules[0].remote_group_id: no security group \"nope\"");
  EXPECT_REFUSED(m.add_security_group(group({{"id", "g2"}, {"rules", {ssh()}}})), "conflict",
                 "rules[0].id: rule r-ssh already exists (in security group web)");
  // Rules without ids (the switch gives them one before it gets here).
  EXPECT_REFUSED(
      m.add_security_group(group({{"id", "g2"}, {"rules", {{{"direction", "egress"}}}}})),
      "invalid_argument", "rules[0].id: missing");
  // A group built in code, past parse_security_group's own checks.
  SecurityGroup twice{"g3", "", {rule(ssh("a")), rule(ssh("b"))}};
  EXPECT_REFUSED(m.add_security_group(twice), "conflict",
                 "rules[1]: duplicates a rule with the same");
  SecurityGroup same_id{"g3", "", {rule(ssh("a")), rule(from_group("a", "g3"))}};
  EXPECT_REFUSED(m.add_security_group(same_id), "conflict",
                 "rule a is already in security group g3");
  EXPECT_REFUSED(m.add_security_group(SecurityGroup{"-bad", "", {}}), "invalid_argument", "id:");
  EXPECT_EQ(dump(m), before);
}

TEST_F(ModelGroups, RemoveRefusedWhileUsed) {
  add_group({{"id", "web"}, {"rules", {from_group("r-self", "web")}}});
  add_group({{"id", "db"}, {"rules", {from_group("r-db", "web")}}});
  add_group({{"id", "idle"}});
  add_port(port(kUuidA, "02:00:00:00:00:01", {{"security_groups", {"db"}}}));
  const json before = dump(m);
  EXPECT_REFUSED(m.remove_security_group("db"), "conflict",
                 std::string("security group db is in use by port ") + kUuidA);
  EXPECT_REFUSED(m.remove_security_group("web"), "conflict",
                 "security group web is the remote group of rule r-db of security group db");
  EXPECT_REFUSED(m.remove_security_group("nope"), "not_found", "security group nope not found");
  EXPECT_EQ(dump(m), before);
  ASSERT_TRUE(m.remove_security_group("idle").ok());
  // Its own rule naming itself does not hold a group.
  ASSERT_TRUE(m.remove_sg_rule("r-db").ok());
  ASSERT_TRUE(m.remove_security_group("web").ok());
  EXPECT_EQ(m.security_group("web"), nullptr);
  EXPECT_EQ(m.group_of_rule("r-self"), "");
}

// ---- rules ----------------------------------------------------------------------

TEST_F(ModelGroups, AddAndRemoveRules) {
  add_group({{"id", "web"}});
  add_group({{"id", "db"}});
  ASSERT_TRUE(m.add_sg_rule("web", rule(ssh())).ok());
  ASSERT_TRUE(m.add_sg_rule("web", rule(from_group("r-db", "db"))).ok());
  ASSERT_TRUE(m.add_sg_rule("web", rule(from_group("r-self", "web"))).ok());
  EXPECT_EQ(m.security_group("web")->rules.size(), 3u);
  EXPECT_EQ(m.group_of_rule("r-db"), "web");
  ASSERT_TRUE(m.remove_sg_rule("r-ssh").ok());
  EXPECT_EQ(m.group_of_rule("r-ssh"), "");
  ASSERT_EQ(m.security_group("web")->rules.size(), 2u);
  EXPECT_EQ(m.security_group("web")->rules[0].id, "r-db") << "order kept";
  // The same rule may go in again after its removal, and into another group.
  ASSERT_TRUE(m.add_sg_rule("db", rule(ssh())).ok());
  EXPECT_EQ(m.group_of_rule("r-ssh"), "db");
}

TEST_F(ModelGroups, RuleRefusals) {
  add_group({{"id", "web"}, {"rules", {ssh()}}});
  add_group({{"id", "db"}, {"rules", {ssh("r-db-ssh")}}});
  const json before = dump(m);
  EXPECT_REFUSED(m.add_sg_rule("nope", rule(ssh("r2"))), "not_found",
                 "security_group_id: no security group \"nope\"");
  EXPECT_REFUSED(m.add_sg_rule("web", rule(ssh("r-db-ssh"))), "conflict",
                 "id: rule r-db-ssh already exists (in security group db)");
  EXPECT_REFUSED(m.add_sg_rule("web", rule(ssh("r2"))), "conflict",
                 "security group web already has a rule with the same direction, ethertype, "
                 "protocol, ports and remote (r-ssh)");
  EXPECT_REFUSED(m.add_sg_rule("web", rule(from_group("r3", "nope"))), "not_found",
                 "remote_group_id: no security group \"nope\"");
  SecurityGroupRule no_id = rule(ssh("x"));
  no_id.id = "";
  EXPECT_REFUSED(m.add_sg_rule("web", no_id), "invalid_argument", "id: missing");
  EXPECT_REFUSED(m.remove_sg_rule("nope"), "not_found", "security group rule nope not found");
  EXPECT_EQ(dump(m), before);
}

TEST_F(ModelGroups, UpdateReplacesTheWholeRuleListAtOnce) {
  add_group({{"id", "db"}});
  add_group({{"id", "web"}, {"name", "Web"}, {"rules", {ssh(), from_group("r-db", "db")}}});
  ASSERT_TRUE(m.set_remote_member(RemoteMember{"web", kUuidB, {prefix("10.1.0.2/32")}}).ok());
  json http = ssh("r-http");
  http["port_range_min"] = http["port_range_max"] = 80;
  // r-ssh stays under its id, r-db goes, r-http and a rule from web itself come.
  ASSERT_TRUE(m.update_security_group(
                   group({{"id", "web"},
                          {"name", "Web 2"},
                          {"rules", {http, ssh(), from_group("r-self", "web")}}}))
                  .ok());
  const SecurityGroup* g = m.security_group("web");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->name, "Web 2");
  std::vector<std::string> ids;
  for (const SecurityGroupRule& r : g->rules) ids.push_back(r.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"r-http", "r-ssh", "r-self"})) << "the list's order";
  EXPECT_EQ(m.group_of_rule("r-db"), "");
  EXPECT_EQ(g->remote_members.size(), 1u) << "members are not the document's to change";
  // Now db may go: no rule names it any more.
  EXPECT_TRUE(m.remove_security_group("db").ok());
}

TEST_F(ModelGroups, ARefusedUpdateChangesNothing) {
  add_group({{"id", "db"}, {"rules", {ssh("r-db-ssh")}}});
  add_group({{"id", "web"}, {"rules", {ssh()}}});
  const json before = dump(m);
  auto update = [&](json rules) { return m.update_security_group(group({{"id", "web"}, {"rules", rules}})); };
  EXPECT_REFUSED(m.update_security_group(group({{"id", "nope"}})), "not_found",
                 "security group nope not found");
  EXPECT_REFUSED(update({{{"id", "r-new"}, {"direction", "egress"}}, from_group("r-x", "nope")}),
                 "not_found", "rules[1].remote_group_id: no security group \"nope\"");
  EXPECT_REFUSED(update({ssh("r-db-ssh")}), "conflict",
                 "rules[0].id: rule r-db-ssh already exists (in security group db)");
  // Built in code, past parse_security_group's own duplicate check.
  EXPECT_REFUSED(m.update_security_group(SecurityGroup{"web", "", {rule(ssh()), rule(ssh("r-2"))}}),
                 "conflict", "rules[1]: duplicates a rule");
  EXPECT_REFUSED(update(port_rules(kMaxRulesPerGroup + 1, "w")), "resource_exhausted",
                 "rules: 1001 rules, more than the 1000 a security group may have");
  EXPECT_EQ(dump(m), before);
}

// ---- restore --------------------------------------------------------------------

TEST_F(ModelGroups, RestoreTakesRemoteGroupsInAnyOrderAndCycles) {
  // a names b and b names a: no order of add_security_group works.
  std::vector<SecurityGroup> saved = {
      group({{"id", "a"}, {"rules", {from_group("ra", "b")}}}),
      group({{"id", "b"}, {"name", "B"}, {"rules", {from_group("rb", "a"), ssh()}}})};
  ASSERT_TRUE(m.restore_security_groups(saved).ok());
  EXPECT_EQ(m.group_of_rule("ra"), "a");
  EXPECT_EQ(m.group_of_rule("r-ssh"), "b");
  EXPECT_EQ(m.security_group("b")->name, "B");
  EXPECT_EQ(to_json(*m.security_group("b")), to_json(saved[1]));
}

TEST_F(ModelGroups, RestoreIsAllOrNothing) {
  add_group({{"id", "old"}});
  const json before = dump(m);
  std::vector<SecurityGroup> saved = {
      group({{"id", "a"}, {"rules", {from_group("ra", "b")}}}),
      group({{"id", "b"}, {"rules", {ssh(), from_group("rb", "gone")}}})};
  EXPECT_REFUSED(m.restore_security_groups(saved), "not_found",
                 "security group b: rules[1]: remote_group_id: no security group \"gone\"");
  EXPECT_EQ(dump(m), before);
  EXPECT_REFUSED(m.restore_security_groups({group({{"id", "x"}}), group({{"id", "old"}})}),
                 "conflict", "security group old: security group old already exists");
  EXPECT_EQ(dump(m), before);
}

// ---- ports and groups -------------------------------------------------------------

TEST_F(ModelGroups, PortGroupsMustExist) {
  add_group({{"id", "web"}});
  const json before = dump(m);
  PortSpec p = port(kUuidA, "02:00:00:00:00:01", {{"security_groups", {"web", "nope"}}});
  EXPECT_REFUSED(m.check_add_port(p), "not_found",
                 "security_groups[1]: no security group \"nope\"");
  EXPECT_REFUSED(m.add_port(p), "not_found", "security_groups[1]: no security group \"nope\"");
  EXPECT_REFUSED(m.restore_port(p, 5), "not_found", "security_groups[1]");
  EXPECT_EQ(dump(m), before);
  EXPECT_EQ(m.local_vlan("net1"), 0) << "no VLAN left behind";
  // A spec built in code with port security off and groups: refused too.
  PortSpec off = port(kUuidA, "02:00:00:00:00:01", {{"security_groups", {"web"}}});
  off.port_security_enabled = false;
  EXPECT_REFUSED(m.add_port(off), "invalid_argument", "port_security_enabled: false");
  EXPECT_EQ(dump(m), before);
  add_port(port(kUuidA, "02:00:00:00:00:01", {{"security_groups", {"web"}}}));
  EXPECT_EQ(m.ports_in_group("web"), std::vector<std::string>{kUuidA});
}

TEST_F(ModelGroups, MembersAreFixedIpsAndPairsOfBoundPorts) {
  add_group({{"id", "web"}});
  add_group({{"id", "db"}});
  add_group({{"id", "empty"}});
  add_port(port(kUuidA, "02:00:00:00:00:01",
                {{"fixed_ips", {"10.0.0.1", "2001:db8::1"}},
                 {"security_groups", {"web", "db"}},
                 {"allowed_address_pairs", {{{"ip_address", "10.9.0.0/16"}}}}}));
  add_port(port(kUuidB, "02:00:00:00:00:02",
                {{"fixed_ips", {"10.0.0.2"}}, {"security_groups", {"web"}}}));
  // Port security alone: anti-spoofing, in no group.
  add_port(port(kUuidC, "02:00:00:00:00:03",
                {{"fixed_ips", {"10.0.0.3"}}, {"port_security_enabled", true}}));
  GroupMembers members = m.group_members();
  EXPECT_EQ(members.size(), 2u) << "groups without members are absent";
  EXPECT_EQ(members["web"],
            (std::vector<IpPrefix>{prefix("10.0.0.1/32"), prefix("10.0.0.2/32"),
                                   prefix("10.9.0.0/16"), prefix("2001:db8::1/128")}));
  EXPECT_EQ(members["db"], (std::vector<IpPrefix>{prefix("10.0.0.1/32"), prefix("10.9.0.0/16"),
                                                  prefix("2001:db8::1/128")}));
  EXPECT_EQ(m.ports_in_group("web"), (std::vector<std::string>{kUuidA, kUuidB}));
  EXPECT_EQ(m.ports_in_group("db"), std::vector<std::string>{kUuidA});
  EXPECT_TRUE(m.ports_in_group("empty").empty());
  ASSERT_TRUE(m.remove_port(kUuidA).ok());
  EXPECT_EQ(m.group_members()["web"], std::vector<IpPrefix>{prefix("10.0.0.2/32")});
  EXPECT_FALSE(m.group_members().count("db"));
}

// Members bound on other hosts (etcd's remote_group documents) count in the
// group's address set with the ports bound here, and travel in the group's
// JSON (what the store saves).
TEST_F(ModelGroups, RemoteMembersJoinTheGroupsAddressSet) {
  add_group({{"id", "web"}});
  add_port(port(kUuidA, "02:00:00:00:00:01", {{"fixed_ips", {"10.0.0.1"}}, {"security_groups", {"web"}}}));
  auto member = [](const std::string& port, json addrs) {
    auto r = parse_remote_member({{"id", "web"}, {"port", port}, {"addresses", addrs}});
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? *r : RemoteMember{};
  };
  ASSERT_TRUE(m.set_remote_member(member(kUuidB, {"10.1.0.2", "10.9.0.0/16", "10.1.0.2"})).ok());
  // A member that is also bound here counts each address once.
  ASSERT_TRUE(m.set_remote_member(member(kUuidA, {"10.0.0.1"})).ok());
  EXPECT_EQ(m.group_members()["web"],
            (std::vector<IpPrefix>{prefix("10.0.0.1/32"), prefix("10.1.0.2/32"), prefix("10.9.0.0/16")}));
  const json saved = to_json(*m.security_group("web"));
  EXPECT_EQ(saved["remote_members"][kUuidB], json({"10.1.0.2/32", "10.9.0.0/16"}));
  auto again = parse_security_group(saved);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->remote_members, m.security_group("web")->remote_members);

  // No addresses: no longer a member.
  ASSERT_TRUE(m.set_remote_member(member(kUuidB, json::array())).ok());
  ASSERT_TRUE(m.set_remote_member(member(kUuidA, json::array())).ok());
  EXPECT_EQ(m.group_members()["web"], std::vector<IpPrefix>{prefix("10.0.0.1/32")});
  EXPECT_FALSE(to_json(*m.security_group("web")).contains("remote_members"));

  const json before = dump(m);
  EXPECT_REFUSED(m.set_remote_member(RemoteMember{"nope", kUuidB, {prefix("10.1.0.2/32")}}),
                 "not_found", "security group nope not found");
  EXPECT_EQ(dump(m), before);
}

TEST_F(ModelGroups, RemoteMemberRefusals) {
  auto refusal = [](json params) {
    auto r = parse_remote_member(params);
    return r.ok() ? std::string("accepted") : r.error().code + ": " + r.error().message;
  };
  EXPECT_EQ(refusal({{"id", "web"}, {"addresses", {"10.0.0.1"}}}),
            "invalid_argument: port: missing (the member port's UUID)");
  EXPECT_EQ(refusal({{"id", "web"}, {"port", "p1"}}),
            "invalid_argument: port: \"p1\" is not a UUID (8-4-4-4-12 hex digits)");
  EXPECT_EQ(refusal({{"id", "web"}, {"port", kUuidA}, {"addresses", {"10.0.0.300"}}}).substr(0, 36),
            "invalid_argument: addresses[0]: \"10.");
  EXPECT_EQ(refusal({{"id", "web"}, {"port", kUuidA}, {"addresses", "10.0.0.1"}}),
            "invalid_argument: addresses: expected a list of addresses, got \"10.0.0.1\"");
  EXPECT_EQ(refusal({{"id", "web"}, {"port", kUuidA}, {"mac", "x"}}).substr(0, 36),
            "invalid_argument: mac: unknown field");
  json many = json::array();
  for (int i = 0; i <= static_cast<int>(kMaxMemberAddresses); i++) many.push_back("10.0.1." + std::to_string(i));
  EXPECT_EQ(refusal({{"id", "web"}, {"port", kUuidA}, {"addresses", many}}),
            "resource_exhausted: addresses: 65 addresses, more than the 64 one member may give a group");
  EXPECT_EQ(refusal({{"id", "web"}, {"port", "AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE"}}), "accepted");

  // The group's address limit counts remote members too.
  add_group({{"id", "web"}});
  for (int i = 0; i < static_cast<int>(kMaxGroupAddresses / kMaxMemberAddresses); i++) {
    RemoteMember r{"web", "", {}};
    char id[40];
    std::snprintf(id, sizeof id, "00000000-0000-4000-8000-%012d", i);
    r.port = id;
    for (int a = 0; a < static_cast<int>(kMaxMemberAddresses); a++)
      r.addresses.push_back(prefix("10." + std::to_string(i / 250) + "." + std::to_string(i % 250) +
                                   "." + std::to_string(a) + "/32"));
    ASSERT_TRUE(m.set_remote_member(r).ok()) << i;
  }
  const json before = dump(m);
  EXPECT_REFUSED(m.set_remote_member(RemoteMember{"web", kUuidA, {prefix("10.255.0.1/32")}}),
                 "resource_exhausted", "security group web would have more than 16384 member addresses");
  EXPECT_REFUSED(m.add_port(port(kUuidB, "02:00:00:00:00:02",
                                 {{"fixed_ips", {"10.0.0.2"}}, {"security_groups", {"web"}}})),
                 "resource_exhausted", "security group web would have more than 16384");
  EXPECT_EQ(dump(m), before);
}

// ---- port.update ----------------------------------------------------------------

TEST_F(ModelGroups, UpdatedPortAppliesThePresentFields) {
  add_group({{"id", "web"}});
  add_group({{"id", "db"}});
  add_port(port(kUuidA, "02:00:00:00:00:01", {{"fixed_ips", {"10.0.0.1"}}}));
  const json before = dump(m);
  // A plain port gets groups: port security must be switched on with them.
  EXPECT_REFUSED(m.updated_port(update({{"id", kUuidA}, {"security_groups", {"web"}}})),
                 "invalid_argument",
                 "port_security_enabled: false, but the port has security groups");
  auto p = m.updated_port(
      update({{"id", kUuidA}, {"security_groups", {"web"}}, {"port_security_enabled", true}}));
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->security_groups, std::vector<std::string>{"web"});
  EXPECT_TRUE(p->port_security_enabled);
  EXPECT_EQ(p->fixed_ips, m.port(kUuidA)->fixed_ips) << "absent fields kept";
  EXPECT_EQ(dump(m), before) << "updated_port changes nothing";
  ASSERT_TRUE(m.update_port(*p).ok());
  EXPECT_EQ(m.ports_in_group("web"), std::vector<std::string>{kUuidA});
  EXPECT_EQ(m.group_members()["web"], std::vector<IpPrefix>{prefix("10.0.0.1/32")});

  // Pairs without a MAC get the port's; fixed IPs are replaced.
  p = m.updated_port(update({{"id", kUuidA},
                             {"fixed_ips", {"10.0.0.7"}},
                             {"allowed_address_pairs", {{{"ip_address", "10.0.0.100"}}}}}));
  ASSERT_TRUE(p.ok()) << p.error().message;
  ASSERT_EQ(p->allowed_address_pairs.size(), 1u);
  EXPECT_EQ(p->allowed_address_pairs[0].mac_address, m.port(kUuidA)->mac);
  ASSERT_TRUE(m.update_port(*p).ok());
  EXPECT_EQ(m.group_members()["web"],
            (std::vector<IpPrefix>{prefix("10.0.0.7/32"), prefix("10.0.0.100/32")}));

  // Clearing groups and pairs, then switching port security off.
  p = m.updated_port(update({{"id", kUuidA},
                             {"security_groups", json::array()},
                             {"allowed_address_pairs", json::array()},
                             {"port_security_enabled", false}}));
  ASSERT_TRUE(p.ok()) << p.error().message;
  ASSERT_TRUE(m.update_port(*p).ok());
  EXPECT_FALSE(m.port(kUuidA)->port_security_enabled);
  EXPECT_TRUE(m.ports_in_group("web").empty());
}

TEST_F(ModelGroups, UpdateRefusals) {
  add_group({{"id", "web"}});
  add_port(port(kUuidA, "02:00:00:00:00:01",
                {{"fixed_ips", {"10.0.0.1"}}, {"security_groups", {"web"}}}));
  add_port(port(kUuidB, "02:00:00:00:00:02", {{"fixed_ips", {"10.0.0.2"}}}));
  const json before = dump(m);
  EXPECT_REFUSED(m.updated_port(update({{"id", kUuidC}, {"port_security_enabled", true}})),
                 "not_found", std::string("port ") + kUuidC + " not found");
  EXPECT_REFUSED(m.updated_port(update({{"id", kUuidA}, {"port_security_enabled", false}})),
                 "invalid_argument",
                 "port_security_enabled: false, but the port has security groups");
  EXPECT_REFUSED(m.updated_port(update({{"id", kUuidA}, {"security_groups", {"web", "nope"}}})),
                 "not_found", "security_groups[1]: no security group \"nope\"");
  EXPECT_REFUSED(m.updated_port(update({{"id", kUuidA}, {"fixed_ips", {"10.0.0.3", "10.0.0.2"}}})),
                 "conflict", std::string("fixed_ips: 10.0.0.2 is already used by port ") + kUuidB);
  EXPECT_REFUSED(m.updated_port(update(
                     {{"id", kUuidA},
                      {"allowed_address_pairs",
                       {{{"ip_address", "10.0.0.5"}},
                        {{"ip_address", "10.0.0.5"}, {"mac_address", "02:00:00:00:00:01"}}}}})),
                 "invalid_argument",
                 "allowed_address_pairs[1]: 10.0.0.5/32 with 02:00:00:00:00:01 is listed twice");
  // Its own addresses are not a conflict.
  EXPECT_TRUE(m.updated_port(update({{"id", kUuidA}, {"fixed_ips", {"10.0.0.1"}}})).ok());

  PortSpec other = *m.port(kUuidA);
  other.mac = {2, 0, 0, 0, 0, 9};
  EXPECT_REFUSED(m.update_port(other), "invalid_argument", "network, mac and attach");
  other = *m.port(kUuidA);
  other.attach.path = "/run/elsewhere.sock";
  EXPECT_REFUSED(m.update_port(other), "invalid_argument", "network, mac and attach");
  other = *m.port(kUuidA);
  other.security_groups = {"nope"};
  EXPECT_REFUSED(m.update_port(other), "not_found", "security_groups[0]");
  other = *m.port(kUuidA);
  other.fixed_ips = m.port(kUuidB)->fixed_ips;
  EXPECT_REFUSED(m.update_port(other), "conflict", "fixed_ips: 10.0.0.2");
  other = *m.port(kUuidA);
  other.id = kUuidC;
  EXPECT_REFUSED(m.update_port(other), "not_found", "not found");
  EXPECT_EQ(dump(m), before);
}

// ---- limits ------------------------------------------------------------------------

// Rules added one at a time slowed to 127 ms each by 1800, and an 8000-rule
// group took seconds to compile: a group holds kMaxRulesPerGroup rules.
TEST_F(ModelGroups, RulesPerGroupStopAtTheLimit) {
  ASSERT_EQ(kMaxRulesPerGroup, 1000u);
  add_group({{"id", "full"}, {"rules", port_rules(kMaxRulesPerGroup, "f")}});
  add_group({{"id", "grows"}, {"rules", port_rules(kMaxRulesPerGroup - 1, "g")}});
  ASSERT_TRUE(m.add_sg_rule("grows", rule({{"id", "last"}, {"direction", "egress"}})).ok());
  const json before = dump(m);
  for (const char* g : {"full", "grows"})
    EXPECT_REFUSED(m.add_sg_rule(g, rule({{"id", "one-more"}, {"direction", "egress"}})),
                   "resource_exhausted",
                   "security group " + std::string(g) +
                       " already has 1000 rules, the most a group may have (1000)");
  EXPECT_REFUSED(m.add_security_group(group({{"id", "big"}, {"rules", port_rules(1001, "b")}})),
                 "resource_exhausted",
                 "rules: 1001 rules, more than the 1000 a security group may have");
  EXPECT_EQ(dump(m), before);
  // Deleting one makes room for one.
  ASSERT_TRUE(m.remove_sg_rule("f0").ok());
  EXPECT_TRUE(m.add_sg_rule("full", rule({{"id", "one-more"}, {"direction", "egress"}})).ok());
}

// A group an older straitd saved past the limit still comes back.
TEST_F(ModelGroups, RestoreTakesAGroupSavedPastTheRuleLimit) {
  SecurityGroup big = group({{"id", "big"}, {"rules", port_rules(kMaxRulesPerGroup + 1, "b")}});
  ASSERT_TRUE(m.restore_security_groups({big}).ok());
  EXPECT_EQ(m.security_group("big")->rules.size(), kMaxRulesPerGroup + 1);
  EXPECT_REFUSED(m.add_sg_rule("big", rule({{"id", "more"}, {"direction", "egress"}})),
                 "resource_exhausted", "already has 1001 rules");
}

// A port with one fixed IP and n - 1 allowed pairs: n member addresses.
PortSpec port_with_addresses(int i, size_t n, json groups) {
  json pairs = json::array();
  for (size_t k = 1; k < n; ++k)
    pairs.push_back({{"ip_address", "10." + std::to_string(i) + "." + std::to_string(k / 256) +
                                        "." + std::to_string(k % 256)}});
  char mac[18], id[37];
  std::snprintf(mac, sizeof mac, "02:00:00:00:%02x:%02x", i / 256, i % 256);
  std::snprintf(id, sizeof id, "00000000-0000-0000-0000-%012d", i);
  return port(id, mac,
              {{"fixed_ips", {"10." + std::to_string(i) + ".255.1"}},
               {"allowed_address_pairs", pairs},
               {"security_groups", groups}});
}

TEST_F(ModelGroups, MemberAddressesPerGroupStopAtTheLimit) {
  ASSERT_EQ(kMaxGroupAddresses, 16384u);
  add_group({{"id", "web"}});
  add_group({{"id", "other"}});
  // 64 ports of 256 addresses (1 fixed IP, 255 pairs, under kMaxAddressPairs).
  for (int i = 1; i <= 64; ++i) add_port(port_with_addresses(i, 256, {"web"}));  // 16384
  const json before = dump(m);
  EXPECT_REFUSED(m.add_port(port_with_addresses(65, 1, {"other", "web"})), "resource_exhausted",
                 "security_groups[1]: security group web would have more than 16384 member "
                 "addresses (fixed IPs and allowed address pairs of its ports, and its remote "
                 "members'; it has 16384, the port 1)");
  EXPECT_EQ(dump(m), before);
  // An update that grows a member past it is refused the same way; one that
  // keeps its count is not.
  PortSpec grown = port_with_addresses(64, 257, {"web"});
  EXPECT_REFUSED(m.update_port(grown), "resource_exhausted", "security group web");
  EXPECT_EQ(dump(m), before);
  EXPECT_TRUE(m.update_port(port_with_addresses(64, 256, {"web"})).ok());
  // A member leaving makes room.
  ASSERT_TRUE(m.remove_port(port_with_addresses(1, 1, {}).id).ok());
  add_port(port_with_addresses(65, 1, {"other", "web"}));
  // Restoring a saved state past the limit (an older straitd's) is not refused.
  EXPECT_TRUE(m.restore_port(port_with_addresses(66, 2000, {"web"}), m.local_vlan("net1")).ok());
}

// Per port: fixed IPs, allowed pairs and groups have limits (model.h), so a
// bind or update stays cheap to check; a refusal names the field and changes
// nothing; a port an older straitd saved past them is restored as it was.
TEST_F(ModelGroups, PortFieldsStopAtTheirLimits) {
  ASSERT_EQ(kMaxFixedIps, 256u);
  ASSERT_EQ(kMaxAddressPairs, 256u);
  ASSERT_EQ(kMaxPortGroups, 64u);
  json groups = json::array();
  for (size_t g = 0; g <= kMaxPortGroups; ++g) {
    add_group({{"id", "g" + std::to_string(g)}});
    groups.push_back("g" + std::to_string(g));
  }
  json ips = json::array();
  for (size_t k = 0; k <= kMaxFixedIps; ++k)
    ips.push_back("10.1." + std::to_string(k / 256) + "." + std::to_string(k % 256));
  const char* id = "00000000-0000-0000-0000-000000000001";
  const char* mac = "02:00:00:00:00:01";
  const json before = dump(m);
  EXPECT_REFUSED(m.add_port(port(id, mac, {{"fixed_ips", ips}})), "resource_exhausted",
                 "fixed_ips: 257 given, at most 256 per port");
  EXPECT_REFUSED(m.add_port(port_with_addresses(1, kMaxAddressPairs + 2, {"g0"})),
                 "resource_exhausted", "allowed_address_pairs: 257 given, at most 256 per port");
  EXPECT_REFUSED(m.add_port(port(id, mac, {{"security_groups", groups}})), "resource_exhausted",
                 "security_groups: 65 given, at most 64 per port");
  EXPECT_EQ(dump(m), before);
  // At the limits a port binds; an update past one is refused.
  json at_limit = groups;
  at_limit.erase(at_limit.size() - 1);
  json fewer_ips = ips;
  fewer_ips.erase(fewer_ips.size() - 1);
  add_port(port(id, mac, {{"fixed_ips", fewer_ips}, {"security_groups", at_limit}}));
  EXPECT_REFUSED(m.updated_port(update({{"id", id}, {"fixed_ips", ips}})), "resource_exhausted",
                 "fixed_ips: 257 given");
  EXPECT_REFUSED(m.updated_port(update({{"id", id}, {"security_groups", groups}})),
                 "resource_exhausted", "security_groups: 65 given");
  EXPECT_TRUE(m.restore_port(port_with_addresses(2, 300, {"g0"}), m.local_vlan("net1")).ok());
}

}  // namespace
}  // namespace strait::ctl
