// Named *_diff_eal_test so that it links strait_control: tests/CMakeLists.txt adds
// switch_harness.cc (control code) to every EAL test, which a dataplane-only
// test cannot link. The code under test is dataplane-only.
// The compiled security-group classifier (rte_acl + remote-group address
// index) against a brute-force reference, on random rule sets and packets
// aimed at the edges (OVS test-classifier.c), plus focused cases per rule kind.
//
// STRAIT_SG_SEED=<n> replays a run; STRAIT_SG_SETS=<n> changes how many rule
// sets the differential test draws.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dataplane/sg_classifier.h"

namespace strait::dp {
namespace {

using ::testing::HasSubstr;

constexpr SgDirection kIn = SgDirection::kIngress;
constexpr SgDirection kEg = SgDirection::kEgress;
constexpr SgFamily kV4 = SgFamily::kIpv4;
constexpr SgFamily kV6 = SgFamily::kIpv6;
using Addr = std::array<uint8_t, 16>;

// ---- the reference: plain, bit by bit, written without the classifier's code ----

bool bit_of(const Addr& a, int i) { return (a[i / 8] >> (7 - i % 8)) & 1; }

bool ref_contains(const SgPrefix& p, SgFamily fam, const Addr& addr) {
  if (p.family != fam) return false;
  for (int i = 0; i < p.len; i++)
    if (bit_of(p.addr, i) != bit_of(addr, i)) return false;
  return true;
}

struct Packet {
  SgFamily family = kV4;
  uint8_t proto = 0;
  Addr src{}, dst{};
  uint16_t tp_src = 0, tp_dst = 0;
};

// Index + 1 of the first rule allowing p in direction dir, 0 if none.
uint32_t ref_match(const std::vector<SgRule>& rules, const std::vector<SgAddressSet>& sets,
                   SgDirection dir, const Packet& p) {
  const Addr& remote = dir == kIn ? p.src : p.dst;
  for (size_t i = 0; i < rules.size(); i++) {
    const SgRule& r = rules[i];
    if (r.direction != dir || r.family != p.family) continue;
    if (!r.any_proto && r.proto != p.proto) continue;
    if (p.tp_src < r.tp_src_lo || p.tp_src > r.tp_src_hi) continue;
    if (p.tp_dst < r.tp_dst_lo || p.tp_dst > r.tp_dst_hi) continue;
    if (r.remote_set != kSgNoSet) {
      bool member = false;
      for (const SgPrefix& m : sets[r.remote_set]) member |= ref_contains(m, p.family, remote);
      if (!member) continue;
    } else if (r.remote.len > 0 && !ref_contains(r.remote, p.family, remote)) {
      continue;
    }
    return static_cast<uint32_t>(i + 1);
  }
  return 0;
}

FlowKey to_flow_key(const Packet& p) {
  FlowKey k{};
  k.dl_type = p.family == kV4 ? kEthTypeIpv4 : kEthTypeIpv6;
  const size_t n = p.family == kV4 ? 4 : 16;  // IPv4: the rest stays zero (FlowKey's contract)
  std::memcpy(k.nw_src, p.src.data(), n);
  std::memcpy(k.nw_dst, p.dst.data(), n);
  k.nw_proto = p.proto;
  k.tp_src = p.tp_src;
  k.tp_dst = p.tp_dst;
  return k;
}

// ---- printing -------------------------------------------------------------------

std::string addr_str(SgFamily f, const Addr& a) {
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(f == kV4 ? AF_INET : AF_INET6, a.data(), buf, sizeof buf);
  return buf;
}

std::string prefix_str(const SgPrefix& p) {
  return addr_str(p.family, p.addr) + "/" + std::to_string(p.len);
}

std::string rule_str(const SgRule& r) {
  std::ostringstream o;
  o << (r.direction == kIn ? "ingress " : "egress ") << (r.family == kV4 ? "IPv4 " : "IPv6 ")
    << "proto=" << (r.any_proto ? std::string("any") : std::to_string(r.proto))
    << " tp_src=" << r.tp_src_lo << ".." << r.tp_src_hi << " tp_dst=" << r.tp_dst_lo << ".."
    << r.tp_dst_hi << " remote=";
  if (r.remote_set != kSgNoSet)
    o << "set#" << r.remote_set;
  else
    o << (r.remote.len ? prefix_str(r.remote) : "any");
  return o.str();
}

std::string dump(const std::vector<SgRule>& rules, const std::vector<SgAddressSet>& sets) {
  std::ostringstream o;
  for (size_t i = 0; i < rules.size(); i++)
    o << "  rule " << i << ": " << rule_str(rules[i]) << "\n";
  for (size_t s = 0; s < sets.size(); s++) {
    o << "  set#" << s << ":";
    for (const SgPrefix& p : sets[s]) o << " " << prefix_str(p);
    o << "\n";
  }
  return o.str();
}

std::string packet_str(SgDirection d, const Packet& p) {
  std::ostringstream o;
  o << (d == kIn ? "ingress " : "egress ") << (p.family == kV4 ? "IPv4 " : "IPv6 ")
    << "proto=" << int(p.proto) << " " << addr_str(p.family, p.src) << ":" << p.tp_src << " -> "
    << addr_str(p.family, p.dst) << ":" << p.tp_dst;
  return o.str();
}

// ---- building ---------------------------------------------------------------------

std::unique_ptr<SgClassifier> must_build(const std::vector<SgRule>& rules,
                                         const std::vector<SgAddressSet>& sets = {}) {
  SgBuildResult r = SgClassifier::build(rules, sets);
  EXPECT_TRUE(r.classifier) << r.error << "\n" << dump(rules, sets);
  return std::move(r.classifier);
}

Addr v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) { return Addr{a, b, c, d}; }
Addr v6(const char* s) {
  Addr a{};
  EXPECT_EQ(inet_pton(AF_INET6, s, a.data()), 1) << s;
  return a;
}
SgPrefix pfx(SgFamily f, const Addr& a, uint8_t len) { return SgPrefix{f, len, a}; }

SgRule rule(SgDirection d, SgFamily f) {
  SgRule r;
  r.direction = d;
  r.family = f;
  r.remote.family = f;
  return r;
}
SgRule proto_rule(SgDirection d, SgFamily f, uint8_t proto) {
  SgRule r = rule(d, f);
  r.any_proto = false;
  r.proto = proto;
  return r;
}

Packet pkt(SgFamily f, uint8_t proto, const Addr& src, uint16_t sport, const Addr& dst,
           uint16_t dport) {
  return Packet{f, proto, src, dst, sport, dport};
}

const Addr kVm4 = v4(10, 0, 0, 5);
const Addr kPeer4 = v4(192, 0, 2, 7);

bool allows(const SgClassifier& c, SgDirection d, const Packet& p) {
  return c.allows(d, to_flow_key(p));
}

// ---- focused cases ------------------------------------------------------------------

TEST(SgClassifier, NoRulesDenyEverything) {
  auto c = must_build({});
  EXPECT_FALSE(allows(*c, kIn, pkt(kV4, 6, kPeer4, 1000, kVm4, 22)));
  EXPECT_FALSE(allows(*c, kEg, pkt(kV4, 17, kVm4, 1000, kPeer4, 53)));
  EXPECT_EQ(c->rule_count(), 0u);
}

TEST(SgClassifier, AnyProtocolRuleIsPerDirectionAndFamily) {
  auto c = must_build({rule(kEg, kV4)});
  EXPECT_TRUE(allows(*c, kEg, pkt(kV4, 6, kVm4, 1000, kPeer4, 22)));
  EXPECT_TRUE(allows(*c, kEg, pkt(kV4, 47, kVm4, 0, kPeer4, 0)));
  EXPECT_FALSE(allows(*c, kIn, pkt(kV4, 6, kPeer4, 22, kVm4, 1000)));
  EXPECT_FALSE(allows(*c, kEg, pkt(kV6, 6, v6("fd00::5"), 1000, v6("fd00::7"), 22)));
  FlowKey arp{};
  arp.dl_type = kEthTypeArp;
  EXPECT_FALSE(c->allows(kEg, arp)) << "the classifier only speaks IP";
}

TEST(SgClassifier, TcpSinglePortAndUdpRange) {
  SgRule ssh = proto_rule(kIn, kV4, 6);
  ssh.tp_dst_lo = ssh.tp_dst_hi = 22;
  SgRule high = proto_rule(kIn, kV4, 17);
  high.tp_dst_lo = 1024;
  high.tp_dst_hi = 2047;
  auto c = must_build({ssh, high});
  EXPECT_TRUE(allows(*c, kIn, pkt(kV4, 6, kPeer4, 40000, kVm4, 22)));
  EXPECT_FALSE(allows(*c, kIn, pkt(kV4, 6, kPeer4, 40000, kVm4, 21)));
  EXPECT_FALSE(allows(*c, kIn, pkt(kV4, 6, kPeer4, 40000, kVm4, 23)));
  EXPECT_FALSE(allows(*c, kIn, pkt(kV4, 17, kPeer4, 40000, kVm4, 22)));
  EXPECT_FALSE(allows(*c, kIn, pkt(kV4, 17, kPeer4, 22, kVm4, 1023)));
  EXPECT_TRUE(allows(*c, kIn, pkt(kV4, 17, kPeer4, 22, kVm4, 1024)));
  EXPECT_TRUE(allows(*c, kIn, pkt(kV4, 17, kPeer4, 22, kVm4, 2047)));
  EXPECT_FALSE(allows(*c, kIn, pkt(kV4, 17, kPeer4, 22, kVm4, 2048)));
}

TEST(SgClassifier, IcmpTypeAndCodeAreTpSrcAndTpDst) {
  SgRule echo = proto_rule(kIn, kV4, 1);  // type 8, any code
  echo.tp_src_lo = echo.tp_src_hi = 8;
  SgRule unreach = proto_rule(kIn, kV6, 58);  // type 1 code 4
  unreach.tp_src_lo = unreach.tp_src_hi = 1;
  unreach.tp_dst_lo = unreach.tp_dst_hi = 4;
  auto c = must_build({echo, unreach});
  EXPECT_TRUE(allows(*c, kIn, pkt(kV4, 1, kPeer4, 8, kVm4, 0)));
  EXPECT_TRUE(allows(*c, kIn, pkt(kV4, 1, kPeer4, 8, kVm4, 3)));
  EXPECT_FALSE(allows(*c, kIn, pkt(kV4, 1, kPeer4, 0, kVm4, 0)));
  const Addr a = v6("2001:db8::1"), b = v6("2001:db8::2");
  EXPECT_TRUE(allows(*c, kIn, pkt(kV6, 58, a, 1, b, 4)));
  EXPECT_FALSE(allows(*c, kIn, pkt(kV6, 58, a, 1, b, 3)));
  EXPECT_FALSE(allows(*c, kIn, pkt(kV6, 58, a, 2, b, 4)));
}

TEST(SgClassifier, ProtocolNumber) {
  auto c = must_build({proto_rule(kEg, kV4, 47)});
  EXPECT_TRUE(allows(*c, kEg, pkt(kV4, 47, kVm4, 0, kPeer4, 0)));
  EXPECT_FALSE(allows(*c, kEg, pkt(kV4, 46, kVm4, 0, kPeer4, 0)));
}

TEST(SgClassifier, RemoteIsSourceForIngressAndDestinationForEgress) {
  SgRule in = rule(kIn, kV4), eg = rule(kEg, kV4);
  in.remote = eg.remote = pfx(kV4, v4(192, 0, 2, 0), 24);
  auto c = must_build({in, eg});
  EXPECT_TRUE(allows(*c, kIn, pkt(kV4, 6, kPeer4, 1, kVm4, 2)));
  EXPECT_FALSE(allows(*c, kIn, pkt(kV4, 6, kVm4, 1, kPeer4, 2)));
  EXPECT_TRUE(allows(*c, kEg, pkt(kV4, 6, kVm4, 1, kPeer4, 2)));
  EXPECT_FALSE(allows(*c, kEg, pkt(kV4, 6, kPeer4, 1, kVm4, 2)));
}

TEST(SgClassifier, PrefixEdgesIpv4AndIpv6) {
  SgRule a = rule(kIn, kV4), b = rule(kIn, kV6), c6 = rule(kIn, kV6);
  a.remote = pfx(kV4, v4(198, 51, 100, 0), 23);
  b.remote = pfx(kV6, v6("2001:db8:0:1::"), 65);  // crosses the second 32-bit word
  c6.remote = pfx(kV6, v6("2001:db8::ff"), 128);
  auto c = must_build({a, b, c6});
  EXPECT_TRUE(allows(*c, kIn, pkt(kV4, 6, v4(198, 51, 100, 0), 1, kVm4, 2)));
  EXPECT_TRUE(allows(*c, kIn, pkt(kV4, 6, v4(198, 51, 101, 255), 1, kVm4, 2)));
  EXPECT_FALSE(allows(*c, kIn, pkt(kV4, 6, v4(198, 51, 102, 0), 1, kVm4, 2)));
  EXPECT_FALSE(allows(*c, kIn, pkt(kV4, 6, v4(198, 51, 99, 255), 1, kVm4, 2)));
  const Addr vm = v6("fd00::5");
  EXPECT_TRUE(allows(*c, kIn, pkt(kV6, 6, v6("2001:db8:0:1:7fff:ffff:ffff:ffff"), 1, vm, 2)));
  EXPECT_FALSE(allows(*c, kIn, pkt(kV6, 6, v6("2001:db8:0:1:8000::"), 1, vm, 2)));
  EXPECT_TRUE(allows(*c, kIn, pkt(kV6, 6, v6("2001:db8::ff"), 1, vm, 2)));
  EXPECT_FALSE(allows(*c, kIn, pkt(kV6, 6, v6("2001:db8::fe"), 1, vm, 2)));
}

TEST(SgClassifier, RemoteGroupsAreAddressSets) {
  // set 0: two hosts and a /28; set 1: a /24 covering set 0's /28, and an IPv6 host.
  std::vector<SgAddressSet> sets = {{pfx(kV4, v4(10, 1, 0, 1), 32), pfx(kV4, v4(10, 1, 0, 2), 32),
                                     pfx(kV4, v4(10, 2, 0, 16), 28)},
                                    {pfx(kV4, v4(10, 2, 0, 0), 24), pfx(kV6, v6("fd00::9"), 128)}};
  SgRule ssh = proto_rule(kIn, kV4, 6);
  ssh.tp_dst_lo = ssh.tp_dst_hi = 22;
  ssh.remote_set = 0;
  SgRule web = proto_rule(kIn, kV4, 6);
  web.tp_dst_lo = web.tp_dst_hi = 80;
  web.remote_set = 1;
  SgRule any6 = rule(kIn, kV6);
  any6.remote_set = 1;
  auto c = must_build({ssh, web, any6}, sets);
  EXPECT_EQ(c->set_bit(kV4, 0), 0);
  EXPECT_EQ(c->set_bit(kV4, 1), 1);
  EXPECT_EQ(c->set_bit(kV6, 0), -1);
  EXPECT_EQ(c->set_bit(kV6, 1), 0);
  EXPECT_TRUE(allows(*c, kIn, pkt(kV4, 6, v4(10, 1, 0, 2), 5, kVm4, 22)));
  EXPECT_FALSE(allows(*c, kIn, pkt(kV4, 6, v4(10, 1, 0, 3), 5, kVm4, 22)));
  EXPECT_FALSE(allows(*c, kIn, pkt(kV4, 6, v4(10, 1, 0, 2), 5, kVm4, 80)));
  // 10.2.0.20 is in both sets (the /28 inside the /24): the longest match carries both bits.
  EXPECT_TRUE(allows(*c, kIn, pkt(kV4, 6, v4(10, 2, 0, 20), 5, kVm4, 22)));
  EXPECT_TRUE(allows(*c, kIn, pkt(kV4, 6, v4(10, 2, 0, 20), 5, kVm4, 80)));
  EXPECT_FALSE(allows(*c, kIn, pkt(kV4, 6, v4(10, 2, 0, 40), 5, kVm4, 22)));
  EXPECT_TRUE(allows(*c, kIn, pkt(kV4, 6, v4(10, 2, 0, 40), 5, kVm4, 80)));
  EXPECT_TRUE(allows(*c, kIn, pkt(kV6, 17, v6("fd00::9"), 5, v6("fd00::5"), 53)));
  EXPECT_FALSE(allows(*c, kIn, pkt(kV6, 17, v6("fd00::8"), 5, v6("fd00::5"), 53)));
}

TEST(SgClassifier, SixtyFourRemoteGroupsPerFamilyAndNoMore) {
  std::vector<SgAddressSet> sets;
  std::vector<SgRule> rules;
  for (uint8_t s = 0; s < 65; s++) {
    sets.push_back({pfx(kV4, v4(10, 9, s, 1), 32)});
    SgRule r = proto_rule(kIn, kV4, 17);
    r.tp_dst_lo = r.tp_dst_hi = 1000 + s;
    r.remote_set = s;
    rules.push_back(r);
  }
  SgBuildResult too_many = SgClassifier::build(rules, sets);
  EXPECT_FALSE(too_many.classifier);
  EXPECT_THAT(too_many.error, HasSubstr("65 remote groups"));
  EXPECT_THAT(too_many.error, HasSubstr("at most 64"));

  rules.pop_back();
  auto c = must_build(rules, sets);
  for (uint8_t s = 0; s < 64; s++) {
    EXPECT_EQ(c->set_bit(kV4, s), s);
    EXPECT_TRUE(allows(*c, kIn, pkt(kV4, 17, v4(10, 9, s, 1), 7, kVm4, 1000 + s))) << int(s);
    EXPECT_FALSE(allows(*c, kIn, pkt(kV4, 17, v4(10, 9, s, 1), 7, kVm4, 1001 + s))) << int(s);
  }
  // 64 more in IPv6 rules are fine: the limit is per family.
  for (uint8_t s = 0; s < 64; s++) {
    SgRule r = rule(kEg, kV6);
    r.remote_set = s;
    rules.push_back(r);
  }
  EXPECT_TRUE(SgClassifier::build(rules, sets).classifier);
}

TEST(SgClassifier, MembershipChangeKeepsTheCompiledRules) {
  SgRule r = rule(kIn, kV4);
  r.remote_set = 0;
  auto c = must_build({r}, {{pfx(kV4, v4(10, 0, 0, 1), 32)}});
  const Packet from1 = pkt(kV4, 6, v4(10, 0, 0, 1), 1, kVm4, 2);
  const Packet from2 = pkt(kV4, 6, v4(10, 0, 0, 2), 1, kVm4, 2);
  EXPECT_TRUE(allows(*c, kIn, from1));
  EXPECT_FALSE(allows(*c, kIn, from2));
  std::vector<SgAddressSet> next = {{pfx(kV4, v4(10, 0, 0, 2), 32)}};
  SgBuildResult n = c->with_address_sets(next);
  ASSERT_TRUE(n.classifier) << n.error;
  EXPECT_TRUE(n.classifier->shares_tries_with(*c));
  EXPECT_FALSE(allows(*n.classifier, kIn, from1));
  EXPECT_TRUE(allows(*n.classifier, kIn, from2));
  EXPECT_TRUE(allows(*c, kIn, from1)) << "the old classifier is unchanged (RCU readers)";
  c.reset();  // the tries live on in the new one
  EXPECT_TRUE(allows(*n.classifier, kIn, from2));
  std::vector<SgAddressSet> wrong(2);
  EXPECT_THAT(n.classifier->with_address_sets(wrong).error, HasSubstr("1 address sets, got 2"));
}

TEST(SgClassifier, InvalidInputIsRefusedWithTheReason) {
  SgRule empty_range = proto_rule(kIn, kV4, 6);
  empty_range.tp_dst_lo = 80;
  empty_range.tp_dst_hi = 79;
  EXPECT_THAT(SgClassifier::build(std::vector{empty_range}, {}).error,
              HasSubstr("rule 0: empty tp_dst range 80..79"));
  SgRule bad_set = rule(kIn, kV4);
  bad_set.remote_set = 3;
  EXPECT_THAT(SgClassifier::build(std::vector{rule(kEg, kV4), bad_set}, {}).error,
              HasSubstr("rule 1: remote_set 3 but there are 0 address sets"));
  SgRule mixed = rule(kIn, kV4);
  mixed.remote = pfx(kV6, v6("fd00::"), 8);
  EXPECT_THAT(SgClassifier::build(std::vector{mixed}, {}).error,
              HasSubstr("IPv6 remote prefix in an IPv4 rule"));
  SgRule too_long = rule(kIn, kV4);
  too_long.remote = pfx(kV4, kPeer4, 33);
  EXPECT_THAT(SgClassifier::build(std::vector{too_long}, {}).error,
              HasSubstr("remote prefix length 33 is too long for IPv4"));
  SgRule by_set = rule(kIn, kV4);
  by_set.remote_set = 0;
  std::vector<SgAddressSet> sets = {{pfx(kV4, kPeer4, 40)}};
  EXPECT_THAT(SgClassifier::build(std::vector{by_set}, sets).error,
              HasSubstr("address set 0: member prefix length 40 is too long for IPv4"));
}

TEST(SgClassifier, FirstRuleInBuildOrderIsTheAnswer) {
  SgRule narrow = proto_rule(kIn, kV4, 6);
  narrow.tp_dst_lo = narrow.tp_dst_hi = 443;
  auto c = must_build({rule(kEg, kV4), narrow, rule(kIn, kV4)});
  EXPECT_EQ(c->match(kIn, to_flow_key(pkt(kV4, 6, kPeer4, 1, kVm4, 443))), 2u);
  EXPECT_EQ(c->match(kIn, to_flow_key(pkt(kV4, 6, kPeer4, 1, kVm4, 444))), 3u);
  EXPECT_EQ(c->match(kEg, to_flow_key(pkt(kV4, 6, kVm4, 1, kPeer4, 443))), 1u);
}

// rte_acl_create hands back an existing context of the same name: every build
// must name its contexts afresh, or a second classifier would overwrite the first.
TEST(SgClassifier, ManyClassifiersLiveSideBySide) {
  std::vector<std::unique_ptr<SgClassifier>> live;
  for (uint16_t port = 1; port <= 50; port++) {
    SgRule r = proto_rule(kIn, kV4, 6);
    r.tp_dst_lo = r.tp_dst_hi = port;
    live.push_back(must_build({r}));
  }
  for (uint16_t port = 1; port <= 50; port++) {
    EXPECT_TRUE(allows(*live[port - 1], kIn, pkt(kV4, 6, kPeer4, 9, kVm4, port)));
    EXPECT_FALSE(allows(*live[port - 1], kIn, pkt(kV4, 6, kPeer4, 9, kVm4, port + 1)));
  }
  live.clear();  // frees the contexts; building again must still work
  EXPECT_TRUE(allows(*must_build({rule(kIn, kV4)}), kIn, pkt(kV4, 6, kPeer4, 9, kVm4, 1)));
}

// ---- the differential test ------------------------------------------------------------

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}

  uint32_t below(uint32_t n) { return static_cast<uint32_t>(rng_() % n); }
  bool chance(uint32_t percent) { return below(100) < percent; }

  // A new rule set: a small pool of base addresses per family, so that
  // prefixes nest, overlap and get hit.
  void new_universe() {
    for (auto& a : bases4_) a = random_addr(kV4);
    for (auto& a : bases6_) a = random_addr(kV6);
  }

  Addr random_addr(SgFamily f) {
    Addr a{};
    for (size_t i = 0; i < (f == kV4 ? 4u : 16u); i++) a[i] = static_cast<uint8_t>(rng_());
    return a;
  }
  Addr base(SgFamily f) { return f == kV4 ? bases4_[below(4)] : bases6_[below(4)]; }

  uint8_t prefix_len(SgFamily f) {
    static const uint8_t k4[] = {0, 1, 7, 8, 9, 15, 16, 17, 23, 24, 25, 30, 31, 32, 32, 32};
    static const uint8_t k6[] = {0, 1, 31, 32, 33, 48, 63, 64, 65, 95, 96, 97, 120, 127, 128, 128};
    if (chance(20)) return static_cast<uint8_t>(below(sg_max_len(f) + 1));
    return f == kV4 ? k4[below(16)] : k6[below(16)];
  }

  SgPrefix prefix(SgFamily f) {
    SgPrefix p{f, prefix_len(f), base(f)};
    // vary the host part so members of one base differ; the classifier ignores bits past len
    for (int i = p.len; i < sg_max_len(f); i++)
      if (chance(30)) p.addr[i / 8] ^= static_cast<uint8_t>(0x80 >> (i % 8));
    return p;
  }

  SgAddressSet address_set() {
    SgAddressSet s;
    const uint32_t n = chance(10) ? 0 : 1 + below(chance(20) ? 40 : 6);
    for (uint32_t i = 0; i < n; i++) {
      SgFamily f = chance(60) ? kV4 : kV6;
      SgPrefix p = prefix(f);
      if (chance(70)) p.len = sg_max_len(f);  // mostly fixed IPs
      s.push_back(p);
    }
    return s;
  }

  // lo..hi around interesting values, sometimes single, sometimes everything.
  std::pair<uint16_t, uint16_t> range() {
    static const uint16_t kEdges[] = {0,   1,    2,    7,     8,     22,    53,   80,
                                      443, 1023, 1024, 32767, 32768, 65534, 65535};
    auto pick = [&]() -> uint16_t {
      return chance(70) ? kEdges[below(15)] : static_cast<uint16_t>(below(65536));
    };
    switch (below(4)) {
      case 0:
        return {0, 65535};
      case 1: {
        uint16_t v = pick();
        return {v, v};
      }
      default: {
        uint16_t a = pick(), b = pick();
        return {std::min(a, b), std::max(a, b)};
      }
    }
  }

  // A rule set of many remote groups: most rules name one, mostly in one
  // family, so that more than 32 bits (the second key word) are in use.
  void set_many_groups(bool on) { many_groups_ = on; }

  SgRule rule(size_t n_sets) {
    SgRule r;
    r.direction = chance(50) ? kIn : kEg;
    r.family = chance(many_groups_ ? 90 : 50) ? kV4 : kV6;
    r.remote.family = r.family;
    switch (below(6)) {
      case 0:
        break;  // any protocol
      case 1:
      case 2:
        r.any_proto = false;
        r.proto = chance(50) ? 6 : 17;
        std::tie(r.tp_dst_lo, r.tp_dst_hi) = range();
        if (chance(15)) std::tie(r.tp_src_lo, r.tp_src_hi) = range();
        break;
      case 3:
        r.any_proto = false;
        r.proto = r.family == kV4 ? 1 : 58;
        if (chance(70)) r.tp_src_lo = r.tp_src_hi = static_cast<uint16_t>(below(4) * 4);
        if (chance(50)) r.tp_dst_lo = r.tp_dst_hi = static_cast<uint16_t>(below(3));
        break;
      default:
        r.any_proto = false;
        r.proto = chance(50) ? static_cast<uint8_t>(below(256)) : kProtos[below(6)];
    }
    const uint32_t remote = many_groups_ ? below(5) : below(10);
    if (remote < 4 && n_sets > 0)
      r.remote_set = static_cast<uint16_t>(below(static_cast<uint32_t>(n_sets)));
    else if (remote < 8)
      r.remote = prefix(r.family);
    return r;
  }

  uint16_t near(uint16_t lo, uint16_t hi) {
    switch (below(7)) {
      case 0:
        return lo == 0 ? 0 : lo - 1;
      case 1:
        return lo;
      case 2:
        return hi;
      case 3:
        return hi == 65535 ? 65535 : hi + 1;
      case 4:
        return static_cast<uint16_t>(lo + below(hi - lo + 1u));
      default:
        return static_cast<uint16_t>(below(65536));
    }
  }

  // An address at an edge of p: first, last, just outside, or inside at random.
  Addr near(const SgPrefix& p) {
    Addr a = p.addr;
    const int max = sg_max_len(p.family);
    auto set_host = [&](bool one) {
      for (int i = p.len; i < max; i++) {
        uint8_t m = static_cast<uint8_t>(0x80 >> (i % 8));
        a[i / 8] = one ? (a[i / 8] | m) : (a[i / 8] & ~m);
      }
    };
    switch (below(5)) {
      case 0:
        set_host(false);
        break;
      case 1:
        set_host(true);
        break;
      case 2:  // flip the last prefix bit: the neighbouring prefix
        set_host(chance(50));
        if (p.len > 0) a[(p.len - 1) / 8] ^= static_cast<uint8_t>(0x80 >> ((p.len - 1) % 8));
        break;
      default:
        for (int i = p.len; i < max; i++)
          if (chance(50)) a[i / 8] ^= static_cast<uint8_t>(0x80 >> (i % 8));
    }
    return a;
  }

  Packet packet(const std::vector<SgRule>& rules, const std::vector<SgAddressSet>& sets,
                SgDirection* dir) {
    Packet p;
    const SgRule* t = rules.empty() || chance(10) ? nullptr : &rules[below(rules.size())];
    *dir = t && chance(90) ? t->direction : (chance(50) ? kIn : kEg);
    p.family = t && chance(95) ? t->family : (chance(50) ? kV4 : kV6);
    p.proto = t && !t->any_proto && chance(85) ? t->proto : kProtos[below(6)];
    p.tp_src = t ? near(t->tp_src_lo, t->tp_src_hi) : static_cast<uint16_t>(below(65536));
    p.tp_dst = t ? near(t->tp_dst_lo, t->tp_dst_hi) : static_cast<uint16_t>(below(65536));
    Addr remote = chance(30) ? random_addr(p.family) : base(p.family);
    if (t && t->remote_set != kSgNoSet && !sets[t->remote_set].empty() && chance(85)) {
      const SgPrefix& m = sets[t->remote_set][below(sets[t->remote_set].size())];
      if (m.family == p.family) remote = near(m);
    } else if (t && t->remote.len > 0 && t->remote.family == p.family && chance(85)) {
      remote = near(t->remote);
    } else if (chance(50)) {
      remote = near(prefix(p.family));
    }
    Addr local = chance(50) ? base(p.family) : random_addr(p.family);
    if (p.family == kV4) {  // only 4 bytes are an IPv4 address
      std::fill(remote.begin() + 4, remote.end(), 0);
      std::fill(local.begin() + 4, local.end(), 0);
    }
    p.src = *dir == kIn ? remote : local;
    p.dst = *dir == kIn ? local : remote;
    return p;
  }

 private:
  static constexpr uint8_t kProtos[6] = {6, 17, 1, 58, 132, 47};
  std::mt19937_64 rng_;
  Addr bases4_[4]{}, bases6_[4]{};
  bool many_groups_ = false;
};

