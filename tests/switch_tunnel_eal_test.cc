// VXLAN through a real Switch (issue 6): the tunnel.* API and its refusals,
// persistence, next-hop resolution by ARP on the underlay, and frames
// encapsulated to and decapsulated from the underlay NIC (a net_ring).
#include <gtest/gtest.h>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <sstream>

#include "tests/frame_builder.h"
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
    h_->ok("port.bind", port_params(port_uuid(n), net, mac, vms_.back()->name()));
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
                                       "ip": null, "learned": false}])"));
  EXPECT_EQ(n["arp_responder"], true);
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
  h.ok("port.bind", port_params(port_uuid(1), "vx", kVmA, vm.name()));
  h.ok("tunnel.flood.set", {{"network", "vx"}, {"vteps", {kPeerIp}}});
  const std::string our_mac = h.ok("tunnel.show")["vtep"]["mac"];
  underlay.send({Eth(kNextHop, our_mac)
                     .ipv4(kPeerIp, kLocalIp)
                     .udp(50000, 4789)
                     .vxlan(5001, Eth("02:00:00:00:01:07", kVmA).ipv4().udp())});
  ASSERT_EQ(vm.wait_for(1).size(), 1u);
  json fdb;
  for (int i = 0; i < 100 && fdb.empty(); i++) {
    h.pump(std::chrono::milliseconds(10));
    fdb = h.ok("tunnel.show", {{"network", "vx"}})["networks"][0]["fdb"];
  }
  EXPECT_EQ(fdb, json::parse(R"([{"mac": "02:00:00:00:01:07", "vtep": "10.99.0.2",
                                  "ip": null, "learned": true}])"));
  // Back to the learned MAC: one VXLAN frame to the peer, not a flood.
  vm.send({Eth(kVmA, "02:00:00:00:01:07").ipv4().udp()});
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
    h.ok("network.create",
         {{"id", "quiet"}, {"type", "vxlan"}, {"segmentation_id", 5003}, {"arp_responder", false}});
    h.ok("tunnel.fdb.add", {{"network", "vx"},
                            {"entries", {{{"mac", kRemote}, {"vtep", kPeerIp}, {"ip", "10.0.0.2"}},
                                         {{"mac", "02:00:00:00:01:02"}, {"vtep", kPeerIp}}}}});
    h.ok("tunnel.flood.set", {{"network", "vx"}, {"vteps", {kPeerIp}}});
    h.ok("tunnel.flood.set", {{"network", "gone"}, {"vteps", {"10.99.0.5"}}});
    h.ok("network.delete", {{"id", "gone"}});  // its tunnel state goes with it
    before = h.ok("tunnel.show");
  }
  Harness h(cfg);
  json after = h.ok("tunnel.show");
  EXPECT_EQ(after["networks"], before["networks"]);
  EXPECT_EQ(after["remote_vteps"], before["remote_vteps"]);
  ASSERT_EQ(after["networks"].size(), 2u);
  EXPECT_EQ(after["networks"][0]["id"], "quiet");
  EXPECT_EQ(after["networks"][0]["arp_responder"], false);
  const json& fdb = after["networks"][1]["fdb"];
  ASSERT_EQ(fdb.size(), 2u);
  EXPECT_EQ(fdb[0]["ip"], "10.0.0.2");  // the ARP responder's address survives the restart
  EXPECT_TRUE(fdb[1]["ip"].is_null());
}

