// The worker's per-packet security-group stage (sg_stage.h): conntrack
// verdicts for tracked actions as pipeline_decide makes them, rule changes
// between snapshots (F10: revoke, re-verify from a reply through
// reverse_key), a full table, related ICMP errors, and flood targets.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dataplane/pipeline.h"
#include "dataplane/sg_stage.h"
#include "tests/frame_builder.h"
#include "tests/sg_fixture.h"

namespace strait::dp {
namespace {

using test::kMacA;
using test::kMacB;
using test::kMacRemote;
using test::kPortA;
using test::kPortB;
using test::kUplink;

constexpr uint64_t kNow = 1'000'000;

using test::Eth;
using test::Frame;
constexpr uint8_t kSyn = 0x02, kSynAck = 0x12, kAck = 0x10, kPshAck = 0x18;
constexpr const char* kBcast = "ff:ff:ff:ff:ff:ff";

Frame tcp_frame(const char* smac, const char* dmac, const char* src, const char* dst, uint16_t sport,
          uint16_t dport, uint8_t flags) {
  return Eth(smac, dmac).ipv4(src, dst).tcp(sport, dport, flags);
}
Frame udp_frame(const char* smac, const char* dmac, const char* src, const char* dst, uint16_t sport,
          uint16_t dport) {
  return Eth(smac, dmac).ipv4(src, dst).udp(sport, dport);
}

CtConfig ct_config(uint32_t capacity = 1024) {
  CtConfig c;
  c.capacity = capacity;
  c.n_workers = 1;
  return c;
}

// The action the worker caches (rules deferred), then sg_track, as
// Worker::execute does: the rules are applied only where conntrack needs them.
SgVerdict run(const Snapshot& s, Conntrack* ct, const test::Pkt& p, uint64_t now = kNow) {
  const Action a = pipeline_decide_deferred(s, p.key);
  EXPECT_TRUE(a.flags & kActTrack) << "the test expects a tracked action";
  return sg_track(s, ct, a, p.key, p.l4(), p.l4_len(), now, 0);
}

std::string name(DropReason r) { return std::string(drop_reason_name(r)); }

// A -> B:80, the web server B answers; B's ingress rules allow port 80.
class SgStageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A's UDP datagram to a remote host, and (5) that host's port
    // unreachable about it, quoting its IP header and UDP header.
    const Frame datagram = udp_frame(kMacA, kMacRemote, "10.0.0.10", "192.0.2.1", 5000, 53);
    const Frame unreachable = Eth(kMacRemote, kMacA)
                                  .ipv4("192.0.2.1", "10.0.0.10")
                                  .icmp(3, 3)
                                  .bytes(Frame(datagram.begin() + 14, datagram.end()));
    pkts_ = test::packets({
        {kPortA, tcp_frame(kMacA, kMacB, "10.0.0.10", "10.0.0.11", 40000, 80, kSyn)},      // 0 syn
        {kPortB, tcp_frame(kMacB, kMacA, "10.0.0.11", "10.0.0.10", 80, 40000, kSynAck)},   // 1 syn-ack
        {kPortA, tcp_frame(kMacA, kMacB, "10.0.0.10", "10.0.0.11", 40000, 80, kAck)},      // 2 ack
        {kPortB, tcp_frame(kMacB, kMacA, "10.0.0.11", "10.0.0.10", 80, 40000, kPshAck)},   // 3 data
        {kPortB, tcp_frame(kMacB, kMacA, "10.0.0.11", "10.0.0.10", 80, 40001, kSynAck)},   // 4 stray
        {kUplink, unreachable},                                                     // 5
        {kPortA, datagram},                                                         // 6
        {kPortA, tcp_frame(kMacA, kMacB, "10.0.0.10", "10.0.0.11", 40002, 80, kSyn)},      // 7 2nd syn
    });
    ASSERT_EQ(pkts_.size(), 8u);
  }
  const test::Pkt& syn() { return pkts_[0]; }
  const test::Pkt& synack() { return pkts_[1]; }
  const test::Pkt& ack() { return pkts_[2]; }
  const test::Pkt& data() { return pkts_[3]; }
  const test::Pkt& stray_synack() { return pkts_[4]; }
  const test::Pkt& unreachable() { return pkts_[5]; }
  const test::Pkt& udp() { return pkts_[6]; }
  const test::Pkt& syn2() { return pkts_[7]; }

  // Opens A -> B:80 through the handshake under `s`.
  void handshake(const Snapshot& s, Conntrack& ct) {
    EXPECT_EQ(name(run(s, &ct, syn()).drop), "none");
    const SgVerdict v = run(s, &ct, synack());
    EXPECT_EQ(name(v.drop), "none");
    EXPECT_TRUE(v.in_connection);
    EXPECT_EQ(name(run(s, &ct, ack()).drop), "none");
  }
  CtEntry* entry(Conntrack& ct) {
    CtPacket p;
    ct_packet_from_key(syn().key, test::kLvlan, syn().l4(), syn().l4_len(), &p);
    return ct.lookup(p.tuple, kNow).entry;
  }

