// VXLAN networks and their tunnel state in the model (issue 6): field
// validation of the tunnel.* requests, and the model's rules. Every refusal
// is checked to change nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "control/model/model.h"
#include "tests/expect_refused.h"

namespace strait::ctl {
namespace {

using json = nlohmann::json;

IpAddr ip(const std::string& s) { return *parse_ip(s); }
Mac mac(const std::string& s) { return *parse_mac(s); }

json vxlan(const std::string& id, int vni) {
  return {{"id", id}, {"type", "vxlan"}, {"segmentation_id", vni}};
}

const std::map<std::string, std::string> kPhysnets = {{"physnet1", "net_ring0"}};

NetworkSpec spec(const json& j) {
  auto n = parse_network(j);
  EXPECT_TRUE(n.ok()) << (n.ok() ? "" : n.error().message);
  return n.ok() ? *n : NetworkSpec{};
}

TEST(ParseVxlanNetwork, VniRangeAndNoPhysnet) {
  auto n = parse_network(vxlan("vx", 16777215));
  ASSERT_TRUE(n.ok()) << n.error().message;
  EXPECT_EQ(n->type, dp::NetType::kVxlan);
  EXPECT_EQ(n->seg_id, 16777215u);
  EXPECT_EQ(n->mtu, 0);  // the model's default
  EXPECT_REFUSED(parse_network(vxlan("vx", 16777216)), "invalid_argument",
                 "segmentation_id: 16777216 is outside 1..16777215");
  EXPECT_REFUSED(parse_network(vxlan("vx", 0)), "invalid_argument", "segmentation_id");
  EXPECT_REFUSED(parse_network({{"id", "vx"}, {"type", "vxlan"}}), "invalid_argument",
                 "segmentation_id: missing");
  json with_physnet = vxlan("vx", 5);
  with_physnet["physnet"] = "p1";
  EXPECT_REFUSED(parse_network(with_physnet), "invalid_argument",
                 "physnet: not allowed for a vxlan network");
  // VLAN ids stay 1..4094 with the wider field.
  EXPECT_REFUSED(parse_network({{"id", "v"}, {"type", "vlan"}, {"physnet", "p1"},
                                {"segmentation_id", 5000}}),
                 "invalid_argument", "5000 is outside 1..4094");
}

TEST(ParseVxlanNetwork, ToJsonRoundTrips) {
  NetworkSpec n = spec(vxlan("vx", 70000));
  n.mtu = 1450;
  const json j = to_json(n);
  EXPECT_EQ(j["type"], "vxlan");
  EXPECT_EQ(j["segmentation_id"], 70000);
  EXPECT_TRUE(j["physnet"].is_null());
  EXPECT_EQ(to_json(spec(j)), j);
}

TEST(ParseTunnel, FdbEntries) {
  auto r = parse_tunnel_fdb({{"network", "vx"},
                             {"entries", {{{"mac", "02:00:00:00:00:0A"}, {"vtep", "10.99.0.2"}}}}},
                            true);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->network, "vx");
  ASSERT_EQ(r->entries.size(), 1u);
  EXPECT_EQ(r->entries[0].mac, mac("02:00:00:00:00:0a"));
  EXPECT_EQ(r->entries[0].vtep, ip("10.99.0.2"));
  auto del = parse_tunnel_fdb({{"network", "vx"}, {"entries", {{{"mac", "02:00:00:00:00:0a"}}}}},
                              false);
  ASSERT_TRUE(del.ok()) << del.error().message;
}

TEST(ParseTunnel, FdbErrorsNameTheField) {
  auto add = [](json entries) {
    return parse_tunnel_fdb({{"network", "vx"}, {"entries", entries}}, true);
  };
  EXPECT_REFUSED(parse_tunnel_fdb({{"entries", json::array()}}, true), "invalid_argument",
                 "network: missing");
  EXPECT_REFUSED(add(json::array()), "invalid_argument", "entries: expected a non-empty list");
  EXPECT_REFUSED(add({{{"mac", "01:00:5e:00:00:01"}, {"vtep", "10.0.0.2"}}}), "invalid_argument",
                 "entries[0].mac: \"01:00:5e:00:00:01\" is not a unicast MAC");
  EXPECT_REFUSED(add({{{"mac", "02:00:00:00:00:01"}}}), "invalid_argument",
                 "entries[0].vtep: missing");
  EXPECT_REFUSED(add({{{"mac", "02:00:00:00:00:01"}, {"vtep", "fe80::1"}}}), "invalid_argument",
                 "entries[0].vtep: \"fe80::1\" is not an IPv4 address");
  EXPECT_REFUSED(add({{{"mac", "02:00:00:00:00:01"}, {"vtep", "239.1.1.1"}}}), "invalid_argument",
                 "not a unicast IPv4 address");
  EXPECT_REFUSED(add({{{"mac", "02:00:00:00:00:01"}, {"vtep", "10.0.0.2"}},
                      {{"mac", "02:00:00:00:00:01"}, {"vtep", "10.0.0.3"}}}),
                 "invalid_argument", "entries[1].mac: 02:00:00:00:00:01 is also entries[0]");
  EXPECT_REFUSED(add({{{"mac", "02:00:00:00:00:01"}, {"vtep", "10.0.0.2"}, {"x", 1}}}),
                 "invalid_argument", "entries[0].x");
  EXPECT_REFUSED(parse_tunnel_fdb({{"network", "vx"},
                                   {"entries", {{{"mac", "02:00:00:00:00:01"}, {"vtep", "1.2.3.4"}}}}},
                                  false),
                 "invalid_argument", "entries[0].vtep");
}

// The remote port's address (l2population's ip_address, for the ARP responder).
TEST(ParseTunnel, FdbEntryIp) {
  auto add = [](json entry) {
    return parse_tunnel_fdb({{"network", "vx"}, {"entries", {entry}}}, true);
  };
  const json e = {{"mac", "02:00:00:00:00:01"}, {"vtep", "10.99.0.2"}};
  auto r = add(e);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->entries[0].ip);
  json with = e;
  with["ip"] = "10.0.0.5";
  r = add(with);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->entries[0].ip, ip("10.0.0.5"));
  with["ip"] = nullptr;  // null: none
  ASSERT_TRUE(add(with).ok());
  for (const auto& [bad, why] : std::vector<std::pair<json, std::string>>{
           {"10.0.0", "entries[0].ip: \"10.0.0\" is not an IPv4 address"},
           {"fe80::1", "entries[0].ip: \"fe80::1\" is not an IPv4 address"},
           {"224.0.0.5", "entries[0].ip: \"224.0.0.5\" is not a unicast IPv4 address"},
           {"0.0.0.0", "entries[0].ip: \"0.0.0.0\" is not a unicast"},
           {"255.255.255.255", "not a unicast"},
           {5, "entries[0].ip: expected a string"}}) {
    with["ip"] = bad;
    EXPECT_REFUSED(add(with), "invalid_argument", why);
  }
  EXPECT_REFUSED(parse_tunnel_fdb({{"network", "vx"},
                                   {"entries", {{{"mac", "02:00:00:00:00:01"}, {"vtep", "10.0.0.2"},
                                                 {"ip", "10.0.0.5"}},
                                                {{"mac", "02:00:00:00:00:02"}, {"vtep", "10.0.0.2"},
                                                 {"ip", "10.0.0.5"}}}}},
                                  true),
                 "invalid_argument", "entries[1].ip: 10.0.0.5 is also the ip of entries[0]");
  // Delete names MACs only.
  EXPECT_REFUSED(parse_tunnel_fdb({{"network", "vx"},
                                   {"entries", {{{"mac", "02:00:00:00:00:01"}, {"ip", "10.0.0.5"}}}}},
                                  false),
                 "invalid_argument", "entries[0].ip");
}

