// The snapshot builder, and the pipeline's decisions on what it builds.
#include "control/switch/snapshot_builder.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dataplane/pipeline.h"

namespace strait::ctl {
namespace {

using dp::ActionKind;
using dp::DropReason;

class BuilderTest : public ::testing::Test {
 protected:
  BuilderTest() : model_(std::map<std::string, std::string>{{"physnet1", "net_ring_phys"}}) {
    in_.model = &model_;
    in_.n_workers = 2;
    in_.uplinks["physnet1"] = DpPort{0, 10, {0}, 1, true};
  }
  void net(const std::string& id, const std::string& type, int seg = 0, int mtu = 1500) {
    nlohmann::json j = {{"id", id}, {"type", type}, {"mtu", mtu}};
    if (type != "local") j["physnet"] = "physnet1";
    if (type == "vlan") j["segmentation_id"] = seg;
    ASSERT_TRUE(model_.add_network(*parse_network(j)).ok());
  }
  void port(int n, const std::string& network, const std::string& mac, bool live = true) {
    char id[40];
    snprintf(id, sizeof(id), "00000000-0000-4000-8000-%012d", n);
    auto spec = parse_port({{"id", id}, {"network", network}, {"mac", mac},
                            {"attach", {{"type", "ethdev"}, {"devargs", "net_ring_vm" + std::to_string(n)}}}});
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    ASSERT_TRUE(model_.add_port(*spec).ok());
    in_.ports[id] = DpPort{static_cast<uint16_t>(n), static_cast<uint16_t>(10 + n),
                           {static_cast<uint16_t>(n % 2)}, 1, live};
  }
  dp::FlowKey key(uint16_t in_port, const std::string& src, const std::string& dst, int vid = -1) {
    dp::FlowKey k{};
    k.in_port = in_port;
    auto s = *parse_mac(src), d = *parse_mac(dst);
    std::copy(s.begin(), s.end(), k.dl_src);
    std::copy(d.begin(), d.end(), k.dl_dst);
    k.dl_type = 0x0800;
    if (vid >= 0) {
      k.n_tags = 1;
      k.vlan_tpid = 0x8100;
      k.vlan_tci = static_cast<uint16_t>(vid);
    }
    return k;
  }
  // With the learned MACs of learned_ (build_learned_fdb).
  dp::Action decide(const dp::FlowKey& k) {
    auto fdb = build_learned_fdb(learned_);
    dp::LearnedLookup lk{fdb.get()};
    return dp::pipeline_decide(*build_snapshot(in_), k, &lk);
  }

