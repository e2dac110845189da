// VXLAN through a real Switch (issue 6): the tunnel.* API and its refusals,
// persistence, next-hop resolution by ARP on the underlay, and frames
// encapsulated to and decapsulated from the underlay NIC (a net_ring).
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>

#include "tests/switch_harness.h"

namespace strait::test {
namespace {

using nlohmann::json;

constexpr char kVmA[] = "02:00:00:00:00:0a";
constexpr char kVmB[] = "02:00:00:00:00:0b";
constexpr char kRemote[] = "02:00:00:00:01:01";   // a VM on the other host
constexpr char kNextHop[] = "02:00:00:00:99:02";  // the other host's underlay NIC
constexpr char kLocalIp[] = "10.99.0.1";
constexpr char kPeerIp[] = "10.99.0.2";

std::string uuid(int n) {
  char buf[40];
  snprintf(buf, sizeof(buf), "00000000-0000-4000-8000-%012d", n);
  return buf;
}

ctl::Config vtep_config(const std::string& underlay, std::optional<std::string> next_hop_mac = {}) {
  ctl::Config cfg = test_config();
  cfg.physnets = {{"underlay", underlay}};
  ctl::VtepSettings v;
  v.local_ip = *ctl::parse_ip(kLocalIp);
  v.physnet = "underlay";
  if (next_hop_mac) v.next_hop_mac = *ctl::parse_mac(*next_hop_mac);
  cfg.vtep = v;
  return cfg;
}

uint16_t be16(const Frame& f, size_t at) { return uint16_t(f[at] << 8 | f[at + 1]); }

class TunnelTest : public ::testing::Test {
 protected:
  void start(std::optional<std::string> next_hop_mac = {}) {
    underlay_ = std::make_unique<RingPort>("net_ring_underlay");
    h_ = std::make_unique<Harness>(vtep_config(underlay_->name(), next_hop_mac));
  }
  void TearDown() override {
    h_.reset();
    vms_.clear();
    underlay_.reset();
  }
  RingPort& bind(int n, const std::string& net, const std::string& mac) {
    vms_.push_back(std::make_unique<RingPort>("net_ring_tvm" + std::to_string(n)));
    h_->ok("port.bind", port_params(uuid(n), net, mac, vms_.back()->name()));
    return *vms_.back();
  }
  // A vxlan network "vx" (VNI 5001) with VM A bound, kRemote behind the
  // peer and the peer in the flood list.
  RingPort& populate() {
    h_->ok("network.create", {{"id", "vx"}, {"type", "vxlan"}, {"segmentation_id", 5001}});
    RingPort& a = bind(1, "vx", kVmA);
    h_->ok("tunnel.fdb.add",
           {{"network", "vx"}, {"entries", {{{"mac", kRemote}, {"vtep", kPeerIp}}}}});
    h_->ok("tunnel.flood.set", {{"network", "vx"}, {"vteps", {kPeerIp, "10.99.0.3"}}});
    return a;
  }
  std::unique_ptr<RingPort> underlay_;
  std::vector<std::unique_ptr<RingPort>> vms_;
  std::unique_ptr<Harness> h_;
};

TEST_F(TunnelTest, NetworkFdbFloodAndShow) {
  start();
  json net = h_->ok("network.create", {{"id", "vx"}, {"type", "vxlan"}, {"segmentation_id", 5001}});
  EXPECT_EQ(net["type"], "vxlan");
  EXPECT_EQ(net["segmentation_id"], 5001);
  EXPECT_EQ(net["mtu"], 1450);  // underlay_mtu - 50
  bind(1, "vx", kVmA);
  h_->ok("tunnel.fdb.add", {{"network", "vx"}, {"entries", {{{"mac", kRemote}, {"vtep", kPeerIp}}}}});
  h_->ok("tunnel.flood.set", {{"network", "vx"}, {"vteps", {"10.99.0.3", kPeerIp}}});
  json t = h_->ok("tunnel.show");
  EXPECT_EQ(t["vtep"]["local_ip"], kLocalIp);
  EXPECT_EQ(t["vtep"]["physnet"], "underlay");
  EXPECT_EQ(t["vtep"]["udp_port"], 4789);
  EXPECT_EQ(t["vtep"]["ttl"], 64);
  EXPECT_TRUE(t["vtep"]["next_hop"].is_null());
  ASSERT_EQ(t["remote_vteps"].size(), 2u);
  EXPECT_EQ(t["remote_vteps"][0]["ip"], kPeerIp);
  EXPECT_EQ(t["remote_vteps"][0]["next_hop"], kPeerIp);
  EXPECT_EQ(t["remote_vteps"][0]["resolved"], false);
  EXPECT_EQ(t["remote_vteps"][1]["ip"], "10.99.0.3");
  ASSERT_EQ(t["networks"].size(), 1u);
  const json& n = t["networks"][0];
  EXPECT_EQ(n["id"], "vx");
  EXPECT_EQ(n["vni"], 5001);
  EXPECT_EQ(n["local_vlan"], 1);
  EXPECT_EQ(n["fdb"], json::parse(R"([{"mac": "02:00:00:00:01:01", "vtep": "10.99.0.2",
                                       "learned": false}])"));
  EXPECT_EQ(n["flood"], json::parse(R"(["10.99.0.2", "10.99.0.3"])"));
  json show = h_->ok("show");
  ASSERT_EQ(show["networks"].size(), 1u);
  EXPECT_EQ(show["networks"][0]["type"], "vxlan");
  EXPECT_EQ(show["networks"][0]["ports"], 1);
  // Delete and clear: the remote VTEPs leave tunnel.show.
  h_->ok("tunnel.fdb.delete", {{"network", "vx"}, {"entries", {{{"mac", kRemote}}}}});
  h_->ok("tunnel.flood.set", {{"network", "vx"}, {"vteps", json::array()}});
  t = h_->ok("tunnel.show", {{"network", "vx"}});
  EXPECT_TRUE(t["remote_vteps"].empty());
  EXPECT_TRUE(t["networks"][0]["fdb"].empty());
  EXPECT_TRUE(t["networks"][0]["flood"].empty());
}

TEST_F(TunnelTest, RefusalsChangeNothing) {
  start();
  populate();
  h_->ok("network.create", {{"id", "loc"}, {"type", "local"}});
  const json before = h_->ok("tunnel.show");
  auto code = [&](const std::string& method, const json& params) {
    json r = h_->call(method, params);
    EXPECT_FALSE(r["ok"].get<bool>()) << method << " " << params.dump();
    return r["error"]["code"].get<std::string>();
  };
  EXPECT_EQ(code("tunnel.fdb.add", {{"network", "vx"},
                                    {"entries", {{{"mac", "02:00:00:00:01:05"}, {"vtep", "10.99.0.7"}},
                                                 {{"mac", "02:00:00:00:01:06"}, {"vtep", kLocalIp}}}}}),
            "invalid_argument");
  EXPECT_EQ(code("tunnel.fdb.add", {{"network", "nope"},
                                    {"entries", {{{"mac", "02:00:00:00:01:05"}, {"vtep", kPeerIp}}}}}),
            "not_found");
  EXPECT_EQ(code("tunnel.fdb.add", {{"network", "loc"},
                                    {"entries", {{{"mac", "02:00:00:00:01:05"}, {"vtep", kPeerIp}}}}}),
            "invalid_argument");
  EXPECT_EQ(code("tunnel.fdb.delete", {{"network", "vx"},
                                       {"entries", {{{"mac", kRemote}}, {{"mac", "02:00:00:00:01:09"}}}}}),
            "not_found");
  EXPECT_EQ(code("tunnel.flood.set", {{"network", "vx"}, {"vteps", {kLocalIp}}}), "invalid_argument");
  EXPECT_EQ(code("tunnel.flood.set", {{"network", "vx"}}), "invalid_argument");
  EXPECT_EQ(code("tunnel.show", {{"network", "loc"}}), "invalid_argument");
  EXPECT_EQ(code("tunnel.show", {{"network", "nope"}}), "not_found");
  EXPECT_EQ(code("network.create", {{"id", "vx2"}, {"type", "vxlan"}, {"segmentation_id", 5001}}),
            "conflict");
  EXPECT_EQ(code("network.create",
                 {{"id", "vx2"}, {"type", "vxlan"}, {"segmentation_id", 5002}, {"mtu", 1500}}),
            "invalid_argument");
  EXPECT_EQ(h_->ok("tunnel.show"), before);
}

// learning = true: an inner source MAC no FDB entry names is learned behind
// the VTEP that sent it, shown as learned, and unicast back through it.
TEST(TunnelLearning, DecapsulatedSourcesAreLearnedBehindTheirVtep) {
  RingPort underlay("net_ring_lrunder"), vm("net_ring_lrvm");
  auto cfg = vtep_config(underlay.name(), kNextHop);
  cfg.vtep->learning = true;
  Harness h(cfg);
  h.ok("network.create", {{"id", "vx"}, {"type", "vxlan"}, {"segmentation_id", 5001}});
  h.ok("port.bind", port_params(uuid(1), "vx", kVmA, vm.name()));
  h.ok("tunnel.flood.set", {{"network", "vx"}, {"vteps", {kPeerIp}}});
  const std::string our_mac = h.ok("tunnel.show")["vtep"]["mac"];
  underlay.send(scapy(std::string("[Ether(src='") + kNextHop + "', dst='" + our_mac +
                      "')/IP(src='" + kPeerIp + "', dst='" + kLocalIp +
                      "')/UDP(sport=50000, dport=4789)/VXLAN(vni=5001)/Ether(src='02:00:00:00:01:07', dst='" +
                      kVmA + "')/IP()/UDP()]"));
  ASSERT_EQ(vm.wait_for(1).size(), 1u);
  json fdb;
  for (int i = 0; i < 100 && fdb.empty(); i++) {
    h.pump(std::chrono::milliseconds(10));
    fdb = h.ok("tunnel.show", {{"network", "vx"}})["networks"][0]["fdb"];
  }
  EXPECT_EQ(fdb, json::parse(R"([{"mac": "02:00:00:00:01:07", "vtep": "10.99.0.2",
                                  "learned": true}])"));
  // Back to the learned MAC: one VXLAN frame to the peer, not a flood.
  vm.send(scapy(std::string("[Ether(src='") + kVmA + "', dst='02:00:00:00:01:07')/IP()/UDP()]"));
  auto got = underlay.wait_for(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(std::vector<uint8_t>(got[0].begin() + 30, got[0].begin() + 34),
            (std::vector<uint8_t>{10, 99, 0, 2}));
  // The flood list cleared, the learned MAC still holds its VTEP.
  h.ok("tunnel.flood.set", {{"network", "vx"}, {"vteps", json::array()}});
  json t = h.ok("tunnel.show");
  ASSERT_EQ(t["remote_vteps"].size(), 1u);
  EXPECT_EQ(t["remote_vteps"][0]["ip"], kPeerIp);
}

TEST(TunnelNoVtep, VxlanNetworkNeedsAVtep) {
  RingPort phys("net_ring_novtep");
  auto cfg = test_config();
  cfg.physnets = {{"physnet1", phys.name()}};
  Harness h(cfg);
  json r = h.call("network.create", {{"id", "vx"}, {"type", "vxlan"}, {"segmentation_id", 5}});
  EXPECT_FALSE(r["ok"].get<bool>());
  EXPECT_EQ(r["error"]["code"], "invalid_argument");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("vtep"), std::string::npos);
  EXPECT_TRUE(h.ok("tunnel.show")["vtep"].is_null());
}