TEST(ParseTunnel, Flood) {
  auto r = parse_tunnel_flood({{"network", "vx"}, {"vteps", {"10.0.0.2", "10.0.0.3"}}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->vteps.size(), 2u);
  EXPECT_TRUE(parse_tunnel_flood({{"network", "vx"}, {"vteps", json::array()}}).ok());
  EXPECT_REFUSED(parse_tunnel_flood({{"network", "vx"}}), "invalid_argument", "vteps: missing");
  EXPECT_REFUSED(parse_tunnel_flood({{"network", "vx"}, {"vteps", {"10.0.0.2", "10.0.0.2"}}}),
                 "invalid_argument", "vteps[1]: 10.0.0.2 is listed twice");
  EXPECT_REFUSED(parse_tunnel_flood({{"network", "vx"}, {"vteps", {"x"}}}), "invalid_argument",
                 "vteps[0]");
}

TEST(ParseTunnel, StoredFormRoundTrips) {
  TunnelSpec t;
  t.fdb[mac("02:00:00:00:00:01")] = ip("10.0.0.2");
  t.fdb[mac("02:00:00:00:00:02")] = ip("10.0.0.3");
  t.ips[mac("02:00:00:00:00:02")] = ip("10.0.0.22");
  t.flood = {ip("10.0.0.2"), ip("10.0.0.4")};
  EXPECT_EQ(to_json(t)["fdb"][1]["ip"], "10.0.0.22");
  EXPECT_FALSE(to_json(t)["fdb"][0].contains("ip"));
  auto back = parse_tunnel(to_json(t));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, t);
  EXPECT_EQ(ipv4_from_be32(ipv4_be32(ip("10.1.2.3"))), ip("10.1.2.3"));
}

