// The desired-state model: field validation of API params (parse_network,
// parse_port) and the relational rules of Model. Every refusal is checked to
// change nothing, by comparing the whole model before and after.
#include "control/model/model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "tests/expect_refused.h"
#include "tests/model_dump.h"

namespace strait::ctl {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using test::dump;

constexpr const char* kUuidA = "11111111-2222-3333-4444-555555555555";
constexpr const char* kUuidB = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
constexpr const char* kUuidC = "01234567-89ab-cdef-0123-456789abcdef";

// ---- helpers -------------------------------------------------------------

std::string uuid_n(unsigned n) {
  char buf[37];
  std::snprintf(buf, sizeof buf, "00000000-0000-0000-0000-%012x", n);
  return buf;
}

json vlan_json(const std::string& id = "net1", int seg = 100) {
  return {{"id", id}, {"type", "vlan"}, {"physnet", "physnet1"}, {"segmentation_id", seg}};
}

json port_json(const std::string& id = kUuidA, const std::string& net = "net1",
               const std::string& mac = "02:00:00:00:00:01", json ips = json::array(),
               const std::string& devargs = "net_ring1") {
  return {{"id", id},
          {"network", net},
          {"mac", mac},
          {"fixed_ips", ips},
          {"attach", {{"type", "ethdev"}, {"devargs", devargs}}}};
}

NetworkSpec net_spec(const json& j) {
  auto r = parse_network(j);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? r.value() : NetworkSpec{};
}

PortSpec port_spec(const json& j) {
  auto r = parse_port(j);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? r.value() : PortSpec{};
}

PortSpec port_n(unsigned n, const std::string& net) {
  char mac[18];
  std::snprintf(mac, sizeof mac, "02:00:00:00:%02x:%02x", (n >> 8) & 0xff, n & 0xff);
  return port_spec(port_json(uuid_n(n), net, mac, json::array(), "net_null" + std::to_string(n)));
}


// ---- parse_network ---------------------------------------------------------

TEST(ParseNetwork, VlanWithAllFields) {
  auto r = parse_network({{"id", "net1"},
                          {"type", "vlan"},
                          {"physnet", "physnet1"},
                          {"segmentation_id", 100},
                          {"mtu", 9000}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->id, "net1");
  EXPECT_EQ(r->type, dp::NetType::kVlan);
  EXPECT_EQ(r->physnet, "physnet1");
  EXPECT_EQ(r->seg_id, 100);
  EXPECT_EQ(r->mtu, 9000);
}

TEST(ParseNetwork, FlatAndLocalDefaultMtu) {
  auto flat = parse_network({{"id", "f"}, {"type", "flat"}, {"physnet", "physnet1"}});
  ASSERT_TRUE(flat.ok()) << flat.error().message;
  EXPECT_EQ(flat->type, dp::NetType::kFlat);
  EXPECT_EQ(flat->seg_id, 0);
  EXPECT_EQ(flat->mtu, 1500);
  auto local = parse_network({{"id", "l"}, {"type", "local"}});
  ASSERT_TRUE(local.ok()) << local.error().message;
  EXPECT_EQ(local->type, dp::NetType::kLocal);
  EXPECT_EQ(local->physnet, "");
  EXPECT_EQ(local->mtu, 1500);
}

TEST(ParseNetwork, IdAcceptsUuidAndNames) {
  for (const char* id : {kUuidA, "a", "Net_1.b:c-d", "0"}) {
    EXPECT_TRUE(parse_network({{"id", id}, {"type", "local"}}).ok()) << id;
  }
  EXPECT_TRUE(parse_network({{"id", std::string(64, 'x')}, {"type", "local"}}).ok());
}

TEST(ParseNetwork, IdMissing) {
  EXPECT_REFUSED(parse_network({{"type", "local"}}), "invalid_argument", "id: missing");
}

TEST(ParseNetwork, IdWrongType) {
  EXPECT_REFUSED(parse_network({{"id", 7}, {"type", "local"}}), "invalid_argument",
                 "id: expected a string");
}

TEST(ParseNetwork, IdBadSyntax) {
  for (std::string id : std::vector<std::string>{"", "-net", "_net", "a b", "net/1", "net\n",
                                                 std::string(65, 'x')}) {
    EXPECT_REFUSED(parse_network({{"id", id}, {"type", "local"}}), "invalid_argument", "id: ");
  }
}

TEST(ParseNetwork, TypeMissing) {
  EXPECT_REFUSED(parse_network({{"id", "n"}}), "invalid_argument", "type: missing");
}

TEST(ParseNetwork, TypeUnknown) {
  EXPECT_REFUSED(parse_network({{"id", "n"}, {"type", "gre"}}), "invalid_argument",
                 "type: \"gre\" is not one of vlan, vxlan, flat, local");
}

TEST(ParseNetwork, TypeWrongJsonType) {
  EXPECT_REFUSED(parse_network({{"id", "n"}, {"type", 1}}), "invalid_argument",
                 "type: expected a string");
}

TEST(ParseNetwork, PhysnetRequiredForVlanAndFlat) {
  EXPECT_REFUSED(parse_network({{"id", "n"}, {"type", "vlan"}, {"segmentation_id", 5}}),
                 "invalid_argument", "physnet: missing");
  EXPECT_REFUSED(parse_network({{"id", "n"}, {"type", "flat"}}), "invalid_argument",
                 "physnet: missing");
}

TEST(ParseNetwork, PhysnetForbiddenForLocal) {
  EXPECT_REFUSED(parse_network({{"id", "n"}, {"type", "local"}, {"physnet", "physnet1"}}),
                 "invalid_argument", "physnet: not allowed for a local network");
}

TEST(ParseNetwork, PhysnetWrongTypeOrName) {
  EXPECT_REFUSED(parse_network({{"id", "n"}, {"type", "flat"}, {"physnet", 3}}), "invalid_argument",
                 "physnet: expected a string");
  EXPECT_REFUSED(parse_network({{"id", "n"}, {"type", "flat"}, {"physnet", "a b"}}),
                 "invalid_argument", "physnet: ");
}

TEST(ParseNetwork, SegmentationIdRequiredForVlan) {
  EXPECT_REFUSED(parse_network({{"id", "n"}, {"type", "vlan"}, {"physnet", "p"}}),
                 "invalid_argument", "segmentation_id: missing");
}

TEST(ParseNetwork, SegmentationIdOutOfRange) {
  EXPECT_REFUSED(parse_network(vlan_json("n", 5000)), "invalid_argument",
                 "segmentation_id: 5000 is outside 1..4094");
  EXPECT_REFUSED(parse_network(vlan_json("n", 0)), "invalid_argument",
                 "segmentation_id: 0 is outside 1..4094");
  EXPECT_REFUSED(parse_network(vlan_json("n", 4095)), "invalid_argument", "4095 is outside");
  EXPECT_REFUSED(parse_network(vlan_json("n", -1)), "invalid_argument", "-1 is outside");
  json huge = vlan_json("n");
  huge["segmentation_id"] = uint64_t{1} << 63;
  EXPECT_REFUSED(parse_network(huge), "invalid_argument", "is outside 1..4094");
  EXPECT_TRUE(parse_network(vlan_json("n", 1)).ok());
  EXPECT_TRUE(parse_network(vlan_json("n", 4094)).ok());
}

TEST(ParseNetwork, SegmentationIdMustBeInteger) {
  for (json v : {json("100"), json(100.5), json(100.0), json(true)}) {
    json j = vlan_json();
    j["segmentation_id"] = v;
    EXPECT_REFUSED(parse_network(j), "invalid_argument", "segmentation_id: expected an integer");
  }
}

TEST(ParseNetwork, SegmentationIdForbiddenForFlatAndLocal) {
  EXPECT_REFUSED(
      parse_network({{"id", "n"}, {"type", "flat"}, {"physnet", "p"}, {"segmentation_id", 5}}),
      "invalid_argument", "segmentation_id: not allowed for a flat network");
  EXPECT_REFUSED(parse_network({{"id", "n"}, {"type", "local"}, {"segmentation_id", 5}}),
                 "invalid_argument", "segmentation_id: not allowed for a local network");
}

TEST(ParseNetwork, MtuRange) {
  for (int mtu : {67, 9001, 0, -1500}) {
    json j = vlan_json();
    j["mtu"] = mtu;
    EXPECT_REFUSED(parse_network(j), "invalid_argument",
                   "mtu: " + std::to_string(mtu) + " is outside 68..9000");
  }
  for (int mtu : {68, 9000}) {
    json j = vlan_json();
    j["mtu"] = mtu;
    auto r = parse_network(j);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->mtu, mtu);
  }
}

TEST(ParseNetwork, MtuWrongType) {
  json j = vlan_json();
  j["mtu"] = "1500";
  EXPECT_REFUSED(parse_network(j), "invalid_argument", "mtu: expected an integer, got \"1500\"");
}

TEST(ParseNetwork, UnknownKeyNamed) {
  json j = vlan_json();
  j["segmentation"] = 5;
  EXPECT_REFUSED(parse_network(j), "invalid_argument", "segmentation: unknown field");
}

TEST(ParseNetwork, ParamsMustBeObject) {
  EXPECT_REFUSED(parse_network(json::array()), "invalid_argument", "params: expected an object");
  EXPECT_REFUSED(parse_network(json()), "invalid_argument", "params: expected an object");
}

TEST(ParseNetwork, ToJsonRoundTrips) {
  for (json j : {vlan_json("v", 7), json{{"id", "f"}, {"type", "flat"}, {"physnet", "p"}},
                 json{{"id", "l"}, {"type", "local"}, {"mtu", 9000}}}) {
    NetworkSpec n = net_spec(j);
    json out = to_json(n);
    EXPECT_EQ(out.size(), 5u) << out;
    auto back = parse_network(out);  // nulls read as "not given"
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(to_json(*back), out);
  }
  EXPECT_EQ(to_json(net_spec(vlan_json("v", 7))), json({{"id", "v"},
                                                        {"type", "vlan"},
                                                        {"physnet", "physnet1"},
                                                        {"segmentation_id", 7},
                                                        {"mtu", 1500}}));
  EXPECT_EQ(to_json(net_spec({{"id", "l"}, {"type", "local"}})), json({{"id", "l"},
                                                                       {"type", "local"},
                                                                       {"physnet", nullptr},
                                                                       {"segmentation_id", nullptr},
                                                                       {"mtu", 1500}}));
}

// ---- parse_port ------------------------------------------------------------

TEST(ParsePort, Valid) {
  auto r = parse_port(port_json(kUuidA, "net1", "02:00:00:00:00:01", {"10.0.0.5", "2001:db8::5"},
                                "net_pcap0,rx_pcap=/tmp/a.pcap"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->id, kUuidA);
  EXPECT_EQ(r->network, "net1");
  EXPECT_EQ(r->mac, (Mac{2, 0, 0, 0, 0, 1}));
  ASSERT_EQ(r->fixed_ips.size(), 2u);
  EXPECT_EQ(r->fixed_ips[0].family, 4);
  EXPECT_EQ(r->fixed_ips[1].family, 6);
  EXPECT_EQ(r->attach.kind, Attachment::Kind::kEthdev);
  EXPECT_EQ(r->attach.devargs, "net_pcap0,rx_pcap=/tmp/a.pcap");
}

TEST(ParsePort, UpperCaseUuidAndMacStoredLowerCase) {
  auto r =
      parse_port(port_json("AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE", "net1", "0A:BB:CC:DD:EE:FF"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->id, kUuidB);
  EXPECT_EQ(mac_to_string(r->mac), "0a:bb:cc:dd:ee:ff");
}

TEST(ParsePort, FixedIpsOptional) {
  json j = port_json();
  j.erase("fixed_ips");
  auto r = parse_port(j);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->fixed_ips.empty());
}

TEST(ParsePort, IdNotUuid) {
  for (const char* id :
       {"net1", "11111111-2222-3333-4444-55555555555", "11111111-2222-3333-4444-5555555555555",
        "111111112222-3333-4444-555555555555", "1111111-22222-3333-4444-555555555555",
        "g1111111-2222-3333-4444-555555555555"}) {
    EXPECT_REFUSED(parse_port(port_json(id)), "invalid_argument", "id: ");
  }
  json j = port_json();
  j.erase("id");
  EXPECT_REFUSED(parse_port(j), "invalid_argument", "id: missing");
  j["id"] = 5;
  EXPECT_REFUSED(parse_port(j), "invalid_argument", "id: expected a string");
}

TEST(ParsePort, NetworkRequiredString) {
  json j = port_json();
  j.erase("network");
  EXPECT_REFUSED(parse_port(j), "invalid_argument", "network: missing");
  j["network"] = json::array();
  EXPECT_REFUSED(parse_port(j), "invalid_argument", "network: expected a string");
  j["network"] = "";
  EXPECT_REFUSED(parse_port(j), "invalid_argument", "network: ");
}

TEST(ParsePort, MacSyntax) {
  for (const char* mac : {"", "02:00:00:00:00", "02:00:00:00:00:01:02", "02-00-00-00-00-01",
                          "0200.0000.0001", "02:00:00:00:00:0g", "2:0:0:0:0:1"}) {
    EXPECT_REFUSED(parse_port(port_json(kUuidA, "net1", mac)), "invalid_argument", "mac: ");
  }
  json j = port_json();
  j["mac"] = 2;
  EXPECT_REFUSED(parse_port(j), "invalid_argument", "mac: expected a string");
  j.erase("mac");
  EXPECT_REFUSED(parse_port(j), "invalid_argument", "mac: missing");
}

TEST(ParsePort, MacMustBeUnicast) {
  EXPECT_REFUSED(parse_port(port_json(kUuidA, "net1", "01:00:5e:00:00:01")), "invalid_argument",
                 "mac: 01:00:5e:00:00:01 is a multicast address");
  EXPECT_REFUSED(parse_port(port_json(kUuidA, "net1", "ff:ff:ff:ff:ff:ff")), "invalid_argument",
                 "multicast");
}

TEST(ParsePort, MacMustNotBeZero) {
  EXPECT_REFUSED(parse_port(port_json(kUuidA, "net1", "00:00:00:00:00:00")), "invalid_argument",
                 "mac: 00:00:00:00:00:00");
}

TEST(ParsePort, FixedIpsMustBeAddresses) {
  for (const char* ip : {"10.0.0", "10.0.0.256", "10.0.0.1/24", "fe80::1%eth0", "host", ""}) {
    EXPECT_REFUSED(parse_port(port_json(kUuidA, "net1", "02:00:00:00:00:01", {"10.0.0.1", ip})),
                   "invalid_argument", "fixed_ips[1]: ");
  }
  EXPECT_REFUSED(parse_port(port_json(kUuidA, "net1", "02:00:00:00:00:01", {1})),
                 "invalid_argument", "fixed_ips[0]: expected a string");
  EXPECT_REFUSED(parse_port(port_json(kUuidA, "net1", "02:00:00:00:00:01", "10.0.0.1")),
                 "invalid_argument", "fixed_ips: expected a list");
}

TEST(ParsePort, FixedIpsNoDuplicates) {
  EXPECT_REFUSED(parse_port(port_json(kUuidA, "net1", "02:00:00:00:00:01",
                                      {"10.0.0.1", "10.0.0.2", "10.0.0.1"})),
                 "invalid_argument", "fixed_ips[2]: 10.0.0.1 is listed twice");
  // The same IPv6 address written two ways is still the same address.
  EXPECT_REFUSED(parse_port(port_json(kUuidA, "net1", "02:00:00:00:00:01",
                                      {"2001:db8::1", "2001:DB8:0:0::1"})),
                 "invalid_argument", "fixed_ips[1]: 2001:db8::1 is listed twice");
}

TEST(ParsePort, AttachRequiredObject) {
  json j = port_json();
  j.erase("attach");
  EXPECT_REFUSED(parse_port(j), "invalid_argument", "attach: missing");
  j["attach"] = "net_ring0";
  EXPECT_REFUSED(parse_port(j), "invalid_argument", "attach: expected an object");
}

TEST(ParsePort, AttachTypeMustBeKnown) {
  json j = port_json();
  j["attach"]["type"] = "tap";
  EXPECT_REFUSED(parse_port(j), "invalid_argument",
                 "attach.type: \"tap\" is not one of ethdev, vhost");
  j["attach"]["type"] = 1;
  EXPECT_REFUSED(parse_port(j), "invalid_argument", "attach.type: expected a string");
  j["attach"].erase("type");
  EXPECT_REFUSED(parse_port(j), "invalid_argument", "attach.type: missing");
}

json vhost_attach(const std::string& path, const char* mode = nullptr) {
  json a = {{"type", "vhost"}, {"path", path}};
  if (mode) a["mode"] = mode;
  return a;
}

TEST(ParsePort, AttachVhost) {
  json j = port_json();
  j["attach"] = vhost_attach("/run/strait/vhu11111111-22.sock");
  auto r = parse_port(j);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->attach.kind, Attachment::Kind::kVhost);
  EXPECT_EQ(r->attach.path, "/run/strait/vhu11111111-22.sock");
  EXPECT_EQ(r->attach.mode, Attachment::Mode::kClient);  // QEMU is the server by default
  j["attach"] = vhost_attach("/tmp/v.sock", "server");
  r = parse_port(j);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->attach.mode, Attachment::Mode::kServer);
  EXPECT_EQ(to_json(*r)["attach"],
            json({{"type", "vhost"}, {"path", "/tmp/v.sock"}, {"mode", "server"}}));
  auto back = parse_port(to_json(*r));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(to_json(*back), to_json(*r));
}

