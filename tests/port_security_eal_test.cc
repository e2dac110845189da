// Port security and security groups in the slow path: anti-spoofing, the
// always-allowed / always-dropped traffic (port_security.h), and how
// pipeline_decide folds the sender's egress and the receiver's ingress rules
// into the cached action (kActTrack / kActNewOk / reason). The trace must
// explain each verdict (TraceResult::consistent). Frames made by scapy.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "dataplane/pipeline.h"
#include "dataplane/port_security.h"
#include "dataplane/trace.h"
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

std::string eth(const char* src, const char* dst, const std::string& rest = "") {
  return std::string("Ether(src='") + src + "',dst='" + dst + "')" + (rest.empty() ? "" : "/" + rest);
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
  std::string frame;
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
  std::vector<std::pair<uint16_t, std::string>> list;
  for (const Case& c : cases) list.emplace_back(c.in_port, c.frame);
  std::vector<test::Pkt> pkts = test::packets(list);
  ASSERT_EQ(pkts.size(), cases.size());
  for (size_t i = 0; i < cases.size(); i++) {
    const Case& c = cases[i];
    SCOPED_TRACE(std::string(c.name) + ": " + c.frame);
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
  const std::string tcp80 = "IP(src='10.0.0.10',dst='10.0.0.11')/TCP(sport=40000,dport=80,flags='S')";
  check(*snap_, {
      {"port's MAC and IP", kPortA, eth(kMacA, kMacB, tcp80), out(kPortB, kTrackNew)},
      {"foreign MAC", kPortA, eth("02:00:00:00:00:ee", kMacB, tcp80),
       drop(DropReason::kSpoofedMac)},
      {"another VM's MAC", kPortA, eth(kMacB, kMacC, tcp80), drop(DropReason::kSpoofedMac)},
      {"foreign IP", kPortA,
       eth(kMacA, kMacB, "IP(src='10.0.0.99',dst='10.0.0.11')/TCP(dport=80)"),
       drop(DropReason::kSpoofedIp)},
      {"pair MAC with pair prefix", kPortA,
       eth(kMacPair, kMacB, "IP(src='10.0.1.200',dst='10.0.0.11')/TCP(dport=80,flags='S')"),
       out(kPortB, kTrackNew)},
      {"pair MAC with the fixed IP", kPortA,
       eth(kMacPair, kMacB, "IP(src='10.0.0.10',dst='10.0.0.11')/TCP(dport=80)"),
       drop(DropReason::kSpoofedIp)},
      {"port MAC with pair prefix of another MAC", kPortA,
       eth(kMacA, kMacB, "IP(src='10.0.1.200',dst='10.0.0.11')/TCP(dport=80)"),
       drop(DropReason::kSpoofedIp)},
      {"/23 pair, upper half", kPortA,
       eth(kMacA, kMacB, "IP(src='10.0.3.254',dst='10.0.0.11')/TCP(dport=80,flags='S')"),
       out(kPortB, kTrackNew)},
      {"/23 pair, just outside", kPortA,
       eth(kMacA, kMacB, "IP(src='10.0.4.1',dst='10.0.0.11')/TCP(dport=80)"),
       drop(DropReason::kSpoofedIp)},
      {"IPv6 fixed IP", kPortA,
       eth(kMacA, kMacC, "IPv6(src='fd00::a',dst='fd00::c')/TCP(dport=22,flags='S')"),
       out(kPortC, kTrackNew)},
      {"IPv6 link-local", kPortA,
       eth(kMacA, kMacC, std::string("IPv6(src='") + kLinkLocalA +
                             "',dst='fe80::c')/ICMPv6EchoRequest()"),
       out(kPortC, kTrackNew)},
      {"IPv6 foreign link-local", kPortA,
       eth(kMacA, kMacC, "IPv6(src='fe80::1',dst='fe80::c')/ICMPv6EchoRequest()"),
       drop(DropReason::kSpoofedIp)},
      {"IPv6 unspecified, not DAD", kPortA,
       eth(kMacA, kMacC, "IPv6(src='::',dst='fd00::c')/UDP(dport=53)"),
       drop(DropReason::kSpoofedIp)},
      {"IPv6 DAD from ::", kPortA,
       eth(kMacA, "33:33:ff:00:00:0a",
           "IPv6(src='::',dst='ff02::1:ff00:a')/ICMPv6ND_NS(tgt='fd00::a')"),
       flood()},
      {"MLDv2 report from ::", kPortA,
       eth(kMacA, "33:33:00:00:00:16", "IPv6(src='::',dst='ff02::16')/ICMPv6MLReport2()"),
       flood()},
  });
}

TEST_F(PortSecurityTest, Arp) {
  auto arp = [](const char* hwsrc, const char* psrc, int op = 1) {
    return std::string("ARP(op=") + std::to_string(op) + ",hwsrc='" + hwsrc + "',psrc='" + psrc +
           "',pdst='10.0.0.11')";
  };
  check(*snap_, {
      {"request", kPortA, eth(kMacA, kBcast, arp(kMacA, "10.0.0.10")), flood()},
      {"reply to B", kPortA, eth(kMacA, kMacB, arp(kMacA, "10.0.0.10", 2)), out(kPortB)},
      {"probe from 0.0.0.0", kPortA, eth(kMacA, kBcast, arp(kMacA, "0.0.0.0")), flood()},
      {"sender MAC not the source", kPortA, eth(kMacA, kBcast, arp(kMacPair, "10.0.1.1")),
       drop(DropReason::kSpoofedArp)},
      {"sender IP not the port's", kPortA, eth(kMacA, kBcast, arp(kMacA, "10.0.0.11")),
       drop(DropReason::kSpoofedArp)},
      {"pair MAC with its prefix", kPortA, eth(kMacPair, kBcast, arp(kMacPair, "10.0.1.1")),
       flood()},
      {"pair MAC with the fixed IP", kPortA, eth(kMacPair, kBcast, arp(kMacPair, "10.0.0.10")),
       drop(DropReason::kSpoofedArp)},
      {"foreign source MAC first", kPortA, eth(kMacB, kBcast, arp(kMacB, "10.0.0.11")),
       drop(DropReason::kSpoofedMac)},
      {"from the uplink to a secured VM", kUplink,
       eth(kMacRemote, kMacA, arp(kMacRemote, "10.0.0.1", 2)), out(kPortA)},
  });
}

TEST_F(PortSecurityTest, AlwaysAllowedAndAlwaysDropped) {
  const std::string dhcp_discover =
      "IP(src='0.0.0.0',dst='255.255.255.255')/UDP(sport=68,dport=67)/BOOTP()";
  check(*snap_, {
      {"DHCP client from 0.0.0.0", kPortA, eth(kMacA, kBcast, dhcp_discover), flood()},
      {"DHCP client unicast renew", kPortA,
       eth(kMacA, kMacC, "IP(src='10.0.0.10',dst='10.0.0.12')/UDP(sport=68,dport=67)/BOOTP()"),
       out(kPortC)},
      {"0.0.0.0 but not DHCP", kPortA,
       eth(kMacA, kBcast, "IP(src='0.0.0.0',dst='255.255.255.255')/UDP(sport=68,dport=68)"),
       drop(DropReason::kSpoofedIp)},
      {"DHCP server from a VM", kPortA,
       eth(kMacA, kBcast,
           "IP(src='10.0.0.10',dst='255.255.255.255')/UDP(sport=67,dport=68)/BOOTP(op=2)"),
       drop(DropReason::kDhcpServerFromVm)},
      {"DHCPv6 server from a VM", kPortA,
       eth(kMacA, kMacC, "IPv6(src='fd00::a',dst='fd00::c')/UDP(sport=547,dport=546)"),
       drop(DropReason::kDhcpServerFromVm)},
      {"DHCPv6 client", kPortA,
       eth(kMacA, "33:33:00:01:00:02",
           std::string("IPv6(src='") + kLinkLocalA + "',dst='ff02::1:2')/UDP(sport=546,dport=547)"),
       flood()},
      {"RA from a VM", kPortA,
       eth(kMacA, "33:33:00:00:00:01",
           std::string("IPv6(src='") + kLinkLocalA + "',dst='ff02::1')/ICMPv6ND_RA()"),
       drop(DropReason::kRaFromVm)},
      {"RS from a VM", kPortA,
       eth(kMacA, "33:33:00:00:00:02",
           std::string("IPv6(src='") + kLinkLocalA + "',dst='ff02::2')/ICMPv6ND_RS()"),
       flood()},
      {"NA from a VM to B (no IPv6 ingress rule)", kPortA,
       eth(kMacA, kMacB, "IPv6(src='fd00::a',dst='fd00::b')/ICMPv6ND_NA(tgt='fd00::a')"),
       out(kPortB)},
      {"other ethertype from a VM", kPortA, eth(kMacA, kMacB, "LLC()/SNAP()"),
       drop(DropReason::kEthertypeDenied)},
      {"LLDP from a VM", kPortA, "Ether(src='02:00:00:00:00:0a',dst='01:80:c2:00:00:0e',type=0x88cc)",
       drop(DropReason::kEthertypeDenied)},
      {"other ethertype to a VM", kUplink,
       "Ether(src='02:00:00:00:99:01',dst='02:00:00:00:00:0a',type=0x88b5)",
       drop(DropReason::kEthertypeDenied)},
      {"other ethertype to an unsecured VM", kUplink,
       "Ether(src='02:00:00:00:99:01',dst='02:00:00:00:00:0c',type=0x88b5)", out(kPortC)},
      {"DHCP reply to a VM", kUplink,
       eth(kMacRemote, kMacA, "IP(src='10.0.0.2',dst='10.0.0.10')/UDP(sport=67,dport=68)/BOOTP(op=2)"),
       out(kPortA)},
      {"RA to a VM", kUplink,
       eth(kMacRemote, kMacA, "IPv6(src='fe80::1',dst='ff02::1')/ICMPv6ND_RA()"), out(kPortA)},
  });
}

TEST_F(PortSecurityTest, EgressAndIngressRules) {
  auto tcp = [](const char* src, const char* dst, int sport, int dport, const char* flags = "S") {
    return std::string("IP(src='") + src + "',dst='" + dst + "')/TCP(sport=" +
           std::to_string(sport) + ",dport=" + std::to_string(dport) + ",flags='" + flags + "')";
  };
  check(*snap_, {
      {"A -> B:80, both sides allow", kPortA, eth(kMacA, kMacB, tcp("10.0.0.10", "10.0.0.11", 40000, 80)),
       out(kPortB, kTrackNew)},
      {"A -> B:22, B's ingress denies", kPortA,
       eth(kMacA, kMacB, tcp("10.0.0.10", "10.0.0.11", 40000, 22)),
       out(kPortB, kActTrack, DropReason::kSgIngressDenied)},
      {"B's reply to A: A's ingress denies it as new", kPortB,
       eth(kMacB, kMacA, tcp("10.0.0.11", "10.0.0.10", 80, 40000, "SA")),
       out(kPortA, kActTrack, DropReason::kSgIngressDenied)},
      {"D has no group: egress denies", kPortD, eth(kMacD, kMacB, tcp("10.0.0.13", "10.0.0.11", 40000, 80)),
       out(kPortB, kActTrack, DropReason::kSgEgressDenied)},
      {"D -> C (unsecured): egress still denies", kPortD,
       eth(kMacD, kMacC, tcp("10.0.0.13", "10.0.0.12", 40000, 80)),
       out(kPortC, kActTrack, DropReason::kSgEgressDenied)},
      {"A -> C (unsecured): egress allows", kPortA,
       eth(kMacA, kMacC, tcp("10.0.0.10", "10.0.0.12", 40000, 22)), out(kPortC, kTrackNew)},
      {"C (unsecured) -> A:80", kPortC, eth(kMacC, kMacA, tcp("10.0.0.12", "10.0.0.10", 40000, 80)),
       out(kPortA, kTrackNew)},
      {"C (unsecured) -> A:22", kPortC, eth(kMacC, kMacA, tcp("10.0.0.12", "10.0.0.10", 40000, 22)),
       out(kPortA, kActTrack, DropReason::kSgIngressDenied)},
      {"uplink -> A:80", kUplink, eth(kMacRemote, kMacA, tcp("192.0.2.1", "10.0.0.10", 40000, 80)),
       out(kPortA, kTrackNew)},
      {"uplink -> A:22", kUplink, eth(kMacRemote, kMacA, tcp("192.0.2.1", "10.0.0.10", 40000, 22)),
       out(kPortA, kActTrack, DropReason::kSgIngressDenied)},
      {"uplink -> D (no group)", kUplink,
       eth(kMacRemote, kMacD, tcp("192.0.2.1", "10.0.0.13", 40000, 80)),
       out(kPortD, kActTrack, DropReason::kSgIngressDenied)},
      {"uplink -> C: nothing to check", kUplink,
       eth(kMacRemote, kMacC, tcp("192.0.2.1", "10.0.0.12", 40000, 22)), out(kPortC)},
      {"ICMP echo uplink -> A", kUplink,
       eth(kMacRemote, kMacA, "IP(src='192.0.2.1',dst='10.0.0.10')/ICMP()"),
       out(kPortA, kTrackNew)},
      {"IPv6 A -> B: B has no IPv6 ingress rule", kPortA,
       eth(kMacA, kMacB, "IPv6(src='fd00::a',dst='fd00::b')/TCP(dport=80,flags='S')"),
       out(kPortB, kActTrack, DropReason::kSgIngressDenied)},
      {"later fragment A -> B: tracked, rules see no ports", kPortA,
       eth(kMacA, kMacB, "IP(src='10.0.0.10',dst='10.0.0.11',proto=6,frag=100)/Raw(b'x'*16)"),
       out(kPortB, kActTrack, DropReason::kSgIngressDenied)},
  });
}

TEST_F(PortSecurityTest, FloodsCarryTheSendersSideOnly) {
  check(*snap_, {
      {"A broadcasts UDP: egress allows", kPortA,
       eth(kMacA, kBcast, "IP(src='10.0.0.10',dst='10.0.0.255')/UDP(sport=5000,dport=5000)"),
       flood(kTrackNew)},
      {"A to an unknown MAC", kPortA,
       eth(kMacA, kMacRemote, "IP(src='10.0.0.10',dst='192.0.2.1')/TCP(dport=22,flags='S')"),
       flood(kTrackNew)},
      {"D broadcasts UDP: egress denies", kPortD,
       eth(kMacD, kBcast, "IP(src='10.0.0.13',dst='10.0.0.255')/UDP(sport=5000,dport=5000)"),
       flood(kActTrack, DropReason::kSgEgressDenied)},
      {"uplink broadcast: untracked, targets check per packet", kUplink,
       eth(kMacRemote, kBcast, "IP(src='192.0.2.1',dst='255.255.255.255')/UDP(dport=5000)"),
       flood()},
  });
}

TEST_F(PortSecurityTest, PortSecurityOffFiltersNothing) {
  check(*snap_, {
      {"foreign MAC", kPortC, eth("02:00:00:00:00:ee", kMacB, "IP(src='10.9.9.9',dst='10.0.0.11')/TCP(dport=80,flags='S')"),
       out(kPortB, kTrackNew)},  // B's own ingress rules still apply
      {"foreign IP to the uplink", kPortC,
       eth(kMacC, kMacRemote, "IP(src='10.9.9.9',dst='192.0.2.1')/UDP(sport=67,dport=68)"), flood()},
      {"spoofed ARP", kPortC, eth(kMacC, kBcast, "ARP(hwsrc='02:00:00:00:00:01',psrc='10.0.0.1')"),
       flood()},
      {"RA", kPortC, eth(kMacC, "33:33:00:00:00:01", "IPv6(src='fe80::c',dst='ff02::1')/ICMPv6ND_RA()"),
       flood()},
      {"other ethertype", kPortC, "Ether(src='02:00:00:00:00:0c',dst='02:00:00:00:99:01',type=0x88b5)",
       flood()},
  });
}

TEST_F(PortSecurityTest, TraceExplainsEachStep) {
  auto pkts = test::packets({
      {kPortA, eth(kMacA, kMacB, "IP(src='10.0.0.10',dst='10.0.0.11')/TCP(sport=40000,dport=22,flags='S')")},
      {kPortA, eth("02:00:00:00:00:ee", kMacB, "IP(src='10.0.0.10',dst='10.0.0.11')/TCP()")},
      {kUplink, eth(kMacRemote, kBcast, "IP(src='192.0.2.1',dst='255.255.255.255')/UDP(dport=5000)")},
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
  auto pkts = test::packets({
      {kPortB, eth(kMacB, kMacA, "IP(src='10.0.0.11',dst='10.0.0.10')/TCP(sport=80,dport=40000,flags='SA')")},
      {kPortB, eth(kMacB, kMacA, "IP(src='10.0.0.11',dst='10.0.0.10')/ICMP(type=0,id=7)")},
      {kPortB, eth(kMacB, kMacA, "IPv6(src='fd00::b',dst='fd00::a')/ICMPv6EchoReply(id=7)")},
      {kPortB, eth(kMacB, kMacA, "IP(src='10.0.0.11',dst='10.0.0.10')/ICMP(type=14)")},
      {kPortB, eth(kMacB, kMacA, "IPv6(src='fd00::b',dst='fd00::a')/ICMPv6DestUnreach()")},
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