TEST(TunnelRestart, TunnelStateIsRestored) {
  RingPort underlay("net_ring_rsunder");
  auto cfg = vtep_config(underlay.name());
  json before;
  {
    Harness h(cfg, /*keep_state=*/true);
    h.ok("network.create", {{"id", "vx"}, {"type", "vxlan"}, {"segmentation_id", 5001}});
    h.ok("network.create", {{"id", "gone"}, {"type", "vxlan"}, {"segmentation_id", 5002}});
    h.ok("tunnel.fdb.add", {{"network", "vx"}, {"entries", {{{"mac", kRemote}, {"vtep", kPeerIp}}}}});
    h.ok("tunnel.flood.set", {{"network", "vx"}, {"vteps", {kPeerIp}}});
    h.ok("tunnel.flood.set", {{"network", "gone"}, {"vteps", {"10.99.0.5"}}});
    h.ok("network.delete", {{"id", "gone"}});  // its tunnel state goes with it
    before = h.ok("tunnel.show");
  }
  Harness h(cfg);
  json after = h.ok("tunnel.show");
  EXPECT_EQ(after["networks"], before["networks"]);
  EXPECT_EQ(after["remote_vteps"], before["remote_vteps"]);
  ASSERT_EQ(after["networks"].size(), 1u);
  EXPECT_EQ(after["networks"][0]["fdb"].size(), 1u);
}