// Saved vxlan networks need [vtep]: a restart without it is refused, naming
// them and the VTEP they had, before anything opens; a changed local_ip
// starts, with a warning naming both addresses.
TEST(TunnelRestart, VxlanNetworksNeedTheirVtepAcrossRestarts) {
  RingPort underlay("net_ring_vrunder");
  auto cfg = vtep_config(underlay.name());
  {
    Harness h(cfg, /*keep_state=*/true);
    h.ok("network.create", {{"id", "vx"}, {"type", "vxlan"}, {"segmentation_id", 5001}});
  }
  auto no_vtep = cfg;
  no_vtep.vtep.reset();
  auto sw = ctl::Switch::create(no_vtep);
  ASSERT_FALSE(sw.ok());
  EXPECT_EQ(sw.error().code, "failed_precondition");
  EXPECT_NE(sw.error().message.find("vxlan network(s) vx need [vtep] (local_ip 10.99.0.1 on "
                                    "physnet underlay at the last start)"),
            std::string::npos)
      << sw.error().message;

  auto moved = cfg;
  moved.vtep->local_ip = *ctl::parse_ip("10.99.0.7");
  std::ostringstream log;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  spdlog::default_logger()->sinks().push_back(sink);
  {
    Harness h(moved, /*keep_state=*/true);
    EXPECT_EQ(h.ok("show")["recorded_config"]["vtep"]["local_ip"], "10.99.0.7");
    EXPECT_EQ(h.ok("network.list")["networks"].size(), 1u);
  }
  spdlog::default_logger()->sinks().pop_back();
  EXPECT_NE(log.str().find("vtep.local_ip changed from \"10.99.0.1\" to \"10.99.0.7\""),
            std::string::npos)
      << log.str();
  std::filesystem::remove_all(cfg.state_dir);
}

// The peer answers the worker's ARP request (or announces itself): the
// control thread learns its MAC and the VTEP is resolved.
TEST_F(TunnelTest, NextHopResolvedByArp) {
  start();
  RingPort& a = populate();
  // A frame for the peer makes the worker ask (and count vtep_unresolved).
  a.send({Eth(kVmA, kRemote).ipv4().udp()});
  h_->pump(std::chrono::milliseconds(50));
  const std::string our_mac = h_->ok("tunnel.show")["vtep"]["mac"];
  underlay_->send({Eth(kNextHop, our_mac).arp(2, kPeerIp, kLocalIp, kNextHop, our_mac)});
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
  const std::vector<Frame> sent = {
      Eth(kVmA, kRemote).ipv4("10.0.0.1", "10.0.0.2").udp(1234, 80).fill('x', 40)};
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
  a.send({Eth(kVmA, "ff:ff:ff:ff:ff:ff").ipv4().udp()});
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
  const Frame inner =
      Eth(kRemote, kVmB).ipv4("10.0.0.2", "10.0.0.11").udp(80, 1234).fill('y', 30);
  auto outer = [&](uint32_t vni, const char* dst_ip) -> Frame {
    return Eth(kNextHop, our_mac).ipv4(kPeerIp, dst_ip).udp(50000, 4789).vxlan(vni, inner);
  };
  const std::vector<Frame> want = {inner};
  underlay_->send({outer(5001, kLocalIp)});
  auto got = b.wait_for(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], want[0]);
  EXPECT_TRUE(a.take().empty());
  // Unknown VNI, and VXLAN for another address: dropped with their reasons.
  underlay_->send({outer(7777, kLocalIp), outer(5001, "10.99.0.9")});
  h_->pump(std::chrono::milliseconds(100));
  EXPECT_EQ(h_->drops("unknown_vni"), 1u);
  EXPECT_EQ(h_->drops("vxlan_not_ours"), 1u);
  EXPECT_TRUE(b.take().empty());
}

// ---- the ARP responder (neutron's arp_responder with l2population) ----------

constexpr char kVmAIp[] = "10.0.0.1";
constexpr char kRemoteIp[] = "10.0.0.2";  // kRemote's address on the other host

uint64_t arp_replies(Harness& h) {
  uint64_t n = 0;
  const json stats = h.sw().stats();  // lives through the loop
  for (const json& w : stats["workers"]) n += w["arp_responder_replies"].get<uint64_t>();
  return n;
}

std::string mac_at(const Frame& f, size_t at) {
  char buf[18];
  snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", f[at], f[at + 1], f[at + 2],
           f[at + 3], f[at + 4], f[at + 5]);
  return buf;
}

std::string ip_at(const Frame& f, size_t at) {
  return std::to_string(f[at]) + "." + std::to_string(f[at + 1]) + "." +
         std::to_string(f[at + 2]) + "." + std::to_string(f[at + 3]);
}

std::string hex(const Frame& f) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : f) s += {kDigits[b >> 4], kDigits[b & 15]};
  return s;
}

// VM A's broadcast "who has ip?".
std::vector<Frame> arp_request(const std::string& ip) {
  return {Eth(kVmA, "ff:ff:ff:ff:ff:ff").arp(1, kVmAIp, ip, kVmA)};
}