TEST(ParsePort, AttachVhostPath) {
  json j = port_json();
  j["attach"] = {{"type", "vhost"}};
  EXPECT_REFUSED(parse_port(j), "invalid_argument", "attach.path: missing");
  for (std::string path :
       std::vector<std::string>{"", "relative.sock", "/a b.sock", "/" + std::string(107, 'x')}) {
    j["attach"] = vhost_attach(path);
    EXPECT_REFUSED(parse_port(j), "invalid_argument", "attach.path: ");
  }
  j["attach"] = vhost_attach("/" + std::string(106, 'x'));  // 107 bytes: fits sun_path
  EXPECT_TRUE(parse_port(j).ok());
}

// "/dir//vm1.sock" and "/dir/./vm1.sock" were taken for other sockets than
// /dir/vm1.sock: a second port on one socket.
TEST(ParsePort, AttachVhostPathIsStoredInOneSpelling) {
  json j = port_json();
  for (const char* given : {"/run//strait/vhu1.sock", "/run/./strait/vhu1.sock",
                            "/run/strait/vhu1.sock/", "//run/strait/./vhu1.sock"}) {
    j["attach"] = vhost_attach(given);
    auto r = parse_port(j);
    ASSERT_TRUE(r.ok()) << given << ": " << r.error().message;
    EXPECT_EQ(r->attach.path, "/run/strait/vhu1.sock") << given;
  }
  // ".." stays: after a symlink, dropping it would name another file.
  j["attach"] = vhost_attach("/run/link/../vhu1.sock");
  EXPECT_EQ(parse_port(j)->attach.path, "/run/link/../vhu1.sock");
  j["attach"] = vhost_attach("/./");
  EXPECT_REFUSED(parse_port(j), "invalid_argument",
                 "attach.path: \"/./\" names a directory, not a socket");
  // The length that counts is the stored one.
  j["attach"] = vhost_attach("//" + std::string(106, 'x'));
  EXPECT_EQ(parse_port(j)->attach.path, "/" + std::string(106, 'x'));
}