class TunnelModelTest : public ::testing::Test {
 protected:
  TunnelModelTest() : m(kPhysnets) {
    m.set_vxlan({true, ip("10.99.0.1"), 1500});
  }
  void add(const json& j) {
    auto s = m.add_network(spec(j));
    ASSERT_TRUE(s.ok()) << s.error().message;
  }
  // The whole tunnel state, to show a refusal changed nothing.
  json state() const {
    json j = json::object();
    for (const auto& [net, t] : m.tunnels()) j[net] = to_json(t);
    j["networks"] = m.networks().size();
    return j;
  }
  Model m;
};

TEST_F(TunnelModelTest, VxlanNeedsAVtep) {
  Model plain(kPhysnets);
  EXPECT_REFUSED(plain.add_network(spec(vxlan("vx", 5))), "invalid_argument", "[vtep]");
  EXPECT_TRUE(plain.networks().empty());
}

TEST_F(TunnelModelTest, MtuDefaultsToUnderlayMinusOverheadAndIsCapped) {
  add(vxlan("vx1", 5));
  EXPECT_EQ(m.network("vx1")->mtu, 1450);
  json big = vxlan("vx2", 6);
  big["mtu"] = 1451;
  EXPECT_REFUSED(m.add_network(spec(big)), "invalid_argument", "mtu: 1451 is outside 68..1450");
  big["mtu"] = 1400;
  add(big);
  EXPECT_EQ(m.network("vx2")->mtu, 1400);
}

TEST_F(TunnelModelTest, VniIsUniqueAcrossVxlanNetworks) {
  add(vxlan("vx1", 100));
  add({{"id", "v100"}, {"type", "vlan"}, {"physnet", "physnet1"}, {"segmentation_id", 100}});
  const json before = state();
  EXPECT_REFUSED(m.add_network(spec(vxlan("vx2", 100))), "conflict",
                 "VNI 100 is already used by network vx1");
  EXPECT_EQ(state(), before);
}

TEST_F(TunnelModelTest, FdbAddReplacesAndDeleteRemoves) {
  add(vxlan("vx", 5));
  ASSERT_TRUE(m.add_tunnel_fdb("vx", {{mac("02:00:00:00:00:01"), ip("10.99.0.2")},
                                      {mac("02:00:00:00:00:02"), ip("10.99.0.2")}})
                  .ok());
  ASSERT_TRUE(m.add_tunnel_fdb("vx", {{mac("02:00:00:00:00:01"), ip("10.99.0.3")}}).ok());
  ASSERT_NE(m.tunnel("vx"), nullptr);
  EXPECT_EQ(m.tunnel("vx")->fdb.at(mac("02:00:00:00:00:01")), ip("10.99.0.3"));
  EXPECT_EQ(m.remote_vteps(), (std::set<IpAddr>{ip("10.99.0.2"), ip("10.99.0.3")}));
  ASSERT_TRUE(m.remove_tunnel_fdb("vx", {mac("02:00:00:00:00:01")}).ok());
  EXPECT_EQ(m.remote_vteps(), (std::set<IpAddr>{ip("10.99.0.2")}));
  ASSERT_TRUE(m.remove_tunnel_fdb("vx", {mac("02:00:00:00:00:02")}).ok());
  EXPECT_EQ(m.tunnel("vx"), nullptr);  // nothing left: no state
}

