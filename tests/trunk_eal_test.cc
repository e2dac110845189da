// Trunk ports (neutron's VLAN-aware VMs, issue 25) through real DPDK
// devices: a VM stand-in's NIC is a trunk's parent, frames it tags with a
// subport's VLAN are that subport's, on the subport's network with its rules,
// and frames to a subport reach the VM tagged. The parent is a net_ring
// ethdev the test feeds, or a virtio-user guest on a vhost-user socket.
#include <atomic>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/frame_builder.h"
#include "tests/switch_harness.h"

namespace strait::test {
namespace {

using nlohmann::json;

constexpr char kMacP[] = "02:00:00:00:00:0a";  // the trunk VM's NIC; its subports share it
constexpr char kMacB[] = "02:00:00:00:00:0b";  // a VM on the parent's network
constexpr char kMacC[] = "02:00:00:00:00:0c";  // a VM on subport 101's network
constexpr char kRemote[] = "02:00:00:00:99:01";  // a host behind the physnet

uint16_t ethertype(const Frame& f) { return uint16_t(f[12] << 8 | f[13]); }
uint16_t vlan_id(const Frame& f) { return uint16_t((f[14] << 8 | f[15]) & 0xfff); }
// The frame without its outer 802.1Q tag.
Frame untag(const Frame& f) {
  Frame out = f;
  out.erase(out.begin() + 12, out.begin() + 16);
  return out;
}

std::string to_hex(const Frame& f) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (uint8_t b : f) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

json subport(const std::string& id, const std::string& net, const std::string& parent, int vid,
             const std::string& mac = kMacP) {
  return {{"id", id},
          {"network", net},
          {"mac", mac},
          {"attach", {{"type", "subport"}, {"parent", parent}, {"segmentation_id", vid}}}};
}

// Networks: n1 (local) for the parent and B, n2 (local) for subport 101 and
// C, n3 (vlan 300 on the physnet) for subport 102.
class TrunkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    phys_ = std::make_unique<RingPort>("net_ring_tphys");
    auto cfg = test_config();
    cfg.physnets = {{"physnet1", "net_ring_tphys"}};
    h_ = std::make_unique<Harness>(cfg);
    h_->ok("network.create", {{"id", "n1"}, {"type", "local"}});
    h_->ok("network.create", {{"id", "n2"}, {"type", "local"}});
    h_->ok("network.create", {{"id", "n3"}, {"type", "vlan"}, {"physnet", "physnet1"},
                              {"segmentation_id", 300}});
  }
  void TearDown() override {
    h_.reset();
    ports_.clear();
    phys_.reset();
  }
  RingPort& bind(int n, const std::string& net, const std::string& mac) {
    ports_.push_back(std::make_unique<RingPort>("net_ring_t" + std::to_string(n)));
    h_->ok("port.bind", port_params(port_uuid(n), net, mac, ports_.back()->name()));
    return *ports_.back();
  }
  // Parent P (port 1) on n1, subports 101 (port 2, n2) and 102 (port 3, n3),
  // B (port 4) on n1 and C (port 5) on n2.
  void trunk() {
    p_ = &bind(1, "n1", kMacP);
    h_->ok("port.bind", subport(port_uuid(2), "n2", port_uuid(1), 101));
    h_->ok("port.bind", subport(port_uuid(3), "n3", port_uuid(1), 102));
    b_ = &bind(4, "n1", kMacB);
    c_ = &bind(5, "n2", kMacC);
  }
  json port_stats(int n) {
    const json stats = h_->ok("stats");
    for (const json& p : stats["ports"])
      if (p["id"] == port_uuid(n)) return p;
    ADD_FAILURE() << "no stats for port " << n;
    return {};
  }
  std::unique_ptr<RingPort> phys_;
  std::vector<std::unique_ptr<RingPort>> ports_;
  std::unique_ptr<Harness> h_;
  RingPort* p_ = nullptr;
  RingPort* b_ = nullptr;
  RingPort* c_ = nullptr;
};