TEST(ParsePort, AttachVhostMode) {
  json j = port_json();
  j["attach"] = vhost_attach("/tmp/v.sock", "both");
  EXPECT_REFUSED(parse_port(j), "invalid_argument",
                 "attach.mode: \"both\" is not one of client, server");
}

TEST(ParsePort, AttachKeysBelongToTheirType) {
  json j = port_json();
  j["attach"]["path"] = "/tmp/v.sock";  // ethdev has no path
  EXPECT_REFUSED(parse_port(j), "invalid_argument", "attach.path: unknown field");
  j["attach"] = vhost_attach("/tmp/v.sock");
  j["attach"]["devargs"] = "net_ring0";  // vhost has no devargs
  EXPECT_REFUSED(parse_port(j), "invalid_argument", "attach.devargs: unknown field");
}

TEST(ParsePort, AttachDevargs) {
  json j = port_json();
  j["attach"]["devargs"] = "";
  EXPECT_REFUSED(parse_port(j), "invalid_argument", "attach.devargs: is empty");
  for (const char* d : {"net_ring0 ", "net_pcap0, rx_pcap=a", "net\tring", "net_ring0\n"}) {
    j["attach"]["devargs"] = d;
    EXPECT_REFUSED(parse_port(j), "invalid_argument", "attach.devargs: ");
  }
  j["attach"]["devargs"] = ",iface=x";
  EXPECT_REFUSED(parse_port(j), "invalid_argument", "attach.devargs: ");
  j["attach"]["devargs"] = 0;
  EXPECT_REFUSED(parse_port(j), "invalid_argument", "attach.devargs: expected a string");
  j["attach"].erase("devargs");
  EXPECT_REFUSED(parse_port(j), "invalid_argument", "attach.devargs: missing");
}

TEST(ParsePort, AttachUnknownKey) {
  json j = port_json();
  j["attach"]["queues"] = 2;
  EXPECT_REFUSED(parse_port(j), "invalid_argument", "attach.queues: unknown field");
}

TEST(ParsePort, UnknownKeyNamed) {
  json j = port_json();
  j["qos_policy"] = json::array();
  EXPECT_REFUSED(parse_port(j), "invalid_argument", "qos_policy: unknown field");
}

TEST(ParsePort, ToJsonRoundTrips) {
  PortSpec p = port_spec(
      port_json(kUuidA, "net1", "02:AB:00:00:00:01", {"10.0.0.5", "2001:DB8::5"}, "net_ring1"));
  json out = to_json(p);
  EXPECT_EQ(out, json({{"id", kUuidA},
                       {"network", "net1"},
                       {"mac", "02:ab:00:00:00:01"},
                       {"fixed_ips", {"10.0.0.5", "2001:db8::5"}},
                       {"attach", {{"type", "ethdev"}, {"devargs", "net_ring1"}}},
                       {"security_groups", json::array()},
                       {"allowed_address_pairs", json::array()},
                       {"port_security_enabled", false},
                       {"qos", json::array()}}));
  auto back = parse_port(out);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(to_json(*back), out);
}

// ---- helpers ---------------------------------------------------------------

TEST(ModelHelpers, MacRoundTrip) {
  auto m = parse_mac("De:aD:bE:eF:00:01");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m, (Mac{0xde, 0xad, 0xbe, 0xef, 0x00, 0x01}));
  EXPECT_EQ(mac_to_string(*m), "de:ad:be:ef:00:01");
  EXPECT_TRUE(parse_mac("01:00:5e:00:00:01").ok());  // syntax only; ports check unicast
  EXPECT_FALSE(parse_mac("de:ad:be:ef:00:1").ok());
}

// Bytes that are not UTF-8 (from a client or a domain XML) are a refusal
// with a printable message, never an exception.
TEST(ModelHelpers, NonUtf8InputIsRefusedNotThrown) {
  auto m = parse_mac("de:ad:be:ef:00:\xff");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("is not a MAC address"), std::string::npos);
  auto n = parse_network({{"id", "n1"}, {"type", std::string("vl\xc3" "an")}});
  ASSERT_FALSE(n.ok());
}