  Model model_;
  BuildInput in_;
  std::vector<LearnedMac> learned_;
};

TEST_F(BuilderTest, VmToKnownVmIsUnicastUntagged) {
  net("n1", "vlan", 100);
  port(1, "n1", "02:00:00:00:00:01");
  port(2, "n1", "02:00:00:00:00:02");
  auto a = decide(key(1, "02:00:00:00:00:01", "02:00:00:00:00:02"));
  EXPECT_EQ(a.kind, ActionKind::kOutput);
  EXPECT_EQ(a.out_port, 2);
  EXPECT_EQ(a.egress_vid, 0);
}

TEST_F(BuilderTest, UnknownUnicastFloodsWithPerTargetTags) {
  net("n1", "vlan", 100);
  port(1, "n1", "02:00:00:00:00:01");
  port(2, "n1", "02:00:00:00:00:02");
  auto s = build_snapshot(in_);
  auto a = dp::pipeline_decide(*s, key(1, "02:00:00:00:00:01", "02:00:00:00:00:99"));
  ASSERT_EQ(a.kind, ActionKind::kFlood);
  const auto& flood = s->networks[a.lvlan].flood;
  ASSERT_EQ(flood.size(), 3u);
  EXPECT_EQ(flood[0].port, 0);  // the uplink carries the segmentation id
  EXPECT_EQ(flood[0].egress_vid, 100);
  EXPECT_EQ(flood[1].egress_vid, 0);
}

TEST_F(BuilderTest, PortNotLiveForwardsNothingAndIsNotFlooded) {
  net("n1", "local");
  port(1, "n1", "02:00:00:00:00:01");
  port(2, "n1", "02:00:00:00:00:02", /*live=*/false);
  EXPECT_EQ(decide(key(2, "02:00:00:00:00:02", "02:00:00:00:00:01")).reason, DropReason::kPortDown);
  // Flood from port 1 has nobody to reach.
  EXPECT_EQ(decide(key(1, "02:00:00:00:00:01", "ff:ff:ff:ff:ff:ff")).reason,
            DropReason::kFloodNoTarget);
}

TEST_F(BuilderTest, UplinkMapsVlanToNetworkAndLearnsUnknownSources) {
  net("n1", "vlan", 100);
  net("n2", "vlan", 200);
  port(1, "n1", "02:00:00:00:00:01");
  port(2, "n2", "02:00:00:00:00:01");  // same MAC, other network
  auto a = decide(key(0, "02:00:00:00:99:99", "02:00:00:00:00:01", 200));
  EXPECT_EQ(a.kind, ActionKind::kOutput);
  EXPECT_EQ(a.out_port, 2);
  EXPECT_TRUE(a.flags & dp::kActIngressTagged);
  EXPECT_TRUE(a.flags & dp::kActLearn);
  EXPECT_EQ(decide(key(0, "02:00:00:00:99:99", "02:00:00:00:00:01", 300)).reason,
            DropReason::kUnknownVlan);
  EXPECT_EQ(decide(key(0, "02:00:00:00:99:99", "02:00:00:00:00:01")).reason,
            DropReason::kNoFlatNetwork);
}

TEST_F(BuilderTest, LearnedMacIsUnicastToUplinkAndStaticEntryWins) {
  net("n1", "vlan", 100);
  port(1, "n1", "02:00:00:00:00:01");
  const uint16_t lvlan = model_.local_vlan("n1");
  learned_.push_back({lvlan, *parse_mac("02:00:00:00:99:99"), 0, 7});
  learned_.push_back({lvlan, *parse_mac("02:00:00:00:00:01"), 0, 8});  // a VM's MAC seen outside
  auto a = decide(key(1, "02:00:00:00:00:01", "02:00:00:00:99:99"));
  EXPECT_EQ(a.kind, ActionKind::kOutput);
  EXPECT_EQ(a.out_port, 0);
  EXPECT_EQ(a.egress_vid, 100);
  auto b = decide(key(0, "02:00:00:00:99:99", "02:00:00:00:00:01", 100));
  EXPECT_EQ(b.out_port, 1);  // the bound port's static entry, not the learned one
  EXPECT_EQ(b.learn_slot, 7);
  EXPECT_FALSE(b.flags & dp::kActLearn);
}

// Two hosts behind the uplink: a frame between them is not ours to forward
// (same_port), but an unknown source in it is learned all the same.
TEST_F(BuilderTest, FrameBackToItsUplinkIsDroppedAndItsSourceLearned) {
  net("n1", "vlan", 100);
  port(1, "n1", "02:00:00:00:00:01");
  const uint16_t lvlan = model_.local_vlan("n1");
  learned_.push_back({lvlan, *parse_mac("02:00:00:00:99:99"), 0, 7});
  auto a = decide(key(0, "02:00:00:00:99:98", "02:00:00:00:99:99", 100));
  EXPECT_EQ(a.reason, DropReason::kSamePort);
  EXPECT_TRUE(a.flags & dp::kActLearn);
  EXPECT_EQ(a.lvlan, lvlan);
  // A source learned already is not reported again.
  learned_.push_back({lvlan, *parse_mac("02:00:00:00:99:98"), 0, 8});
  auto b = decide(key(0, "02:00:00:00:99:98", "02:00:00:00:99:99", 100));
  EXPECT_EQ(b.reason, DropReason::kSamePort);
  EXPECT_FALSE(b.flags & dp::kActLearn);
}

TEST_F(BuilderTest, RxQueuesFollowTheirOwnerAndTxQueuesAreSharedWhenFewer) {
  net("n1", "local");
  port(1, "n1", "02:00:00:00:00:01");
  port(2, "n1", "02:00:00:00:00:02");
  auto s = build_snapshot(in_);
  ASSERT_EQ(s->rx_by_worker.size(), 2u);
  EXPECT_EQ(s->rx_by_worker[0].size(), 2u);  // uplink + port 2
  EXPECT_EQ(s->rx_by_worker[1].size(), 1u);  // port 1
  EXPECT_TRUE(s->ports[1].txq[0].shared);   // 2 workers, 1 tx queue
  EXPECT_EQ(tx_queue_for(3, 4, 2).queue, 1);
  EXPECT_FALSE(tx_queue_for(1, 2, 2).shared);
  EXPECT_TRUE(tx_queue_for(1, 4, 2).shared);
}

TEST_F(BuilderTest, NetworkWithoutPortsHereIsAbsent) {
  net("n1", "vlan", 100);
  auto s = build_snapshot(in_);
  for (const auto& n : s->networks) EXPECT_FALSE(n.present);
  EXPECT_EQ(s->uplinks[0].vid_to_lvlan[100], 0);
}

// ---- VXLAN (issue 6) --------------------------------------------------------

uint32_t be32(const std::string& ip) { return ipv4_be32(*parse_ip(ip)); }

class VxlanBuilderTest : public BuilderTest {
 protected:
  VxlanBuilderTest() {
    model_.set_vxlan({true, *parse_ip("10.99.0.1"), 1500});
    VtepInput v;
    v.config.local_ip = be32("10.99.0.1");
    v.config.udp_port = 4789;
    v.config.ttl = 64;
    v.physnet = "physnet1";
    v.remotes.resize(3);  // index 1 is free
    v.remotes[0] = {true, be32("10.99.0.2"), be32("10.99.0.2"), true, {2, 0, 0, 0, 0xaa, 2}};
    v.remotes[2] = {true, be32("10.99.0.3"), be32("10.99.0.3"), false, {}};
    v.index = {{be32("10.99.0.2"), 0}, {be32("10.99.0.3"), 2}};
    in_.vtep = v;
  }
  void vxnet(const std::string& id, int vni) {
    auto s = model_.add_network(
        *parse_network({{"id", id}, {"type", "vxlan"}, {"segmentation_id", vni}}));
    ASSERT_TRUE(s.ok()) << s.error().message;
  }
  void remote(const std::string& net, const std::string& mac, const std::string& vtep) {
    ASSERT_TRUE(model_.add_tunnel_fdb(net, {{*parse_mac(mac), *parse_ip(vtep)}}).ok());
  }
};

TEST_F(VxlanBuilderTest, NetworkHasVniLocalFloodAndFloodVteps) {
  vxnet("vx", 5001);
  port(1, "vx", "02:00:00:00:00:01");
  port(2, "vx", "02:00:00:00:00:02");
  ASSERT_TRUE(model_.set_tunnel_flood("vx", {*parse_ip("10.99.0.3"), *parse_ip("10.99.0.2")}).ok());
  auto s = build_snapshot(in_);
  const uint16_t lvlan = model_.local_vlan("vx");
  const dp::Network& n = s->networks[lvlan];
  ASSERT_TRUE(n.present);
  EXPECT_EQ(n.type, dp::NetType::kVxlan);
  EXPECT_EQ(n.vni, 5001u);
  EXPECT_EQ(n.mtu, 1450);
  EXPECT_EQ(n.uplink, dp::kNoPort);
  ASSERT_EQ(n.flood.size(), 2u);  // the VMs, not the underlay
  EXPECT_EQ(n.flood[0].port, 1);
  EXPECT_EQ(n.flood[1].port, 2);
  EXPECT_EQ(n.flood_vteps, (std::vector<uint16_t>{0, 2}));  // by address
  EXPECT_EQ(s->vni_to_lvlan, (std::vector<std::pair<uint32_t, uint16_t>>{{5001, lvlan}}));
  EXPECT_EQ(s->uplinks[0].flat_lvlan, 0);  // the underlay carries no flat network
}

TEST_F(VxlanBuilderTest, RemoteMacsPointAtVtepPortsAndLocalMacsWin) {
  vxnet("vx", 5001);
  port(1, "vx", "02:00:00:00:00:01");
  remote("vx", "02:00:00:00:01:01", "10.99.0.2");
  remote("vx", "02:00:00:00:01:02", "10.99.0.3");
  remote("vx", "02:00:00:00:00:01", "10.99.0.3");  // stale: the VM is here now
  const uint16_t lvlan = model_.local_vlan("vx");
  learned_.push_back({lvlan, *parse_mac("02:00:00:00:01:09"), dp::kVtepPortBase + 2, 4});
  auto s = build_snapshot(in_);
  auto learned = build_learned_fdb(learned_);
  auto find = [&](const char* mac) {
    const Mac m = *parse_mac(mac);
    const dp::FdbEntry* e = s->fdb.find(lvlan, m.data());
    return e ? e : learned->find(lvlan, m.data());
  };
  EXPECT_EQ(s->fdb.find(lvlan, parse_mac("02:00:00:00:01:09")->data()), nullptr)
      << "learned MACs live in the learned FDB, not the snapshot";
  ASSERT_NE(find("02:00:00:00:01:01"), nullptr);
  EXPECT_EQ(find("02:00:00:00:01:01")->port, dp::kVtepPortBase + 0);
  EXPECT_EQ(find("02:00:00:00:01:02")->port, dp::kVtepPortBase + 2);
  EXPECT_EQ(find("02:00:00:00:01:02")->learn_slot, dp::kNoSlot);
  EXPECT_EQ(find("02:00:00:00:00:01")->port, 1);
  EXPECT_EQ(find("02:00:00:00:01:09")->port, dp::kVtepPortBase + 2);  // learned behind a VTEP
  EXPECT_EQ(find("02:00:00:00:01:09")->learn_slot, 4);
  ASSERT_NE(s->vtep_of(dp::kVtepPortBase + 2), nullptr);
  EXPECT_EQ(s->vtep_of(dp::kVtepPortBase + 2)->ip, be32("10.99.0.3"));
}

TEST_F(VxlanBuilderTest, VtepConfigRemoteTableAndUnderlayKeyScope) {
  vxnet("vx", 5001);
  port(1, "vx", "02:00:00:00:00:01");
  auto s = build_snapshot(in_);
  EXPECT_TRUE(s->vtep.enabled);
  EXPECT_EQ(s->vtep.uplink, 0);
  EXPECT_EQ(s->vtep.local_ip, be32("10.99.0.1"));
  EXPECT_EQ(s->vtep.udp_port, 4789);
  EXPECT_EQ(s->ports[0].key_bytes, dp::kFullKeyBytes);
  EXPECT_EQ(s->ports[1].key_bytes, dp::kL2KeyBytes);
  ASSERT_EQ(s->vteps.size(), 3u);
  EXPECT_TRUE(s->vteps[0].resolved);
  EXPECT_EQ(s->vteps[0].next_hop_mac[4], 0xaa);
  EXPECT_FALSE(s->vteps[1].present);
  EXPECT_EQ(s->vtep_of(dp::kVtepPortBase + 1), nullptr);
  EXPECT_FALSE(s->vteps[2].resolved);
}

TEST_F(VxlanBuilderTest, NetworkWithoutPortsHereIsNotInTheDatapath) {
  vxnet("vx1", 7);
  vxnet("vx2", 3);
  vxnet("vx3", 5);
  port(1, "vx1", "02:00:00:00:00:01");
  port(2, "vx2", "02:00:00:00:00:02");
  remote("vx3", "02:00:00:00:01:01", "10.99.0.2");
  auto s = build_snapshot(in_);
  ASSERT_EQ(s->vni_to_lvlan.size(), 2u);
  EXPECT_EQ(s->vni_to_lvlan[0].first, 3u);  // sorted by VNI
  EXPECT_EQ(s->vni_to_lvlan[1].first, 7u);
  EXPECT_EQ(s->fdb.size(), 2u);  // the two VMs only
}

TEST_F(VxlanBuilderTest, WithoutAVtepNothingTunnels) {
  in_.vtep.reset();
  net("n1", "flat");
  port(1, "n1", "02:00:00:00:00:01");
  auto s = build_snapshot(in_);
  EXPECT_FALSE(s->vtep.enabled);
  EXPECT_TRUE(s->vteps.empty());
  EXPECT_EQ(s->ports[0].key_bytes, dp::kL2KeyBytes);
}

// ---- QoS (issue 25) ----------------------------------------------------------

TEST(CompileQos, LimitsBecomeMetersInTscUnitsAndZeroIsNoLimit) {
  auto rules = parse_qos_rules(nlohmann::json::parse(R"([
      {"type": "bandwidth_limit", "direction": "egress", "max_kbps": 8000, "max_burst_kbps": 800},
      {"type": "bandwidth_limit", "direction": "ingress", "max_kbps": 0},
      {"type": "packet_rate_limit", "direction": "ingress", "max_kpps": 10},
      {"type": "dscp_marking", "dscp_mark": 18}])"));
  ASSERT_TRUE(rules.ok()) << rules.error().message;
  const uint64_t hz = 2'000'000'000;
  const dp::PortQos q = compile_qos(*rules, hz);
  // 8 Mbit/s = 1 MB/s: 2000 TSC a byte; 800 kbit of burst = 0.1 s.
  EXPECT_EQ(q.bytes[0].cost, uint64_t(2000) << dp::kQosShift);
  EXPECT_EQ(q.bytes[0].tau, hz / 10);
  EXPECT_EQ(q.bytes[1].cost, 0u);  // max_kbps 0: not policed
  // 10 kpps: 200000 TSC a frame; no burst given: 80 % of a second's.
  EXPECT_EQ(q.packets[1].cost, uint64_t(200'000) << dp::kQosShift);
  EXPECT_EQ(q.packets[1].tau, hz * 4 / 5);
  EXPECT_EQ(q.packets[0].cost, 0u);
  EXPECT_EQ(q.dscp, 18);
  EXPECT_TRUE(q.polices(dp::QosDir::kEgress));
  EXPECT_TRUE(q.polices(dp::QosDir::kIngress));
}

// ---- trunks (issue 25) -------------------------------------------------------

TEST_F(BuilderTest, SubportSendsOnItsParentsDeviceTaggedAndIsNeverPolled) {
  net("n1", "local");
  net("n2", "local");
  port(1, "n1", "02:00:00:00:00:01", /*live=*/false);
  port(3, "n2", "02:00:00:00:00:03");
  auto sub = parse_port({{"id", "00000000-0000-4000-8000-000000000002"},
                         {"network", "n2"},
                         {"mac", "02:00:00:00:00:01"},
                         {"attach", {{"type", "subport"},
                                     {"parent", "00000000-0000-4000-8000-000000000001"},
                                     {"segmentation_id", 101}}}});
  ASSERT_TRUE(sub.ok()) << sub.error().message;
  ASSERT_TRUE(model_.add_port(*sub).ok());
  in_.ports[sub->id] = DpPort{2};  // an index, no device
  {
    // The parent's device is down: so is the subport, and nobody floods to it.
    auto s = build_snapshot(in_);
    EXPECT_TRUE(s->ports[2].present);
    EXPECT_FALSE(s->ports[2].enabled);
    for (const dp::FloodTarget& t : s->networks[s->ports[2].lvlan].flood) EXPECT_NE(t.port, 2);
  }
  in_.ports["00000000-0000-4000-8000-000000000001"].live = true;
  auto s = build_snapshot(in_);
  const dp::PortEntry& e = s->ports[2];
  EXPECT_TRUE(e.enabled);
  EXPECT_EQ(e.parent, 1);
  EXPECT_EQ(e.trunk_vid, 101);
  EXPECT_EQ(e.ethdev, 11);  // the parent's device
  EXPECT_EQ(e.device_port(2), 1);
  ASSERT_NE(s->ports[1].trunk, nullptr);
  EXPECT_EQ((*s->ports[1].trunk)[101], 2);
  EXPECT_EQ((*s->ports[1].trunk)[102], dp::kNoPort);
  EXPECT_EQ(s->ports[3].trunk, nullptr);
  // Polled: the parent's queue only.
  size_t polled_sub = 0;
  for (const auto& w : s->rx_by_worker)
    for (const dp::RxQueue& q : w) polled_sub += q.port == 2;
  EXPECT_EQ(polled_sub, 0u);
  // Flooded to, tagged; and unicast to it leaves tagged too.
  bool flooded = false;
  for (const dp::FloodTarget& t : s->networks[e.lvlan].flood)
    if (t.port == 2) flooded = t.egress_vid == 101;
  EXPECT_TRUE(flooded);
  auto a = decide(key(3, "02:00:00:00:00:03", "02:00:00:00:00:01"));
  EXPECT_EQ(a.kind, ActionKind::kOutput);
  EXPECT_EQ(a.out_port, 2);
  EXPECT_EQ(a.egress_vid, 101);
  // A snapshot without the subport forwards differently (the cache must go).
  auto before = build_snapshot(in_);
  ASSERT_TRUE(model_.remove_port(sub->id).ok());
  in_.ports.erase(sub->id);
  EXPECT_FALSE(dp::same_forwarding(*before, *build_snapshot(in_)));
}

}  // namespace
}  // namespace strait::ctl
