// Connection tracking: state machines, one entry per connection across
// workers (F9), bounded table under a SYN flood, expiry with deferred reuse
// (rte_rcu_qsbr), flushes, F10 re-verification hooks. The workers-and-control
// churn under real threads is conntrack_stress_test.cc. No EAL needed.
#include "dataplane/conntrack.h"
#include "tests/ct_tuple.h"

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <cstring>
#include <thread>
#include <vector>

#include "dataplane/parse.h"
#include "tests/test_util.h"

namespace strait::dp {
namespace {

constexpr uint16_t kZone = 7;
constexpr uint8_t kFin = 0x01, kSyn = 0x02, kRst = 0x04, kAck = 0x10;
constexpr uint64_t kSec = 1000;

CtTuple v4(uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport, uint8_t proto,
           uint16_t zone = kZone) {
  return test::v4(src, sport, dst, dport, proto, zone);
}
using test::reversed;

CtPacket pkt(const CtTuple& t, uint8_t tcp_flags = 0, bool echo_reply = false) {
  CtPacket p;
  p.tuple = t;
  p.kind = CtPacketKind::kConn;
  p.tcp_flags = tcp_flags;
  p.icmp_echo_reply = echo_reply;
  return p;
}

constexpr uint32_t kA = 0x0a000001, kB = 0x0a000002;  // 10.0.0.1, 10.0.0.2

CtConfig config(uint32_t capacity, uint16_t workers = 1) {
  CtConfig c;
  c.capacity = capacity;
  c.n_workers = workers;
  return c;
}

// lookup + update, the worker's path for a packet of a known connection.
CtState send(Conntrack& ct, const CtTuple& t, uint8_t flags, uint64_t now, bool* reply = nullptr) {
  CtLookup l = ct.lookup(t, now);
  if (l.entry == nullptr) return CtState::kNone;
  if (reply) *reply = l.reply;
  return ct.update(l.entry, pkt(t, flags), now);
}

TEST(ConntrackKey, NormalisedBothDirectionsOneKey) {
  CtTuple t = v4(kB, 80, kA, 40000, kIpProtoTcp);
  bool hi1, hi2;
  CtKey k1 = ct_make_key(t, &hi1), k2 = ct_make_key(reversed(t), &hi2);
  EXPECT_EQ(k1, k2);
  EXPECT_NE(hi1, hi2);
  EXPECT_TRUE(hi1);  // 10.0.0.2 > 10.0.0.1
  // Same addresses, ports decide.
  CtTuple s = v4(kA, 2, kA, 1, kIpProtoUdp);
  bool hs;
  CtKey ks = ct_make_key(s, &hs);
  EXPECT_TRUE(hs);
  EXPECT_EQ(ks.lo_port, 1);
  // Zone is part of the key.
  CtTuple z = t;
  z.zone = kZone + 1;
  EXPECT_FALSE(ct_make_key(z, &hi1) == k1);
}

TEST(ConntrackTcp, HandshakeAndTeardown) {
  Conntrack ct(config(64));
  const CtTuple ab = v4(kA, 40000, kB, 80, kIpProtoTcp), ba = reversed(ab);
  uint64_t now = 1000 * kSec;
  CtCreate c = ct.create(pkt(ab, kSyn), 5, now, 0);
  ASSERT_EQ(c.status, CtCreateStatus::kCreated);
  EXPECT_EQ(Conntrack::state_of(c.entry), CtState::kTcpSynSent);
  EXPECT_EQ(Conntrack::expires_ms(c.entry), now + 120 * kSec);
  EXPECT_EQ(Conntrack::verified_generation(c.entry), 5u);
  bool reply = false;
  EXPECT_EQ(send(ct, ab, kSyn, now), CtState::kTcpSynSent);  // retransmission
  EXPECT_EQ(send(ct, ba, kSyn | kAck, now, &reply), CtState::kTcpSynRecv);
  EXPECT_TRUE(reply);
  EXPECT_EQ(send(ct, ab, kAck, now, &reply), CtState::kTcpEstablished);
  EXPECT_FALSE(reply);
  EXPECT_EQ(Conntrack::expires_ms(c.entry), now + 432000 * kSec);
  EXPECT_EQ(send(ct, ba, kAck, now + 5 * kSec), CtState::kTcpEstablished);
  // The server closes first.
  EXPECT_EQ(send(ct, ba, kFin | kAck, now), CtState::kTcpFinWait);
  EXPECT_EQ(send(ct, ba, kAck, now), CtState::kTcpFinWait);  // closer's own ACKs move nothing
  EXPECT_EQ(send(ct, ab, kAck, now), CtState::kTcpCloseWait);
  EXPECT_EQ(send(ct, ab, kFin | kAck, now), CtState::kTcpLastAck);
  EXPECT_EQ(Conntrack::expires_ms(c.entry), now + 30 * kSec);
  EXPECT_EQ(send(ct, ba, kAck, now), CtState::kTcpTimeWait);
  EXPECT_EQ(Conntrack::expires_ms(c.entry), now + 120 * kSec);
  // The original direction is kept whatever the key order.
  CtTuple o = Conntrack::original_tuple(c.entry);
  EXPECT_EQ(std::memcmp(&o, &ab, sizeof o), 0);
  EXPECT_EQ(ct.stats().entries, 1u);
  EXPECT_EQ(ct.stats().created, 1u);
}

TEST(ConntrackTcp, SimultaneousFinGoesToLastAck) {
  Conntrack ct(config(64));
  const CtTuple ab = v4(kA, 1, kB, 2, kIpProtoTcp), ba = reversed(ab);
  ct.create(pkt(ab, kSyn), 1, 0, 0);
  send(ct, ba, kSyn | kAck, 0);
  send(ct, ab, kAck, 0);
  EXPECT_EQ(send(ct, ab, kFin | kAck, 0), CtState::kTcpFinWait);
  EXPECT_EQ(send(ct, ba, kFin | kAck, 0), CtState::kTcpLastAck);
  EXPECT_EQ(send(ct, ab, kAck, 0), CtState::kTcpTimeWait);
}

TEST(ConntrackTcp, RstClosesFromAnyState) {
  Conntrack ct(config(64));
  const CtTuple ab = v4(kA, 1000, kB, 22, kIpProtoTcp), ba = reversed(ab);
  const uint64_t now = 50 * kSec;
  ASSERT_EQ(ct.create(pkt(ab, kSyn), 1, now, 0).status, CtCreateStatus::kCreated);
  EXPECT_EQ(send(ct, ba, kRst | kAck, now), CtState::kTcpClose);  // connection refused
  CtLookup l = ct.lookup(ab, now);
  ASSERT_NE(l.entry, nullptr);
  EXPECT_EQ(Conntrack::expires_ms(l.entry), now + 10 * kSec);
  EXPECT_EQ(ct.lookup(ab, now + 10 * kSec).entry, nullptr);  // closed entries time out fast

  const CtTuple cd = v4(kA, 1001, kB, 22, kIpProtoTcp), dc = reversed(cd);
  ct.create(pkt(cd, kSyn), 1, now, 0);
  send(ct, dc, kSyn | kAck, now);
  send(ct, cd, kAck, now);
  EXPECT_EQ(send(ct, cd, kRst, now), CtState::kTcpClose);
}

TEST(ConntrackTcp, WhatMayOpenAConnection) {
  Conntrack ct(config(64));
  const CtTuple ab = v4(kA, 1, kB, 2, kIpProtoTcp);
  EXPECT_EQ(ct.create(pkt(ab, kSyn | kAck), 1, 0, 0).status, CtCreateStatus::kInvalid);
  EXPECT_EQ(ct.create(pkt(ab, kRst), 1, 0, 0).status, CtCreateStatus::kInvalid);
  EXPECT_EQ(ct.stats().invalid, 2u);
  EXPECT_EQ(ct.stats().entries, 0u);
  // Loose pick-up (default): mid-stream traffic after a restart continues.
  CtCreate c = ct.create(pkt(ab, kAck), 1, 0, 0);
  ASSERT_EQ(c.status, CtCreateStatus::kCreated);
  EXPECT_EQ(Conntrack::state_of(c.entry), CtState::kTcpEstablished);
  const CtTuple cd = v4(kA, 3, kB, 4, kIpProtoTcp);
  EXPECT_EQ(Conntrack::state_of(ct.create(pkt(cd, kFin | kAck), 1, 0, 0).entry),
            CtState::kTcpFinWait);
  // Strict.
  CtConfig strict = config(64);
  strict.tcp_loose = false;
  Conntrack st(strict);
  EXPECT_EQ(st.create(pkt(ab, kAck), 1, 0, 0).status, CtCreateStatus::kInvalid);
  // An ICMP echo reply never opens one.
  const CtTuple icmp = v4(kA, 9, kB, 9, kIpProtoIcmp);
  EXPECT_EQ(ct.create(pkt(icmp, 0, true), 1, 0, 0).status, CtCreateStatus::kInvalid);
}

TEST(ConntrackTcp, SynAfterTimeWaitReopensAndAsksForReverification) {
  Conntrack ct(config(64));
  const CtTuple ab = v4(kA, 5555, kB, 80, kIpProtoTcp), ba = reversed(ab);
  CtCreate c = ct.create(pkt(ab, kSyn), 3, 0, 0);
  send(ct, ba, kSyn | kAck, 0);
  send(ct, ab, kAck, 0);
  send(ct, ab, kFin | kAck, 0);
  send(ct, ba, kFin | kAck, 0);
  ASSERT_EQ(send(ct, ab, kAck, 0), CtState::kTcpTimeWait);
  // The other side reuses the tuple: a new connection, B is the opener now.
  EXPECT_EQ(send(ct, ba, kSyn, kSec), CtState::kTcpSynSent);
  EXPECT_EQ(Conntrack::verified_generation(c.entry), 0u);  // pipeline must re-check
  CtTuple o = Conntrack::original_tuple(c.entry);
  EXPECT_EQ(std::memcmp(&o, &ba, sizeof o), 0);
  bool reply;
  EXPECT_EQ(send(ct, ab, kSyn | kAck, kSec, &reply), CtState::kTcpSynRecv);
  EXPECT_TRUE(reply);
  EXPECT_EQ(ct.stats().entries, 1u);
}

TEST(ConntrackUdp, UnrepliedThenReplied) {
  Conntrack ct(config(64));
  const CtTuple ab = v4(kA, 5353, kB, 53, kIpProtoUdp), ba = reversed(ab);
  const uint64_t now = 7 * kSec;
  CtCreate c = ct.create(pkt(ab), 1, now, 0);
  ASSERT_EQ(c.status, CtCreateStatus::kCreated);
  EXPECT_EQ(Conntrack::state_of(c.entry), CtState::kUdpUnreplied);
  EXPECT_EQ(Conntrack::expires_ms(c.entry), now + 30 * kSec);
  EXPECT_EQ(send(ct, ab, 0, now + kSec), CtState::kUdpUnreplied);
  bool reply;
  EXPECT_EQ(send(ct, ba, 0, now + 2 * kSec, &reply), CtState::kUdpReplied);
  EXPECT_TRUE(reply);
  EXPECT_EQ(Conntrack::expires_ms(c.entry), now + 2 * kSec + 120 * kSec);
  // Refreshes coarser than a second are skipped (no write per packet).
  EXPECT_EQ(send(ct, ab, 0, now + 2 * kSec + 500), CtState::kUdpReplied);
  EXPECT_EQ(Conntrack::expires_ms(c.entry), now + 2 * kSec + 120 * kSec);
  EXPECT_EQ(send(ct, ab, 0, now + 4 * kSec), CtState::kUdpReplied);
  EXPECT_EQ(Conntrack::expires_ms(c.entry), now + 4 * kSec + 120 * kSec);
}

// ---- from real frames: parse_frame + ct_packet_from_key ----------------------

struct Parsed {
  test::Frame frame;
  FlowKey key;
  PacketMeta meta;
};

std::vector<Parsed> parse_all(const std::string& list) {
  std::vector<Parsed> out;
  for (auto& f : test::scapy(list)) {
    Parsed p;
    p.frame = f;
    EXPECT_EQ(
        parse_frame(p.frame.data(), uint32_t(p.frame.size()), 1, ParseOptions{}, &p.key, &p.meta),
        DropReason::kNone);
    out.push_back(std::move(p));
  }
  return out;
}

CtPacket from_frame(const Parsed& p, uint32_t cut = 0) {
  CtPacket c;
  const uint32_t l4_len = uint32_t(p.frame.size()) - p.meta.l4_ofs - cut;
  ct_packet_from_key(p.key, kZone, p.frame.data() + p.meta.l4_ofs, l4_len, &c);
  return c;
}

TEST(ConntrackIcmp, EchoAndRelatedErrorsFromFrames) {
  auto f = parse_all(
      "[Ether()/IP(src='10.0.0.1',dst='10.0.0.2')/ICMP(type=8,id=77,seq=1),"
      " Ether()/IP(src='10.0.0.2',dst='10.0.0.1')/ICMP(type=0,id=77,seq=1),"
      " Ether()/IP(src='10.0.0.1',dst='10.0.0.2')/UDP(sport=5000,dport=53),"
      // Port unreachable from B about A's datagram.
      " Ether()/IP(src='10.0.0.2',dst='10.0.0.1')/ICMP(type=3,code=3)/"
      "   IP(src='10.0.0.1',dst='10.0.0.2')/UDP(sport=5000,dport=53),"
      // Time exceeded from a router about A's echo request.
      " Ether()/IP(src='10.9.9.9',dst='10.0.0.1')/ICMP(type=11,code=0)/"
      "   IP(src='10.0.0.1',dst='10.0.0.2')/ICMP(type=8,id=77,seq=2),"
      // An error about a connection nobody opened.
      " Ether()/IP(src='10.0.0.2',dst='10.0.0.1')/ICMP(type=3,code=3)/"
      "   IP(src='10.0.0.1',dst='10.0.0.2')/UDP(sport=5001,dport=53),"
      // Neither a query nor an error: untracked.
      " Ether()/IP(src='10.0.0.1',dst='10.0.0.2')/ICMP(type=9)]");
  ASSERT_EQ(f.size(), 7u);
  Conntrack ct(config(64));
  const uint64_t now = 100 * kSec;

  CtPacket req = from_frame(f[0]), rep = from_frame(f[1]);
  ASSERT_EQ(req.kind, CtPacketKind::kConn);
  EXPECT_EQ(req.tuple.sport, 77);  // (id, query type); the reply mirrors it
  EXPECT_EQ(req.tuple.dport, 8);
  EXPECT_EQ(rep.tuple.sport, 8);
  EXPECT_EQ(rep.tuple.dport, 77);
  EXPECT_FALSE(req.icmp_echo_reply);
  EXPECT_TRUE(rep.icmp_echo_reply);
  EXPECT_EQ(ct.lookup(rep.tuple, now).entry, nullptr);
  CtCreate c = ct.create(req, 1, now, 0);
  ASSERT_EQ(c.status, CtCreateStatus::kCreated);
  EXPECT_EQ(Conntrack::state_of(c.entry), CtState::kIcmpRequest);
  CtLookup l = ct.lookup(rep.tuple, now);
  ASSERT_EQ(l.entry, c.entry);
  EXPECT_TRUE(l.reply);
  EXPECT_EQ(ct.update(l.entry, rep, now), CtState::kIcmpReplied);
  EXPECT_EQ(Conntrack::expires_ms(c.entry), now + 30 * kSec);

  CtPacket udp = from_frame(f[2]);
  CtCreate u = ct.create(udp, 1, now, 0);
  ASSERT_EQ(u.status, CtCreateStatus::kCreated);

  CtPacket err = from_frame(f[3]);
  ASSERT_EQ(err.kind, CtPacketKind::kRelated);
  CtLookup rel = ct.lookup(err.tuple, now);
  EXPECT_EQ(rel.entry, u.entry);
  EXPECT_FALSE(rel.reply);  // the embedded packet went the original way

  // A request of the same id from the answering side is another
  // connection, and so is another query type with the ping's id.
  CtPacket back = req;
  std::swap(back.tuple.src, back.tuple.dst);
  back.tuple.zone = req.tuple.zone ^ kCtZoneRequesterLo;
  EXPECT_EQ(ct.lookup(back.tuple, now).entry, nullptr);
  CtPacket ts = req;
  ts.tuple.dport = 13;
  EXPECT_EQ(ct.lookup(ts.tuple, now).entry, nullptr);

  CtPacket ttl = from_frame(f[4]);
  ASSERT_EQ(ttl.kind, CtPacketKind::kRelated);
  EXPECT_EQ(ct.lookup(ttl.tuple, now).entry, c.entry);

  CtPacket stray = from_frame(f[5]);
  ASSERT_EQ(stray.kind, CtPacketKind::kRelated);
  EXPECT_EQ(ct.lookup(stray.tuple, now).entry, nullptr);

  EXPECT_EQ(from_frame(f[6]).kind, CtPacketKind::kUntracked);

  // Bounds: every truncation of the error is refused, never read past.
  const uint32_t full = uint32_t(f[3].frame.size()) - f[3].meta.l4_ofs;
  for (uint32_t len = 0; len < full; len++) {
    std::vector<uint8_t> copy(f[3].frame.begin() + f[3].meta.l4_ofs,
                              f[3].frame.begin() + f[3].meta.l4_ofs + len);
    CtTuple t;
    const bool ok = ct_icmp_error_inner(kCtIpv4, copy.data(), len, kZone, &t);
    EXPECT_EQ(ok, len >= 8 + 20 + 4) << len;
  }
  CtTuple t;
  EXPECT_FALSE(ct_icmp_error_inner(kCtIpv4, nullptr, 100, kZone, &t));
  EXPECT_FALSE(ct_icmp_error_inner(kCtIpv6, f[3].frame.data() + f[3].meta.l4_ofs, full, kZone, &t));
}

// Hand-made embedded headers: IPv4 options, fragments, nested ICMP.
TEST(ConntrackIcmp, ErrorInnerHeaderEdgeCases) {
  // ICMP header (8) + inner IPv4 with IHL 6 (one option word) + UDP ports.
  std::vector<uint8_t> b = {
      3,    3,    0,    0,   0,  0, 0, 0,                         // ICMP port unreach
      0x46, 0,    0,    32,  0,  0, 0, 0, 64, kIpProtoUdp, 0, 0,  // IPv4, IHL 6
      10,   0,    0,    1,   10, 0, 0, 2, 1,  1,           1, 1,  // src, dst, option
      0x13, 0x88, 0x00, 0x35};                                    // 5000 -> 53
  CtTuple t;
  ASSERT_TRUE(ct_icmp_error_inner(kCtIpv4, b.data(), uint32_t(b.size()), kZone, &t));
  EXPECT_EQ(t.sport, 5000);
  EXPECT_EQ(t.dport, 53);
  EXPECT_EQ(t.src[3], 1);
  EXPECT_EQ(t.dst[3], 2);
  EXPECT_EQ(t.src[4], 0);
  EXPECT_EQ(t.zone, kZone);
  EXPECT_FALSE(ct_icmp_error_inner(kCtIpv4, b.data(), uint32_t(b.size()) - 1, kZone, &t));
  auto v = b;
  v[8] = 0x44;  // IHL 4: below the minimum
  EXPECT_FALSE(ct_icmp_error_inner(kCtIpv4, v.data(), uint32_t(v.size()), kZone, &t));
  v = b;
  v[8] = 0x66;  // version 6 inside an ICMPv4 error
  EXPECT_FALSE(ct_icmp_error_inner(kCtIpv4, v.data(), uint32_t(v.size()), kZone, &t));
  v = b;
  v[15] = 1;  // fragment offset 8: no L4 header in it
  EXPECT_FALSE(ct_icmp_error_inner(kCtIpv4, v.data(), uint32_t(v.size()), kZone, &t));
  v = b;
  v[17] = kIpProtoIcmp;  // an error about an error (type 3): never tracked
  v[32] = 3;
  EXPECT_FALSE(ct_icmp_error_inner(kCtIpv4, v.data(), uint32_t(v.size()), kZone, &t));
  v[17] = kIpProtoIcmpv6;  // ICMPv6 inside IPv4
  EXPECT_FALSE(ct_icmp_error_inner(kCtIpv4, v.data(), uint32_t(v.size()), kZone, &t));
  v[17] = 47;  // GRE: generic, addresses only
  ASSERT_TRUE(ct_icmp_error_inner(kCtIpv4, v.data(), uint32_t(v.size()), kZone, &t));
  EXPECT_EQ(t.proto, 47);
  EXPECT_EQ(t.sport, 0);
  EXPECT_TRUE(ct_icmp_is_error(kCtIpv4, 12));
  EXPECT_FALSE(ct_icmp_is_error(kCtIpv4, 8));
  EXPECT_TRUE(ct_icmp_is_error(kCtIpv6, 4));
  EXPECT_FALSE(ct_icmp_is_error(kCtIpv6, 128));
}

TEST(ConntrackIcmp, Ipv6EchoAndPacketTooBig) {
  auto f = parse_all(
      "[Ether()/IPv6(src='fd00::1',dst='fd00::2')/ICMPv6EchoRequest(id=5),"
      " Ether()/IPv6(src='fd00::2',dst='fd00::1')/ICMPv6EchoReply(id=5),"
      " Ether()/IPv6(src='fd00::1',dst='fd00::2')/TCP(sport=33000,dport=443,flags='S'),"
      " Ether()/IPv6(src='fd00::99',dst='fd00::1')/ICMPv6PacketTooBig(mtu=1280)/"
      "   IPv6(src='fd00::1',dst='fd00::2')/TCP(sport=33000,dport=443,flags='A'),"
      " Ether()/IPv6(src='fd00::1',dst='ff02::1')/ICMPv6ND_NS(tgt='fd00::2')]");
  ASSERT_EQ(f.size(), 5u);
  Conntrack ct(config(64));
  CtPacket req = from_frame(f[0]), rep = from_frame(f[1]);
  ASSERT_EQ(req.kind, CtPacketKind::kConn);
  CtCreate c = ct.create(req, 1, 0, 0);
  ASSERT_EQ(c.status, CtCreateStatus::kCreated);
  CtLookup l = ct.lookup(rep.tuple, 0);
  ASSERT_EQ(l.entry, c.entry);
  EXPECT_EQ(ct.update(l.entry, rep, 0), CtState::kIcmpReplied);

  CtPacket syn = from_frame(f[2]);
  EXPECT_EQ(syn.tcp_flags, kSyn);
  CtCreate tcp = ct.create(syn, 1, 0, 0);
  ASSERT_EQ(tcp.status, CtCreateStatus::kCreated);
  CtPacket ptb = from_frame(f[3]);
  ASSERT_EQ(ptb.kind, CtPacketKind::kRelated);
  EXPECT_EQ(ct.lookup(ptb.tuple, 0).entry, tcp.entry);
  EXPECT_EQ(from_frame(f[4]).kind, CtPacketKind::kUntracked);  // ND: the pipeline's business
}

TEST(ConntrackKey, BurstProbeMatchesLookup) {
  Conntrack ct(config(1024));
  std::vector<CtTuple> ts;
  for (uint16_t i = 0; i < 64; i++) {
    ts.push_back(v4(kA, i, kB, 80, kIpProtoTcp));
    if (i % 2) ct.create(pkt(ts.back(), kSyn), 1, 0, 0);
    if (i % 4 == 1) ts.back() = reversed(ts.back());
  }
  CtProbe probes[64];
  for (size_t i = 0; i < ts.size(); i++) ct.probe(ts[i], &probes[i]);
  for (size_t i = 0; i < ts.size(); i++) ct.prefetch_entries(probes[i]);
  for (size_t i = 0; i < ts.size(); i++) {
    CtLookup a = ct.lookup(probes[i], 0), b = ct.lookup(ts[i], 0);
    EXPECT_EQ(a.entry, b.entry);
    EXPECT_EQ(a.reply, b.reply);
    EXPECT_EQ(a.entry != nullptr, i % 2 == 1);
    EXPECT_EQ(a.reply, i % 4 == 1);
  }
}

// ---- F9: one entry per connection, whichever worker sees it --------------------

TEST(ConntrackZones, BothDirectionsThroughDifferentThreadsAreOneEntryF9) {
  Conntrack ct(config(4096, 2));
  constexpr int kConns = 1000;
  std::barrier sync(2);
  // Worker 0 polls VM A's vhost port (A -> B), worker 1 VM B's (B -> A).
  auto worker = [&](uint16_t id) {
    for (int i = 0; i < kConns; i++) {
      CtTuple ab = v4(kA, uint16_t(10000 + i), kB, 5001, kIpProtoUdp);
      CtTuple t = id == 0 ? ab : reversed(ab);
      sync.arrive_and_wait();
      CtLookup l = ct.lookup(t, 0);
      if (l.entry)
        ct.update(l.entry, pkt(t), 0);
      else
        ct.create(pkt(t), 1, 0, id);
    }
  };
  std::thread t0(worker, 0), t1(worker, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(ct.stats().entries, uint64_t(kConns));
  auto states = ct.count_states(0);
  EXPECT_EQ(states[unsigned(CtState::kUdpReplied)], uint64_t(kConns));
  // The same tuple in another zone (network) is another connection.
  CtTuple other = v4(kA, 10000, kB, 5001, kIpProtoUdp, kZone + 1);
  EXPECT_EQ(ct.lookup(other, 0).entry, nullptr);
  EXPECT_EQ(ct.create(pkt(other), 1, 0, 0).status, CtCreateStatus::kCreated);
}

TEST(ConntrackConcurrency, RacingCreatorsMakeOneEntry) {
  constexpr int kThreads = 4, kConns = 2000;
  Conntrack ct(config(8192, kThreads));
  std::vector<std::vector<CtCreate>> got(kThreads, std::vector<CtCreate>(kConns));
  std::barrier sync(kThreads);
  auto racer = [&](uint16_t id) {
    for (int i = 0; i < kConns; i++) {
      CtTuple ab = v4(kA + uint32_t(i), uint16_t(i), kB, 80, kIpProtoTcp);
      sync.arrive_and_wait();
      // Half the racers see the first SYN, half a retransmission of it.
      got[id][i] = ct.create(pkt(ab, kSyn), 1, 0, id);
    }
  };
  std::vector<std::thread> ts;
  for (uint16_t i = 0; i < kThreads; i++) ts.emplace_back(racer, i);
  for (auto& t : ts) t.join();
  for (int i = 0; i < kConns; i++) {
    int created = 0;
    for (int w = 0; w < kThreads; w++) {
      created += got[w][i].status == CtCreateStatus::kCreated;
      EXPECT_EQ(got[w][i].entry, got[0][i].entry);
    }
    EXPECT_EQ(created, 1) << i;
  }
  EXPECT_EQ(ct.stats().entries, uint64_t(kConns));
  EXPECT_EQ(ct.stats().created, uint64_t(kConns));
}

// ---- bounded table ----------------------------------------------------------------

TEST(ConntrackFull, SynFloodRefusesNewKeepsEstablished) {
  constexpr uint32_t kCap = 1024;
  constexpr int kEstablished = 16, kFlood = 20000;
  Conntrack ct(config(kCap, 3));
  std::vector<CtTuple> est;
  for (int i = 0; i < kEstablished; i++) {
    CtTuple ab = v4(kA, uint16_t(20000 + i), kB, 22, kIpProtoTcp);
    ct.create(pkt(ab, kSyn), 1, 0, 0);
    send(ct, reversed(ab), kSyn | kAck, 0);
    ASSERT_EQ(send(ct, ab, kAck, 0), CtState::kTcpEstablished);
    est.push_back(ab);
  }
  std::atomic<bool> flooding{true};
  std::atomic<uint64_t> refused{0}, created{0};
  auto flooder = [&](uint16_t id) {
    for (int i = 0; i < kFlood; i++) {
      CtTuple syn =
          v4(0xc0000000u + uint32_t(id) * kFlood + uint32_t(i), uint16_t(i), kB, 80, kIpProtoTcp);
      CtCreate c = ct.create(pkt(syn, kSyn), 1, kSec, id);
      if (c.status == CtCreateStatus::kFull)
        refused++;
      else if (c.status == CtCreateStatus::kCreated)
        created++;
    }
  };
  // Meanwhile the established connections keep exchanging data.
  std::atomic<uint64_t> est_ok{0}, est_bad{0};
  std::atomic<bool> user_running{false};
  std::thread user([&] {
    do {
      for (auto& t : est) {
        CtState s = send(ct, (est_ok & 1) ? t : reversed(t), kAck, kSec);
        (s == CtState::kTcpEstablished ? est_ok : est_bad)++;
      }
      user_running = true;
    } while (flooding.load());
  });
  // The flood starts once the connections are in use (a 2-core machine may
  // otherwise run both flooders to the end before the user thread starts).
  while (!user_running.load()) std::this_thread::yield();
  std::thread f1(flooder, 1), f2(flooder, 2);
  f1.join();
  f2.join();
  flooding = false;
  user.join();
  EXPECT_GT(est_ok.load(), 0u);
  EXPECT_EQ(est_bad.load(), 0u);
  // The table is full now; the established connections still pass.
  for (auto& t : est) EXPECT_EQ(send(ct, t, kAck, kSec), CtState::kTcpEstablished);
  CtStats s = ct.stats();
  EXPECT_EQ(created.load() + refused.load(), uint64_t(2 * kFlood));
  EXPECT_EQ(s.refused_full, refused.load());
  EXPECT_EQ(s.entries, kEstablished + created.load());
  EXPECT_LE(s.entries, kCap);
  EXPECT_GE(s.entries, kCap * 99 / 100);  // the table really fills (two-choice buckets)
  for (auto& t : est) EXPECT_EQ(send(ct, t, kAck, 2 * kSec), CtState::kTcpEstablished);

  // The half-open flood times out (SYN_SENT, 120 s); the established stay,
  // and once a grace period passed new connections are accepted again.
  const uint64_t later = kSec + 120 * kSec;
  EXPECT_EQ(ct.expire(later), created.load());
  EXPECT_EQ(ct.stats().entries, uint64_t(kEstablished));
  CtTuple fresh = v4(kA, 1, kB, 443, kIpProtoTcp);
  EXPECT_EQ(ct.create(pkt(fresh, kSyn), 1, later, 0).status, CtCreateStatus::kFull);
  ASSERT_TRUE(ct.retire_begin());
  ct.retire_end();
  EXPECT_EQ(ct.create(pkt(fresh, kSyn), 1, later, 0).status, CtCreateStatus::kCreated);
  for (auto& t : est) EXPECT_EQ(send(ct, t, kAck, later), CtState::kTcpEstablished);
}

// ---- expiry, deferred reuse, flushes ---------------------------------------------------

TEST(ConntrackExpiry, IdleGoActiveStayReuseWaitsForGracePeriod) {
  Conntrack ct(config(2));
  const CtTuple idle = v4(kA, 1, kB, 53, kIpProtoUdp), busy = v4(kA, 2, kB, 53, kIpProtoUdp);
  ASSERT_EQ(ct.create(pkt(idle), 1, 0, 0).status, CtCreateStatus::kCreated);
  ASSERT_EQ(ct.create(pkt(busy), 1, 0, 0).status, CtCreateStatus::kCreated);
  for (uint64_t t = 5; t <= 40; t += 5) send(ct, busy, 0, t * kSec);
  EXPECT_EQ(ct.expire(29 * kSec), 0u);
  EXPECT_EQ(ct.expire(30 * kSec), 1u);
  EXPECT_EQ(ct.lookup(idle, 30 * kSec).entry, nullptr);
  EXPECT_NE(ct.lookup(busy, 30 * kSec).entry, nullptr);
  CtStats s = ct.stats();
  EXPECT_EQ(s.expired, 1u);
  EXPECT_EQ(s.entries, 1u);
  EXPECT_EQ(s.parked, 1u);
  // The removed entry is not reused before the caller's grace period ends.
  const CtTuple next = v4(kA, 3, kB, 53, kIpProtoUdp);
  EXPECT_EQ(ct.create(pkt(next), 1, 31 * kSec, 0).status, CtCreateStatus::kFull);
  ASSERT_TRUE(ct.retire_begin());
  EXPECT_FALSE(ct.retire_begin());  // one batch at a time
  EXPECT_EQ(ct.create(pkt(next), 1, 31 * kSec, 0).status, CtCreateStatus::kFull);
  ct.retire_end();
  EXPECT_EQ(ct.stats().parked, 0u);
  EXPECT_EQ(ct.create(pkt(next), 1, 31 * kSec, 0).status, CtCreateStatus::kCreated);
  EXPECT_EQ(ct.stats().refused_full, 2u);
}

TEST(ConntrackExpiry, IncrementalSweepCoversTheTable) {
  Conntrack ct(config(4096));
  for (int i = 0; i < 3000; i++) ct.create(pkt(v4(kA, uint16_t(i), kB, 53, kIpProtoUdp)), 1, 0, 0);
  uint32_t removed = 0;
  for (int i = 0; i < 1024 / 64; i++) removed += ct.expire(31 * kSec, 64);  // 1024 buckets
  EXPECT_EQ(removed, 3000u);
  EXPECT_EQ(ct.stats().entries, 0u);
}

TEST(ConntrackFlush, ZoneAndPortAddresses) {
  Conntrack ct(config(256));
  const uint32_t kC = 0x0a000003;
  for (uint16_t p = 1; p <= 10; p++) {
    ct.create(pkt(v4(kA, p, kB, 80, kIpProtoTcp), kSyn), 1, 0, 0);             // zone 7
    ct.create(pkt(v4(kC, p, kB, 80, kIpProtoTcp), kSyn), 1, 0, 0);             // zone 7
    ct.create(pkt(v4(kA, p, kB, 80, kIpProtoTcp, kZone + 1), kSyn), 1, 0, 0);  // zone 8
  }
  ASSERT_EQ(ct.stats().entries, 30u);
  // VM A stops: its address's connections in its network go, not C's, not
  // those of the same address in another network.
  std::array<uint8_t, 16> a{10, 0, 0, 1};
  EXPECT_EQ(ct.flush_addresses(kZone, std::span(&a, 1)), 10u);
  EXPECT_EQ(ct.lookup(v4(kB, 80, kA, 3, kIpProtoTcp), 0).entry, nullptr);
  EXPECT_NE(ct.lookup(v4(kC, 3, kB, 80, kIpProtoTcp), 0).entry, nullptr);
  EXPECT_NE(ct.lookup(v4(kA, 3, kB, 80, kIpProtoTcp, kZone + 1), 0).entry, nullptr);
  EXPECT_EQ(ct.flush_zone(kZone + 1), 10u);
  EXPECT_EQ(ct.lookup(v4(kA, 3, kB, 80, kIpProtoTcp, kZone + 1), 0).entry, nullptr);
  EXPECT_EQ(ct.stats().entries, 10u);
  EXPECT_EQ(ct.stats().flushed, 20u);
  auto st = ct.count_states(0);
  EXPECT_EQ(st[unsigned(CtState::kTcpSynSent)], 10u);
}

// ---- F10: rule generation and ending a connection ---------------------------------

TEST(ConntrackRules, GenerationMarkAndEndF10) {
  Conntrack ct(config(64));
  const CtTuple ab = v4(kA, 4000, kB, 80, kIpProtoTcp), ba = reversed(ab);
  CtCreate c = ct.create(pkt(ab, kSyn), 3, 0, 0);
  send(ct, ba, kSyn | kAck, 0);
  send(ct, ab, kAck, 0);
  // A new snapshot (gen 4): the pipeline re-checks the original tuple.
  CtLookup l = ct.lookup(ba, 0);
  ASSERT_EQ(l.entry, c.entry);
  EXPECT_EQ(Conntrack::verified_generation(l.entry), 3u);
  CtTuple o = Conntrack::original_tuple(l.entry);
  EXPECT_EQ(std::memcmp(&o, &ab, sizeof o), 0);
  Conntrack::mark_verified(l.entry, 4);
  EXPECT_EQ(Conntrack::verified_generation(c.entry), 4u);
  // Gen 5 removed the rule: the connection ends at once.
  Conntrack::end(c.entry);
  EXPECT_EQ(ct.lookup(ab, 0).entry, nullptr);
  EXPECT_EQ(ct.update(c.entry, pkt(ab, kAck), 0),
            CtState::kNone);  // a stale pointer cannot revive it
  // Gen 6 re-adds it: the next packet (mid-stream, loose) opens it again, in place.
  CtCreate again = ct.create(pkt(ab, kAck), 6, 0, 0);
  EXPECT_EQ(again.status, CtCreateStatus::kCreated);
  EXPECT_EQ(again.entry, c.entry);
  EXPECT_EQ(Conntrack::verified_generation(again.entry), 6u);
  EXPECT_EQ(Conntrack::state_of(again.entry), CtState::kTcpEstablished);
  EXPECT_EQ(ct.stats().reopened, 1u);
  EXPECT_EQ(ct.stats().entries, 1u);
  // An ended entry the control thread removes is really gone.
  Conntrack::end(c.entry);
  EXPECT_EQ(ct.expire(0), 1u);
  EXPECT_EQ(ct.stats().entries, 0u);
}

// ---- hints: a flow's memo of its entry ---------------------------------------------

TEST(ConntrackHint, NamesOneLifeOfOneEntry) {
  Conntrack ct(config(1));  // one entry: the next connection reuses it
  const CtTuple ab = v4(kA, 4000, kB, 53, kIpProtoUdp), ba = reversed(ab);
  const CtCreate c = ct.create(pkt(ab), 1, 0, 0);
  ASSERT_EQ(c.status, CtCreateStatus::kCreated);
  const CtHint fwd = ct.hint(c.entry, c.src_hi);
  CtLookup by_key = ct.lookup(ba, 0);
  const CtHint rev = ct.hint(by_key.entry, by_key.src_hi);
  EXPECT_NE(fwd, rev);  // one entry, two directions
  for (auto [h, t] : {std::pair{fwd, ab}, std::pair{rev, ba}}) {
    const CtLookup a = ct.lookup(h, 0), b = ct.lookup(t, 0);
    EXPECT_EQ(a.entry, c.entry);
    EXPECT_EQ(a.reply, b.reply);
    EXPECT_EQ(a.src_hi, b.src_hi);
  }
  EXPECT_TRUE(ct.lookup(rev, 0).reply);
  EXPECT_EQ(ct.update(ct.lookup(rev, 0), pkt(ba), 0), CtState::kUdpReplied);
  // No hint, or a made-up one, finds nothing.
  EXPECT_EQ(ct.lookup(CtHint{}, 0).entry, nullptr);
  EXPECT_EQ(ct.lookup(CtHint{2, fwd.serial}, 0).entry, nullptr);  // past the table
  // Expired: nothing, though the entry is still there.
  EXPECT_EQ(ct.lookup(fwd, 200 * kSec).entry, nullptr);
  // Ended (F10): nothing; re-opened in place for the same key: found again.
  Conntrack::end(c.entry);
  EXPECT_EQ(ct.lookup(fwd, 0).entry, nullptr);
  ASSERT_EQ(ct.create(pkt(ab), 2, 0, 0).entry, c.entry);
  EXPECT_EQ(ct.lookup(fwd, 0).entry, c.entry);
  // Removed, and the entry given to another connection after the grace
  // period: the old hints never find the new connection.
  Conntrack::end(c.entry);
  ASSERT_EQ(ct.expire(0), 1u);
  ASSERT_TRUE(ct.retire_begin());
  ct.retire_end();
  const CtTuple other = v4(kA, 4001, kB, 53, kIpProtoUdp);
  const CtCreate c2 = ct.create(pkt(other), 3, 0, 0);
  ASSERT_EQ(c2.entry, c.entry);
  EXPECT_EQ(ct.lookup(fwd, 0).entry, nullptr);
  EXPECT_EQ(ct.lookup(rev, 0).entry, nullptr);
  EXPECT_EQ(ct.lookup(ct.hint(c2.entry, c2.src_hi), 0).entry, c2.entry);
}

TEST(ConntrackHint, OnlyForPacketsTheFlowKeyNames) {
  EXPECT_TRUE(ct_hintable(pkt(v4(kA, 1, kB, 2, kIpProtoUdp))));
  EXPECT_TRUE(ct_hintable(pkt(v4(kA, 1, kB, 2, kIpProtoTcp))));
  EXPECT_TRUE(ct_hintable(pkt(v4(kA, 0, kB, 0, 47))));  // GRE: addresses alone
  // ICMP queries are told apart by an id in the payload, not in the key.
  EXPECT_FALSE(ct_hintable(pkt(v4(kA, 1, kB, 8, kIpProtoIcmp))));
  EXPECT_FALSE(ct_hintable(pkt(v4(kA, 1, kB, 128, kIpProtoIcmpv6))));
  CtPacket related = pkt(v4(kA, 1, kB, 2, kIpProtoUdp));
  related.kind = CtPacketKind::kRelated;
  EXPECT_FALSE(ct_hintable(related));
}

}  // namespace
}  // namespace strait::dp