TEST(ModelHelpers, IpRoundTrip) {
  auto v4 = parse_ip("192.0.2.1");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->family, 4);
  EXPECT_EQ(v4->bytes[0], 192);
  EXPECT_EQ(v4->bytes[3], 1);
  EXPECT_EQ(ip_to_string(*v4), "192.0.2.1");
  auto v6 = parse_ip("2001:DB8:0::1");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->family, 6);
  EXPECT_EQ(ip_to_string(*v6), "2001:db8::1");
  EXPECT_NE(*v4, *v6);
  EXPECT_FALSE(parse_ip("192.0.2").ok());
}

TEST(ModelHelpers, DevargsName) {
  EXPECT_EQ(devargs_name("net_ring0"), "net_ring0");
  EXPECT_EQ(devargs_name("net_pcap0,rx_pcap=a.pcap,tx_pcap=b.pcap"), "net_pcap0");
  EXPECT_EQ(devargs_name("0000:01:00.0"), "0000:01:00.0");
  EXPECT_EQ(devargs_name(""), "");
}

TEST(ModelHelpers, NetTypeName) {
  EXPECT_STREQ(net_type_name(dp::NetType::kVlan), "vlan");
  EXPECT_STREQ(net_type_name(dp::NetType::kFlat), "flat");
  EXPECT_STREQ(net_type_name(dp::NetType::kLocal), "local");
  EXPECT_STREQ(net_type_name(dp::NetType::kVxlan), "vxlan");
}

// ---- Model -------------------------------------------------------------------

class ModelTest : public ::testing::Test {
 protected:
  Model m{{{"physnet1", "net_ring0"}, {"physnet2", "net_pcap9,iface=eth1"}}};

  void add_net(const json& j) { ASSERT_TRUE(m.add_network(net_spec(j)).ok()); }
  void add_port(const json& j) {
    auto s = m.add_port(port_spec(j));
    ASSERT_TRUE(s.ok()) << s.error().message;
  }
};

TEST_F(ModelTest, AddNetworkAndLookup) {
  add_net(vlan_json("net1", 100));
  const NetworkSpec* n = m.network("net1");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->seg_id, 100);
  EXPECT_EQ(m.network("nope"), nullptr);
  EXPECT_EQ(m.local_vlan("net1"), 0);  // no port yet
  EXPECT_EQ(m.ports_on("net1"), 0u);
}

TEST_F(ModelTest, AddNetworkDuplicateId) {
  add_net(vlan_json("net1", 100));
  json before = dump(m);
  EXPECT_REFUSED(m.add_network(net_spec(vlan_json("net1", 200))), "already_exists",
                 "network net1 already exists");
  EXPECT_EQ(dump(m), before);
}

TEST_F(ModelTest, AddNetworkUnknownPhysnet) {
  json before = dump(m);
  EXPECT_REFUSED(m.add_network(net_spec({{"id", "f"}, {"type", "flat"}, {"physnet", "physnet9"}})),
                 "not_found",
                 "physnet: physnet9 is not in the config (configured: physnet1, physnet2)");
  EXPECT_EQ(dump(m), before);
}

TEST_F(ModelTest, AddNetworkPhysnetMustMatchType) {
  NetworkSpec local = net_spec({{"id", "l"}, {"type", "local"}});
  local.physnet = "physnet1";
  EXPECT_REFUSED(m.add_network(local), "invalid_argument", "physnet: not allowed");
  NetworkSpec flat = net_spec({{"id", "f"}, {"type", "flat"}, {"physnet", "physnet1"}});
  flat.physnet.clear();
  EXPECT_REFUSED(m.add_network(flat), "invalid_argument", "physnet: missing");
  EXPECT_TRUE(m.networks().empty());
}

TEST_F(ModelTest, VlanSegmentUniquePerPhysnet) {
  add_net(vlan_json("net1", 100));
  json before = dump(m);
  EXPECT_REFUSED(m.add_network(net_spec(vlan_json("net2", 100))), "conflict",
                 "VLAN 100 of physnet physnet1 is already used by network net1");
  EXPECT_EQ(dump(m), before);
  // The same VLAN on another physnet is another segment.
  json other = vlan_json("net3", 100);
  other["physnet"] = "physnet2";
  add_net(other);
  add_net(vlan_json("net4", 101));
}

TEST_F(ModelTest, VlanOutsideThePhysnetsRangesIsRefused) {
  m.set_vlan_ranges({{"physnet1", {{100, 199}, {300, 300}}}});
  EXPECT_REFUSED(m.check_vlan_range(net_spec(vlan_json("net1", 200))), "invalid_argument",
                 "segmentation_id: VLAN 200 is outside physnet physnet1's vlan_ranges (100:199, 300:300)");
  EXPECT_TRUE(m.check_vlan_range(net_spec(vlan_json("net1", 100))).ok());
  EXPECT_TRUE(m.check_vlan_range(net_spec(vlan_json("net1", 300))).ok());
  // A physnet without ranges carries every VLAN; flat networks have none.
  json other = vlan_json("net2", 4000);
  other["physnet"] = "physnet2";
  EXPECT_TRUE(m.check_vlan_range(net_spec(other)).ok());
  EXPECT_TRUE(m.check_vlan_range(net_spec({{"id", "f"}, {"type", "flat"}, {"physnet", "physnet1"}})).ok());
  m.set_vlan_ranges({{"physnet1", {}}});  // flat only
  EXPECT_REFUSED(m.check_vlan_range(net_spec(vlan_json("net1", 100))), "invalid_argument",
                 "vlan_ranges (none)");
}

TEST_F(ModelTest, OneFlatNetworkPerPhysnet) {
  add_net({{"id", "flat1"}, {"type", "flat"}, {"physnet", "physnet1"}});
  json before = dump(m);
  EXPECT_REFUSED(
      m.add_network(net_spec({{"id", "flat2"}, {"type", "flat"}, {"physnet", "physnet1"}})),
      "conflict", "physnet1 already carries flat network flat1");
  EXPECT_EQ(dump(m), before);
  add_net({{"id", "flat3"}, {"type", "flat"}, {"physnet", "physnet2"}});
  add_net(vlan_json("vlan1", 5));  // VLAN networks share the physnet with the flat one
}

TEST_F(ModelTest, LocalNetworksNeedNoPhysnet) {
  add_net({{"id", "l1"}, {"type", "local"}});
  add_net({{"id", "l2"}, {"type", "local"}});
  EXPECT_EQ(m.networks().size(), 2u);
}

TEST_F(ModelTest, RemoveNetwork) {
  add_net(vlan_json("net1", 100));
  ASSERT_TRUE(m.remove_network("net1").ok());
  EXPECT_EQ(m.network("net1"), nullptr);
  add_net(vlan_json("net2", 100));  // its segment is free again
}

TEST_F(ModelTest, RemoveNetworkNotFound) {
  add_net(vlan_json("net1", 100));
  json before = dump(m);
  EXPECT_REFUSED(m.remove_network("net2"), "not_found", "network net2");
  EXPECT_EQ(dump(m), before);
}

TEST_F(ModelTest, RemoveNetworkWithPortsConflicts) {
  add_net(vlan_json("net1", 100));
  add_port(port_json(kUuidA, "net1", "02:00:00:00:00:01", json::array(), "net_ring1"));
  add_port(port_json(kUuidB, "net1", "02:00:00:00:00:02", json::array(), "net_ring2"));
  json before = dump(m);
  EXPECT_REFUSED(m.remove_network("net1"), "conflict", "net1 has 2 bound ports");
  EXPECT_EQ(dump(m), before);
  ASSERT_TRUE(m.remove_port(kUuidA).ok());
  EXPECT_REFUSED(m.remove_network("net1"), "conflict", "has 1 bound port;");
  ASSERT_TRUE(m.remove_port(kUuidB).ok());
  EXPECT_TRUE(m.remove_network("net1").ok());
}

