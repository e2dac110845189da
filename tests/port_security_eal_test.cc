// Port security and security groups in the slow path: anti-spoofing, the
// always-allowed / always-dropped traffic (port_security.h), and how
// pipeline_decide folds the sender's egress and the receiver's ingress rules
// into the cached action (kActTrack / kActNewOk / reason). The trace must
// explain each verdict (TraceResult::consistent). Frames made by
// tests/frame_builder.h.
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <cstring>
#include <string>
#include <vector>

#include "dataplane/pipeline.h"
#include "dataplane/port_security.h"
#include "dataplane/trace.h"
#include "tests/frame_builder.h"
#include "tests/sg_fixture.h"

namespace strait::dp {
namespace {

using test::kLinkLocalA;
using test::kMacA;
using test::kMacB;
using test::kMacC;
using test::kMacD;
using test::kMacPair;
using test::kMacRemote;
using test::kPortA;
using test::kPortB;
using test::kPortC;
using test::kPortD;
using test::kUplink;

using test::Eth;
using test::Frame;

// ICMPv6 messages as scapy makes them by default: NDP with hop limit 255,
// a router advertisement with a router lifetime of 1800 s, NA with R and O.
std::vector<uint8_t> addr6(const char* a) {
  std::vector<uint8_t> b(16);
  inet_pton(AF_INET6, a, b.data());
  return b;
}
std::vector<uint8_t> then(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
Frame echo6(const char* smac, const char* dmac, const char* src, const char* dst) {
  return Eth(smac, dmac).ipv6(src, dst).icmp6(128, 0, {0, 0, 0, 0});
}
Frame ra(const char* smac, const char* dmac, const char* src) {
  return Eth(smac, dmac).ipv6(src, "ff02::1", 255).icmp6(134, 0, {0, 0, 0x07, 0x08, 0, 0, 0, 0, 0, 0, 0, 0});
}
Frame rs(const char* smac, const char* src) {
  return Eth(smac, "33:33:00:00:00:02").ipv6(src, "ff02::2", 255).icmp6(133, 0, {0, 0, 0, 0});
}
Frame ns(const char* smac, const char* dmac, const char* src, const char* dst, const char* tgt) {
  return Eth(smac, dmac).ipv6(src, dst, 255).icmp6(135, 0, then({0, 0, 0, 0}, addr6(tgt)));
}
Frame na(const char* smac, const char* dmac, const char* src, const char* dst, const char* tgt) {
  return Eth(smac, dmac).ipv6(src, dst, 255).icmp6(136, 0, then({0xa0, 0, 0, 0}, addr6(tgt)));
}
Frame mld2_report(const char* smac, const char* src) {
  return Eth(smac, "33:33:00:00:00:16").ipv6(src, "ff02::16", 1).icmp6(143, 0, {0, 0, 0, 0});
}
constexpr const char* kBcast = "ff:ff:ff:ff:ff:ff";

struct Expect {
  ActionKind kind;
  DropReason reason = DropReason::kNone;
  uint8_t sg_flags = 0;  // kActTrack | kActNewOk
  uint16_t out_port = kNoPort;
};

struct Case {
  const char* name;
  uint16_t in_port;
  Frame frame;
  Expect want;
};

Expect drop(DropReason r) { return {ActionKind::kDrop, r}; }
Expect out(uint16_t port, uint8_t flags = 0, DropReason r = DropReason::kNone) {
  return {ActionKind::kOutput, r, flags, port};
}
Expect flood(uint8_t flags = 0, DropReason r = DropReason::kNone) {
  return {ActionKind::kFlood, r, flags};
}
constexpr uint8_t kTrackNew = kActTrack | kActNewOk;

// Runs every case through pipeline_decide and trace_frame.
void check(const Snapshot& s, const std::vector<Case>& cases) {
  std::vector<std::pair<uint16_t, Frame>> list;
  for (const Case& c : cases) list.emplace_back(c.in_port, c.frame);
  std::vector<test::Pkt> pkts = test::packets(list);
  ASSERT_EQ(pkts.size(), cases.size());
  for (size_t i = 0; i < cases.size(); i++) {
    const Case& c = cases[i];
    SCOPED_TRACE(c.name);
    const Action a = pipeline_decide(s, pkts[i].key);
    // What the worker caches: the same decision with the rules left for
    // conntrack's misses; applying them gives pipeline_decide's exactly.
    const Action deferred = pipeline_decide_deferred(s, pkts[i].key);
    const Action resolved = resolve_rules(s, pkts[i].key, deferred);
    EXPECT_EQ(std::memcmp(&resolved, &a, sizeof a), 0);
    EXPECT_EQ((deferred.flags & kActRulesPending) != 0,
              (a.flags & kActTrack) != 0 && a.kind != ActionKind::kDrop);
    EXPECT_EQ(a.flags & kActRulesPending, 0);
    EXPECT_EQ(int(a.kind), int(c.want.kind));
    EXPECT_EQ(drop_reason_name(a.reason), drop_reason_name(c.want.reason));
    EXPECT_EQ(a.flags & (kActTrack | kActNewOk), c.want.sg_flags);
    if (c.want.kind == ActionKind::kOutput) {
      EXPECT_EQ(a.out_port, c.want.out_port);
    }

    const TraceResult t = trace_frame(s, pkts[i].frame.data(), uint32_t(pkts[i].frame.size()),
                                      c.in_port);
    EXPECT_TRUE(t.consistent);
    EXPECT_EQ(t.tracked, bool(a.flags & kActTrack));
    if (a.kind == ActionKind::kDrop || (a.flags & kActTrack && !(a.flags & kActNewOk))) {
      EXPECT_EQ(drop_reason_name(t.drop), drop_reason_name(a.reason));
    }
  }
}

class PortSecurityTest : public ::testing::Test {
 protected:
  std::unique_ptr<Snapshot> snap_ = test::sg_snapshot();
};

TEST_F(PortSecurityTest, AntiSpoofing) {
  auto tcp = [](const char* smac, const char* src, const char* dst = "10.0.0.11",
                uint16_t dport = 80) { return Eth(smac, kMacB).ipv4(src, dst).tcp(40000, dport); };
  check(*snap_, {
      {"port's MAC and IP", kPortA, tcp(kMacA, "10.0.0.10"), out(kPortB, kTrackNew)},
      {"foreign MAC", kPortA, tcp("02:00:00:00:00:ee", "10.0.0.10"), drop(DropReason::kSpoofedMac)},
      {"another VM's MAC", kPortA, Eth(kMacB, kMacC).ipv4("10.0.0.10", "10.0.0.11").tcp(40000, 80),
       drop(DropReason::kSpoofedMac)},
      {"foreign IP", kPortA, tcp(kMacA, "10.0.0.99"), drop(DropReason::kSpoofedIp)},
      {"pair MAC with pair prefix", kPortA, tcp(kMacPair, "10.0.1.200"), out(kPortB, kTrackNew)},
      {"pair MAC with the fixed IP", kPortA, tcp(kMacPair, "10.0.0.10"),
       drop(DropReason::kSpoofedIp)},
      {"port MAC with pair prefix of another MAC", kPortA, tcp(kMacA, "10.0.1.200"),
       drop(DropReason::kSpoofedIp)},
      {"/23 pair, upper half", kPortA, tcp(kMacA, "10.0.3.254"), out(kPortB, kTrackNew)},
      {"/23 pair, just outside", kPortA, tcp(kMacA, "10.0.4.1"), drop(DropReason::kSpoofedIp)},
      {"IPv6 fixed IP", kPortA, Eth(kMacA, kMacC).ipv6("fd00::a", "fd00::c").tcp(20, 22),
       out(kPortC, kTrackNew)},
      {"IPv6 link-local", kPortA, echo6(kMacA, kMacC, kLinkLocalA, "fe80::c"),
       out(kPortC, kTrackNew)},
      {"IPv6 foreign link-local", kPortA, echo6(kMacA, kMacC, "fe80::1", "fe80::c"),
       drop(DropReason::kSpoofedIp)},
      {"IPv6 unspecified, not DAD", kPortA, Eth(kMacA, kMacC).ipv6("::", "fd00::c").udp(53, 53),
       drop(DropReason::kSpoofedIp)},
      {"IPv6 DAD from ::", kPortA, ns(kMacA, "33:33:ff:00:00:0a", "::", "ff02::1:ff00:a", "fd00::a"),
       flood()},
      {"MLDv2 report from ::", kPortA, mld2_report(kMacA, "::"), flood()},
  });
}

TEST_F(PortSecurityTest, Arp) {
  auto arp = [](const char* smac, const char* dmac, const char* hwsrc, const char* psrc,
                uint16_t op = 1) { return Eth(smac, dmac).arp(op, psrc, "10.0.0.11", hwsrc); };
  check(*snap_, {
      {"request", kPortA, arp(kMacA, kBcast, kMacA, "10.0.0.10"), flood()},
      {"reply to B", kPortA, arp(kMacA, kMacB, kMacA, "10.0.0.10", 2), out(kPortB)},
      {"probe from 0.0.0.0", kPortA, arp(kMacA, kBcast, kMacA, "0.0.0.0"), flood()},
      {"sender MAC not the source", kPortA, arp(kMacA, kBcast, kMacPair, "10.0.1.1"),
       drop(DropReason::kSpoofedArp)},
      {"sender IP not the port's", kPortA, arp(kMacA, kBcast, kMacA, "10.0.0.11"),
       drop(DropReason::kSpoofedArp)},
      {"pair MAC with its prefix", kPortA, arp(kMacPair, kBcast, kMacPair, "10.0.1.1"), flood()},
      {"pair MAC with the fixed IP", kPortA, arp(kMacPair, kBcast, kMacPair, "10.0.0.10"),
       drop(DropReason::kSpoofedArp)},
      {"foreign source MAC first", kPortA, arp(kMacB, kBcast, kMacB, "10.0.0.11"),
       drop(DropReason::kSpoofedMac)},
      {"from the uplink to a secured VM", kUplink, arp(kMacRemote, kMacA, kMacRemote, "10.0.0.1", 2),
       out(kPortA)},
  });
}

TEST_F(PortSecurityTest, AlwaysAllowedAndAlwaysDropped) {
  const uint8_t snap[] = {0xaa, 0xaa, 3, 0, 0, 0, 0, 0};  // LLC/SNAP, OUI 0, type 0
  const std::vector<uint8_t> llc_snap(snap, snap + sizeof snap);
  check(*snap_, {
      {"DHCP client from 0.0.0.0", kPortA,
       Eth(kMacA, kBcast).ipv4("0.0.0.0", "255.255.255.255").udp(68, 67).bootp(), flood()},
      {"DHCP client unicast renew", kPortA,
       Eth(kMacA, kMacC).ipv4("10.0.0.10", "10.0.0.12").udp(68, 67).bootp(), out(kPortC)},
      {"0.0.0.0 but not DHCP", kPortA,
       Eth(kMacA, kBcast).ipv4("0.0.0.0", "255.255.255.255").udp(68, 68),
       drop(DropReason::kSpoofedIp)},
      {"DHCP server from a VM", kPortA,
       Eth(kMacA, kBcast).ipv4("10.0.0.10", "255.255.255.255").udp(67, 68).bootp(2),
       drop(DropReason::kDhcpServerFromVm)},
      {"DHCPv6 server from a VM", kPortA, Eth(kMacA, kMacC).ipv6("fd00::a", "fd00::c").udp(547, 546),
       drop(DropReason::kDhcpServerFromVm)},
      {"DHCPv6 client", kPortA,
       Eth(kMacA, "33:33:00:01:00:02").ipv6(kLinkLocalA, "ff02::1:2").udp(546, 547), flood()},
      {"RA from a VM", kPortA, ra(kMacA, "33:33:00:00:00:01", kLinkLocalA),
       drop(DropReason::kRaFromVm)},
      {"RS from a VM", kPortA, rs(kMacA, kLinkLocalA), flood()},
      {"NA from a VM to B (no IPv6 ingress rule)", kPortA,
       na(kMacA, kMacB, "fd00::a", "fd00::b", "fd00::a"), out(kPortB)},
      {"other ethertype from a VM", kPortA, Eth(kMacA, kMacB).type(0x8870).bytes(llc_snap),
       drop(DropReason::kEthertypeDenied)},
      {"802.3 frame (a length, LLC/SNAP) from a VM", kPortA,
       Eth(kMacA, kMacB).type(uint16_t(llc_snap.size())).bytes(llc_snap),
       drop(DropReason::kEthertypeDenied)},
      {"LLDP from a VM", kPortA, Eth(kMacA, "01:80:c2:00:00:0e").type(0x88cc),
       drop(DropReason::kEthertypeDenied)},
      {"other ethertype to a VM", kUplink, Eth("02:00:00:00:99:01", kMacA).type(0x88b5),
       drop(DropReason::kEthertypeDenied)},
      {"other ethertype to an unsecured VM", kUplink, Eth("02:00:00:00:99:01", kMacC).type(0x88b5),
       out(kPortC)},
      {"DHCP reply to a VM", kUplink,
       Eth(kMacRemote, kMacA).ipv4("10.0.0.2", "10.0.0.10").udp(67, 68).bootp(2), out(kPortA)},
      {"RA to a VM", kUplink, ra(kMacRemote, kMacA, "fe80::1"), out(kPortA)},
  });
}

TEST_F(PortSecurityTest, EgressAndIngressRules) {
  auto tcp = [](const char* smac, const char* dmac, const char* src, const char* dst, uint16_t sport,
                uint16_t dport, uint8_t flags = 0x02) {
    return Eth(smac, dmac).ipv4(src, dst).tcp(sport, dport, flags);
  };
  check(*snap_, {
      {"A -> B:80, both sides allow", kPortA, tcp(kMacA, kMacB, "10.0.0.10", "10.0.0.11", 40000, 80),
       out(kPortB, kTrackNew)},
      {"A -> B:22, B's ingress denies", kPortA,
       tcp(kMacA, kMacB, "10.0.0.10", "10.0.0.11", 40000, 22),
       out(kPortB, kActTrack, DropReason::kSgIngressDenied)},
      {"B's reply to A: A's ingress denies it as new", kPortB,
       tcp(kMacB, kMacA, "10.0.0.11", "10.0.0.10", 80, 40000, 0x12),
       out(kPortA, kActTrack, DropReason::kSgIngressDenied)},
      {"D has no group: egress denies", kPortD, tcp(kMacD, kMacB, "10.0.0.13", "10.0.0.11", 40000, 80),
       out(kPortB, kActTrack, DropReason::kSgEgressDenied)},
      {"D -> C (unsecured): egress still denies", kPortD,
       tcp(kMacD, kMacC, "10.0.0.13", "10.0.0.12", 40000, 80),
       out(kPortC, kActTrack, DropReason::kSgEgressDenied)},
      {"A -> C (unsecured): egress allows", kPortA,
       tcp(kMacA, kMacC, "10.0.0.10", "10.0.0.12", 40000, 22), out(kPortC, kTrackNew)},
      {"C (unsecured) -> A:80", kPortC, tcp(kMacC, kMacA, "10.0.0.12", "10.0.0.10", 40000, 80),
       out(kPortA, kTrackNew)},
      {"C (unsecured) -> A:22", kPortC, tcp(kMacC, kMacA, "10.0.0.12", "10.0.0.10", 40000, 22),
       out(kPortA, kActTrack, DropReason::kSgIngressDenied)},
      {"uplink -> A:80", kUplink, tcp(kMacRemote, kMacA, "192.0.2.1", "10.0.0.10", 40000, 80),
       out(kPortA, kTrackNew)},
      {"uplink -> A:22", kUplink, tcp(kMacRemote, kMacA, "192.0.2.1", "10.0.0.10", 40000, 22),
       out(kPortA, kActTrack, DropReason::kSgIngressDenied)},
      {"uplink -> D (no group)", kUplink, tcp(kMacRemote, kMacD, "192.0.2.1", "10.0.0.13", 40000, 80),
       out(kPortD, kActTrack, DropReason::kSgIngressDenied)},
      {"uplink -> C: nothing to check", kUplink,
       tcp(kMacRemote, kMacC, "192.0.2.1", "10.0.0.12", 40000, 22), out(kPortC)},
      {"ICMP echo uplink -> A", kUplink, Eth(kMacRemote, kMacA).ipv4("192.0.2.1", "10.0.0.10").icmp(),
       out(kPortA, kTrackNew)},
      {"IPv6 A -> B: B has no IPv6 ingress rule", kPortA,
       Eth(kMacA, kMacB).ipv6("fd00::a", "fd00::b").tcp(20, 80),
       out(kPortB, kActTrack, DropReason::kSgIngressDenied)},
      {"later fragment A -> B: tracked, rules see no ports", kPortA,
       Eth(kMacA, kMacB).ipv4("10.0.0.10", "10.0.0.11").fragment(6, 100).fill('x', 16),
       out(kPortB, kActTrack, DropReason::kSgIngressDenied)},
  });
}

TEST_F(PortSecurityTest, FloodsCarryTheSendersSideOnly) {
  check(*snap_, {
      {"A broadcasts UDP: egress allows", kPortA,
       Eth(kMacA, kBcast).ipv4("10.0.0.10", "10.0.0.255").udp(5000, 5000), flood(kTrackNew)},
      {"A to an unknown MAC", kPortA, Eth(kMacA, kMacRemote).ipv4("10.0.0.10", "192.0.2.1").tcp(20, 22),
       flood(kTrackNew)},
      {"D broadcasts UDP: egress denies", kPortD,
       Eth(kMacD, kBcast).ipv4("10.0.0.13", "10.0.0.255").udp(5000, 5000),
       flood(kActTrack, DropReason::kSgEgressDenied)},
      {"uplink broadcast: untracked, targets check per packet", kUplink,
       Eth(kMacRemote, kBcast).ipv4("192.0.2.1", "255.255.255.255").udp(53, 5000), flood()},
  });
}

TEST_F(PortSecurityTest, PortSecurityOffFiltersNothing) {
  check(*snap_, {
      {"foreign MAC", kPortC, Eth("02:00:00:00:00:ee", kMacB).ipv4("10.9.9.9", "10.0.0.11").tcp(20, 80),
       out(kPortB, kTrackNew)},  // B's own ingress rules still apply
      {"foreign IP to the uplink", kPortC,
       Eth(kMacC, kMacRemote).ipv4("10.9.9.9", "192.0.2.1").udp(67, 68), flood()},
      {"spoofed ARP", kPortC, Eth(kMacC, kBcast).arp(1, "10.0.0.1", "0.0.0.0", "02:00:00:00:00:01"),
       flood()},
      {"RA", kPortC, ra(kMacC, "33:33:00:00:00:01", "fe80::c"), flood()},
      {"other ethertype", kPortC, Eth(kMacC, "02:00:00:00:99:01").type(0x88b5), flood()},
  });
}

// A frame from the uplink that the receiving VM's port security drops still
// tells where its source is: an unknown source is learned (replies to it go
// to the uplink instead of flooding), a known one is not reported again.
TEST_F(PortSecurityTest, DroppedByTheReceiverTheSourceIsStillLearned) {
  auto pkts = test::packets(std::vector<std::pair<uint16_t, Frame>>{
      {kUplink, Eth("02:00:00:00:99:01", kMacA).type(0x88b5)},
      {kUplink, Eth("02:00:00:00:99:01", kMacC).type(0x88b5)},
      {kPortC, Eth(kMacC, kMacA).type(0x88b5)}});
  const Action denied = pipeline_decide(*snap_, pkts[0].key);
  EXPECT_EQ(drop_reason_name(denied.reason), drop_reason_name(DropReason::kEthertypeDenied));
  EXPECT_TRUE(denied.flags & kActLearn);
  const Action passed = pipeline_decide(*snap_, pkts[1].key);  // C has no port security
  EXPECT_EQ(int(passed.kind), int(ActionKind::kOutput));
  EXPECT_TRUE(passed.flags & kActLearn);
  EXPECT_EQ(denied.lvlan, passed.lvlan);  // the network it is learned in
  // A bound port's MAC is never learned, dropped or not.
  const Action from_vm = pipeline_decide(*snap_, pkts[2].key);
  EXPECT_EQ(drop_reason_name(from_vm.reason), drop_reason_name(DropReason::kEthertypeDenied));
  EXPECT_FALSE(from_vm.flags & kActLearn);
  EXPECT_TRUE(trace_frame(*snap_, pkts[0].frame.data(), uint32_t(pkts[0].frame.size()), kUplink)
                  .learn);
  // Once learned, its dropped frames still keep it alive: the drop carries
  // its aging slot.
  Fdb learned({{Fdb::make_key(denied.lvlan, pkts[0].key.dl_src), kUplink, 9}});
  LearnedLookup lk{&learned};
  const Action known = pipeline_decide(*snap_, pkts[0].key, &lk);
  EXPECT_EQ(drop_reason_name(known.reason), drop_reason_name(DropReason::kEthertypeDenied));
  EXPECT_FALSE(known.flags & kActLearn);
  EXPECT_EQ(known.learn_slot, 9);
  EXPECT_TRUE(lk.used);
}

TEST_F(PortSecurityTest, TraceExplainsEachStep) {
  auto pkts = test::packets(std::vector<std::pair<uint16_t, Frame>>{
      {kPortA, Eth(kMacA, kMacB).ipv4("10.0.0.10", "10.0.0.11").tcp(40000, 22)},
      {kPortA, Eth("02:00:00:00:00:ee", kMacB).ipv4("10.0.0.10", "10.0.0.11").tcp()},
      {kUplink, Eth(kMacRemote, kBcast).ipv4("192.0.2.1", "255.255.255.255").udp(53, 5000)},
  });
  ASSERT_EQ(pkts.size(), 3u);
  auto stages = [](const TraceResult& r) {
    std::string s;
    for (const TraceStep& st : r.steps) s += std::string(trace_stage_name(st.stage)) + " ";
    return s;
  };
  auto find = [](const TraceResult& r, TraceStage st, uint16_t port = kNoPort) -> const TraceStep* {
    for (const TraceStep& s : r.steps)
      if (s.stage == st && (port == kNoPort || s.port == port)) return &s;
    return nullptr;
  };
  {
    const auto& p = pkts[0];
    TraceResult r = trace_frame(*snap_, p.frame.data(), uint32_t(p.frame.size()), kPortA);
    EXPECT_TRUE(r.consistent) << stages(r);
    EXPECT_TRUE(r.tracked);
    EXPECT_EQ(r.drop, DropReason::kSgIngressDenied);
    const TraceStep* eg = find(r, TraceStage::kEgressSg);
    ASSERT_TRUE(eg) << stages(r);
    EXPECT_NE(eg->detail.find("egress rule #3"), std::string::npos) << eg->detail;
    const TraceStep* in = find(r, TraceStage::kIngressSg);
    ASSERT_TRUE(in) << stages(r);
    EXPECT_EQ(in->port, kPortB);
    EXPECT_NE(in->detail.find("no ingress rule"), std::string::npos) << in->detail;
    const TraceStep* ct = find(r, TraceStage::kConntrack);
    ASSERT_TRUE(ct) << stages(r);
    EXPECT_EQ(ct->drop, DropReason::kSgIngressDenied);
    EXPECT_NE(ct->detail.find("replies"), std::string::npos) << ct->detail;
  }
  {
    const auto& p = pkts[1];
    TraceResult r = trace_frame(*snap_, p.frame.data(), uint32_t(p.frame.size()), kPortA);
    EXPECT_TRUE(r.consistent) << stages(r);
    const TraceStep* sp = find(r, TraceStage::kAntiSpoof);
    ASSERT_TRUE(sp) << stages(r);
    EXPECT_EQ(sp->drop, DropReason::kSpoofedMac);
  }
  {
    // Uplink broadcast UDP: A, B (ingress TCP 80 / ICMP only) and D (no
    // group) refuse it; C (unsecured) takes it.
    const auto& p = pkts[2];
    TraceResult r = trace_frame(*snap_, p.frame.data(), uint32_t(p.frame.size()), kUplink);
    EXPECT_TRUE(r.consistent) << stages(r);
    EXPECT_EQ(r.drop, DropReason::kNone);
    ASSERT_EQ(r.outputs.size(), 1u);
    EXPECT_EQ(r.outputs[0].port, kPortC);
    for (uint16_t port : {kPortA, kPortB, kPortD}) {
      const TraceStep* s = find(r, TraceStage::kIngressSg, port);
      ASSERT_TRUE(s) << port << ": " << stages(r);
      EXPECT_EQ(s->drop, DropReason::kSgIngressDenied);
    }
  }
}

// ---- the helpers themselves --------------------------------------------------------

TEST(PortSecurityHelpers, ReverseKey) {
  auto pkts = test::packets(std::vector<std::pair<uint16_t, Frame>>{
      {kPortB, Eth(kMacB, kMacA).ipv4("10.0.0.11", "10.0.0.10").tcp(80, 40000, 0x12)},
      {kPortB, Eth(kMacB, kMacA).ipv4("10.0.0.11", "10.0.0.10").icmp(0, 0, 7)},
      {kPortB, Eth(kMacB, kMacA).ipv6("fd00::b", "fd00::a").icmp6(129, 0, {0, 7, 0, 0})},
      {kPortB, Eth(kMacB, kMacA).ipv4("10.0.0.11", "10.0.0.10").icmp(14)},
      {kPortB, Eth(kMacB, kMacA).ipv6("fd00::b", "fd00::a").icmp6(1, 0, {0, 0, 0, 0})},
  });
  ASSERT_EQ(pkts.size(), 5u);
  const FlowKey tcp = reverse_key(pkts[0].key, kPortA);
  EXPECT_EQ(tcp.in_port, kPortA);
  EXPECT_EQ(tcp.tp_src, 40000);
  EXPECT_EQ(tcp.tp_dst, 80);
  EXPECT_EQ(0, std::memcmp(tcp.nw_src, pkts[0].key.nw_dst, 16));
  EXPECT_EQ(0, std::memcmp(tcp.nw_dst, pkts[0].key.nw_src, 16));
  EXPECT_EQ(0, std::memcmp(tcp.dl_src, pkts[0].key.dl_dst, 6));
  EXPECT_EQ(reverse_key(pkts[1].key, kPortA).tp_src, 8) << "echo reply -> echo request";
  EXPECT_EQ(reverse_key(pkts[1].key, kPortA).tp_dst, 0);
  EXPECT_EQ(reverse_key(pkts[2].key, kPortA).tp_src, 128);
  EXPECT_EQ(reverse_key(pkts[3].key, kPortA).tp_src, 13) << "timestamp reply -> request";
  EXPECT_EQ(reverse_key(pkts[4].key, kPortA).tp_src, 1) << "not a query: type kept";
}

TEST(PortSecurityHelpers, ClassesWithoutPortSecurityState) {
  FlowKey k{};
  DropReason why = DropReason::kNone;
  k.dl_type = 0x88cc;
  EXPECT_EQ(egress_class(k, &why), SgClass::kDeny);
  EXPECT_EQ(why, DropReason::kEthertypeDenied);
  k.dl_type = kEthTypeArp;
  EXPECT_EQ(egress_class(k, &why), SgClass::kAllow);
  EXPECT_EQ(ingress_class(k, &why), SgClass::kAllow);
  k.dl_type = kEthTypeIpv4;
  k.nw_proto = kIpProtoUdp;
  k.tp_src = 67;
  k.tp_dst = 68;
  EXPECT_EQ(ingress_class(k, &why), SgClass::kAllow);
  k.nw_frag = kFragLater;  // no ports in a later fragment, whatever tp_* hold
  EXPECT_EQ(ingress_class(k, &why), SgClass::kRules);
  PortSecurity no_groups;
  EXPECT_FALSE(rules_allow(no_groups, SgDirection::kEgress, k));
}

}  // namespace
}  // namespace strait::dp