  std::vector<test::Pkt> pkts_;
  std::unique_ptr<Snapshot> gen1_ = test::sg_snapshot();
};

TEST_F(SgStageTest, EstablishedRepliesPass) {
  Conntrack ct(ct_config());
  // The reply direction is denied as new by A's ingress rules.
  const Action reply = pipeline_decide(*gen1_, synack().key);
  EXPECT_EQ(reply.flags & kActNewOk, 0);
  EXPECT_EQ(name(reply.reason), "sg_ingress_denied");
  handshake(*gen1_, ct);
  EXPECT_EQ(Conntrack::state_of(entry(ct)), CtState::kTcpEstablished);
  EXPECT_EQ(name(run(*gen1_, &ct, data()).drop), "none");
  EXPECT_EQ(Conntrack::verified_generation(entry(ct)), gen1_->generation);
}

TEST_F(SgStageTest, SynAckOfNoConnectionIsInvalidEvenWhereRulesDenyIt) {
  Conntrack ct(ct_config());
  EXPECT_EQ(name(pipeline_decide(*gen1_, stray_synack().key).reason), "sg_ingress_denied");
  EXPECT_EQ(name(run(*gen1_, &ct, stray_synack()).drop), "ct_invalid");
  EXPECT_EQ(ct.stats().entries + ct.stats().created, 0u);
  EXPECT_EQ(ct.stats().invalid, 1u);
  // What could open a connection meets the rules.
  EXPECT_EQ(name(run(*gen1_, &ct, data()).drop), "sg_ingress_denied");
}

TEST_F(SgStageTest, SynAckWithoutEntryIsInvalidWhereRulesAllowIt) {
  Conntrack ct(ct_config());
  // From the uplink to A:80 (allowed by A's ingress) a SYN-ACK opens nothing.
  auto p = test::packets(
      {{kUplink, tcp_frame(kMacRemote, kMacA, "192.0.2.1", "10.0.0.10", 5555, 80, kSynAck)}});
  ASSERT_EQ(p.size(), 1u);
  const Action a = pipeline_decide(*gen1_, p[0].key);
  ASSERT_EQ(a.flags & (kActTrack | kActNewOk), kActTrack | kActNewOk);
  EXPECT_EQ(name(run(*gen1_, &ct, p[0]).drop), "ct_invalid");
  EXPECT_EQ(ct.stats().invalid, 1u);
}

TEST_F(SgStageTest, TableFullRefusesNewKeepsEstablished) {
  Conntrack ct(ct_config(1));
  handshake(*gen1_, ct);
  EXPECT_EQ(name(run(*gen1_, &ct, syn2()).drop), "ct_full");
  EXPECT_EQ(name(run(*gen1_, &ct, data()).drop), "none");
}

TEST_F(SgStageTest, RuleRemovedRevokesOnTheReplyThenDeniesF10) {
  Conntrack ct(ct_config());
  handshake(*gen1_, ct);
  test::SgOptions o;
  o.web_ingress_tcp80 = false;
  o.generation = 2;
  auto gen2 = test::sg_snapshot(o);
  // B's answer: re-checked as the original A -> B:80 (reverse_key), which
  // B's ingress no longer allows.
  EXPECT_EQ(name(run(*gen2, &ct, data()).drop), "ct_revoked");
  EXPECT_EQ(entry(ct), nullptr) << "the connection is ended";
  // Later packets meet the rules as new.
  EXPECT_EQ(name(run(*gen2, &ct, data()).drop), "sg_ingress_denied");
  EXPECT_EQ(name(run(*gen2, &ct, ack()).drop), "sg_ingress_denied");
}

TEST_F(SgStageTest, RuleRemovedRevokesOnTheOriginalDirection) {
  Conntrack ct(ct_config());
  handshake(*gen1_, ct);
  test::SgOptions o;
  o.web_ingress_tcp80 = false;
  o.generation = 2;
  auto gen2 = test::sg_snapshot(o);
  EXPECT_EQ(name(run(*gen2, &ct, ack()).drop), "ct_revoked");
  EXPECT_EQ(entry(ct), nullptr);
}

// Issue 22: a connection is checked again only when the rules of one of
// its two ports changed since it was verified (PortSecurity's generation,
// set by the publisher) or everything did (verify_generation).
TEST_F(SgStageTest, OnlyAChangeOfItsPortsRulesRechecksAConnection) {
  Conntrack ct(ct_config());
  handshake(*gen1_, ct);
  test::SgOptions o;
  o.web_ingress_tcp80 = false;
  o.generation = 3;
  auto gen3 = test::sg_snapshot(o);
  // As the publisher leaves a snapshot whose change touched neither port.
  gen3->verify_generation = 1;
  EXPECT_EQ(rules_floor(*gen3, kPortB, kPortA), 1u);
  EXPECT_EQ(name(run(*gen3, &ct, data()).drop), "none");
  EXPECT_EQ(Conntrack::verified_generation(entry(ct)), gen1_->generation) << "not checked";
  // B's rules changed at generation 2: checked, and B's ingress refuses.
  gen3->ports[kPortB].rules_gen = 2;
  EXPECT_EQ(rules_floor(*gen3, kPortB, kPortA), 2u);
  EXPECT_EQ(rules_floor(*gen3, kPortA, kNoPort), 1u) << "A alone: its own rules";
  EXPECT_EQ(name(run(*gen3, &ct, data()).drop), "ct_revoked");
}