TEST_F(ModelTest, AddPortAndLookup) {
  add_net(vlan_json("net1", 100));
  PortSpec p = port_spec(port_json(kUuidA, "net1", "02:00:00:00:00:01", {"10.0.0.1"}));
  ASSERT_TRUE(m.check_add_port(p).ok());
  EXPECT_TRUE(m.ports().empty());  // check changes nothing
  EXPECT_EQ(m.local_vlan("net1"), 0);
  ASSERT_TRUE(m.add_port(p).ok());
  ASSERT_NE(m.port(kUuidA), nullptr);
  EXPECT_EQ(to_json(*m.port(kUuidA)), to_json(p));
  EXPECT_EQ(m.port(kUuidB), nullptr);
  EXPECT_EQ(m.ports_on("net1"), 1u);
}

TEST_F(ModelTest, PortLookupIgnoresUuidCase) {
  add_net(vlan_json("net1", 100));
  add_port(port_json(kUuidB));
  EXPECT_NE(m.port("AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE"), nullptr);
  EXPECT_TRUE(m.remove_port("AAAAAAAA-bbbb-CCCC-dddd-EEEEEEEEEEEE").ok());
  EXPECT_TRUE(m.ports().empty());
}

TEST_F(ModelTest, AddPortDuplicateId) {
  add_net(vlan_json("net1", 100));
  add_port(port_json(kUuidA, "net1", "02:00:00:00:00:01", json::array(), "net_ring1"));
  json before = dump(m);
  PortSpec again = port_spec(port_json("11111111-2222-3333-4444-555555555555", "net1",
                                       "02:00:00:00:00:02", json::array(), "net_ring2"));
  EXPECT_REFUSED(m.check_add_port(again), "already_exists", std::string("port ") + kUuidA);
  EXPECT_REFUSED(m.add_port(again), "already_exists", "already exists");
  EXPECT_EQ(dump(m), before);
}

TEST_F(ModelTest, AddPortUnknownNetwork) {
  add_net(vlan_json("net1", 100));
  json before = dump(m);
  EXPECT_REFUSED(m.add_port(port_spec(port_json(kUuidA, "net2"))), "not_found",
                 "network: no network net2");
  EXPECT_EQ(dump(m), before);
}

TEST_F(ModelTest, MacUniqueWithinNetwork) {
  add_net(vlan_json("net1", 100));
  add_net(vlan_json("net2", 200));
  add_port(port_json(kUuidA, "net1", "02:00:00:00:00:01", json::array(), "net_ring1"));
  json before = dump(m);
  EXPECT_REFUSED(
      m.add_port(
          port_spec(port_json(kUuidB, "net1", "02:00:00:00:00:01", json::array(), "net_ring2"))),
      "conflict",
      std::string("mac: 02:00:00:00:00:01 is already used by port ") + kUuidA + " in network net1");
  EXPECT_EQ(dump(m), before);
  // Another network is another L2 domain.
  add_port(port_json(kUuidB, "net2", "02:00:00:00:00:01", json::array(), "net_ring2"));
}

TEST_F(ModelTest, FixedIpsUniqueWithinNetwork) {
  add_net(vlan_json("net1", 100));
  add_net(vlan_json("net2", 200));
  add_port(
      port_json(kUuidA, "net1", "02:00:00:00:00:01", {"10.0.0.1", "2001:db8::1"}, "net_ring1"));
  json before = dump(m);
  EXPECT_REFUSED(m.add_port(port_spec(port_json(kUuidB, "net1", "02:00:00:00:00:02",
                                                {"10.0.0.2", "2001:DB8::1"}, "net_ring2"))),
                 "conflict",
                 std::string("fixed_ips: 2001:db8::1 is already used by port ") + kUuidA);
  EXPECT_EQ(dump(m), before);
  add_port(port_json(kUuidB, "net2", "02:00:00:00:00:02", {"10.0.0.1"}, "net_ring2"));
}

TEST_F(ModelTest, EthdevNotSharedBetweenPorts) {
  add_net(vlan_json("net1", 100));
  add_net(vlan_json("net2", 200));
  add_port(
      port_json(kUuidA, "net1", "02:00:00:00:00:01", json::array(), "net_pcap1,rx_pcap=a.pcap"));
  json before = dump(m);
  // Other devargs, same ethdev name, other network: still the same device.
  EXPECT_REFUSED(
      m.add_port(port_spec(port_json(kUuidB, "net2", "02:00:00:00:00:02", json::array(),
                                     "net_pcap1,rx_pcap=b.pcap"))),
      "conflict",
      std::string("attach.devargs: ethdev net_pcap1 is already attached to port ") + kUuidA);
  EXPECT_EQ(dump(m), before);
}

TEST_F(ModelTest, EthdevNotAPhysnetDevice) {
  add_net(vlan_json("net1", 100));
  json before = dump(m);
  EXPECT_REFUSED(m.add_port(port_spec(
                     port_json(kUuidA, "net1", "02:00:00:00:00:01", json::array(), "net_ring0"))),
                 "conflict", "ethdev net_ring0 is the device of physnet physnet1");
  EXPECT_REFUSED(m.add_port(port_spec(port_json(kUuidA, "net1", "02:00:00:00:00:01", json::array(),
                                                "net_pcap9,rx_pcap=x"))),
                 "conflict", "ethdev net_pcap9 is the device of physnet physnet2");
  EXPECT_EQ(dump(m), before);
}

TEST_F(ModelTest, VhostSocketNotSharedBetweenPorts) {
  add_net(vlan_json("net1", 100));
  add_net(vlan_json("net2", 200));
  json a = port_json(kUuidA, "net1", "02:00:00:00:00:01");
  a["attach"] = vhost_attach("/tmp/vhu-a.sock");
  add_port(a);
  json before = dump(m);
  json b = port_json(kUuidB, "net2", "02:00:00:00:00:02");
  b["attach"] = vhost_attach("/tmp/vhu-a.sock", "server");
  EXPECT_REFUSED(
      m.add_port(port_spec(b)), "conflict",
      std::string("attach.path: socket /tmp/vhu-a.sock is already attached to port ") + kUuidA);
  EXPECT_EQ(dump(m), before);
  // A vhost port and an ethdev port never share a device.
  add_port(port_json(kUuidB, "net1", "02:00:00:00:00:02", json::array(), "net_ring1"));
  b["id"] = kUuidC;
  b["attach"] = vhost_attach("/tmp/vhu-c.sock");
  add_port(b);
}

// A temporary directory with a subdirectory and a symlink to itself.
struct SocketDir {
  SocketDir() {
    char tmpl[] = "/tmp/strait-socket-dir.XXXXXX";
    path = mkdtemp(tmpl);
    std::filesystem::create_directory(path + "/sub");
    std::filesystem::create_directory_symlink(path, path + "/link");
  }
  ~SocketDir() { std::filesystem::remove_all(path); }
  std::string path;
};

TEST_F(ModelTest, VhostSocketSpelledAnotherWayIsRefusedNamingItsHolder) {
  SocketDir dir;
  add_net(vlan_json("net1", 100));
  json a = port_json(kUuidA, "net1", "02:00:00:00:00:01");
  a["attach"] = vhost_attach(dir.path + "/vm1.sock");
  add_port(a);
  const json before = dump(m);
  json b = port_json(kUuidB, "net1", "02:00:00:00:00:02");
  for (const std::string& spelling : {dir.path + "//vm1.sock", dir.path + "/./vm1.sock",
                                      dir.path + "/sub/../vm1.sock", dir.path + "/link/vm1.sock"}) {
    b["attach"] = vhost_attach(spelling, "server");
    EXPECT_REFUSED(m.add_port(port_spec(b)), "conflict",
                   std::string("is already attached to port ") + kUuidA);
  }
  EXPECT_EQ(dump(m), before);
  // Unbound, it frees the socket under every spelling.
  ASSERT_TRUE(m.remove_port(kUuidA).ok());
  b["attach"] = vhost_attach(dir.path + "/link/vm1.sock");
  add_port(b);
  EXPECT_REFUSED(m.add_port(port_spec(a)), "conflict",
                 std::string("is already attached to port ") + kUuidB);
}