uint64_t env_u64(const char* name, uint64_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 0) : dflt;
}

struct DiffStats {
  uint64_t sets = 0, packets = 0, allowed = 0, rebinds = 0;
  uint64_t wide = 0;     // sets using remote-group bits 32..63
  uint64_t refused = 0;  // over 64 remote groups in one family
  double build_s = 0;
};

// Checks every packet one at a time (match) and as bursts per direction x
// family (fill_key + classify) against ref_match. Returns "" or the first mismatch.
std::string check_packets(Gen& g, const SgClassifier& c, const std::vector<SgRule>& rules,
                          const std::vector<SgAddressSet>& sets, int n, DiffStats& st) {
  std::vector<SgKey> keys[2][2];
  std::vector<uint32_t> want[2][2];
  std::vector<std::string> what[2][2];
  for (int i = 0; i < n; i++) {
    SgDirection dir;
    Packet p = g.packet(rules, sets, &dir);
    const uint32_t expect = ref_match(rules, sets, dir, p);
    const FlowKey fk = to_flow_key(p);
    const uint32_t got = c.match(dir, fk);
    st.packets++;
    st.allowed += expect != 0;
    if (got != expect)
      return packet_str(dir, p) + ": classifier says rule " + std::to_string(got) +
             ", reference says " + std::to_string(expect) + " (1-based, 0 = denied)";
    SgKey k;
    SgFamily f;
    if (!c.fill_key(dir, fk, &k, &f)) return "fill_key refused an IP packet";
    const int d = static_cast<int>(dir), fi = static_cast<int>(f);
    keys[d][fi].push_back(k);
    want[d][fi].push_back(expect);
    what[d][fi].push_back(packet_str(dir, p));
  }
  for (int d = 0; d < 2; d++) {
    for (int f = 0; f < 2; f++) {
      std::vector<const uint8_t*> ptrs;
      for (const SgKey& k : keys[d][f]) ptrs.push_back(reinterpret_cast<const uint8_t*>(&k));
      std::vector<uint32_t> res(ptrs.size(), 0xdead);
      c.classify(SgDirection(d), SgFamily(f), ptrs.data(), static_cast<uint32_t>(ptrs.size()),
                 res.data());
      for (size_t i = 0; i < res.size(); i++)
        if (res[i] != want[d][f][i])
          return what[d][f][i] + " in a burst of " + std::to_string(res.size()) +
                 ": classify says rule " + std::to_string(res[i]) + ", reference says " +
                 std::to_string(want[d][f][i]);
    }
  }
  return "";
}