// An address is one MAC's: re-adding a MAC replaces its address (or drops
// it), another MAC cannot take it, deleting the MAC frees it.
TEST_F(TunnelModelTest, FdbIpsFollowTheirMacs) {
  add(vxlan("vx", 5));
  const Mac m1 = mac("02:00:00:00:00:01"), m2 = mac("02:00:00:00:00:02");
  ASSERT_TRUE(m.add_tunnel_fdb("vx", {{m1, ip("10.99.0.2"), ip("10.0.0.1")},
                                      {m2, ip("10.99.0.2"), ip("10.0.0.2")}})
                  .ok());
  EXPECT_EQ(m.tunnel("vx")->ips.at(m1), ip("10.0.0.1"));
  const json before = state();
  EXPECT_REFUSED(m.add_tunnel_fdb("vx", {{mac("02:00:00:00:00:03"), ip("10.99.0.2"), ip("10.0.0.1")}}),
                 "conflict", "entries[0].ip: 10.0.0.1 is the ip of remote MAC 02:00:00:00:00:01 in network vx");
  EXPECT_EQ(state(), before);
  ASSERT_TRUE(m.add_tunnel_fdb("vx", {{m1, ip("10.99.0.3"), ip("10.0.0.9")}}).ok());
  EXPECT_EQ(m.tunnel("vx")->ips.at(m1), ip("10.0.0.9"));
  ASSERT_TRUE(m.add_tunnel_fdb("vx", {{m1, ip("10.99.0.3"), std::nullopt}}).ok());
  EXPECT_FALSE(m.tunnel("vx")->ips.count(m1));
  // A swap in one request is fine: the result has each address once.
  ASSERT_TRUE(m.add_tunnel_fdb("vx", {{m1, ip("10.99.0.2"), ip("10.0.0.2")},
                                      {m2, ip("10.99.0.2"), ip("10.0.0.1")}})
                  .ok());
  ASSERT_TRUE(m.remove_tunnel_fdb("vx", {m2}).ok());
  EXPECT_EQ(m.tunnel("vx")->ips.size(), 1u);
  ASSERT_TRUE(m.add_tunnel_fdb("vx", {{m2, ip("10.99.0.2"), ip("10.0.0.1")}}).ok());
  // Restored state is checked the same way.
  TunnelSpec t = *m.tunnel("vx");
  Model fresh(kPhysnets);
  fresh.set_vxlan({true, ip("10.99.0.1"), 1500});
  ASSERT_TRUE(fresh.add_network(spec(vxlan("vx", 5))).ok());
  ASSERT_TRUE(fresh.restore_tunnel("vx", t).ok());
  EXPECT_EQ(*fresh.tunnel("vx"), t);
}

TEST(ParseVxlanNetwork, ArpResponderFlag) {
  EXPECT_TRUE(spec(vxlan("vx", 5)).arp_responder);  // default on
  json off = vxlan("vx", 5);
  off["arp_responder"] = false;
  EXPECT_FALSE(spec(off).arp_responder);
  EXPECT_EQ(to_json(spec(off))["arp_responder"], false);
  NetworkSpec stored = spec(off);
  stored.mtu = 1450;  // as the model stores it
  EXPECT_EQ(to_json(spec(to_json(stored))), to_json(stored));
  off["arp_responder"] = "no";
  EXPECT_REFUSED(parse_network(off), "invalid_argument", "arp_responder");
  EXPECT_REFUSED(parse_network({{"id", "l"}, {"type", "local"}, {"arp_responder", true}}),
                 "invalid_argument", "arp_responder: not allowed for a local network (vxlan only)");
  EXPECT_FALSE(to_json(spec({{"id", "l"}, {"type", "local"}})).contains("arp_responder"));
}