TEST_F(TrunkTest, EachVlanOfTheTrunkLandsOnItsSubportsNetwork) {
  trunk();
  const Frame plain = Eth(kMacP, kMacB).ipv4("10.1.0.1", "10.1.0.2").udp(1000, 80).fill('p', 30);
  const Frame inner101 = Eth(kMacP, kMacC).ipv4("10.2.0.1", "10.2.0.2").udp(1001, 80).fill('a', 30);
  const Frame inner102 = Eth(kMacP, kRemote).ipv4("10.3.0.1", "10.3.0.9").udp(1002, 80).fill('b', 30);
  p_->send({plain});
  p_->send({Eth(kMacP, kMacC).vlan(101, 5).ipv4("10.2.0.1", "10.2.0.2").udp(1001, 80).fill('a', 30)});
  p_->send({Eth(kMacP, kRemote).vlan(102).ipv4("10.3.0.1", "10.3.0.9").udp(1002, 80).fill('b', 30)});
  // Untagged: the parent's network, as it was sent.
  auto at_b = b_->wait_for(1);
  ASSERT_EQ(at_b.size(), 1u);
  EXPECT_EQ(at_b[0], plain);
  // VLAN 101: subport 101's network, untagged there.
  auto at_c = c_->wait_for(1);
  ASSERT_EQ(at_c.size(), 1u);
  EXPECT_EQ(at_c[0], inner101);
  // VLAN 102: subport 102's network, a vlan network: out of the physnet with its tag 300.
  auto at_phys = phys_->wait_for(1);
  ASSERT_EQ(at_phys.size(), 1u);
  EXPECT_EQ(ethertype(at_phys[0]), 0x8100);
  EXPECT_EQ(vlan_id(at_phys[0]), 300);
  EXPECT_EQ(untag(at_phys[0]), inner102);
  // Nothing crossed networks.
  h_->pump(std::chrono::milliseconds(20));
  EXPECT_TRUE(b_->take().empty());
  EXPECT_TRUE(c_->take().empty());
  // Each subport counts its own frames; the parent only its untagged one.
  EXPECT_EQ(port_stats(1)["rx_packets"], 1);
  EXPECT_EQ(port_stats(2)["rx_packets"], 1);
  EXPECT_EQ(port_stats(3)["rx_packets"], 1);
}