// Two rows an older straitd saved on one socket, spelled two ways: both
// come back (refusing one would stop straitd from starting), the socket
// stays the first one's, and unbinding the second leaves it so.
TEST_F(ModelTest, RestoredPortsOnOneSocketBothComeBack) {
  SocketDir dir;
  add_net(vlan_json("net1", 100));
  json a = port_json(kUuidA, "net1", "02:00:00:00:00:01");
  a["attach"] = vhost_attach(dir.path + "/vm1.sock");
  json b = port_json(kUuidB, "net1", "02:00:00:00:00:02");
  b["attach"] = vhost_attach(dir.path + "//vm1.sock");
  ASSERT_TRUE(m.restore_port(port_spec(a), 5).ok());
  ASSERT_TRUE(m.restore_port(port_spec(b), 5).ok());
  EXPECT_EQ(m.port(kUuidB)->attach.path, dir.path + "/vm1.sock");
  ASSERT_TRUE(m.remove_port(kUuidB).ok());
  json c = port_json(kUuidC, "net1", "02:00:00:00:00:03");
  c["attach"] = vhost_attach(dir.path + "/vm1.sock");
  EXPECT_REFUSED(m.add_port(port_spec(c)), "conflict",
                 std::string("is already attached to port ") + kUuidA);
}

// What a port held (socket, MAC, fixed IPs) is free once it is unbound, and
// an update's old fixed IPs are free while its new ones are held.
TEST_F(ModelTest, UnbindAndUpdateFreeWhatThePortHeld) {
  add_net(vlan_json("net1", 100));
  json a = port_json(kUuidA, "net1", "02:00:00:00:00:01", {"10.0.0.1"});
  a["attach"] = vhost_attach("/tmp/vhu-a.sock");
  add_port(a);
  add_port(port_json(kUuidC, "net1", "02:00:00:00:00:03", {"10.0.0.3"}, "net_ring3"));
  EXPECT_EQ(m.ports_on("net1"), 2u);
  ASSERT_TRUE(m.remove_port(kUuidA).ok());
  EXPECT_EQ(m.ports_on("net1"), 1u);
  json b = a;
  b["id"] = kUuidB;
  add_port(b);  // A's socket, MAC and IP
  EXPECT_EQ(m.ports_on("net1"), 2u);

  auto u = parse_port_update({{"id", kUuidB}, {"fixed_ips", {"10.0.0.2"}}});
  ASSERT_TRUE(u.ok());
  auto p = m.updated_port(*u);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(m.update_port(*p).ok());
  // 10.0.0.1 is free again, 10.0.0.2 is B's, 10.0.0.3 still C's.
  auto c = parse_port_update({{"id", kUuidC}, {"fixed_ips", {"10.0.0.3", "10.0.0.1"}}});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(m.updated_port(*c).ok());
  c = parse_port_update({{"id", kUuidC}, {"fixed_ips", {"10.0.0.2"}}});
  ASSERT_TRUE(c.ok());
  EXPECT_REFUSED(m.updated_port(*c), "conflict",
                 std::string("fixed_ips: 10.0.0.2 is already used by port ") + kUuidB);
  EXPECT_REFUSED(m.add_port(port_spec(port_json(uuid_n(9), "net1", "02:00:00:00:00:09",
                                                {"10.0.0.2"}, "net_ring9"))),
                 "conflict", std::string("fixed_ips: 10.0.0.2 is already used by port ") + kUuidB);
  // A port's own addresses are no conflict with itself.
  auto same = parse_port_update({{"id", kUuidB}, {"fixed_ips", {"10.0.0.2"}}});
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(m.updated_port(*same).ok());
  ASSERT_TRUE(m.remove_port(kUuidB).ok());
  ASSERT_TRUE(m.remove_port(kUuidC).ok());
  EXPECT_EQ(m.ports_on("net1"), 0u);
  EXPECT_EQ(m.local_vlan("net1"), 0u);
}

TEST_F(ModelTest, FirstPortAllocatesLocalVlan) {
  add_net(vlan_json("net1", 100));
  add_net(vlan_json("net2", 200));
  add_net({{"id", "l"}, {"type", "local"}});
  add_port(port_json(uuid_n(1), "net2", "02:00:00:00:00:01", json::array(), "net_ring1"));
  EXPECT_EQ(m.local_vlan("net2"), 1);
  add_port(port_json(uuid_n(2), "net2", "02:00:00:00:00:02", json::array(), "net_ring2"));
  EXPECT_EQ(m.local_vlan("net2"), 1);  // the network keeps its number
  add_port(port_json(uuid_n(3), "l", "02:00:00:00:00:03", json::array(), "net_ring3"));
  EXPECT_EQ(m.local_vlan("l"), 2);
  EXPECT_EQ(m.local_vlan("net1"), 0);
}

TEST_F(ModelTest, LastPortReleasesLocalVlan) {
  add_net(vlan_json("net1", 100));
  add_net(vlan_json("net2", 200));
  add_net(vlan_json("net3", 300));
  add_port(port_json(uuid_n(1), "net1", "02:00:00:00:00:01", json::array(), "net_ring1"));
  add_port(port_json(uuid_n(2), "net2", "02:00:00:00:00:02", json::array(), "net_ring2"));
  add_port(port_json(uuid_n(3), "net2", "02:00:00:00:00:03", json::array(), "net_ring3"));
  ASSERT_EQ(m.local_vlan("net1"), 1);
  ASSERT_EQ(m.local_vlan("net2"), 2);
  ASSERT_TRUE(m.remove_port(uuid_n(1)).ok());
  EXPECT_EQ(m.local_vlan("net1"), 0);
  ASSERT_TRUE(m.remove_port(uuid_n(2)).ok());
  EXPECT_EQ(m.local_vlan("net2"), 2);  // still has a port
  add_port(port_json(uuid_n(4), "net3", "02:00:00:00:00:04", json::array(), "net_ring4"));
  EXPECT_EQ(m.local_vlan("net3"), 1);  // lowest free, reused
  ASSERT_TRUE(m.remove_port(uuid_n(3)).ok());
  EXPECT_EQ(m.local_vlan("net2"), 0);
  // The ethdev and the MAC of a removed port are free again.
  add_port(port_json(uuid_n(5), "net1", "02:00:00:00:00:01", json::array(), "net_ring1"));
  EXPECT_EQ(m.local_vlan("net1"), 2);
}

TEST_F(ModelTest, RemovePortNotFound) {
  add_net(vlan_json("net1", 100));
  add_port(port_json(kUuidA));
  json before = dump(m);
  EXPECT_REFUSED(m.remove_port(kUuidB), "not_found", std::string("port ") + kUuidB);
  EXPECT_EQ(dump(m), before);
}

TEST_F(ModelTest, LocalVlanExhausted) {
  for (unsigned i = 0; i < 4094; ++i) {
    std::string net = "n" + std::to_string(i);
    ASSERT_TRUE(m.add_network(net_spec({{"id", net}, {"type", "local"}})).ok());
    auto s = m.add_port(port_n(i, net));
    ASSERT_TRUE(s.ok()) << s.error().message;
  }
  EXPECT_EQ(m.local_vlan("n4093"), 4094);
  add_net({{"id", "last"}, {"type", "local"}});
  json before = dump(m);
  EXPECT_REFUSED(m.check_add_port(port_n(5000, "last")), "resource_exhausted",
                 "no free local VLAN");
  EXPECT_REFUSED(m.add_port(port_n(5000, "last")), "resource_exhausted", "no free local VLAN");
  EXPECT_EQ(dump(m), before);
  // A network that already has its VLAN takes more ports.
  EXPECT_TRUE(m.add_port(port_n(5001, "n7")).ok());
  // Freeing one makes room.
  ASSERT_TRUE(m.remove_port(uuid_n(10)).ok());
  ASSERT_TRUE(m.add_port(port_n(5000, "last")).ok());
  EXPECT_EQ(m.local_vlan("last"), 11);
}