// The peer answers the worker's ARP request (or announces itself): the
// control thread learns its MAC and the VTEP is resolved.
TEST_F(TunnelTest, NextHopResolvedByArp) {
  start();
  RingPort& a = populate();
  // A frame for the peer makes the worker ask (and count vtep_unresolved).
  a.send(scapy(std::string("[Ether(src='") + kVmA + "', dst='" + kRemote + "')/IP()/UDP()]"));
  h_->pump(std::chrono::milliseconds(50));
  const std::string our_mac = h_->ok("tunnel.show")["vtep"]["mac"];
  underlay_->send(scapy(std::string("[Ether(src='") + kNextHop + "', dst='" + our_mac +
                        "')/ARP(op=2, hwsrc='" + kNextHop + "', psrc='" + kPeerIp +
                        "', hwdst='" + our_mac + "', pdst='" + kLocalIp + "')]"));
  json peer;
  for (int i = 0; i < 100; i++) {
    h_->pump(std::chrono::milliseconds(20));
    peer = h_->ok("tunnel.show")["remote_vteps"][0];
    if (peer["resolved"] == true) break;
  }
  EXPECT_EQ(peer["ip"], kPeerIp);
  EXPECT_EQ(peer["resolved"], true);
  EXPECT_EQ(peer["mac"], kNextHop);
  EXPECT_EQ(h_->ok("tunnel.show")["remote_vteps"][1]["resolved"], false);  // 10.99.0.3 did not answer
}

