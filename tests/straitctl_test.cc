// straitctl without a switch: command lines to requests, replies to tables.
// The client's sources are compiled in here (straitctl is an executable, not
// a library, and links nothing of strait_control).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>
#include <vector>

#include "control/straitctl/cli.cc"     // NOLINT(bugprone-suspicious-include)
#include "control/straitctl/render.cc"  // NOLINT(bugprone-suspicious-include)

namespace strait::straitctl {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

struct Parsed {
  int rc;
  Invocation inv;
  std::string out, err;
};

Parsed parse(std::vector<std::string> args) {
  args.insert(args.begin(), "straitctl");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  Parsed p;
  std::ostringstream out, err;
  p.rc = parse_args(static_cast<int>(argv.size()), argv.data(), p.inv, out, err);
  p.out = out.str();
  p.err = err.str();
  return p;
}

class StraitctlArgs : public ::testing::Test {
 protected:
  void SetUp() override { unsetenv("STRAIT_SOCKET"); }
};

TEST_F(StraitctlArgs, NetworkCreate) {
  auto p = parse({"network", "create", "net1", "--type", "vlan", "--physnet", "physnet1",
                  "--segmentation-id", "100", "--mtu", "9000"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.method, "network.create");
  EXPECT_EQ(p.inv.params, json({{"id", "net1"},
                                {"type", "vlan"},
                                {"physnet", "physnet1"},
                                {"segmentation_id", 100},
                                {"mtu", 9000}}));
  EXPECT_EQ(p.inv.view, View::kNetworkRow);
  EXPECT_FALSE(p.inv.json_output);
  EXPECT_EQ(p.inv.socket, "/run/strait/api.sock");
}

TEST_F(StraitctlArgs, NetworkCreateSendsOnlyGivenOptions) {
  auto p = parse({"network", "create", "l1", "--type", "local"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.params, json({{"id", "l1"}, {"type", "local"}}));
}

TEST_F(StraitctlArgs, RangesAreTheSwitchsToCheck) {
  // Refused by the switch (exit 1, message naming the field), not here.
  auto p = parse(
      {"network", "create", "n", "--type", "vlan", "--physnet", "p", "--segmentation-id", "5000"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.params["segmentation_id"], 5000);
}

TEST_F(StraitctlArgs, NetworkDeleteAndList) {
  auto d = parse({"network", "delete", "net1"});
  ASSERT_EQ(d.rc, -1);
  EXPECT_EQ(d.inv.method, "network.delete");
  EXPECT_EQ(d.inv.params, json({{"id", "net1"}}));
  EXPECT_EQ(d.inv.view, View::kNothing);
  auto l = parse({"network", "list"});
  ASSERT_EQ(l.rc, -1);
  EXPECT_EQ(l.inv.method, "network.list");
  EXPECT_EQ(l.inv.params, json::object());
}

TEST_F(StraitctlArgs, PortBind) {
  auto p = parse({"port", "bind", "--ip", "10.0.0.1", "11111111-2222-3333-4444-555555555555",
                  "--network", "net1", "--mac", "02:00:00:00:00:01", "--ip", "2001:db8::1",
                  "--ethdev", "net_pcap0,rx_pcap=a.pcap"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.method, "port.bind");
  EXPECT_EQ(p.inv.params,
            json({{"id", "11111111-2222-3333-4444-555555555555"},
                  {"network", "net1"},
                  {"mac", "02:00:00:00:00:01"},
                  {"fixed_ips", {"10.0.0.1", "2001:db8::1"}},
                  {"attach", {{"type", "ethdev"}, {"devargs", "net_pcap0,rx_pcap=a.pcap"}}}}));
}

TEST_F(StraitctlArgs, PortBindVhost) {
  auto p = parse({"port", "bind", "u", "--network", "n", "--mac", "m", "--vhost", "/tmp/v.sock"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.params["attach"], json({{"type", "vhost"}, {"path", "/tmp/v.sock"}}));
  p = parse({"port", "bind", "u", "--network", "n", "--mac", "m", "--vhost", "/tmp/v.sock",
             "--vhost-mode", "server"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.params["attach"],
            json({{"type", "vhost"}, {"path", "/tmp/v.sock"}, {"mode", "server"}}));
}

TEST_F(StraitctlArgs, PortBindSubport) {
  auto p = parse({"port", "bind", "u", "--network", "n2", "--mac", "m", "--subport-of", "parent",
                  "--segmentation-id", "101"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.params["attach"],
            json({{"type", "subport"}, {"parent", "parent"}, {"segmentation_id", 101}}));
  // Both or neither; and no device besides.
  EXPECT_EQ(parse({"port", "bind", "u", "--network", "n", "--mac", "m", "--subport-of", "p"}).rc,
            kExitUsage);
  EXPECT_EQ(parse({"port", "bind", "u", "--network", "n", "--mac", "m", "--ethdev", "e",
                   "--segmentation-id", "5"})
                .rc,
            kExitUsage);
  EXPECT_EQ(parse({"port", "bind", "u", "--network", "n", "--mac", "m", "--vhost", "/v",
                   "--subport-of", "p", "--segmentation-id", "5"})
                .rc,
            kExitUsage);
  // Shown as subport:PARENT.VLAN; a parent lists its subports.
  std::string out = render_port_detail(json::parse(R"({"id": "s1",
      "attach": {"type": "subport", "parent": "p1", "segmentation_id": 101}})"));
  EXPECT_THAT(out, HasSubstr("subport:p1.101"));
  out = render_port_detail(json::parse(R"({"id": "p1", "attach": {"type": "vhost", "path": "/v"},
      "subports": [{"port": "s1", "segmentation_id": 101}, {"port": "s2", "segmentation_id": 102}]})"));
  EXPECT_THAT(out, HasSubstr("101:s1, 102:s2"));
}

TEST_F(StraitctlArgs, PortQosOptionsBecomeNeutronsRules) {
  auto p = parse({"port", "update", "u", "--bandwidth-limit", "egress:10000:1000",
                  "--bandwidth-limit", "ingress:5000", "--packet-rate-limit", "egress:100",
                  "--dscp-mark", "26"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.params["qos"],
            json::parse(R"([{"type": "bandwidth_limit", "direction": "egress", "max_kbps": 10000,
                             "max_burst_kbps": 1000},
                            {"type": "bandwidth_limit", "direction": "ingress", "max_kbps": 5000},
                            {"type": "packet_rate_limit", "direction": "egress", "max_kpps": 100},
                            {"type": "dscp_marking", "dscp_mark": 26}])"));
  p = parse({"port", "update", "u", "--no-qos"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.params["qos"], json::array());
  // A number that is none goes as given: the switch names the field.
  p = parse({"port", "update", "u", "--bandwidth-limit", "egress:lots"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.params["qos"][0]["max_kbps"], "lots");
  EXPECT_EQ(parse({"port", "update", "u", "--no-qos", "--dscp-mark", "26"}).rc, kExitUsage);
  EXPECT_THAT(render_port_detail(p.inv.params),
              HasSubstr("egress lots kbit/s"));
}

TEST_F(StraitctlArgs, PortBindNeedsExactlyOneDevice) {
  EXPECT_EQ(parse({"port", "bind", "u", "--network", "n", "--mac", "m"}).rc, kExitUsage);
  EXPECT_EQ(parse({"port", "bind", "u", "--network", "n", "--mac", "m", "--ethdev", "e", "--vhost",
                   "/tmp/v.sock"})
                .rc,
            kExitUsage);
  EXPECT_EQ(parse({"port", "bind", "u", "--network", "n", "--mac", "m", "--ethdev", "e",
                   "--vhost-mode", "server"})
                .rc,
            kExitUsage);
  EXPECT_EQ(parse({"port", "bind", "u", "--network", "n", "--mac", "m", "--vhost", "/v",
                   "--vhost-mode", "both"})
                .rc,
            kExitUsage);
}

TEST_F(StraitctlArgs, PortBindWithoutIps) {
  auto p = parse({"port", "bind", "u", "--network", "n", "--mac", "m", "--ethdev", "e"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_FALSE(p.inv.params.contains("fixed_ips"));
}

TEST_F(StraitctlArgs, PortUnbindListShow) {
  auto u = parse({"port", "unbind", "u1"});
  ASSERT_EQ(u.rc, -1);
  EXPECT_EQ(u.inv.method, "port.unbind");
  EXPECT_EQ(u.inv.params, json({{"id", "u1"}}));
  auto l = parse({"port", "list"});
  ASSERT_EQ(l.rc, -1);
  EXPECT_EQ(l.inv.method, "port.list");
  auto s = parse({"port", "show", "u1"});
  ASSERT_EQ(s.rc, -1);
  EXPECT_EQ(s.inv.method, "port.show");
  EXPECT_EQ(s.inv.view, View::kPortDetail);
}

TEST_F(StraitctlArgs, PortCaptureOnOrOff) {
  auto on = parse({"port", "capture", "u1", "--on"});
  ASSERT_EQ(on.rc, -1) << on.err;
  EXPECT_EQ(on.inv.method, "port.capture");
  EXPECT_EQ(on.inv.params, json({{"id", "u1"}, {"enabled", true}}));
  auto off = parse({"port", "capture", "u1", "--off"});
  ASSERT_EQ(off.rc, -1) << off.err;
  EXPECT_EQ(off.inv.params, json({{"id", "u1"}, {"enabled", false}}));
  EXPECT_EQ(parse({"port", "capture", "u1"}).rc, kExitUsage);
  EXPECT_EQ(parse({"port", "capture", "u1", "--on", "--off"}).rc, kExitUsage);
  EXPECT_EQ(parse({"port", "capture", "--on"}).rc, kExitUsage);
}

TEST_F(StraitctlArgs, ShowAndStats) {
  EXPECT_EQ(parse({"show"}).inv.method, "show");
  auto s = parse({"stats"});
  ASSERT_EQ(s.rc, -1);
  EXPECT_EQ(s.inv.method, "stats");
  EXPECT_EQ(s.inv.watch_seconds, 0);
  auto w = parse({"stats", "-w", "2"});
  ASSERT_EQ(w.rc, -1) << w.err;
  EXPECT_EQ(w.inv.watch_seconds, 2);
  EXPECT_EQ(parse({"stats", "--watch", "0.5"}).inv.watch_seconds, 0.5);
  EXPECT_EQ(parse({"stats", "--watch", "0"}).rc, kExitUsage);
}

TEST_F(StraitctlArgs, LogLevel) {
  auto get = parse({"log-level"});
  ASSERT_EQ(get.rc, -1) << get.err;
  EXPECT_EQ(get.inv.method, "log.level");
  EXPECT_EQ(get.inv.view, View::kLogLevel);
  EXPECT_EQ(get.inv.params, json::object());  // no level: only read it
  auto set = parse({"log-level", "debug"});
  ASSERT_EQ(set.rc, -1) << set.err;
  EXPECT_EQ(set.inv.params, (json{{"level", "debug"}}));
  auto bad = parse({"log-level", "chatty"});
  EXPECT_EQ(bad.rc, kExitUsage);
  EXPECT_THAT(bad.err, HasSubstr("chatty"));
}

TEST_F(StraitctlArgs, Call) {
  auto p = parse({"call", "port.show", R"({"id": "x", "n": [1, 2]})"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.method, "port.show");
  EXPECT_EQ(p.inv.params, json({{"id", "x"}, {"n", {1, 2}}}));
  EXPECT_EQ(p.inv.view, View::kRaw);
  auto bare = parse({"call", "network.list"});
  ASSERT_EQ(bare.rc, -1);
  EXPECT_EQ(bare.inv.params, json::object());
}

TEST_F(StraitctlArgs, CallParamsMustBeAJsonObject) {
  auto bad = parse({"call", "x", "{bad"});
  EXPECT_EQ(bad.rc, kExitUsage);
  EXPECT_THAT(bad.err, HasSubstr("not valid JSON"));
  EXPECT_EQ(parse({"call", "x", "[1]"}).rc, kExitUsage);
}

TEST_F(StraitctlArgs, GlobalOptionsBeforeOrAfterTheCommand) {
  auto before = parse({"-s", "/tmp/a.sock", "-o", "json", "network", "list"});
  ASSERT_EQ(before.rc, -1) << before.err;
  EXPECT_EQ(before.inv.socket, "/tmp/a.sock");
  EXPECT_TRUE(before.inv.json_output);
  auto after = parse({"port", "show", "u1", "--output", "json", "--socket", "/tmp/b.sock"});
  ASSERT_EQ(after.rc, -1) << after.err;
  EXPECT_EQ(after.inv.socket, "/tmp/b.sock");
  EXPECT_TRUE(after.inv.json_output);
}

TEST_F(StraitctlArgs, SocketFromEnvironment) {
  setenv("STRAIT_SOCKET", "/tmp/env.sock", 1);
  EXPECT_EQ(parse({"show"}).inv.socket, "/tmp/env.sock");
  EXPECT_EQ(parse({"-s", "/tmp/flag.sock", "show"}).inv.socket, "/tmp/flag.sock");
  unsetenv("STRAIT_SOCKET");
}

TEST_F(StraitctlArgs, Version) {
  auto p = parse({"--version"});
  EXPECT_EQ(p.rc, 0);
  EXPECT_THAT(p.out, HasSubstr("straitctl " STRAIT_VERSION));
}

TEST_F(StraitctlArgs, Help) {
  auto p = parse({"--help"});
  EXPECT_EQ(p.rc, 0);
  EXPECT_THAT(p.out, HasSubstr("network"));
}

TEST_F(StraitctlArgs, UsageErrorsExit2) {
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {},
           {"frobnicate"},
           {"network"},
           {"network", "create", "n"},               // --type missing
           {"network", "create", "--type", "vlan"},  // ID missing
           {"network", "create", "n", "--type", "vlan", "--segmentation-id", "abc"},
           {"port", "bind", "u", "--network", "n", "--mac", "m"},  // --ethdev missing
           {"port", "show"},
           {"port", "update", "u"},  // nothing to update
           {"port", "update", "u", "--security-group", "a", "--no-security-groups"},
           {"port", "update", "u", "--port-security", "--no-port-security"},
           {"port", "bind", "u", "--network", "n", "--mac", "m", "--ethdev", "e",
            "--no-security-groups"},  // only update clears lists
           {"security-group"},
           {"security-group", "create"},
           {"security-group", "rule", "create", "g"},  // --direction missing
           {"security-group", "rule", "create", "g", "--direction", "in"},
           {"security-group", "rule", "create", "g", "--direction", "ingress", "--remote-ip-prefix",
            "10.0.0.0/8", "--remote-group-id", "g"},
           {"security-group", "rule", "create", "g", "--direction", "ingress", "--port-range-min",
            "x"},
           {"security-group", "rule", "delete"},
           {"-o", "yaml", "show"},
           {"call"},
           {"show", "extra"}}) {
    auto p = parse(args);
    EXPECT_EQ(p.rc, kExitUsage) << ::testing::PrintToString(args);
    EXPECT_FALSE(p.err.empty()) << ::testing::PrintToString(args);
  }
}

TEST_F(StraitctlArgs, PortBindWithPortSecurity) {
  auto p = parse({"port", "bind", "u", "--network", "n", "--mac", "m", "--ethdev", "e",
                  "--security-group", "web", "--security-group", "ssh", "--allowed-address-pair",
                  "10.0.0.100", "--allowed-address-pair", "10.1.0.0/16,02:aa:00:00:00:09"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.params["security_groups"], json({"web", "ssh"}));
  EXPECT_EQ(p.inv.params["allowed_address_pairs"],
            json({{{"ip_address", "10.0.0.100"}},
                  {{"ip_address", "10.1.0.0/16"}, {"mac_address", "02:aa:00:00:00:09"}}}));
  EXPECT_FALSE(p.inv.params.contains("port_security_enabled")) << "the switch's default";
  p = parse(
      {"port", "bind", "u", "--network", "n", "--mac", "m", "--ethdev", "e", "--port-security"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.params["port_security_enabled"], true);
  EXPECT_FALSE(p.inv.params.contains("security_groups"));
  p = parse(
      {"port", "bind", "u", "--network", "n", "--mac", "m", "--ethdev", "e", "--no-port-security"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.params["port_security_enabled"], false);
}

TEST_F(StraitctlArgs, PortUpdate) {
  auto p = parse({"port", "update", "u1", "--security-group", "web", "--port-security"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.method, "port.update");
  EXPECT_EQ(p.inv.view, View::kPortDetail);
  EXPECT_EQ(p.inv.params,
            json({{"id", "u1"}, {"security_groups", {"web"}}, {"port_security_enabled", true}}));
  p = parse({"port", "update", "u1", "--no-security-groups", "--no-allowed-address-pairs",
             "--no-port-security"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.params, json({{"id", "u1"},
                                {"security_groups", json::array()},
                                {"allowed_address_pairs", json::array()},
                                {"port_security_enabled", false}}));
  p = parse({"port", "update", "u1", "--ip", "10.0.0.7", "--ip", "2001:db8::7",
             "--allowed-address-pair", "10.0.0.0/24,02:00:00:00:00:09"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.params,
            json({{"id", "u1"},
                  {"fixed_ips", {"10.0.0.7", "2001:db8::7"}},
                  {"allowed_address_pairs",
                   {{{"ip_address", "10.0.0.0/24"}, {"mac_address", "02:00:00:00:00:09"}}}}}));
  p = parse({"port", "update", "u1"});
  EXPECT_EQ(p.rc, kExitUsage);
  EXPECT_THAT(p.err, HasSubstr("nothing to update"));
}

TEST_F(StraitctlArgs, SecurityGroupCommands) {
  auto p = parse({"security-group", "create", "web", "--name", "Web servers"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.method, "security_group.create");
  EXPECT_EQ(p.inv.view, View::kGroupRow);
  EXPECT_EQ(p.inv.params, json({{"id", "web"}, {"name", "Web servers"}}));
  p = parse({"security-group", "create", "web"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.params, json({{"id", "web"}}));
  p = parse({"security-group", "delete", "web"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.method, "security_group.delete");
  EXPECT_EQ(p.inv.params, json({{"id", "web"}}));
  EXPECT_EQ(p.inv.view, View::kNothing);
  p = parse({"security-group", "list", "-o", "json"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.method, "security_group.list");
  EXPECT_EQ(p.inv.view, View::kGroups);
  EXPECT_TRUE(p.inv.json_output);
  p = parse({"security-group", "show", "web"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.method, "security_group.show");
  EXPECT_EQ(p.inv.view, View::kGroupDetail);
  EXPECT_EQ(p.inv.params, json({{"id", "web"}}));
}

TEST_F(StraitctlArgs, RuleCreateAndDelete) {
  auto p = parse({"security-group", "rule", "create", "web", "--direction", "ingress",
                  "--ethertype", "IPv6", "--protocol", "tcp", "--port-range-min", "80",
                  "--port-range-max", "443", "--remote-ip-prefix", "2001:db8::/32", "--id", "r1"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.method, "security_group_rule.create");
  EXPECT_EQ(p.inv.view, View::kRuleRow);
  EXPECT_EQ(p.inv.params, json({{"security_group_id", "web"},
                                {"id", "r1"},
                                {"direction", "ingress"},
                                {"ethertype", "IPv6"},
                                {"protocol", "tcp"},
                                {"port_range_min", 80},
                                {"port_range_max", 443},
                                {"remote_ip_prefix", "2001:db8::/32"}}));
  // Only what is given; a protocol number stays a number.
  p = parse({"security-group", "rule", "create", "web", "--direction", "egress", "--protocol",
             "132", "--remote-group-id", "db"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.params, json({{"security_group_id", "web"},
                                {"direction", "egress"},
                                {"protocol", 132},
                                {"remote_group_id", "db"}}));
  p = parse({"security-group", "rule", "delete", "r1"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.method, "security_group_rule.delete");
  EXPECT_EQ(p.inv.params, json({{"id", "r1"}}));
}

// ---- tables ------------------------------------------------------------------

TEST(StraitctlRender, GroupsTable) {
  json groups = json::parse(R"([
    {"id": "web", "name": "Web servers", "rules": [{}, {}], "ports": ["p1", "p2", "p3"]},
    {"id": "empty", "name": "", "rules": [], "ports": []},
    {"id": "old"}])");
  EXPECT_EQ(render_groups(groups),
            "ID     NAME         RULES  PORTS\n"
            "web    Web servers      2      3\n"
            "empty  -                0      0\n"
            "old    -                -      -\n");
}

TEST(StraitctlRender, RulesTable) {
  json rules = json::parse(R"([
    {"id": "r1", "direction": "ingress", "ethertype": "IPv4", "protocol": "tcp",
     "port_range_min": 22, "port_range_max": 22, "remote_ip_prefix": "10.0.0.0/8",
     "remote_group_id": null, "security_group_id": "web"},
    {"id": "r2", "direction": "ingress", "ethertype": "IPv4", "protocol": "udp",
     "port_range_min": 1000, "port_range_max": 2000, "remote_group_id": "db"},
    {"id": "r3", "direction": "egress", "ethertype": "IPv6", "protocol": null},
    {"id": "r4", "direction": "ingress", "ethertype": "IPv4", "protocol": "icmp",
     "port_range_min": 8, "port_range_max": 0}])");
  EXPECT_EQ(render_rules(rules),
            "ID  DIRECTION  ETHERTYPE  PROTOCOL  PORT RANGE     REMOTE\n"
            "r1  ingress    IPv4       tcp       22             10.0.0.0/8\n"
            "r2  ingress    IPv4       udp       1000-2000      group db\n"
            "r3  egress     IPv6       any       -              -\n"
            "r4  ingress    IPv4       icmp      type 8 code 0  -\n");
}

TEST(StraitctlRender, GroupDetail) {
  json g = json::parse(R"({"id": "web", "name": "Web", "ports": ["p1", "p2"],
    "rules": [{"id": "r1", "direction": "egress", "ethertype": "IPv4"}]})");
  EXPECT_EQ(render_group_detail(g),
            "id:     web\n"
            "name:   Web\n"
            "ports:  p1,p2\n"
            "\n"
            "Rules\n"
            "ID  DIRECTION  ETHERTYPE  PROTOCOL  PORT RANGE  REMOTE\n"
            "r1  egress     IPv4       any       -           -\n");
}

TEST(StraitctlRender, PortDetailWithPortSecurity) {
  std::string out = render_port_detail(json::parse(R"({"id": "p1",
    "security_groups": ["web", "ssh"], "port_security_enabled": true,
    "allowed_address_pairs": [{"ip_address": "10.0.0.100", "mac_address": "02:00:00:00:00:01"},
                              {"ip_address": "10.1.0.0/16"}]})"));
  EXPECT_THAT(out, HasSubstr("port_security:    true\n"));
  EXPECT_THAT(out, HasSubstr("security_groups:  web,ssh\n"));
  EXPECT_THAT(out, HasSubstr("address_pairs:    10.0.0.100 (02:00:00:00:00:01), 10.1.0.0/16\n"));
  out = render_port_detail(json::parse(R"({"id": "p1"})"));
  EXPECT_THAT(out, HasSubstr("security_groups:  -\n"));
  EXPECT_THAT(out, HasSubstr("address_pairs:    -\n"));
}

TEST(StraitctlRender, NetworksTableAlignsAndFillsMissing) {
  json nets = json::parse(R"([
    {"id": "net1", "type": "vlan", "physnet": "physnet1", "segmentation_id": 100, "mtu": 1500,
     "local_vlan": 1, "ports": 2, "future_field": {"x": 1}},
    {"id": "l", "type": "local", "physnet": null, "mtu": 9000}
  ])");
  EXPECT_EQ(render_networks(nets),
            "ID    TYPE   PHYSNET   SEG   MTU  LVLAN  PORTS\n"
            "net1  vlan   physnet1  100  1500      1      2\n"
            "l     local  -           -  9000      -      -\n");
}

TEST(StraitctlRender, EmptyListIsHeaderOnly) {
  EXPECT_EQ(render_networks(json::array()), "ID  TYPE  PHYSNET  SEG  MTU  LVLAN  PORTS\n");
  EXPECT_EQ(render_ports(json()), "ID  NETWORK  MAC  IPS  STATE  LINK  LVLAN  DOMAIN  ATTACH\n");
}

TEST(StraitctlRender, PortsTable) {
  json ports = json::parse(R"([{"id": "p1", "network": "n", "mac": "02:00:00:00:00:01",
    "fixed_ips": ["10.0.0.1", "2001:db8::1"], "attach": {"type": "ethdev", "devargs": "net_ring1"},
    "state": "up", "local_vlan": 3}])");
  EXPECT_EQ(render_ports(ports),
            "ID  NETWORK  MAC                IPS                   STATE  LINK  LVLAN  DOMAIN  ATTACH\n"
            "p1  n        02:00:00:00:00:01  10.0.0.1,2001:db8::1  up     -         3  -       net_ring1\n");
}

// Issue #23: an ethdev port forwarding with its link down read as plain
// "up", and a port's instance and vhost device were only in -o json.
TEST(StraitctlRender, PortsTableShowsLinkAndDomain) {
  json ports = json::parse(R"([
    {"id": "e", "state": "up", "link": "down", "attach": {"type": "ethdev", "devargs": "net_tap0"},
     "rx_queues": 2, "tx_queues": 2, "domain": null},
    {"id": "v", "state": "up", "link": "up", "attach": {"type": "vhost", "path": "/run/v.sock"},
     "vhost": {"vid": 0, "queues": 1, "attached": true},
     "domain": {"uuid": "6f1d0000-0000-4000-8000-000000000001", "name": "vm1", "state": "running"}},
    {"id": "w", "state": "down", "link": null, "attach": {"type": "vhost", "path": "/run/w.sock"},
     "domain": {"uuid": "6f1d0000-0000-4000-8000-000000000002", "name": "", "state": "stopped"}}])");
  EXPECT_EQ(render_ports(ports),
            "ID  NETWORK  MAC  IPS  STATE  LINK  LVLAN  DOMAIN                                         ATTACH\n"
            "e   -        -    -    up     down  -      -                                              net_tap0\n"
            "v   -        -    -    up     up    -      vm1(running)                                   vhost:/run/v.sock\n"
            "w   -        -    -    down   -     -      6f1d0000-0000-4000-8000-000000000002(stopped)  vhost:/run/w.sock\n");
}

TEST(StraitctlRender, PortDetailShowsLinkQueuesVhostAndDomain) {
  std::string out = render_port_detail(json::parse(R"({"id": "e", "link": "down",
    "attach": {"type": "ethdev", "devargs": "net_tap0"}, "ethdev": 3, "rx_queues": 2,
    "tx_queues": 4, "vhost": null, "domain": null})"));
  EXPECT_THAT(out, HasSubstr("link:             down\n"));
  EXPECT_THAT(out, HasSubstr("queues:           2 rx, 4 tx\n"));
  EXPECT_THAT(out, HasSubstr("vhost:            -\n"));
  EXPECT_THAT(out, HasSubstr("domain:           -\n"));
  out = render_port_detail(json::parse(R"({"id": "v", "link": "up",
    "vhost": {"vid": 5, "queues": 2, "attached": true},
    "domain": {"uuid": "6f1d0000-0000-4000-8000-000000000001", "name": "vm1", "state": "paused"}})"));
  EXPECT_THAT(out, HasSubstr("vhost:            device 5, 2 queue pair(s)\n"));
  EXPECT_THAT(out, HasSubstr("domain:           vm1 6f1d0000-0000-4000-8000-000000000001 paused\n"));
  EXPECT_THAT(out, HasSubstr("queues:           -\n"));
  out = render_port_detail(json::parse(R"({"id": "v", "vhost": {"vid": -1, "queues": 0, "attached": true}})"));
  EXPECT_THAT(out, HasSubstr("vhost:            no device (no guest driver)\n"));
  out = render_port_detail(json::parse(R"({"id": "v", "vhost": {"vid": -1, "queues": 0, "attached": false}})"));
  EXPECT_THAT(out, HasSubstr("vhost:            detached (its instance's interface is gone)\n"));
}

TEST(StraitctlRender, VhostAttachment) {
  json ports = json::parse(R"([
    {"id": "a", "attach": {"type": "vhost", "path": "/run/vhu-a.sock", "mode": "client"}},
    {"id": "b", "attach": {"type": "vhost", "path": "/run/vhu-b.sock", "mode": "server"}}])");
  std::string out = render_ports(ports);
  EXPECT_THAT(out, HasSubstr("  vhost:/run/vhu-a.sock\n"));
  EXPECT_THAT(out, HasSubstr("  vhost:/run/vhu-b.sock(server)\n"));
}

TEST(StraitctlRender, CapturedVhostPortShowsItsStandIn) {
  json ports = json::parse(R"([
    {"id": "a", "attach": {"type": "vhost", "path": "/run/vhu-a.sock", "mode": "client"},
     "capture": {"ethdev": "net_null_a", "ethdev_id": 3}},
    {"id": "b", "attach": {"type": "vhost", "path": "/run/vhu-b.sock"}, "capture": null}])");
  std::string out = render_ports(ports);
  EXPECT_THAT(out, HasSubstr("  vhost:/run/vhu-a.sock capture:net_null_a\n"));
  EXPECT_THAT(out, HasSubstr("  vhost:/run/vhu-b.sock\n"));
  EXPECT_THAT(render_port_detail(ports[0]), HasSubstr("capture:          net_null_a\n"));
  EXPECT_THAT(render_port_detail(ports[1]), HasSubstr("capture:          -\n"));
}

TEST(StraitctlRender, AddressesAreNotNumbers) {
  json ports = json::parse(R"([{"id": "a", "fixed_ips": ["10.0.0.1"]}, {"id": "b"}])");
  EXPECT_EQ(render_ports(ports),
            "ID  NETWORK  MAC  IPS       STATE  LINK  LVLAN  DOMAIN  ATTACH\n"
            "a   -        -    10.0.0.1  -      -     -      -       -\n"
            "b   -        -    -         -      -     -      -       -\n");
}

TEST(StraitctlRender, PortDetail) {
  std::string out = render_port_detail(json::parse(R"({"id": "p1", "dp_port": 4})"));
  EXPECT_THAT(out, HasSubstr("id:               p1\n"));
  EXPECT_THAT(out, HasSubstr("dp_port:          4\n"));
  EXPECT_THAT(out, HasSubstr("state:            -\n"));
}

TEST(StraitctlRender, ShowSections) {
  json show = json::parse(R"({"version": "0.1.0", "generation": 7,
    "workers": [{"id": 0, "lcore": 1, "rx_queues": [{"port": 0, "queue": 0}, {"port": 2, "queue": 1}]}],
    "physnets": [{"name": "physnet1", "device": "net_ring0", "dp_port": 0, "ethdev": 0, "state": "up"}],
    "networks": [], "ports": []})");
  std::string out = render_show(show);
  EXPECT_THAT(out, HasSubstr("generation  7\n"));
  EXPECT_THAT(out, HasSubstr("Workers\nWORKER  LCORE  RX QUEUES\n     0      1  0:0 2:1\n"));
  EXPECT_THAT(out, HasSubstr("Physnets\nNAME      DEVICE     DP_PORT  ETHDEV  RXQ  TXQ  STATE  LINK\n"));
  EXPECT_THAT(out, HasSubstr("Networks\nID  TYPE"));
  EXPECT_THAT(out, HasSubstr("Ports\nID  NETWORK"));
}

TEST(StraitctlRender, ShowSaysLibvirtAndEachPhysnetsLinkAndQueues) {
  json show = json::parse(R"({"version": "0.1.0", "generation": 7,
    "physnets": [{"name": "physnet1", "device": "net_tap0", "dp_port": 0, "ethdev": 0,
                  "rx_queues": 2, "tx_queues": 2, "state": "up", "link": "down"}],
    "libvirt": {"uri": "qemu:///system", "connected": true, "read_only": false}})");
  std::string out = render_show(show);
  EXPECT_THAT(out, HasSubstr("libvirt     qemu:///system, connected\n"));
  EXPECT_THAT(out, HasSubstr("\nphysnet1  net_tap0        0       0    2    2  up     down\n"));
  show["libvirt"] = json::parse(R"({"uri": "qemu:///system", "connected": false,
    "read_only": false, "last_error": "Failed to connect socket", "next_retry_s": 2.5})");
  EXPECT_THAT(render_show(show),
              HasSubstr("libvirt     qemu:///system, not connected (Failed to connect socket; "
                        "next try in 2.5 s)\n"));
  show["libvirt"] = {{"enabled", false}};
  EXPECT_THAT(render_show(show), HasSubstr("libvirt     disabled\n"));
}

TEST(StraitctlRender, ShowSaysWhereDesiredStateComesFrom) {
  json show = json::parse(R"({"version": "0.1.0", "generation": 7,
    "etcd": {"prefix": "/strait", "host": "compute-1", "watching": true, "revision": 42,
             "intake": {"ports_applied": 3, "refused_ports": {"p9": "not JSON"}}}})");
  EXPECT_THAT(render_show(show),
              HasSubstr("etcd        /strait as compute-1, watching (revision 42), 3 port(s), 1 "
                        "refused (-o json: etcd.intake.refused_ports)\n"));
  show["etcd"]["watching"] = false;
  show["etcd"]["last_error"] = "etcd: no endpoint answered";
  EXPECT_THAT(render_show(show),
              HasSubstr("/strait as compute-1, not reachable (etcd: no endpoint answered), 3 port(s)"));
  show.erase("etcd");
  EXPECT_THAT(render_show(show), Not(HasSubstr("etcd")));
}

TEST(StraitctlRender, StatsTables) {
  json stats = json::parse(R"({"generation": 3,
    "ports": [{"id": "p1", "rx_packets": 10, "rx_bytes": 640, "tx_packets": 9, "tx_bytes": 576,
               "drops": {"a": 2, "b": 3}}],
    "workers": [{"id": 0, "lcore": 1, "packets": 19, "busy_cycles": 1, "idle_cycles": 3,
                 "cache_hits": 9, "cache_misses": 1}],
    "drops": {"small": 1, "big": 7, "also_big": 7}})");
  std::string out = render_stats(stats);
  EXPECT_THAT(out, HasSubstr("PORT  RX_PACKETS  RX_BYTES  TX_PACKETS  TX_BYTES  DROPS\n"
                             "p1            10       640           9       576      5\n"));
  EXPECT_THAT(out, HasSubstr("WORKER  LCORE  PACKETS  CACHE_HIT   BUSY  DROPS\n"
                             "     0      1       19      90.0%  25.0%      0\n"));
  EXPECT_THAT(out, HasSubstr("DROP REASON  PACKETS\n"
                             "also_big           7\n"
                             "big                7\n"
                             "small              1\n"));
}

TEST(StraitctlRender, StatsConntrack) {
  json stats = json::parse(R"({"conntrack": {"capacity": 1024, "entries": 256, "created": 300,
    "reopened": 4, "refused_full": 2, "invalid": 1, "expired": 44, "flushed": 0,
    "new_per_s": 12.25}})");
  EXPECT_THAT(render_stats(stats),
              HasSubstr("Conntrack\n"
                        "ENTRIES  CAPACITY   USED  NEW/S  CREATED  REFUSED_FULL  INVALID  EXPIRED\n"
                        "    256      1024  25.0%   12.2      300             2        1       44\n"));
  // An older straitd without the rate; none without a table at all.
  stats["conntrack"].erase("new_per_s");
  EXPECT_THAT(render_stats(stats), HasSubstr("  25.0%  -          300"));
  EXPECT_THAT(render_stats(json::object()), Not(HasSubstr("Conntrack")));
}

TEST(StraitctlRender, StatsRatesFromPreviousSample) {
  json before = json::parse(R"({"ports": [{"id": "p1", "rx_packets": 100, "tx_packets": 0}],
                               "workers": [{"id": 0, "packets": 100}]})");
  json now = json::parse(R"({"ports": [{"id": "p1", "rx_packets": 300, "tx_packets": 50},
                                       {"id": "p2", "rx_packets": 1}],
                            "workers": [{"id": 0, "packets": 500}]})");
  std::string out = render_stats(now, before, 2.0);
  EXPECT_THAT(out, HasSubstr("RX_PPS  TX_PPS\n"));
  EXPECT_THAT(out, HasSubstr("     100      25\n"));  // p1
  EXPECT_THAT(out, HasSubstr("       -       -\n"));  // p2: new since the last sample
  EXPECT_THAT(out, HasSubstr("  200\n"));             // worker 0
}

TEST(StraitctlRender, CellFormats) {
  json o = {{"s", "x"},           {"e", ""},       {"n", 5}, {"b", true}, {"l", {"a", 1}},
            {"z", json::array()}, {"nul", nullptr}};
  EXPECT_EQ(cell(o, "s"), "x");
  EXPECT_EQ(cell(o, "e"), "-");
  EXPECT_EQ(cell(o, "n"), "5");
  EXPECT_EQ(cell(o, "b"), "true");
  EXPECT_EQ(cell(o, "l"), "a,1");
  EXPECT_EQ(cell(o, "z"), "-");
  EXPECT_EQ(cell(o, "nul"), "-");
  EXPECT_EQ(cell(o, "missing"), "-");
  EXPECT_EQ(cell(json("not an object"), "x"), "-");
}

// ---- trace, cache dump ------------------------------------------------------

TEST_F(StraitctlArgs, TraceWithFields) {
  auto p = parse({"trace", "u1", "--dst", "02:00:00:00:00:0b", "--vlan", "100", "--ip-dst",
                  "10.0.0.2", "--proto", "tcp", "--dport", "22", "-o", "json"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.method, "trace");
  EXPECT_EQ(p.inv.view, View::kTrace);
  EXPECT_TRUE(p.inv.json_output);
  EXPECT_EQ(p.inv.params, json({{"port", "u1"},
                                {"frame",
                                 {{"dst", "02:00:00:00:00:0b"},
                                  {"vlan", 100},
                                  {"ip_dst", "10.0.0.2"},
                                  {"proto", "tcp"},
                                  {"dport", 22}}}}));
  // A protocol number goes as a number; no fields at all: an empty object.
  EXPECT_EQ(parse({"trace", "u1", "--proto", "47"}).inv.params["frame"]["proto"], 47);
  EXPECT_EQ(parse({"trace", "physnet:p"}).inv.params,
            json({{"port", "physnet:p"}, {"frame", json::object()}}));
}

TEST_F(StraitctlArgs, TraceWithHexFrameExcludesFields) {
  auto p = parse({"trace", "u1", "--frame", "ffffffffffff020000000001"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.params, json({{"port", "u1"}, {"frame", "ffffffffffff020000000001"}}));
  EXPECT_EQ(parse({"trace", "u1", "--frame", "00", "--dst", "02:00:00:00:00:01"}).rc, kExitUsage);
  EXPECT_EQ(parse({"trace"}).rc, kExitUsage);
  EXPECT_EQ(parse({"trace", "u1", "--vlan", "x"}).rc, kExitUsage);
}

TEST_F(StraitctlArgs, CacheDump) {
  auto all = parse({"cache", "dump"});
  ASSERT_EQ(all.rc, -1) << all.err;
  EXPECT_EQ(all.inv.method, "cache.dump");
  EXPECT_EQ(all.inv.view, View::kCacheDump);
  EXPECT_EQ(all.inv.params, json::object());
  EXPECT_EQ(parse({"cache", "dump", "--worker", "2"}).inv.params, json({{"worker", 2}}));
  EXPECT_EQ(parse({"cache"}).rc, kExitUsage);
}

TEST_F(StraitctlArgs, WorkersRebalance) {
  auto r = parse({"workers", "rebalance"});
  ASSERT_EQ(r.rc, -1) << r.err;
  EXPECT_EQ(r.inv.method, "workers.rebalance");
  EXPECT_EQ(r.inv.params, json({{"dry_run", false}}));
  EXPECT_EQ(parse({"workers", "rebalance", "--dry-run"}).inv.params, json({{"dry_run", true}}));
  EXPECT_EQ(parse({"workers"}).rc, kExitUsage);
  EXPECT_EQ(parse({"workers", "rebalance", "now"}).rc, kExitUsage);
}

TEST(StraitctlRender, TraceStepsVerdictAndOutputs) {
  json t = json::parse(R"J({"generation": 5, "in_port": {"dp_port": 1, "name": "u1"},
    "frame": {"length": 60, "hex": "00"},
    "steps": [
      {"step": "parse", "detail": "well-formed",
       "key": {"in_port": 1, "dl_src": "02:00:00:00:00:0a", "dl_dst": "ff:ff:ff:ff:ff:ff",
               "dl_type": "0x0806", "n_tags": 0, "arp_op": 1}},
      {"step": "in_port", "detail": "access port (a VM's NIC)", "port": {"dp_port": 1, "name": "u1"}},
      {"step": "flood", "detail": "to every port",
       "targets": [{"dp_port": 2, "name": "u2", "vlan": null, "up": true},
                   {"dp_port": 0, "name": "physnet:p", "vlan": 100, "up": true}]}],
    "verdict": "flood", "drop_reason": null, "actions": [
      {"dp_port": 2, "name": "u2", "vlan": null, "up": true},
      {"dp_port": 0, "name": "physnet:p", "vlan": 100, "up": false}],
    "learn": false, "consistent": true})J");
  std::string out = render_trace(t);
  EXPECT_THAT(out, HasSubstr("trace: 60-byte frame from u1, snapshot generation 5"));
  EXPECT_THAT(out, HasSubstr(" 1. parse    well-formed\n"));
  EXPECT_THAT(out, HasSubstr("in_port=1 dl_src=02:00:00:00:00:0a dl_dst=ff:ff:ff:ff:ff:ff "
                             "dl_type=0x0806 arp_op=1\n"));
  EXPECT_THAT(out, HasSubstr(" 3. flood    to every port\n"));
  EXPECT_THAT(out, HasSubstr("-> physnet:p (100)\n"));
  EXPECT_THAT(out, HasSubstr("verdict: flood\n"));
  EXPECT_THAT(out, HasSubstr("OUTPUT     DP_PORT  VLAN      STATE\n"
                             "u2               2  untagged  up\n"
                             "physnet:p        0  100       down (dropped at tx)\n"));
}

TEST(StraitctlRender, TraceDrop) {
  json t = json::parse(R"J({"in_port": {"dp_port": 0, "name": "physnet:p"},
    "steps": [{"step": "ingress_vlan", "detail": "VLAN 101 is no network of this physnet",
               "drop_reason": "unknown_vlan", "vlan": 101}],
    "verdict": "drop", "drop_reason": "unknown_vlan",
    "drop_help": "VLAN id of no network on this physnet", "actions": []})J");
  std::string out = render_trace(t);
  EXPECT_THAT(out, HasSubstr("DROP: unknown_vlan\n"));
  EXPECT_THAT(out,
              HasSubstr("verdict: drop (unknown_vlan: VLAN id of no network on this physnet)\n"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("OUTPUT")));
}

TEST(StraitctlRender, CacheDumpTable) {
  json d = json::parse(R"J({"workers": [{"worker": 0, "generation": 4, "capacity": 4096,
    "live": 2, "truncated": false, "entries": [
      {"key": {"in_port": 1, "dl_src": "02:00:00:00:00:0a", "dl_dst": "02:00:00:00:00:0b",
               "dl_type": "0x0800", "nw_src": "10.0.0.1", "nw_dst": "10.0.0.2", "nw_proto": 17},
       "scope": "l2", "in_port": {"dp_port": 1, "name": "u1"},
       "action": {"kind": "output", "port": {"dp_port": 2, "name": "u2"}, "vlan": null}},
      {"key": {"in_port": 0, "dl_src": "02:00:00:00:99:01", "dl_dst": "ff:ff:ff:ff:ff:ff",
               "dl_type": "0x0806", "vlan": {"vid": 100, "pcp": 0, "tpid": "0x8100"}},
       "scope": "l2", "in_port": {"dp_port": 0, "name": "physnet:p"},
       "action": {"kind": "flood", "local_vlan": 1, "learn": true}}]}]})J");
  std::string out = render_cache_dump(d);
  EXPECT_THAT(out, HasSubstr("worker 0: 2 live entries of 4096, generation 4\n"));
  EXPECT_THAT(out, HasSubstr("IN_PORT    DL_SRC             DL_DST             VLAN  DL_TYPE  "
                             "L3/L4  SCOPE  ACTION\n"));
  EXPECT_THAT(out, HasSubstr("output:u2 untagged\n"));
  EXPECT_THAT(out, HasSubstr("physnet:p  02:00:00:00:99:01  ff:ff:ff:ff:ff:ff   100  0x0806"));
  EXPECT_THAT(out, HasSubstr("flood lvlan 1, learn\n"));
}

TEST_F(StraitctlArgs, NetworkCreateVxlan) {
  auto p = parse({"network", "create", "vx", "--type", "vxlan", "--segmentation-id", "5001"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.params, json({{"id", "vx"}, {"type", "vxlan"}, {"segmentation_id", 5001}}));
}

TEST_F(StraitctlArgs, TunnelCommands) {
  auto p = parse({"tunnel", "fdb", "add", "vx", "02:00:00:00:01:01", "10.99.0.2"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.method, "tunnel.fdb.add");
  EXPECT_EQ(p.inv.view, View::kNothing);
  EXPECT_EQ(p.inv.params,
            json::parse(R"({"network": "vx",
                            "entries": [{"mac": "02:00:00:00:01:01", "vtep": "10.99.0.2"}]})"));
  // The remote port's address, for the ARP responder.
  p = parse({"tunnel", "fdb", "add", "vx", "02:00:00:00:01:01", "10.99.0.2", "--ip", "10.0.0.5"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.params,
            json::parse(R"({"network": "vx", "entries": [{"mac": "02:00:00:00:01:01",
                            "vtep": "10.99.0.2", "ip": "10.0.0.5"}]})"));
  p = parse({"network", "create", "vx", "--type", "vxlan", "--segmentation-id", "5001",
             "--no-arp-responder"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.params, json({{"id", "vx"}, {"type", "vxlan"}, {"segmentation_id", 5001},
                                {"arp_responder", false}}));
  p = parse({"tunnel", "fdb", "delete", "vx", "02:00:00:00:01:01"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.method, "tunnel.fdb.delete");
  EXPECT_EQ(p.inv.params,
            json::parse(R"({"network": "vx", "entries": [{"mac": "02:00:00:00:01:01"}]})"));
  p = parse({"tunnel", "flood", "set", "vx", "10.99.0.2", "10.99.0.3"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.method, "tunnel.flood.set");
  EXPECT_EQ(p.inv.params, json::parse(R"({"network": "vx", "vteps": ["10.99.0.2", "10.99.0.3"]})"));
  p = parse({"tunnel", "flood", "set", "vx"});  // clears
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.params, json::parse(R"({"network": "vx", "vteps": []})"));
  p = parse({"tunnel", "show"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.method, "tunnel.show");
  EXPECT_EQ(p.inv.view, View::kTunnel);
  EXPECT_EQ(p.inv.params, json::object());
  p = parse({"tunnel", "show", "vx", "-o", "json"});
  ASSERT_EQ(p.rc, -1) << p.err;
  EXPECT_EQ(p.inv.params, json({{"network", "vx"}}));
  EXPECT_TRUE(p.inv.json_output);
  EXPECT_EQ(parse({"tunnel", "fdb", "add", "vx", "02:00:00:00:01:01"}).rc, kExitUsage);
  EXPECT_EQ(parse({"tunnel", "fdb"}).rc, kExitUsage);
}

TEST(StraitctlRender, Tunnel) {
  json t = json::parse(R"({
    "vtep": {"local_ip": "10.99.0.1", "physnet": "underlay", "udp_port": 4789, "ttl": 64,
             "next_hop": null, "learning": false, "mac": "02:00:00:00:99:01"},
    "remote_vteps": [{"ip": "10.99.0.2", "next_hop": "10.99.0.2", "resolved": true,
                      "mac": "02:00:00:00:99:02"},
                     {"ip": "10.99.0.3", "next_hop": "10.99.0.3", "resolved": false, "mac": null}],
    "networks": [{"id": "vx", "vni": 5001, "local_vlan": 1, "arp_responder": true,
                  "fdb": [{"mac": "02:00:00:00:01:01", "vtep": "10.99.0.2", "ip": "10.0.0.5",
                           "learned": false},
                          {"mac": "02:00:00:00:01:02", "vtep": "10.99.0.2", "ip": null,
                           "learned": true}],
                  "flood": ["10.99.0.2", "10.99.0.3"]}]})");
  const std::string out = render_tunnel(t);
  EXPECT_THAT(out, HasSubstr("local_ip:  10.99.0.1\n"));
  EXPECT_THAT(out, HasSubstr("next_hop:  -\n"));
  EXPECT_THAT(out, HasSubstr("Remote VTEPs\n"
                             "VTEP       NEXT_HOP   RESOLVED  MAC\n"
                             "10.99.0.2  10.99.0.2  true      02:00:00:00:99:02\n"
                             "10.99.0.3  10.99.0.3  false     -\n"));
  EXPECT_THAT(out, HasSubstr("NETWORK   VNI  LVLAN  ARP_RESPONDER  FLOOD\n"
                             "vx       5001      1  true           10.99.0.2,10.99.0.3\n"));
  EXPECT_THAT(out, HasSubstr("vx       02:00:00:00:01:01  10.99.0.2  10.0.0.5  false\n"));
  EXPECT_THAT(out, HasSubstr("vx       02:00:00:00:01:02  10.99.0.2  -         true\n"));
  EXPECT_EQ(render_tunnel(json::parse(R"({"vtep": null, "remote_vteps": [], "networks": []})")),
            "no VTEP configured ([vtep] in straitd's config)\n");
}

}  // namespace
}  // namespace strait::straitctl