TEST_F(ModelTest, RefusedPortLeavesNoVlanBehind) {
  add_net(vlan_json("net1", 100));
  add_net(vlan_json("net2", 200));
  add_port(port_json(uuid_n(1), "net1", "02:00:00:00:00:01", json::array(), "net_ring1"));
  // net2 has no VLAN yet; a refused first port must not take one.
  EXPECT_REFUSED(m.add_port(port_spec(port_json(uuid_n(2), "net2", "02:00:00:00:00:02",
                                                json::array(), "net_ring1"))),
                 "conflict", "net_ring1");
  EXPECT_EQ(m.local_vlan("net2"), 0);
  add_port(port_json(uuid_n(3), "net2", "02:00:00:00:00:03", json::array(), "net_ring3"));
  EXPECT_EQ(m.local_vlan("net2"), 2);
}

TEST_F(ModelTest, RestorePortKeepsPersistedVlan) {
  add_net(vlan_json("net1", 100));
  add_net(vlan_json("net2", 200));
  add_net(vlan_json("net3", 300));
  ASSERT_TRUE(m.restore_port(port_n(1, "net1"), 7).ok());
  EXPECT_EQ(m.local_vlan("net1"), 7);
  ASSERT_TRUE(m.restore_port(port_n(2, "net1"), 7).ok());
  json before = dump(m);
  EXPECT_REFUSED(m.restore_port(port_n(3, "net1"), 8), "conflict", "already has local VLAN 7");
  EXPECT_REFUSED(m.restore_port(port_n(3, "net2"), 7), "conflict",
                 "7 is already the local VLAN of network net1");
  EXPECT_REFUSED(m.restore_port(port_n(3, "net2"), 0), "invalid_argument", "outside 1..4094");
  EXPECT_REFUSED(m.restore_port(port_n(3, "net2"), 4095), "invalid_argument", "outside 1..4094");
  EXPECT_REFUSED(m.restore_port(port_n(1, "net2"), 9), "already_exists", "already exists");
  EXPECT_EQ(dump(m), before);
  // New networks get the lowest number free around the restored ones.
  add_port(json(to_json(port_n(4, "net3"))));
  EXPECT_EQ(m.local_vlan("net3"), 1);
}

TEST_F(ModelTest, RefusedRequestsChangeNothing) {
  add_net(vlan_json("net1", 100));
  add_net({{"id", "flat1"}, {"type", "flat"}, {"physnet", "physnet1"}});
  add_port(port_json(kUuidA, "net1", "02:00:00:00:00:01", {"10.0.0.1"}, "net_ring1"));
  const json before = dump(m);
  EXPECT_FALSE(m.add_network(net_spec(vlan_json("net1", 300))).ok());
  EXPECT_FALSE(m.add_network(net_spec(vlan_json("netx", 100))).ok());
  EXPECT_FALSE(
      m.add_network(net_spec({{"id", "f2"}, {"type", "flat"}, {"physnet", "physnet1"}})).ok());
  EXPECT_FALSE(m.add_network(net_spec({{"id", "f3"}, {"type", "flat"}, {"physnet", "nope"}})).ok());
  EXPECT_FALSE(m.remove_network("net1").ok());
  EXPECT_FALSE(m.remove_network("nope").ok());
  EXPECT_FALSE(m.add_port(port_spec(port_json(kUuidA, "flat1", "02:00:00:00:00:09"))).ok());
  EXPECT_FALSE(m.add_port(port_spec(port_json(kUuidB, "nope"))).ok());
  EXPECT_FALSE(m.add_port(port_spec(port_json(kUuidB, "net1", "02:00:00:00:00:01", json::array(),
                                              "net_ring2")))
                   .ok());
  EXPECT_FALSE(m.add_port(port_spec(port_json(kUuidB, "net1", "02:00:00:00:00:02", {"10.0.0.1"},
                                              "net_ring2")))
                   .ok());
  EXPECT_FALSE(m.add_port(port_spec(port_json(kUuidB, "flat1", "02:00:00:00:00:02", json::array(),
                                              "net_ring1")))
                   .ok());
  EXPECT_FALSE(m.add_port(port_spec(port_json(kUuidB, "flat1", "02:00:00:00:00:02", json::array(),
                                              "net_ring0")))
                   .ok());
  EXPECT_FALSE(m.remove_port(kUuidC).ok());
  EXPECT_EQ(dump(m), before);
}

// ---- QoS (issue 25) ----------------------------------------------------------

TEST(PortSpecQos, NeutronsRulesParseAndReadBackAsGiven) {
  json j = port_json();
  j["qos"] = {{{"type", "bandwidth_limit"}, {"direction", "ingress"}, {"max_kbps", 10000},
               {"max_burst_kbps", 1000}},
              {{"type", "bandwidth_limit"}, {"max_kbps", 5000}},  // egress, the default
              {{"type", "packet_rate_limit"}, {"direction", "egress"}, {"max_kpps", 100},
               {"max_burst_kpps", 10}, {"id", "8d4b0000-0000-4000-8000-000000000001"}},
              {{"type", "dscp_marking"}, {"dscp_mark", 26}}};
  auto p = parse_port(j);
  ASSERT_TRUE(p.ok()) << p.error().message;
  ASSERT_EQ(p->qos.size(), 4u);
  EXPECT_EQ(p->qos[0].direction, dp::QosDir::kIngress);
  EXPECT_EQ(p->qos[1].direction, dp::QosDir::kEgress);
  EXPECT_EQ(p->qos[1].burst, 0u);
  EXPECT_EQ(p->qos[3].dscp, 26);
  const json back = to_json(*p)["qos"];
  EXPECT_EQ(back[1], json({{"type", "bandwidth_limit"}, {"direction", "egress"},
                           {"max_kbps", 5000}, {"max_burst_kbps", 0}}));
  auto again = parse_port(to_json(*p));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->qos, p->qos);
}

TEST(PortSpecQos, BadRulesAreRefusedNamingTheField) {
  auto with = [](json rules) {
    json j = port_json();
    j["qos"] = std::move(rules);
    return parse_port(j);
  };
  EXPECT_REFUSED(with(json::object()), "invalid_argument", "qos");
  EXPECT_REFUSED(with({{{"type", "bandwidth_limit"}, {"max_kbps", -1}}}), "invalid_argument",
                 "qos[0].max_kbps");
  EXPECT_REFUSED(with({{{"type", "bandwidth_limit"}}}), "invalid_argument", "qos[0].max_kbps");
  EXPECT_REFUSED(with({{{"type", "bandwidth_limit"}, {"max_kbps", 10}, {"max_burst_kbps", -1}}}),
                 "invalid_argument", "qos[0].max_burst_kbps");
  EXPECT_REFUSED(with({{{"type", "bandwidth_limit"}, {"max_kbps", 10}, {"direction", "up"}}}),
                 "invalid_argument", "qos[0].direction");
  EXPECT_REFUSED(with({{{"type", "packet_rate_limit"}, {"max_kbps", 10}}}), "invalid_argument",
                 "qos[0].max_kbps");  // a bandwidth field on a packet-rate rule
  EXPECT_REFUSED(with({{{"type", "dscp_marking"}, {"dscp_mark", 27}}}), "invalid_argument",
                 "qos[0].dscp_mark");
  EXPECT_REFUSED(with({{{"type", "dscp_marking"}, {"dscp_mark", 26}, {"direction", "egress"}}}),
                 "invalid_argument", "qos[0].direction");
  EXPECT_REFUSED(with({{{"type", "minimum_bandwidth"}, {"min_kbps", 10}}}), "invalid_argument",
                 "not supported");
  EXPECT_REFUSED(with({{{"type", "bandwidth_limit"}, {"max_kbps", 10}},
                       {{"type", "bandwidth_limit"}, {"max_kbps", 20}, {"direction", "egress"}}}),
                 "invalid_argument", "qos[1]: a second bandwidth_limit rule for egress");
  EXPECT_REFUSED(with({{{"type", "dscp_marking"}, {"dscp_mark", 0}},
                       {{"type", "dscp_marking"}, {"dscp_mark", 8}}}),
                 "invalid_argument", "a second dscp_marking");
}