TEST_F(TunnelTest, StaticNextHopNeedsNoArp) {
  start(kNextHop);
  populate();
  json t = h_->ok("tunnel.show");
  EXPECT_EQ(t["vtep"]["next_hop_mac"], kNextHop);
  for (const json& r : t["remote_vteps"]) {
    EXPECT_EQ(r["resolved"], true);
    EXPECT_EQ(r["mac"], kNextHop);
  }
}

TEST_F(TunnelTest, VmFrameToRemoteMacIsEncapsulated) {
  start(kNextHop);
  RingPort& a = populate();
  auto sent = scapy(std::string("[Ether(src='") + kVmA + "', dst='" + kRemote +
                    "')/IP(src='10.0.0.1', dst='10.0.0.2')/UDP(sport=1234, dport=80)/('x'*40)]");
  a.send(sent);
  auto got = underlay_->wait_for(1);
  ASSERT_EQ(got.size(), 1u);
  const Frame& f = got[0];
  ASSERT_EQ(f.size(), sent[0].size() + 50);
  const std::string our_mac = h_->ok("tunnel.show")["vtep"]["mac"];
  char dst[18], src[18];
  snprintf(dst, sizeof dst, "%02x:%02x:%02x:%02x:%02x:%02x", f[0], f[1], f[2], f[3], f[4], f[5]);
  snprintf(src, sizeof src, "%02x:%02x:%02x:%02x:%02x:%02x", f[6], f[7], f[8], f[9], f[10], f[11]);
  EXPECT_EQ(std::string(dst), kNextHop);
  EXPECT_EQ(std::string(src), our_mac);
  EXPECT_EQ(be16(f, 12), 0x0800);
  EXPECT_EQ(f[14], 0x45);
  EXPECT_EQ(be16(f, 20) & 0x4000, 0x4000);  // DF
  EXPECT_EQ(f[22], 64);                     // TTL
  EXPECT_EQ(f[23], 17);                     // UDP
  EXPECT_EQ(std::vector<uint8_t>(f.begin() + 26, f.begin() + 30),
            (std::vector<uint8_t>{10, 99, 0, 1}));
  EXPECT_EQ(std::vector<uint8_t>(f.begin() + 30, f.begin() + 34),
            (std::vector<uint8_t>{10, 99, 0, 2}));
  EXPECT_GE(be16(f, 34), 49152);  // source port from the inner flow
  EXPECT_EQ(be16(f, 36), 4789);
  EXPECT_EQ(f[42], 0x08);  // VXLAN I flag
  EXPECT_EQ((f[46] << 16) | (f[47] << 8) | f[48], 5001);
  EXPECT_TRUE(std::equal(sent[0].begin(), sent[0].end(), f.begin() + 50));
  // Broadcast: one copy per flood VTEP, none back to the sender.
  a.send(scapy(std::string("[Ether(src='") + kVmA + "', dst='ff:ff:ff:ff:ff:ff')/IP()/UDP()]"));
  auto flooded = underlay_->wait_for(2);
  h_->pump(std::chrono::milliseconds(50));
  auto more = underlay_->take();
  EXPECT_EQ(flooded.size() + more.size(), 2u);
}