TEST_F(TrunkTest, FramesToASubportReachTheVmTaggedWithItsVlan) {
  trunk();
  // Unicast from C to the subport's MAC (the parent's, on another network).
  const Frame to_sub = Eth(kMacC, kMacP).ipv4("10.2.0.2", "10.2.0.1").udp(80, 1001).fill('c', 30);
  c_->send({to_sub});
  auto got = p_->wait_for(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(ethertype(got[0]), 0x8100);
  EXPECT_EQ(vlan_id(got[0]), 101);
  EXPECT_EQ(untag(got[0]), to_sub);
  // From the physnet's VLAN 300 to subport 102: tag 300 becomes 102.
  phys_->send({Eth(kRemote, kMacP).vlan(300).ipv4("10.3.0.9", "10.3.0.1").udp().fill('r', 30)});
  got = p_->wait_for(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(vlan_id(got[0]), 102);
  // A broadcast in n2 reaches the VM once, tagged 101; nothing untagged, nothing to B.
  c_->send({Eth(kMacC, "ff:ff:ff:ff:ff:ff").arp(1, "10.2.0.2", "10.2.0.1")});
  got = p_->wait_for(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(vlan_id(got[0]), 101);
  h_->pump(std::chrono::milliseconds(20));
  EXPECT_TRUE(p_->take().empty());
  EXPECT_TRUE(b_->take().empty());
  EXPECT_EQ(port_stats(2)["tx_packets"], 2);
  EXPECT_EQ(port_stats(3)["tx_packets"], 1);
  EXPECT_EQ(port_stats(1)["tx_packets"], 0);
}

TEST_F(TrunkTest, AVlanNoSubportHasIsDroppedAndCounted) {
  trunk();
  p_->send({Eth(kMacP, kMacC).vlan(150).ipv4().udp(),                 // no subport
            Eth(kMacP, kMacC).vlan(101, 0, 0x88a8).ipv4().udp(),      // an S-tag
            Eth(kMacP, kMacC).vlan(101).vlan(7).ipv4().udp(),         // 101, then another tag
            Eth(kMacP, kMacC).vlan(101).ipv4().udp()});
  ASSERT_EQ(c_->wait_for(1).size(), 1u);
  h_->pump(std::chrono::milliseconds(20));
  EXPECT_TRUE(c_->take().empty());
  EXPECT_EQ(h_->drops("tagged_on_access_port"), 3u);
  // straitctl trace says why, and where a good frame goes.
  const json bad = h_->ok("trace", {{"port", port_uuid(1)},
                                    {"frame", to_hex(Eth(kMacP, kMacC).vlan(150).ipv4().udp())}});
  EXPECT_EQ(bad["drop_reason"], "tagged_on_access_port");
  EXPECT_THAT(bad.dump(), ::testing::HasSubstr("no subport of this trunk has that VLAN"));
  const json good = h_->ok("trace", {{"port", port_uuid(1)},
                                     {"frame", to_hex(Eth(kMacP, kMacC).vlan(101).ipv4().udp())}});
  EXPECT_EQ(good["steps"][0]["step"], "trunk");
  EXPECT_EQ(good["steps"][0]["vlan"], 101);
  EXPECT_EQ(good["steps"][0]["port"]["name"], port_uuid(2));
  EXPECT_EQ(good["verdict"], "output");
  ASSERT_EQ(good["actions"].size(), 1u);
  EXPECT_EQ(good["actions"][0]["name"], port_uuid(5));
}

TEST_F(TrunkTest, SubportPortSecurityCatchesSpoofingOnItsVlanOnly) {
  p_ = &bind(1, "n1", kMacP);
  json sp = subport(port_uuid(2), "n2", port_uuid(1), 101);
  sp["fixed_ips"] = {"10.2.0.1"};
  sp["port_security_enabled"] = true;
  h_->ok("port.bind", sp);
  c_ = &bind(5, "n2", kMacC);
  b_ = &bind(4, "n1", kMacB);
  // ARP is always allowed from a secured port, but only with its own address.
  p_->send({Eth(kMacP, "ff:ff:ff:ff:ff:ff").vlan(101).arp(1, "10.2.0.66", "10.2.0.2"),
            Eth(kMacP, "ff:ff:ff:ff:ff:ff").vlan(101).arp(1, "10.2.0.1", "10.2.0.2"),
            Eth("02:00:00:00:00:66", "ff:ff:ff:ff:ff:ff").vlan(101).arp(1, "10.2.0.1", "10.2.0.2")});
  auto got = c_->wait_for(1);
  ASSERT_EQ(got.size(), 1u);
  h_->pump(std::chrono::milliseconds(20));
  EXPECT_TRUE(c_->take().empty());
  EXPECT_EQ(h_->drops("spoofed_arp"), 1u);
  EXPECT_EQ(h_->drops("spoofed_mac"), 1u);
  const json drops = port_stats(2)["drops"];
  EXPECT_EQ(drops["spoofed_arp"], 1);
  EXPECT_EQ(drops["spoofed_mac"], 1);
  // The parent has no port security: anything untagged from it goes.
  p_->send({Eth("02:00:00:00:00:66", kMacB).ipv4("10.9.9.9", "10.1.0.2").udp()});
  EXPECT_EQ(b_->wait_for(1).size(), 1u);
}

// A subport's security groups guard its VLAN: a reply to what the VM
// opened on it passes, and a new connection only where its rules allow.
TEST_F(TrunkTest, SubportSecurityGroupsApplyToItsVlanAndTrackItsConnections) {
  h_->ok("security_group.create", {{"id", "ssh"}});
  h_->ok("security_group_rule.create", {{"security_group_id", "ssh"}, {"direction", "egress"},
                                        {"ethertype", "IPv4"}});
  h_->ok("security_group_rule.create",
         {{"security_group_id", "ssh"}, {"direction", "ingress"}, {"ethertype", "IPv4"},
          {"protocol", "tcp"}, {"port_range_min", 22}, {"port_range_max", 22}});
  p_ = &bind(1, "n1", kMacP);
  json sp = subport(port_uuid(2), "n2", port_uuid(1), 101);
  sp["fixed_ips"] = {"10.2.0.1"};
  sp["security_groups"] = {"ssh"};
  h_->ok("port.bind", sp);
  c_ = &bind(5, "n2", kMacC);
  auto from_c = [](uint16_t sport, uint16_t dport, uint8_t flags) {
    return Eth(kMacC, kMacP).ipv4("10.2.0.2", "10.2.0.1").tcp(sport, dport, flags).frame();
  };
  // New from C: to 22 passes (tagged 101 on the parent), to 23 does not.
  c_->send({from_c(40000, 22, 0x02), from_c(40001, 23, 0x02)});
  auto got = p_->wait_for(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(vlan_id(got[0]), 101);
  h_->pump(std::chrono::milliseconds(20));
  EXPECT_TRUE(p_->take().empty());
  EXPECT_EQ(h_->drops("sg_ingress_denied"), 1u);
  // The VM opens a connection on VLAN 101 to C's port 8080; C's reply gets back.
  p_->send({Eth(kMacP, kMacC).vlan(101).ipv4("10.2.0.1", "10.2.0.2").tcp(50000, 8080, 0x02)});
  ASSERT_EQ(c_->wait_for(1).size(), 1u);
  c_->send({from_c(8080, 50000, 0x12)});
  got = p_->wait_for(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(vlan_id(got[0]), 101);
}

// A subport bound and unbound while the VM sends on the parent and on
// another subport: those frames all arrive (no blink), the removed
// subport's VLAN stops at once.
TEST_F(TrunkTest, SubportsComeAndGoAtRunTimeWithoutABlinkOfTheOthers) {
  p_ = &bind(1, "n1", kMacP);
  h_->ok("port.bind", subport(port_uuid(3), "n3", port_uuid(1), 102));
  b_ = &bind(4, "n1", kMacB);
  c_ = &bind(5, "n2", kMacC);
  std::atomic<bool> stop{false};
  std::atomic<unsigned> sent{0};
  std::atomic<bool> probe{false};  // the main thread asks for one frame on VLAN 101
  // The only thread that feeds the parent (its ring has one producer).
  std::thread sender([&] {
    while (!stop.load()) {
      const unsigned i = sent.load();
      p_->send({Eth(kMacP, kMacB).ipv4("10.1.0.1", "10.1.0.2").udp(2000, uint16_t(i)),
                Eth(kMacP, kRemote).vlan(102).ipv4("10.3.0.1", "10.3.0.9").udp(2000, uint16_t(i))});
      sent.store(i + 1);
      if (probe.exchange(false)) p_->send({Eth(kMacP, kMacC).vlan(101).ipv4().udp()});
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  std::vector<Frame> at_b, at_phys;
  auto drain = [&] {
    for (Frame& f : b_->take()) at_b.push_back(std::move(f));
    for (Frame& f : phys_->take()) at_phys.push_back(std::move(f));
  };
  for (int round = 0; round < 5; round++) {
    h_->ok("port.bind", subport(port_uuid(2), "n2", port_uuid(1), 101));
    probe = true;
    EXPECT_EQ(c_->wait_for(1).size(), 1u) << "round " << round;
    drain();
    h_->ok("port.unbind", {{"id", port_uuid(2)}});
    drain();
  }
  stop = true;
  sender.join();
  const unsigned n = sent.load();
  for (int i = 0; i < 100 && (at_b.size() < n || at_phys.size() < n); i++) {
    h_->pump(std::chrono::milliseconds(10));
    drain();
  }
  EXPECT_GT(n, 20u);
  EXPECT_EQ(at_b.size(), n);
  EXPECT_EQ(at_phys.size(), n);
  // Unbound, VLAN 101 is no subport's any more.
  p_->send({Eth(kMacP, kMacC).vlan(101).ipv4().udp()});
  h_->pump(std::chrono::milliseconds(30));
  EXPECT_TRUE(c_->take().empty());
  EXPECT_EQ(h_->drops("tagged_on_access_port"), 1u);
  EXPECT_EQ(h_->drops("port_down") + h_->drops("unknown_port"), 0u);
}

TEST_F(TrunkTest, ParentIsRefusedUnbindWhileItHasSubportsAndShowsThem) {
  trunk();
  const json r = h_->call("port.unbind", {{"id", port_uuid(1)}});
  ASSERT_TRUE(r.contains("error")) << r.dump();
  EXPECT_EQ(r["error"]["code"], "conflict");
  const json shown = h_->ok("port.show", {{"id", port_uuid(1)}});
  EXPECT_EQ(shown["subports"], json::array({{{"port", port_uuid(2)}, {"segmentation_id", 101}},
                                            {{"port", port_uuid(3)}, {"segmentation_id", 102}}}));
  // Still forwarding.
  p_->send({Eth(kMacP, kMacC).vlan(101).ipv4().udp()});
  EXPECT_EQ(c_->wait_for(1).size(), 1u);
  const json sub = h_->ok("port.show", {{"id", port_uuid(2)}});
  EXPECT_EQ(sub["state"], "up");
  EXPECT_EQ(sub["attach"]["parent"], port_uuid(1));
}

TEST(TrunkRestart, SubportsAndQosComeBackWithTheirParentAfterARestart) {
  auto phys = std::make_unique<RingPort>("net_ring_trphys");
  auto parent = std::make_unique<RingPort>("net_ring_trp");
  auto peer = std::make_unique<RingPort>("net_ring_trc");
  auto cfg = test_config();
  cfg.physnets = {{"physnet1", "net_ring_trphys"}};
  {
    Harness h(cfg, /*keep_state=*/true);
    h.ok("network.create", {{"id", "n1"}, {"type", "local"}});
    h.ok("network.create", {{"id", "n2"}, {"type", "local"}});
    // The subport's id sorts before its parent's: restored after it all the
    // same. The parent's QoS rules are kept too.
    json pp = port_params(port_uuid(9), "n1", kMacP, parent->name());
    pp["qos"] = {{{"type", "dscp_marking"}, {"dscp_mark", 34}}};
    h.ok("port.bind", pp);
    h.ok("port.bind", subport(port_uuid(1), "n2", port_uuid(9), 101));
    h.ok("port.bind", port_params(port_uuid(5), "n2", kMacC, peer->name()));
  }
  Harness h(cfg);
  const json sub = h.ok("port.show", {{"id", port_uuid(1)}});
  EXPECT_EQ(sub["attach"]["parent"], port_uuid(9));
  EXPECT_EQ(sub["attach"]["segmentation_id"], 101);
  EXPECT_EQ(h.ok("port.show", {{"id", port_uuid(9)}})["qos"],
            json::array({{{"type", "dscp_marking"}, {"dscp_mark", 34}}}));
  parent->send({Eth(kMacP, kMacC).vlan(101).ipv4().udp()});
  EXPECT_EQ(peer->wait_for(1).size(), 1u);
  peer->send({Eth(kMacC, kMacP).ipv4().udp()});
  auto got = parent->wait_for(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(vlan_id(got[0]), 101);
}

// The parent as a VM's virtio NIC: the subports go up and down with its
// guest driver, and their frames cross the vhost device tagged.
TEST(TrunkVhost, SubportsFollowTheParentsGuestAndCrossTheVhostDeviceTagged) {
  auto peer = std::make_unique<RingPort>("net_ring_tvc");
  auto cfg = test_config();
  Harness h(cfg);
  const std::string sock = cfg.state_dir + "/trunk-vm.sock";
  h.ok("network.create", {{"id", "n1"}, {"type", "local"}});
  h.ok("network.create", {{"id", "n2"}, {"type", "local"}});
  h.ok("port.bind", {{"id", port_uuid(1)}, {"network", "n1"}, {"mac", kMacP},
                     {"attach", {{"type", "vhost"}, {"path", sock}, {"mode", "server"}}}});
  h.ok("port.bind", subport(port_uuid(2), "n2", port_uuid(1), 101));
  h.ok("port.bind", port_params(port_uuid(5), "n2", kMacC, peer->name()));
  EXPECT_EQ(h.ok("port.show", {{"id", port_uuid(2)}})["state"], "down");
  std::vector<std::string> events;
  const uint64_t token = h.sw().events().subscribe([&](const json& ev) {
    events.push_back(ev["event"].get<std::string>() + " " + ev["port"].get<std::string>());
  });
  auto guest = std::make_unique<VirtioGuest>("net_virtio_user_trunk", sock, kMacP);
  for (int i = 0; i < 500 && h.ok("port.show", {{"id", port_uuid(2)}})["state"] != "up"; i++)
    h.pump(std::chrono::milliseconds(10));
  ASSERT_EQ(h.ok("port.show", {{"id", port_uuid(2)}})["state"], "up");
  EXPECT_THAT(events, ::testing::IsSupersetOf({"port-up " + port_uuid(1), "port-up " + port_uuid(2)}));
  // Guest -> subport's network.
  const Frame inner = Eth(kMacP, kMacC).ipv4("10.2.0.1", "10.2.0.2").udp(5, 6).fill('g', 40);
  std::vector<Frame> at_peer;
  for (int i = 0; i < 50 && at_peer.empty(); i++) {
    guest->send({Eth(kMacP, kMacC).vlan(101).ipv4("10.2.0.1", "10.2.0.2").udp(5, 6).fill('g', 40)});
    h.pump(std::chrono::milliseconds(10));
    at_peer = peer->take();
  }
  ASSERT_FALSE(at_peer.empty());
  EXPECT_EQ(at_peer[0], inner);
  // Subport's network -> guest, tagged.
  std::vector<Frame> at_guest;
  for (int i = 0; i < 50 && at_guest.empty(); i++) {
    peer->send({Eth(kMacC, kMacP).ipv4("10.2.0.2", "10.2.0.1").udp(6, 5).fill('h', 40)});
    h.pump(std::chrono::milliseconds(10));
    at_guest = guest->take();
  }
  ASSERT_FALSE(at_guest.empty());
  EXPECT_EQ(ethertype(at_guest[0]), 0x8100);
  EXPECT_EQ(vlan_id(at_guest[0]), 101);
  // The guest goes: so does its subport.
  events.clear();
  h.release(guest);
  for (int i = 0; i < 100 && h.ok("port.show", {{"id", port_uuid(2)}})["state"] != "down"; i++)
    h.pump(std::chrono::milliseconds(10));
  EXPECT_EQ(h.ok("port.show", {{"id", port_uuid(2)}})["state"], "down");
  h.pump(std::chrono::milliseconds(50));
  EXPECT_THAT(events, ::testing::IsSupersetOf({"port-down " + port_uuid(1),
                                               "port-down " + port_uuid(2)}));
  h.sw().events().unsubscribe(token);
}

}  // namespace
}  // namespace strait::test
