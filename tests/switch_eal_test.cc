// The forwarding core through real DPDK devices: a Switch with its worker
// lcores, net_ring ethdevs as VM NICs and as the physnet NIC, frames made by
// tests/frame_builder.h, outputs read back and checked field by field.
#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "tests/frame_builder.h"
#include "tests/switch_harness.h"

namespace strait::test {
namespace {

using nlohmann::json;

constexpr char kMacA[] = "02:00:00:00:00:0a";
constexpr char kMacB[] = "02:00:00:00:00:0b";
constexpr char kMacC[] = "02:00:00:00:00:0c";
constexpr char kMacD[] = "02:00:00:00:00:0d";
constexpr char kRemote[] = "02:00:00:00:99:01";  // a host behind the physnet

// Ethernet fields of a frame.
std::string eth_dst(const Frame& f) {
  char b[18];
  snprintf(b, sizeof(b), "%02x:%02x:%02x:%02x:%02x:%02x", f[0], f[1], f[2], f[3], f[4], f[5]);
  return b;
}
uint16_t ethertype(const Frame& f) { return uint16_t(f[12] << 8 | f[13]); }
uint16_t vlan_id(const Frame& f) { return uint16_t((f[14] << 8 | f[15]) & 0xfff); }

class SwitchTest : public ::testing::Test {
 protected:
  // One physnet NIC; networks and ports per test.
  void SetUp() override {
    phys_ = std::make_unique<RingPort>("net_ring_phys");
    auto cfg = test_config();
    cfg.physnets = {{"physnet1", "net_ring_phys"}};
    h_ = std::make_unique<Harness>(cfg);
  }
  void TearDown() override {
    h_.reset();
    ports_.clear();
    phys_.reset();
  }
  RingPort& port(const std::string& name) {
    ports_.push_back(std::make_unique<RingPort>(name));
    return *ports_.back();
  }
  RingPort& bind(int n, const std::string& net, const std::string& mac) {
    RingPort& p = port("net_ring_vm" + std::to_string(n));
    h_->ok("port.bind", port_params(port_uuid(n), net, mac, p.name()));
    return p;
  }
  std::unique_ptr<RingPort> phys_;
  std::vector<std::unique_ptr<RingPort>> ports_;
  std::unique_ptr<Harness> h_;
};

TEST_F(SwitchTest, VmToPhysnetIsTaggedWithSegmentationId) {
  h_->ok("network.create", {{"id", "n1"}, {"type", "vlan"}, {"physnet", "physnet1"},
                            {"segmentation_id", 100}});
  RingPort& a = bind(1, "n1", kMacA);
  const std::vector<Frame> sent = {
      Eth(kMacA, kRemote).ipv4("10.0.0.1", "10.0.0.9").udp(1234, 80).fill('x', 40)};
  a.send(sent);
  auto got = phys_->wait_for(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(eth_dst(got[0]), kRemote);
  EXPECT_EQ(ethertype(got[0]), 0x8100);
  EXPECT_EQ(vlan_id(got[0]), 100);
  // Everything after the tag is the VM's frame, unchanged.
  ASSERT_EQ(got[0].size(), sent[0].size() + 4);
  EXPECT_TRUE(std::equal(sent[0].begin() + 12, sent[0].end(), got[0].begin() + 16));
}

TEST_F(SwitchTest, PhysnetToVmArrivesUntagged) {
  h_->ok("network.create", {{"id", "n1"}, {"type", "vlan"}, {"physnet", "physnet1"},
                            {"segmentation_id", 100}});
  RingPort& a = bind(1, "n1", kMacA);
  const std::vector<Frame> sent = {
      Eth(kRemote, kMacA).vlan(100, 3).ipv4("10.0.0.9", "10.0.0.1").udp().fill('y', 30)};
  phys_->send(sent);
  auto got = a.wait_for(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(ethertype(got[0]), 0x0800);
  ASSERT_EQ(got[0].size(), sent[0].size() - 4);
  EXPECT_TRUE(std::equal(sent[0].begin() + 16, sent[0].end(), got[0].begin() + 12));
}

TEST_F(SwitchTest, FlatNetworkIsUntaggedBothWays) {
  h_->ok("network.create", {{"id", "flat"}, {"type", "flat"}, {"physnet", "physnet1"}});
  RingPort& a = bind(1, "flat", kMacA);
  a.send({Eth(kMacA, kRemote).ipv4().udp()});
  auto out = phys_->wait_for(1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(ethertype(out[0]), 0x0800);
  phys_->send({Eth(kRemote, kMacA).ipv4().udp()});
  auto in = a.wait_for(1);
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(ethertype(in[0]), 0x0800);
}

TEST_F(SwitchTest, UnknownVlanFromPhysnetDropped) {
  h_->ok("network.create", {{"id", "n1"}, {"type", "vlan"}, {"physnet", "physnet1"},
                            {"segmentation_id", 100}});
  RingPort& a = bind(1, "n1", kMacA);
  phys_->send({Eth(kRemote, kMacA).vlan(101).ipv4().udp(), Eth(kRemote, kMacA).vlan(100).ipv4().udp()});
  auto got = a.wait_for(1);
  ASSERT_EQ(got.size(), 1u);  // only the frame of VLAN 100
  h_->pump(std::chrono::milliseconds(20));
  EXPECT_EQ(h_->drops("unknown_vlan"), 1u);
  EXPECT_TRUE(a.take().empty());
}

TEST_F(SwitchTest, TaggedFrameFromAccessPortDropped) {
  h_->ok("network.create", {{"id", "n1"}, {"type", "local"}});
  RingPort& a = bind(1, "n1", kMacA);
  RingPort& b = bind(2, "n1", kMacB);
  // A double tag (802.1ad + 802.1Q) must not escape either.
  a.send({Eth(kMacA, kMacB).vlan(5).ipv4().udp(),
          Eth(kMacA, kMacB).vlan(7, 0, 0x88a8).vlan(8).ipv4().udp(), Eth(kMacA, kMacB).ipv4().udp()});
  auto got = b.wait_for(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(ethertype(got[0]), 0x0800);
  EXPECT_EQ(h_->drops("tagged_on_access_port"), 2u);
}

TEST_F(SwitchTest, FloodStaysInsideNetwork) {
  h_->ok("network.create", {{"id", "n1"}, {"type", "local"}});
  h_->ok("network.create", {{"id", "n2"}, {"type", "vlan"}, {"physnet", "physnet1"},
                            {"segmentation_id", 200}});
  RingPort& a = bind(1, "n1", kMacA);
  RingPort& b = bind(2, "n1", kMacB);
  RingPort& c = bind(3, "n2", kMacC);
  a.send({Eth(kMacA, "ff:ff:ff:ff:ff:ff").arp(1, "10.0.0.1", "10.0.0.2")});
  ASSERT_EQ(b.wait_for(1).size(), 1u);
  // The flood was one burst: had it leaked, C and the physnet have it now.
  EXPECT_TRUE(c.take().empty());
  EXPECT_TRUE(phys_->take().empty());
  EXPECT_TRUE(a.take().empty());  // never back to the sender
}

TEST_F(SwitchTest, SameMacsInTwoNetworksStayIsolated) {
  h_->ok("network.create", {{"id", "n1"}, {"type", "local"}});
  h_->ok("network.create", {{"id", "n2"}, {"type", "local"}});
  RingPort& a1 = bind(1, "n1", kMacA);
  RingPort& b1 = bind(2, "n1", kMacB);
  RingPort& a2 = bind(3, "n2", kMacA);
  RingPort& b2 = bind(4, "n2", kMacB);
  const std::vector<Frame> to_b = {Eth(kMacA, kMacB).ipv4("10.0.0.1").udp(53, 1),
                                   Eth(kMacA, kMacB).ipv4("10.0.0.2").udp(53, 2)};
  a1.send({to_b[0]});
  a2.send({to_b[1]});
  auto g1 = b1.wait_for(1), g2 = b2.wait_for(1);
  ASSERT_EQ(g1.size(), 1u);
  ASSERT_EQ(g2.size(), 1u);
  EXPECT_EQ(g1[0], to_b[0]);
  EXPECT_EQ(g2[0], to_b[1]);
  h_->pump(std::chrono::milliseconds(20));
  EXPECT_TRUE(b1.take().empty());
  EXPECT_TRUE(b2.take().empty());
  EXPECT_TRUE(a1.take().empty() && a2.take().empty());
}

TEST_F(SwitchTest, PhysnetSourceMacIsLearnedAndUnicastStopsFlooding) {
  h_->ok("network.create", {{"id", "n1"}, {"type", "vlan"}, {"physnet", "physnet1"},
                            {"segmentation_id", 100}});
  RingPort& a = bind(1, "n1", kMacA);
  RingPort& b = bind(2, "n1", kMacB);
  const std::vector<Frame> to_remote = {Eth(kMacA, kRemote).ipv4().udp()};
  // Unknown yet: flooded to B and the physnet.
  a.send(to_remote);
  ASSERT_EQ(phys_->wait_for(1).size(), 1u);
  ASSERT_EQ(b.wait_for(1).size(), 1u);
  // The remote host speaks: its MAC is learned behind the physnet.
  phys_->send({Eth(kRemote, "ff:ff:ff:ff:ff:ff").vlan(100).arp()});
  ASSERT_EQ(a.wait_for(1).size(), 1u);
  ASSERT_EQ(b.wait_for(1).size(), 1u);
  h_->pump(std::chrono::milliseconds(50));
  EXPECT_EQ(h_->sw().show()["learned_macs"], 1);
  a.send(to_remote);
  auto out = phys_->wait_for(1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(vlan_id(out[0]), 100);
  EXPECT_TRUE(b.take().empty());  // no longer flooded
}

// Issue 22: a learned MAC changes the decisions of the flows that name it
// and of no other. The snapshot is not rebuilt; flows of the same network
// and of another stay cached; the flow to the new MAC is decided again and
// goes out unicast.
TEST_F(SwitchTest, LearningAMacDecidesAgainOnlyTheFlowsNamingIt) {
  constexpr char kRemote2[] = "02:00:00:00:99:02";
  h_->ok("network.create", {{"id", "n1"}, {"type", "vlan"}, {"physnet", "physnet1"},
                            {"segmentation_id", 100}});
  h_->ok("network.create", {{"id", "n2"}, {"type", "vlan"}, {"physnet", "physnet1"},
                            {"segmentation_id", 200}});
  RingPort& a = bind(1, "n1", kMacA);
  RingPort& b = bind(2, "n1", kMacB);
  RingPort& c = bind(3, "n2", kMacC);
  RingPort& d = bind(4, "n2", kMacD);
  auto drain = [&] {
    h_->pump(std::chrono::milliseconds(50));
    for (RingPort* p : {&a, &b, &c, &d, phys_.get()}) p->take();
  };
  phys_->send({Eth(kRemote, "ff:ff:ff:ff:ff:ff").vlan(100).arp()});
  ASSERT_EQ(a.wait_for(1).size(), 1u);
  drain();
  ASSERT_EQ(h_->sw().show()["learned_macs"], 1);
  const Frame a_to_b = Eth(kMacA, kMacB).ipv4().udp(), c_to_d = Eth(kMacC, kMacD).ipv4().udp();
  const Frame a_to_remote = Eth(kMacA, kRemote).ipv4().udp();
  const Frame a_to_remote2 = Eth(kMacA, kRemote2).ipv4().udp();
  auto send_all = [&] {
    a.send({a_to_b});
    c.send({c_to_d});
    a.send({a_to_remote});
    ASSERT_EQ(b.wait_for(1).size(), 1u);
    ASSERT_EQ(d.wait_for(1).size(), 1u);
    ASSERT_EQ(phys_->wait_for(1).size(), 1u);
    drain();
  };
  send_all();
  a.send({a_to_remote2});  // unknown: flooded
  ASSERT_EQ(b.wait_for(1).size(), 1u);
  drain();
  const uint64_t generation = h_->ok("stats")["generation"].get<uint64_t>();

  // The second remote host speaks in n1: learned.
  phys_->send({Eth(kRemote2, "ff:ff:ff:ff:ff:ff").vlan(100).arp()});
  ASSERT_EQ(a.wait_for(1).size(), 1u);
  drain();
  ASSERT_EQ(h_->sw().show()["learned_macs"], 2);
  EXPECT_EQ(h_->ok("stats")["generation"].get<uint64_t>(), generation)
      << "a learned MAC publishes no snapshot";
  const uint64_t misses = h_->worker_sum("cache_misses"), stale = h_->worker_sum("cache_stale");
  send_all();
  EXPECT_EQ(h_->worker_sum("cache_misses"), misses) << "flows not naming the new MAC stay cached";
  a.send({a_to_remote2});
  auto out = phys_->wait_for(1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(vlan_id(out[0]), 100);
  h_->pump(std::chrono::milliseconds(50));
  EXPECT_TRUE(b.take().empty()) << "unicast now, no longer flooded";
  EXPECT_EQ(h_->worker_sum("cache_misses"), misses + 1);
  EXPECT_EQ(h_->worker_sum("cache_stale"), stale + 1);
}

// A learned MAC that stops talking is forgotten after mac_aging_s, and
// traffic to it floods again; traffic from it keeps it alive.
TEST(SwitchAging, LearnedMacAgesOutAndFloodingResumes) {
  RingPort phys("net_ring_agphys"), a("net_ring_aga"), b("net_ring_agb");
  auto cfg = test_config();
  cfg.physnets = {{"physnet1", "net_ring_agphys"}};
  cfg.mac_aging_s = 1;
  Harness h(cfg);
  h.ok("network.create", {{"id", "n1"}, {"type", "flat"}, {"physnet", "physnet1"}});
  h.ok("port.bind", port_params(port_uuid(41), "n1", kMacA, a.name()));
  h.ok("port.bind", port_params(port_uuid(42), "n1", kMacB, b.name()));
  const std::vector<Frame> from_remote = {Eth(kRemote, "ff:ff:ff:ff:ff:ff").arp()};
  const std::vector<Frame> to_remote = {Eth(kMacA, kRemote).ipv4().udp()};
  phys.send(from_remote);
  ASSERT_EQ(b.wait_for(1).size(), 1u);
  a.take();
  h.pump(std::chrono::milliseconds(50));
  ASSERT_EQ(h.sw().show()["learned_macs"], 1);
  // Kept alive while it talks: 2.5 s of traffic every 300 ms.
  for (int i = 0; i < 8; i++) {
    phys.send(from_remote);
    h.pump(std::chrono::milliseconds(300));
  }
  EXPECT_EQ(h.sw().show()["learned_macs"], 1);
  a.take();
  b.take();
  // Silent for more than the aging time: forgotten, unicast floods again.
  h.pump(std::chrono::milliseconds(2500));
  EXPECT_EQ(h.sw().show()["learned_macs"], 0);
  a.send(to_remote);
  EXPECT_EQ(phys.wait_for(1).size(), 1u);
  EXPECT_EQ(b.wait_for(1).size(), 1u);  // flooded
}

// A host whose frames the receiving VM's port security drops every time
// (an ethertype it denies) is still seen: it stays learned while it sends,
// and traffic to it is not flooded again every aging period.
TEST(SwitchAging, SourceOfDroppedFramesStaysLearnedWhileItSends) {
  RingPort phys("net_ring_agdphys"), a("net_ring_agda"), b("net_ring_agdb"), c("net_ring_agdc");
  auto cfg = test_config();
  cfg.physnets = {{"physnet1", "net_ring_agdphys"}};
  cfg.mac_aging_s = 1;
  Harness h(cfg);
  h.ok("network.create", {{"id", "n1"}, {"type", "flat"}, {"physnet", "physnet1"}});
  json pa = port_params(port_uuid(43), "n1", kMacA, a.name());
  pa["port_security_enabled"] = true;
  h.ok("port.bind", pa);
  h.ok("port.bind", port_params(port_uuid(44), "n1", kMacB, b.name()));
  h.ok("port.bind", port_params(port_uuid(45), "n1", kMacC, c.name()));  // sees floods
  const std::vector<Frame> denied = {Eth(kRemote, kMacA).type(0x88b5)};
  const std::vector<Frame> to_remote = {Eth(kMacB, kRemote).ipv4().udp()};
  phys.send(denied);
  for (int i = 0; i < 100 && h.sw().show()["learned_macs"] != 1; i++)
    h.pump(std::chrono::milliseconds(20));
  ASSERT_EQ(h.sw().show()["learned_macs"], 1);
  // 3 s: B sends to the host just before each of the host's frames, when a
  // MAC that aged out would not be learned again yet.
  int flooded = 0;
  for (int i = 0; i < 10; i++) {
    h.pump(std::chrono::milliseconds(300));
    b.send(to_remote);
    ASSERT_EQ(phys.wait_for(1).size(), 1u);
    h.pump(std::chrono::milliseconds(10));
    flooded += int(c.take().size());
    phys.send(denied);
  }
  EXPECT_EQ(flooded, 0) << "the host aged out while it was sending";
  h.pump(std::chrono::milliseconds(50));
  EXPECT_EQ(h.sw().show()["learned_macs"], 1);
  EXPECT_GE(h.drops("ethertype_denied"), 10u) << "the host's frames were dropped by A";
}

TEST_F(SwitchTest, FramesAboveNetworkMtuDropped) {
  h_->ok("network.create", {{"id", "n1"}, {"type", "local"}, {"mtu", 1000}});
  RingPort& a = bind(1, "n1", kMacA);
  RingPort& b = bind(2, "n1", kMacB);
  // IP total length 1000 fits; 1001 does not.
  a.send({Eth(kMacA, kMacB).ipv4().udp().fill('a', 972), Eth(kMacA, kMacB).ipv4().udp().fill('a', 973)});
  auto got = b.wait_for(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].size(), 1014u);
  h_->pump(std::chrono::milliseconds(20));
  EXPECT_TRUE(b.take().empty());
  EXPECT_EQ(h_->drops("mtu_exceeded"), 1u);
}

TEST_F(SwitchTest, RefusedBindChangesNothing) {
  h_->ok("network.create", {{"id", "n1"}, {"type", "local"}});
  bind(1, "n1", kMacA);
  json before = h_->ok("show");
  // A device that cannot be probed, and a MAC already in the network.
  json r1 = h_->call("port.bind", port_params(port_uuid(2), "n1", kMacB, "net_nonexistent0"));
  EXPECT_FALSE(r1["ok"].get<bool>());
  EXPECT_EQ(r1["error"]["code"], "device_error");
  RingPort& p3 = port("net_ring_vm3");
  json r2 = h_->call("port.bind", port_params(port_uuid(3), "n1", kMacA, p3.name()));
  EXPECT_FALSE(r2["ok"].get<bool>());
  EXPECT_EQ(r2["error"]["code"], "conflict");
  json after = h_->ok("show");
  EXPECT_EQ(before["ports"], after["ports"]);
  EXPECT_EQ(before["networks"], after["networks"]);
  EXPECT_EQ(before["generation"], after["generation"]);  // nothing was published
  // The refused attempts leaked nothing: the device and index are still free.
  h_->ok("port.bind", port_params(port_uuid(3), "n1", kMacB, p3.name()));
}

// F5: many ports in one request bind together or not at all. A refused bulk
// (a bad port last, a device that cannot open, a MAC clash inside the list)
// leaves nothing behind: no port, no local VLAN, no device, no snapshot.
TEST_F(SwitchTest, BulkBindIsAllOrNothing) {
  h_->ok("network.create", {{"id", "n1"}, {"type", "local"}});
  h_->ok("network.create", {{"id", "n2"}, {"type", "local"}});
  RingPort& a = port("net_ring_bk1");
  RingPort& b = port("net_ring_bk2");
  RingPort& c = port("net_ring_bk3");
  const json pa = port_params(port_uuid(21), "n1", kMacA, a.name());
  const json pb = port_params(port_uuid(22), "n1", kMacB, b.name());
  const json pc = port_params(port_uuid(23), "n2", kMacC, c.name());
  const json before = h_->ok("show");
  const std::vector<std::pair<json, std::string>> refused = {
      {json::array({pa, pb, port_params(port_uuid(24), "n2", "zz", c.name())}), "ports[2]: mac"},
      {json::array({pa, pc, port_params(port_uuid(24), "n2", kMacD, "net_nonexistent0")}), "ports[2]"},
      {json::array({pa, pb, port_params(port_uuid(24), "n1", kMacA, c.name())}), "ports[2]"},
      {json::array({pa, pa}), "ports[1]"},
  };
  for (const auto& [list, where] : refused) {
    json r = h_->call("port.bind", {{"ports", list}});
    ASSERT_FALSE(r["ok"].get<bool>()) << list.dump();
    EXPECT_NE(r["error"]["message"].get<std::string>().find(where), std::string::npos) << r.dump();
    const json now = h_->ok("show");
    EXPECT_EQ(now["ports"], before["ports"]);
    EXPECT_EQ(now["networks"], before["networks"]);  // no local VLAN taken
    EXPECT_EQ(now["generation"], before["generation"]);
  }
  // The same devices bind in one go: one snapshot, every port live on reply.
  json r = h_->ok("port.bind", {{"ports", {pa, pb, pc}}});
  ASSERT_EQ(r["ports"].size(), 3u);
  for (const json& p : r["ports"]) EXPECT_EQ(p["state"], "up") << p.dump();
  EXPECT_EQ(h_->ok("show")["generation"], before["generation"].get<uint64_t>() + 1);
  EXPECT_NE(r["ports"][0]["local_vlan"], r["ports"][2]["local_vlan"]);
  a.send({Eth(kMacA, kMacB).ipv4().udp()});
  EXPECT_EQ(b.wait_for(1).size(), 1u);
}

// Operations: the log level changes at run time and an unknown level is
// refused without changing it; show reports the packet-buffer pool.
TEST_F(SwitchTest, LogLevelChangesAtRunTimeAndShowReportsMempool) {
  EXPECT_EQ(h_->ok("log.level", {{"level", "debug"}})["level"], "debug");
  EXPECT_EQ(h_->ok("log.level")["level"], "debug");
  json r = h_->call("log.level", {{"level", "chatty"}});
  EXPECT_FALSE(r["ok"].get<bool>());
  EXPECT_EQ(r["error"]["code"], "invalid_argument");
  EXPECT_EQ(h_->ok("log.level")["level"], "debug");
  EXPECT_EQ(h_->ok("log.level", {{"level", "info"}})["level"], "info");
  const json pool = h_->ok("show")["mempool"];
  EXPECT_LE(pool["in_use"].get<uint64_t>(), pool["buffers"].get<uint64_t>());
  EXPECT_GE(pool["memory_bytes"].get<uint64_t>(),
            pool["buffers"].get<uint64_t>() * pool["buffer_bytes"].get<uint64_t>());
  ASSERT_FALSE(pool["pools"].empty());
  EXPECT_EQ(pool["pools"][0]["owner"], "shared");
  EXPECT_GE(pool["pools"][0]["buffers"].get<uint64_t>(), 8192u);
}

// Operations: show reports DPDK's memory: the pages EAL holds (the tests
// run --no-huge -m 512: plain 4 KiB pages) and its heap, which holds the
// packet pools.
TEST_F(SwitchTest, ShowReportsEalPagesAndHeapUse) {
  const json show = h_->ok("show");
  const json& mem = show["memory"];
  ASSERT_TRUE(mem.is_object()) << show.dump();
  EXPECT_EQ(mem["hugepages"], false);
  EXPECT_EQ(mem["page_sizes"], json::array({4096}));
  const uint64_t reserved = mem["reserved_bytes"].get<uint64_t>();
  EXPECT_GE(reserved, 512u << 20);  // -m 512: all of it, up front
  EXPECT_LE(reserved, mem["virtual_bytes"].get<uint64_t>());
  ASSERT_FALSE(mem["segments"].empty());
  EXPECT_EQ(mem["segments"][0]["page_size"], 4096);
  const uint64_t total = mem["heap_total_bytes"].get<uint64_t>();
  const uint64_t allocated = mem["heap_allocated_bytes"].get<uint64_t>();
  EXPECT_GT(allocated, 0u);
  EXPECT_LE(allocated, total);
  EXPECT_LE(total, reserved);
  EXPECT_EQ(mem["heap_free_bytes"].get<uint64_t>(), total - allocated);
  EXPECT_GE(allocated, show["mempool"]["memory_bytes"].get<uint64_t>());  // pools live there
  ASSERT_FALSE(mem["heaps"].empty());
  EXPECT_EQ(mem["heaps"][0]["allocated_bytes"], allocated);
  // An ethdev port brings its own pool: the heap grows by at least that.
  h_->ok("network.create", {{"id", "n1"}, {"type", "local"}});
  bind(1, "n1", kMacA);
  const json with = h_->ok("show");
  EXPECT_GE(with["memory"]["heap_allocated_bytes"].get<uint64_t>(),
            allocated + with["mempool"]["memory_bytes"].get<uint64_t>() -
                show["mempool"]["memory_bytes"].get<uint64_t>());
}

// Packet buffers are sized from ports and queues: an ethdev port brings a
// pool sized for its rings (not a fixed share of one big pool) and takes it
// away when it is unbound.
TEST_F(SwitchTest, EthdevPortsHaveBufferPoolsSizedFromTheirQueues) {
  auto pools = [&] { return h_->ok("show")["mempool"]; };
  const json before = pools();
  h_->ok("network.create", {{"id", "n1"}, {"type", "local"}});
  bind(1, "n1", kMacA);
  const std::string id = port_uuid(1);
  const json with = pools();
  json mine;
  for (const json& p : with["pools"])
    if (p["owner"] == id) mine = p;
  ASSERT_FALSE(mine.is_null()) << with.dump();
  // net_ring: one rx and one tx queue of 1024 descriptors, one worker.
  EXPECT_EQ(mine["buffers"].get<unsigned>(), ctl::rx_pool_size(1, 1024, 1, 1024, 1));
  EXPECT_EQ(with["buffers"].get<uint64_t>(),
            before["buffers"].get<uint64_t>() + mine["buffers"].get<uint64_t>());
  h_->ok("port.unbind", {{"id", id}});
  h_->pump(std::chrono::milliseconds(200));  // the grace period, then the pool goes
  const json after = pools();
  EXPECT_EQ(after["buffers"], before["buffers"]) << after.dump();
  EXPECT_EQ(after["pools"].size(), before["pools"].size());
}

// An API change is live when its reply arrives: once port.unbind returns,
// no frame sent after that reaches the unbound port, while traffic runs.
TEST_F(SwitchTest, UnbindIsLiveWhenTheCallReturns) {
  h_->ok("network.create", {{"id", "n1"}, {"type", "local"}});
  RingPort& a = bind(1, "n1", kMacA);
  RingPort& b = bind(2, "n1", kMacB);
  RingPort& c = bind(3, "n1", kMacC);
  // One frame A -> B; each copy carries its sequence number (from 1) in the
  // first four bytes of the UDP payload.
  Frame base = Eth(kMacA, kMacB).ipv4().udp().fill('\0', 4);
  base[40] = base[41] = 0;  // no UDP checksum: the sequence number changes per copy
  constexpr size_t kSeqAt = 42;
  auto seq_of = [](const Frame& f) {
    return uint32_t(f[kSeqAt]) << 24 | uint32_t(f[kSeqAt + 1]) << 16 |
           uint32_t(f[kSeqAt + 2]) << 8 | f[kSeqAt + 3];
  };
  // The sender runs until the unbind has returned and 500 frames more, however
  // long the unbind takes, and drains B and C as it goes so no ring fills.
  constexpr uint32_t kAfter = 500;
  std::atomic<uint32_t> sent{0};
  std::atomic<uint32_t> stop_after{0};  // 0: unbind not yet returned
  std::vector<Frame> at_b, at_c;
  std::thread sender([&] {
    Frame f = base;
    for (uint32_t seq = 1;; seq++) {
      const uint32_t last = stop_after.load(std::memory_order_acquire);
      if (last != 0 && seq > last) break;
      f[kSeqAt] = uint8_t(seq >> 24), f[kSeqAt + 1] = uint8_t(seq >> 16);
      f[kSeqAt + 2] = uint8_t(seq >> 8), f[kSeqAt + 3] = uint8_t(seq);
      a.send({f});
      sent.store(seq, std::memory_order_release);
      if (seq % 64 == 0) {
        for (Frame& g : b.take()) at_b.push_back(std::move(g));
        for (Frame& g : c.take()) at_c.push_back(std::move(g));
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
  });
  while (sent.load() < 500) std::this_thread::yield();
  h_->ok("port.unbind", {{"id", port_uuid(2)}});
  const uint32_t returned_at = sent.load(std::memory_order_acquire);
  stop_after.store(returned_at + kAfter, std::memory_order_release);
  sender.join();
  const size_t total = returned_at + kAfter;
  for (Frame& g : b.take()) at_b.push_back(std::move(g));
  ASSERT_FALSE(at_b.empty());
  for (const Frame& f : at_b)
    EXPECT_LE(seq_of(f), returned_at) << "frame sent after unbind returned reached the unbound port";
  // The rest flooded to C as unknown unicast, those sent after the return included.
  for (Frame& g : c.wait_for(total - at_b.size() - at_c.size(), std::chrono::seconds(5)))
    at_c.push_back(std::move(g));
  EXPECT_TRUE(std::any_of(at_c.begin(), at_c.end(),
                          [&](const Frame& f) { return seq_of(f) > returned_at; }));
  EXPECT_EQ(at_b.size() + at_c.size(), total);
}

// A restarted switch rebuilds every network and binding from its store with
// the same local VLANs, before its workers run, and forwards again (F4, F11).
TEST(SwitchRestart, RestartRestoresBindingsAndLocalVlansF4F11) {
  RingPort phys("net_ring_rsphys"), a("net_ring_rsa"), b("net_ring_rsb");
  auto cfg = test_config();
  cfg.physnets = {{"physnet1", "net_ring_rsphys"}};
  json before;
  {
    Harness h(cfg, /*keep_state=*/true);
    h.ok("network.create", {{"id", "other"}, {"type", "local"}});
    h.ok("network.create", {{"id", "n1"}, {"type", "vlan"}, {"physnet", "physnet1"},
                            {"segmentation_id", 100}});
    RingPort o("net_ring_rso");
    h.ok("port.bind", port_params(port_uuid(31), "other", kMacC, o.name()));  // takes VLAN 1
    h.ok("port.bind", port_params(port_uuid(32), "n1", kMacA, a.name()));     // VLAN 2
    h.ok("port.bind", port_params(port_uuid(33), "n1", kMacB, b.name()));
    h.ok("port.unbind", {{"id", port_uuid(31)}});  // frees VLAN 1: a renumbering would take it
    before = h.ok("show");
  }
  Harness h(cfg);
  h.pump(std::chrono::milliseconds(20));  // port-up goes out once the restored snapshot is live
  json after = h.ok("show");
  EXPECT_EQ(after["networks"], before["networks"]);
  ASSERT_EQ(after["ports"].size(), 2u);
  for (size_t i = 0; i < 2; i++) {
    EXPECT_EQ(after["ports"][i]["id"], before["ports"][i]["id"]);
    EXPECT_EQ(after["ports"][i]["local_vlan"], 2);
    EXPECT_EQ(after["ports"][i]["state"], "up");
  }
  a.send({Eth(kMacA, kMacB).ipv4().udp()});
  EXPECT_EQ(b.wait_for(1).size(), 1u);
}

// Every row of every table of the state database, as text: what a refused
// start must leave exactly as it was.
std::string db_rows(const std::string& state_dir) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open((state_dir + "/strait.db").c_str(), &db), SQLITE_OK);
  std::string out;
  auto dump = [](void* o, int n, char** v, char**) {
    auto& text = *static_cast<std::string*>(o);
    for (int i = 0; i < n; i++) text += std::string(v[i] ? v[i] : "NULL") + "|";
    text += "\n";
    return 0;
  };
  std::vector<std::string> tables;
  sqlite3_exec(db, "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name",
               [](void* t, int, char** v, char**) {
                 static_cast<std::vector<std::string>*>(t)->push_back(v[0]);
                 return 0;
               }, &tables, nullptr);
  for (const auto& t : tables) {
    out += "[" + t + "]\n";
    sqlite3_exec(db, ("SELECT * FROM " + t + " ORDER BY 1").c_str(), dump, &out, nullptr);
  }
  sqlite3_close(db);
  return out;
}

// What straitd logs while `fn` runs.
std::string logged_during(const std::function<void()>& fn) {
  std::ostringstream log;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  auto& sinks = spdlog::default_logger()->sinks();
  sinks.push_back(sink);
  fn();
  sinks.pop_back();
  return log.str();
}

// A restart whose config dropped a physnet a saved network uses is refused
// with one message saying which and what to do, the database untouched; the
// old config starts again with everything there, and `show` has the record.
TEST(SwitchRestart, DroppedPhysnetInUseIsRefusedAndChangesNothing) {
  RingPort phys("net_ring_dpphys"), a("net_ring_dpa");
  auto cfg = test_config();
  cfg.physnets = {{"physnet1", "net_ring_dpphys"}};
  json before;
  {
    Harness h(cfg, /*keep_state=*/true);
    h.ok("network.create", {{"id", "n1"}, {"type", "vlan"}, {"physnet", "physnet1"},
                            {"segmentation_id", 100}});
    h.ok("port.bind", port_params(port_uuid(41), "n1", kMacA, a.name()));
    before = h.ok("show");
  }
  EXPECT_EQ(before["recorded_config"]["physnets"], json({{"physnet1", "net_ring_dpphys"}}));
  EXPECT_TRUE(before["recorded_config"]["recorded_at"].is_number());
  const std::string rows = db_rows(cfg.state_dir);
  auto dropped = cfg;
  dropped.physnets.clear();
  auto sw = ctl::Switch::create(dropped);
  ASSERT_FALSE(sw.ok());
  EXPECT_EQ(sw.error().code, "failed_precondition");
  EXPECT_THAT(sw.error().message,
              ::testing::AllOf(::testing::HasSubstr("network(s) n1 use physnet physnet1"),
                               ::testing::HasSubstr("device net_ring_dpphys"),
                               ::testing::HasSubstr("or start with the old config and delete")));
  EXPECT_EQ(sw.error().message.find('\n'), std::string::npos);
  EXPECT_EQ(db_rows(cfg.state_dir), rows);

  Harness h(cfg);
  h.pump(std::chrono::milliseconds(20));
  json after = h.ok("show");
  EXPECT_EQ(after["networks"], before["networks"]);
  EXPECT_EQ(after["ports"][0]["local_vlan"], before["ports"][0]["local_vlan"]);
  EXPECT_EQ(after["recorded_config"]["physnets"], before["recorded_config"]["physnets"]);
}

// The same physnet on another device: accepted, warned about with the old
// and new device, and recorded; networks and ports restored as they were.
TEST(SwitchRestart, ChangedPhysnetDeviceIsAcceptedWithAWarning) {
  RingPort phys("net_ring_cdold"), phys2("net_ring_cdnew"), a("net_ring_cda"), b("net_ring_cdb");
  auto cfg = test_config();
  cfg.physnets = {{"physnet1", "net_ring_cdold"}};
  json before;
  {
    Harness h(cfg, /*keep_state=*/true);
    h.ok("network.create", {{"id", "n1"}, {"type", "vlan"}, {"physnet", "physnet1"},
                            {"segmentation_id", 100}});
    h.ok("port.bind", port_params(port_uuid(51), "n1", kMacA, a.name()));
    before = h.ok("show");
  }
  cfg.physnets = {{"physnet1", "net_ring_cdnew"}};
  std::unique_ptr<Harness> h;
  const std::string log = logged_during([&] { h = std::make_unique<Harness>(cfg); });
  EXPECT_THAT(log, ::testing::HasSubstr(
                       "physnet physnet1: device changed from \"net_ring_cdold\" to \"net_ring_cdnew\""));
  h->pump(std::chrono::milliseconds(20));
  json after = h->ok("show");
  EXPECT_EQ(after["networks"], before["networks"]);
  EXPECT_EQ(after["recorded_config"]["physnets"], json({{"physnet1", "net_ring_cdnew"}}));
  // Frames of the network leave by the new device, tagged.
  a.send({Eth(kMacA, kRemote).ipv4().udp()});
  auto out = phys2.wait_for(1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(vlan_id(out[0]), 100);
  EXPECT_TRUE(phys.take().empty());
}

// Two workers transmit to one physnet queue: shared queues take the lock per
// burst, and nothing is lost or duplicated.
TEST(SwitchMultiWorker, TwoWorkersShareOneTxQueue) {
  RingPort phys("net_ring_mwphys");
  auto cfg = test_config({1, 2});
  cfg.physnets = {{"physnet1", "net_ring_mwphys"}};
  auto h = std::make_unique<Harness>(cfg);
  h->ok("network.create", {{"id", "n1"}, {"type", "flat"}, {"physnet", "physnet1"}});
  RingPort a("net_ring_mwa"), b("net_ring_mwb");
  h->ok("port.bind", port_params(port_uuid(11), "n1", kMacA, a.name()));
  h->ok("port.bind", port_params(port_uuid(12), "n1", kMacB, b.name()));
  json show = h->ok("show");
  ASSERT_EQ(show["workers"].size(), 2u);
  // The two VM ports' queues went to different workers.
  EXPECT_EQ(show["workers"][0]["rx_queues"].size() + show["workers"][1]["rx_queues"].size(), 3u);
  std::vector<Frame> fa, fb;
  for (uint16_t i = 0; i < 1000; i++) {
    fa.push_back(Eth(kMacA, kRemote).ipv4("127.0.0.1", "127.0.0.1", i).udp());
    fb.push_back(Eth(kMacB, kRemote).ipv4("127.0.0.1", "127.0.0.1", i).udp());
  }
  std::thread ta([&] { a.send(fa); });
  b.send(fb);
  ta.join();
  auto got = phys.wait_for(2000, std::chrono::seconds(10));
  EXPECT_EQ(got.size(), 2000u);
  h.reset();
}

// The API is one table: every method in it is in docs/api.md's method
// table, once, and every method documented there is in it (events.subscribe
// is the API server's own).
TEST(SwitchApi, MethodTableMatchesTheDocumentation) {
  std::ifstream doc(std::string(STRAIT_SOURCE_DIR) + "/docs/api.md");
  ASSERT_TRUE(doc.good());
  std::set<std::string> documented;
  std::string line;
  bool in_methods = false;
  const std::regex name("`(\\.?[a-z_.]+)`");
  while (std::getline(doc, line)) {
    if (line.rfind("## ", 0) == 0) in_methods = line == "## Methods";
    if (!in_methods || line.rfind("| `", 0) != 0) continue;
    const std::string cell = line.substr(2, line.find(" |", 2) - 2);  // "`a` / `.b` (bulk)"
    std::string last;
    for (std::sregex_iterator it(cell.begin(), cell.end(), name), end; it != end; ++it) {
      std::string m = (*it)[1];
      if (m[0] == '.') m = last.substr(0, last.rfind('.')) + m;  // `security_group.list` / `.show`
      documented.insert(m);
      last = m;
    }
  }
  documented.erase("events.subscribe");
  std::set<std::string> table;
  for (const ctl::Switch::Method& m : ctl::Switch::methods())
    EXPECT_TRUE(table.insert(m.name).second) << m.name << " is in the table twice";
  EXPECT_GE(table.size(), 20u);
  EXPECT_EQ(table, documented);
}

// A change is logged with its outcome, once it is live; queries are not.
TEST_F(SwitchTest, ChangesAreLoggedWhenDone) {
  const std::string log = logged_during([&] {
    h_->ok("network.create", {{"id", "n1"}, {"type", "local"}});
    EXPECT_FALSE(h_->call("network.create", {{"id", "n1"}, {"type", "local"}})["ok"].get<bool>());
    h_->ok("network.list");
    h_->ok("network.delete", {{"id", "n1"}});
  });
  EXPECT_THAT(log, testing::HasSubstr("API network.create n1: done"));
  EXPECT_THAT(log, testing::HasSubstr("API network.delete n1: done"));
  EXPECT_THAT(log, testing::Not(testing::HasSubstr("network.list")));
  const auto first = log.find("network.create");
  EXPECT_EQ(log.find("network.create", first + 1), std::string::npos) << "the refusal is not logged at info";
}

}  // namespace
}  // namespace strait::test