TEST_F(TunnelTest, VxlanFromPeerReachesTheVmDecapsulated) {
  start(kNextHop);
  RingPort& a = populate();
  RingPort& b = bind(2, "vx", kVmB);
  const std::string our_mac = h_->ok("tunnel.show")["vtep"]["mac"];
  const std::string inner = std::string("Ether(src='") + kRemote + "', dst='" + kVmB +
                            "')/IP(src='10.0.0.2', dst='10.0.0.11')/UDP(sport=80, dport=1234)/('y'*30)";
  auto outer = [&](int vni, const char* dst_ip) {
    return std::string("Ether(src='") + kNextHop + "', dst='" + our_mac + "')/IP(src='" + kPeerIp +
           "', dst='" + dst_ip + "')/UDP(sport=50000, dport=4789)/VXLAN(vni=" + std::to_string(vni) +
           ")/" + inner;
  };
  auto want = scapy("[" + inner + "]");
  underlay_->send(scapy("[" + outer(5001, kLocalIp) + "]"));
  auto got = b.wait_for(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], want[0]);
  EXPECT_TRUE(a.take().empty());
  // Unknown VNI, and VXLAN for another address: dropped with their reasons.
  underlay_->send(scapy("[" + outer(7777, kLocalIp) + ", " + outer(5001, "10.99.0.9") + "]"));
  h_->pump(std::chrono::milliseconds(100));
  EXPECT_EQ(h_->drops("unknown_vni"), 1u);
  EXPECT_EQ(h_->drops("vxlan_not_ours"), 1u);
  EXPECT_TRUE(b.take().empty());
}

}  // namespace
}  // namespace strait::test