class ArpResponderTest : public TunnelTest {
 protected:
  // populate(), VM B bound too, and kRemote's address registered with it.
  void SetUp() override {
    start(kNextHop);
    a_ = &populate();
    b_ = &bind(2, "vx", kVmB);
    h_->ok("tunnel.fdb.add",
           {{"network", "vx"},
            {"entries", {{{"mac", kRemote}, {"vtep", kPeerIp}, {"ip", kRemoteIp}}}}});
  }
  // Nothing more arrives anywhere.
  void expect_quiet() {
    h_->pump(std::chrono::milliseconds(50));
    EXPECT_TRUE(a_->take().empty());
    EXPECT_TRUE(b_->take().empty());
    EXPECT_TRUE(underlay_->take().empty());
  }
  RingPort* a_ = nullptr;
  RingPort* b_ = nullptr;
};

// The answer comes from the switch as the remote port would give it, to the
// asking VM alone: nothing to B, nothing into the tunnel.
TEST_F(ArpResponderTest, RemotePortsAddressIsAnsweredLocally) {
  const json shown = h_->ok("tunnel.show", {{"network", "vx"}})["networks"][0];
  EXPECT_EQ(shown["arp_responder"], true);
  EXPECT_EQ(shown["fdb"][0]["ip"], kRemoteIp);
  const uint64_t before = arp_replies(*h_);
  for (int round = 0; round < 2; round++) {  // a pipeline decision, then a cached one
    SCOPED_TRACE(round);
    a_->send(arp_request(kRemoteIp));
    auto got = a_->wait_for(1);
    ASSERT_EQ(got.size(), 1u);
    const Frame& r = got[0];
    ASSERT_EQ(r.size(), 60u);
    EXPECT_EQ(mac_at(r, 0), kVmA);     // Ethernet: to the asker
    EXPECT_EQ(mac_at(r, 6), kRemote);  // from the remote port
    EXPECT_EQ(be16(r, 12), 0x0806);
    EXPECT_EQ(be16(r, 14), 1);         // hardware: Ethernet
    EXPECT_EQ(be16(r, 16), 0x0800);    // protocol: IPv4
    EXPECT_EQ(r[18], 6);
    EXPECT_EQ(r[19], 4);
    EXPECT_EQ(be16(r, 20), 2);         // opcode: reply
    EXPECT_EQ(mac_at(r, 22), kRemote); // sender: the remote port
    EXPECT_EQ(ip_at(r, 28), kRemoteIp);
    EXPECT_EQ(mac_at(r, 32), kVmA);    // target: the asker
    EXPECT_EQ(ip_at(r, 38), kVmAIp);
    const std::vector<Frame> want = {
        Eth(kRemote, kVmA).arp(2, kRemoteIp, kVmAIp, kRemote, kVmA).fill('\0', 18)};
    EXPECT_EQ(r, want[0]);
    expect_quiet();
  }
  EXPECT_EQ(arp_replies(*h_) - before, 2u);
  EXPECT_EQ(h_->drops("flood_no_target"), 0u);
}

// Same Ethernet header as the answered request: only the ARP target differs,
// so a decision cached by the Ethernet part alone would answer it too.
TEST_F(ArpResponderTest, UnknownAddressIsFloodedAsBefore) {
  a_->send(arp_request(kRemoteIp));
  ASSERT_EQ(a_->wait_for(1).size(), 1u);
  const uint64_t before = arp_replies(*h_);
  a_->send(arp_request("10.0.0.77"));
  EXPECT_EQ(b_->wait_for(1).size(), 1u);
  auto tunnelled = underlay_->wait_for(2);  // one copy per flood VTEP
  EXPECT_EQ(tunnelled.size(), 2u);
  expect_quiet();
  EXPECT_EQ(arp_replies(*h_), before);
  // Gratuitous ARP for the remote's address: an announcement, flooded.
  a_->send({Eth(kVmA, "ff:ff:ff:ff:ff:ff").arp(1, kRemoteIp, kRemoteIp, kVmA)});
  EXPECT_EQ(b_->wait_for(1).size(), 1u);
  EXPECT_EQ(arp_replies(*h_), before);
  // Deleting the entry takes the address with it: flooded again.
  h_->ok("tunnel.fdb.delete", {{"network", "vx"}, {"entries", {{{"mac", kRemote}}}}});
  a_->send(arp_request(kRemoteIp));
  EXPECT_EQ(b_->wait_for(1).size(), 1u);
  EXPECT_EQ(arp_replies(*h_), before);
}