TEST_F(TunnelModelTest, RefusalsChangeNothing) {
  add(vxlan("vx", 5));
  add({{"id", "loc"}, {"type", "local"}});
  ASSERT_TRUE(m.add_tunnel_fdb("vx", {{mac("02:00:00:00:00:01"), ip("10.99.0.2")}}).ok());
  const json before = state();
  EXPECT_REFUSED(m.add_tunnel_fdb("nope", {{mac("02:00:00:00:00:05"), ip("10.99.0.2")}}),
                 "not_found", "no network nope");
  EXPECT_REFUSED(m.add_tunnel_fdb("loc", {{mac("02:00:00:00:00:05"), ip("10.99.0.2")}}),
                 "invalid_argument", "loc is a local network, not a vxlan network");
  // The second entry is bad: the first is not applied either.
  EXPECT_REFUSED(m.add_tunnel_fdb("vx", {{mac("02:00:00:00:00:05"), ip("10.99.0.4")},
                                         {mac("02:00:00:00:00:06"), ip("10.99.0.1")}}),
                 "invalid_argument", "entries[1].vtep: 10.99.0.1 is this host's own VTEP");
  EXPECT_REFUSED(m.remove_tunnel_fdb("vx", {mac("02:00:00:00:00:01"), mac("02:00:00:00:00:09")}),
                 "not_found", "entries[1].mac: 02:00:00:00:00:09 is not in the FDB");
  EXPECT_REFUSED(m.set_tunnel_flood("vx", {ip("10.99.0.5"), ip("10.99.0.1")}), "invalid_argument",
                 "vteps[1]: 10.99.0.1 is this host's own VTEP");
  EXPECT_REFUSED(m.set_tunnel_flood("loc", {}), "invalid_argument", "not a vxlan network");
  EXPECT_EQ(state(), before);
}

TEST_F(TunnelModelTest, FloodSetReplacesAndClears) {
  add(vxlan("vx", 5));
  ASSERT_TRUE(m.set_tunnel_flood("vx", {ip("10.99.0.2"), ip("10.99.0.3")}).ok());
  ASSERT_TRUE(m.set_tunnel_flood("vx", {ip("10.99.0.4")}).ok());
  EXPECT_EQ(m.tunnel("vx")->flood, (std::set<IpAddr>{ip("10.99.0.4")}));
  ASSERT_TRUE(m.set_tunnel_flood("vx", {}).ok());
  EXPECT_EQ(m.tunnel("vx"), nullptr);
}

TEST_F(TunnelModelTest, RemovingTheNetworkDropsItsTunnelState) {
  add(vxlan("vx", 5));
  ASSERT_TRUE(m.set_tunnel_flood("vx", {ip("10.99.0.2")}).ok());
  ASSERT_TRUE(m.remove_network("vx").ok());
  EXPECT_TRUE(m.tunnels().empty());
  add(vxlan("vx", 5));  // a new network of the same id starts empty
  EXPECT_EQ(m.tunnel("vx"), nullptr);
}

TEST_F(TunnelModelTest, RestoreChecksLikeARequest) {
  add(vxlan("vx", 5));
  TunnelSpec t;
  t.fdb[mac("02:00:00:00:00:01")] = ip("10.99.0.2");
  t.flood = {ip("10.99.0.3")};
  ASSERT_TRUE(m.restore_tunnel("vx", t).ok());
  EXPECT_EQ(*m.tunnel("vx"), t);
  const json before = state();
  EXPECT_REFUSED(m.restore_tunnel("vx", t), "already_exists", "already has tunnel state");
  TunnelSpec ours;
  ours.flood = {ip("10.99.0.1")};
  add(vxlan("vx2", 6));
  EXPECT_REFUSED(m.restore_tunnel("vx2", ours), "invalid_argument", "own VTEP");
  EXPECT_EQ(m.tunnel("vx2"), nullptr);
  EXPECT_EQ(state()["vx"], before["vx"]);
}

}  // namespace
}  // namespace strait::ctl