TEST_F(SgStageTest, RuleKeptReverifiesFromTheReplyThroughReverseKey) {
  Conntrack ct(ct_config());
  handshake(*gen1_, ct);
  test::SgOptions o;
  o.generation = 2;  // same rules, new snapshot
  auto gen2 = test::sg_snapshot(o);
  // The reply itself (80 -> 40000 into A) is allowed by no rule: only the
  // original's key, A -> B:80, passes B's ingress.
  EXPECT_EQ(pipeline_decide(*gen2, data().key).flags & kActNewOk, 0);
  EXPECT_TRUE(sg_original_allowed(*gen2, data().key, kPortA));
  EXPECT_FALSE(sg_original_allowed(*gen2, syn().key, kPortB)) << "the reply as if it were new";
  EXPECT_EQ(name(run(*gen2, &ct, data()).drop), "none");
  EXPECT_EQ(Conntrack::verified_generation(entry(ct)), 2u);
}

TEST_F(SgStageTest, RelatedIcmpErrorsPassOnlyForTrackedConnections) {
  Conntrack ct(ct_config());
  // Without the UDP "connection" the error to A is new traffic, and A's
  // ingress allows ICMP: it passes without opening anything.
  EXPECT_EQ(name(run(*gen1_, &ct, unreachable()).drop), "none");
  EXPECT_EQ(ct.stats().created, 0u);
  // The same error where the rules would refuse it as new.
  const Snapshot* s = gen1_.get();
  const Action a = pipeline_decide(*s, unreachable().key);
  Action refused = a;
  refused.flags &= ~kActNewOk;
  refused.reason = DropReason::kSgIngressDenied;
  EXPECT_EQ(name(sg_track(*s, &ct, refused, unreachable().key, unreachable().l4(),
                          unreachable().l4_len(), kNow, 0)
                     .drop),
            "ct_invalid");
  EXPECT_EQ(ct.stats().created, 0u);
  EXPECT_EQ(name(run(*s, &ct, udp()).drop), "none");  // opens A -> 192.0.2.1:53
  const SgVerdict v = sg_track(*s, &ct, refused, unreachable().key, unreachable().l4(),
                               unreachable().l4_len(), kNow, 0);
  EXPECT_EQ(name(v.drop), "none");
  EXPECT_TRUE(v.in_connection);
}

TEST_F(SgStageTest, WithoutConntrackTheRulesAloneDecide) {
  EXPECT_EQ(name(run(*gen1_, nullptr, syn()).drop), "none");
  EXPECT_EQ(name(run(*gen1_, nullptr, synack()).drop), "sg_ingress_denied");
}

TEST_F(SgStageTest, FloodTargets) {
  Conntrack ct(ct_config());
  const PortSecurity& b = *gen1_->ports[kPortB].security;
  auto p = test::packets({
      {kUplink, udp_frame(kMacRemote, kBcast, "192.0.2.1", "10.0.0.10", 9, 9)},
      {kUplink, Eth(kMacRemote, kBcast).arp(1, "192.0.2.1")},
      {kUplink, Eth(kMacRemote, kBcast).type(0x88b5)},
      {kUplink, tcp_frame(kMacRemote, kBcast, "192.0.2.1", "10.0.0.11", 9, 80, kSyn)},
  });
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(name(sg_flood_target(b, p[0].key, false)), "sg_ingress_denied");
  EXPECT_EQ(name(sg_flood_target(b, p[0].key, true)), "none");
  EXPECT_EQ(name(sg_flood_target(b, p[1].key, false)), "none");
  EXPECT_EQ(name(sg_flood_target(b, p[2].key, true)), "ethertype_denied");
  EXPECT_EQ(name(sg_flood_target(b, p[3].key, false)), "none");
  EXPECT_FALSE(sg_in_connection(&ct, p[0].key, test::kLvlan, p[0].l4(), p[0].l4_len(), kNow));
  // A's datagram to 192.0.2.1:9 (dst MAC unknown: flooded) opens a
  // connection; the flooded answer from the uplink is in it.
  auto q = test::packets({{kPortA, udp_frame(kMacA, kBcast, "10.0.0.10", "192.0.2.1", 9, 9)}});
  ASSERT_EQ(q.size(), 1u);
  const SgVerdict v = run(*gen1_, &ct, q[0]);
  EXPECT_EQ(name(v.drop), "none");
  EXPECT_FALSE(v.in_connection) << "a new connection: targets' rules decide";
  EXPECT_TRUE(sg_in_connection(&ct, p[0].key, test::kLvlan, p[0].l4(), p[0].l4_len(), kNow));
  EXPECT_FALSE(sg_in_connection(nullptr, p[0].key, test::kLvlan, p[0].l4(), p[0].l4_len(), kNow));
}

}  // namespace
}  // namespace strait::dp