TEST_F(ArpResponderTest, TraceSaysWhatHappens) {
  json t = h_->ok("trace", {{"port", port_uuid(1)}, {"frame", hex(arp_request(kRemoteIp)[0])}});
  EXPECT_EQ(t["verdict"], "arp_reply") << t.dump(1);
  EXPECT_EQ(t["consistent"], true);
  ASSERT_EQ(t["actions"].size(), 1u) << t.dump(1);
  EXPECT_EQ(t["actions"][0]["name"], port_uuid(1));  // back to the asker only
  std::string detail;
  for (const json& s : t["steps"])
    if (s["step"] == "arp_responder") detail = s["detail"];
  EXPECT_NE(detail.find("answered by the ARP responder with 02:00:00:00:01:01"), std::string::npos)
      << t.dump(1);
  EXPECT_NE(detail.find("not flooded"), std::string::npos) << detail;
  t = h_->ok("trace", {{"port", port_uuid(1)}, {"frame", hex(arp_request("10.0.0.77")[0])}});
  EXPECT_EQ(t["verdict"], "flood");
  detail.clear();
  for (const json& s : t["steps"])
    if (s["step"] == "arp_responder") detail = s["detail"];
  EXPECT_NE(detail.find("no remote port has this address"), std::string::npos) << t.dump(1);
}

TEST_F(ArpResponderTest, OffPerNetworkAndBadAddressesRefused) {
  // A network with the responder off floods every request.
  h_->ok("network.create",
         {{"id", "vq"}, {"type", "vxlan"}, {"segmentation_id", 5002}, {"arp_responder", false}});
  RingPort& c = bind(3, "vq", kVmA);
  h_->ok("tunnel.fdb.add", {{"network", "vq"},
                            {"entries", {{{"mac", kRemote}, {"vtep", kPeerIp}, {"ip", kRemoteIp}}}}});
  h_->ok("tunnel.flood.set", {{"network", "vq"}, {"vteps", {kPeerIp}}});
  EXPECT_EQ(h_->ok("tunnel.show", {{"network", "vq"}})["networks"][0]["arp_responder"], false);
  c.send(arp_request(kRemoteIp));
  EXPECT_EQ(underlay_->wait_for(1).size(), 1u);
  h_->pump(std::chrono::milliseconds(50));
  EXPECT_TRUE(c.take().empty());
  EXPECT_EQ(arp_replies(*h_), 0u);

  const json before = h_->ok("tunnel.show");
  auto refused = [&](const json& entry) {
    json r = h_->call("tunnel.fdb.add", {{"network", "vx"}, {"entries", {entry}}});
    EXPECT_FALSE(r["ok"].get<bool>()) << entry.dump();
    return r["error"]["code"].get<std::string>() + ": " + r["error"]["message"].get<std::string>();
  };
  const json base = {{"mac", "02:00:00:00:01:05"}, {"vtep", kPeerIp}};
  for (const char* bad : {"10.0.0", "fe80::1", "224.0.0.5", "0.0.0.0", "127.0.0.1"}) {
    json e = base;
    e["ip"] = bad;
    EXPECT_EQ(refused(e).rfind("invalid_argument: entries[0].ip: \"" + std::string(bad), 0), 0u)
        << refused(e);
  }
  json e = base;
  e["ip"] = 5;
  EXPECT_EQ(refused(e).rfind("invalid_argument: entries[0].ip", 0), 0u);
  e["ip"] = kRemoteIp;  // kRemote's already
  EXPECT_EQ(refused(e).rfind("conflict: entries[0].ip: 10.0.0.2 is the ip of remote MAC " +
                             std::string(kRemote), 0),
            0u)
      << refused(e);
  EXPECT_EQ(h_->call("network.create", {{"id", "lv"}, {"type", "local"}, {"arp_responder", true}})
                ["error"]["code"],
            "invalid_argument");
  EXPECT_EQ(h_->ok("tunnel.show"), before);
}

}  // namespace
}  // namespace strait::test