TEST_F(ModelTest, QosRulesChangeLiveAndARefusedUpdateKeepsThem) {
  add_net(vlan_json("net1", 100));
  json j = port_json();
  j["qos"] = {{{"type", "dscp_marking"}, {"dscp_mark", 10}}};
  add_port(j);
  auto u = parse_port_update({{"id", kUuidA}, {"qos", {{{"type", "bandwidth_limit"}, {"max_kbps", 100}}}}});
  ASSERT_TRUE(u.ok()) << u.error().message;
  auto next = m.updated_port(*u);
  ASSERT_TRUE(next.ok());
  ASSERT_TRUE(m.update_port(*next).ok());
  ASSERT_EQ(m.port(kUuidA)->qos.size(), 1u);
  EXPECT_EQ(m.port(kUuidA)->qos[0].max, 100u);
  EXPECT_REFUSED(parse_port_update({{"id", kUuidA}, {"qos", {{{"type", "x"}}}}}), "invalid_argument",
                 "qos[0].type");
}

// ---- trunks (issue 25) -------------------------------------------------------

json subport_json(const std::string& id, const std::string& net, const std::string& mac,
                  const std::string& parent, json vid) {
  return {{"id", id},
          {"network", net},
          {"mac", mac},
          {"attach", {{"type", "subport"}, {"parent", parent}, {"segmentation_id", vid}}}};
}

TEST(PortSpecTrunk, SubportAttachParsesAndReadsBackAsGiven) {
  auto p = parse_port(subport_json(kUuidB, "net2", "02:00:00:00:00:01",
                                   "11111111-2222-3333-4444-555555555555", 101));
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->attach.kind, Attachment::Kind::kSubport);
  EXPECT_EQ(p->attach.parent, kUuidA);
  EXPECT_EQ(p->attach.vid, 101);
  EXPECT_EQ(to_json(*p)["attach"],
            json({{"type", "subport"}, {"parent", kUuidA}, {"segmentation_type", "vlan"},
                  {"segmentation_id", 101}}));
  // What is stored reads back the same (the store keeps to_json).
  auto again = parse_port(to_json(*p));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(to_json(*again), to_json(*p));
}

TEST(PortSpecTrunk, BadSubportAttachIsRefusedNamingTheField) {
  auto with = [](json attach) {
    json j = subport_json(kUuidB, "net2", "02:00:00:00:00:01", kUuidA, 101);
    for (auto& [k, v] : attach.items()) j["attach"][k] = v;
    for (auto it = attach.begin(); it != attach.end(); ++it)
      if (it.value().is_null()) j["attach"].erase(it.key());
    return parse_port(j);
  };
  EXPECT_REFUSED(with({{"segmentation_id", 0}}), "invalid_argument", "attach.segmentation_id");
  EXPECT_REFUSED(with({{"segmentation_id", 4095}}), "invalid_argument", "attach.segmentation_id");
  EXPECT_REFUSED(with({{"segmentation_id", "101"}}), "invalid_argument", "attach.segmentation_id");
  EXPECT_REFUSED(with({{"segmentation_id", nullptr}}), "invalid_argument", "attach.segmentation_id");
  EXPECT_REFUSED(with({{"segmentation_type", "inherit"}}), "invalid_argument",
                 "attach.segmentation_type");
  EXPECT_REFUSED(with({{"parent", "vm1"}}), "invalid_argument", "attach.parent");
  EXPECT_REFUSED(with({{"parent", nullptr}}), "invalid_argument", "attach.parent");
  EXPECT_REFUSED(with({{"path", "/run/x.sock"}}), "invalid_argument", "attach.path");
}

class TrunkModelTest : public ModelTest {
 protected:
  void SetUp() override {
    add_net(vlan_json("net1", 100));
    add_net(vlan_json("net2", 200));
    add_net(vlan_json("net3", 300));
    add_port(port_json(kUuidA, "net1", "02:00:00:00:00:01"));
  }
};

TEST_F(TrunkModelTest, SubportsBindOnTheirOwnNetworksWithTheParentsMac) {
  // neutron's subports usually carry the parent's MAC: on other networks,
  // nothing they share.
  add_port(subport_json(kUuidB, "net2", "02:00:00:00:00:01", kUuidA, 101));
  add_port(subport_json(kUuidC, "net3", "02:00:00:00:00:01", kUuidA, 102));
  EXPECT_EQ(m.subports_of(kUuidA),
            (std::map<uint16_t, std::string>{{101, kUuidB}, {102, kUuidC}}));
  EXPECT_NE(m.local_vlan("net2"), 0);
  EXPECT_NE(m.local_vlan("net3"), m.local_vlan("net2"));
  EXPECT_TRUE(m.subports_of(kUuidB).empty());
}

TEST_F(TrunkModelTest, RefusedSubportsChangeNothing) {
  add_port(subport_json(kUuidB, "net2", "02:00:00:00:00:02", kUuidA, 101));
  const json before = dump(m);
  // No such parent.
  EXPECT_REFUSED(m.add_port(port_spec(subport_json(uuid_n(9), "net3", "02:00:00:00:00:09",
                                                    uuid_n(8), 5))),
                 "not_found", "attach.parent");
  // The parent's VLAN is another subport's.
  EXPECT_REFUSED(m.add_port(port_spec(subport_json(uuid_n(9), "net3", "02:00:00:00:00:09",
                                                    kUuidA, 101))),
                 "conflict", "VLAN 101 of trunk parent");
  // Trunks do not nest.
  EXPECT_REFUSED(m.add_port(port_spec(subport_json(uuid_n(9), "net3", "02:00:00:00:00:09",
                                                    kUuidB, 7))),
                 "invalid_argument", "itself a subport");
  // Its network's MAC rule holds as for any port.
  EXPECT_REFUSED(m.add_port(port_spec(subport_json(uuid_n(9), "net2", "02:00:00:00:00:02",
                                                    kUuidA, 102))),
                 "conflict", "mac");
  // The parent stays while it has subports (neutron: delete the trunk first).
  EXPECT_REFUSED(m.remove_port(kUuidA), "conflict", "unbind them first");
  // A bound subport's parent or VLAN does not change in place.
  PortSpec moved = *m.port(kUuidB);
  moved.attach.vid = 111;
  EXPECT_REFUSED(m.update_port(moved), "invalid_argument", "do not change");
  EXPECT_EQ(dump(m), before);
}

TEST_F(TrunkModelTest, ParentUnbindsOnceItsSubportsAreGoneAndTheVlanIsFreeAgain) {
  add_port(subport_json(kUuidB, "net2", "02:00:00:00:00:02", kUuidA, 101));
  ASSERT_TRUE(m.remove_port(kUuidB).ok());
  EXPECT_TRUE(m.subports_of(kUuidA).empty());
  EXPECT_EQ(m.local_vlan("net2"), 0);
  // VLAN 101 of the parent is free for another subport.
  add_port(subport_json(kUuidC, "net3", "02:00:00:00:00:03", kUuidA, 101));
  ASSERT_TRUE(m.remove_port(kUuidC).ok());
  EXPECT_TRUE(m.remove_port(kUuidA).ok());
}

}  // namespace
}  // namespace strait::ctl