TEST(SgClassifierDifferential, RandomRuleSetsAgainstBruteForce) {
  const uint64_t seed = env_u64("STRAIT_SG_SEED", 20240611);
  const uint64_t n_sets = env_u64("STRAIT_SG_SETS", 2000);
  const int kPacketsPerSet = 512;
  std::printf("sg differential: seed %llu (STRAIT_SG_SEED to replay), %llu rule sets\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(n_sets));
  Gen g(seed);
  DiffStats st;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t it = 0; it < n_sets; it++) {
    g.new_universe();
    const bool many_groups = g.chance(8);
    g.set_many_groups(many_groups);
    std::vector<SgAddressSet> sets(many_groups    ? 30 + g.below(40)
                                   : g.chance(30) ? 0
                                                  : 1 + g.below(6));
    for (auto& s : sets) s = g.address_set();
    std::vector<SgRule> rules(many_groups    ? 60 + g.below(100)
                              : g.chance(70) ? 1 + g.below(12)
                                             : 1 + g.below(120));
    for (auto& r : rules) r = g.rule(sets.size());
    const auto b0 = std::chrono::steady_clock::now();
    SgBuildResult b = SgClassifier::build(rules, sets);
    st.build_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - b0).count();
    if (!b.classifier) {
      // Only the remote-group limit may refuse a random set.
      ASSERT_THAT(b.error, HasSubstr("at most 64")) << "seed " << seed << " set " << it;
      st.refused++;
      continue;
    }
    st.sets++;
    for (uint16_t s = 0; s < sets.size(); s++)
      if (b.classifier->set_bit(kV4, s) >= 32 || b.classifier->set_bit(kV6, s) >= 32) {
        st.wide++;
        break;
      }
    std::string bad = check_packets(g, *b.classifier, rules, sets, kPacketsPerSet, st);
    ASSERT_EQ(bad, "") << "seed " << seed << ", rule set " << it << ":\n" << dump(rules, sets);
    if (!sets.empty() && g.chance(25)) {  // members come and go: the tries stay
      for (auto& s : sets)
        if (g.chance(50)) s = g.address_set();
      SgBuildResult n = b.classifier->with_address_sets(sets);
      ASSERT_TRUE(n.classifier) << n.error;
      ASSERT_TRUE(n.classifier->shares_tries_with(*b.classifier));
      st.rebinds++;
      bad = check_packets(g, *n.classifier, rules, sets, kPacketsPerSet, st);
      ASSERT_EQ(bad, "") << "seed " << seed << ", rule set " << it << " after new members:\n"
                         << dump(rules, sets);
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "sg differential: %llu rule sets (%llu with over 32 remote groups, %llu refused "
      "for over 64), +%llu membership changes, %llu packets (%llu allowed), %.1f s (%.1f s "
      "building)\n",
      static_cast<unsigned long long>(st.sets), static_cast<unsigned long long>(st.wide),
      static_cast<unsigned long long>(st.refused), static_cast<unsigned long long>(st.rebinds),
      static_cast<unsigned long long>(st.packets), static_cast<unsigned long long>(st.allowed),
      secs, st.build_s);
  EXPECT_GT(st.wide, 0u) << "the second remote-group word must be exercised";
  EXPECT_GT(st.allowed, st.packets / 10) << "packets should hit rules often";
  EXPECT_LT(st.allowed, st.packets * 9 / 10) << "and miss them often";
}

}  // namespace
}  // namespace strait::dp
