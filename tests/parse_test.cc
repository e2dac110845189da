// Tests of the frame parser (dataplane/parse.h). Frames come from scapy, one
// call per test; malformed variants are made by editing their bytes here, so
// each test says exactly which byte is wrong.
#include "dataplane/parse.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace strait::dp {

// gtest prints DropReason by name.
void PrintTo(DropReason r, std::ostream* os) { *os << drop_reason_name(r); }

namespace {

using test::Frame;

constexpr uint16_t kInPort = 7;
constexpr uint16_t kVxlanPort = 4789;

constexpr char kMacA[] = "02:00:00:00:00:0a";
constexpr char kMacB[] = "02:00:00:00:00:0b";
constexpr char kMacC[] = "02:00:00:00:01:0c";
constexpr char kMacD[] = "02:00:00:00:01:0d";

// --- building frames ----------------------------------------------------------

// Ether(src=A, dst=B, <extra>) as a scapy expression.
std::string eth(const std::string& extra = "") {
  std::string e = std::string("Ether(src='") + kMacA + "',dst='" + kMacB + "'";
  return e + (extra.empty() ? "" : "," + extra) + ")";
}

// One scapy run for all the packets of a test.
std::vector<Frame> make(const std::vector<std::string>& pkts) {
  std::string list = "[";
  for (const auto& p : pkts) list += p + ",\n";
  std::vector<Frame> frames = test::scapy(list + "]");
  if (frames.size() != pkts.size()) throw std::runtime_error("scapy returned too few frames");
  return frames;
}

Frame truncated(Frame f, size_t len) {
  f.resize(len);
  return f;
}

Frame with_byte(Frame f, size_t ofs, uint8_t value) {
  f.at(ofs) = value;
  return f;
}

Frame padded(Frame f, size_t len, uint8_t fill) {
  f.resize(len, fill);
  return f;
}

// --- parsing ------------------------------------------------------------------

struct Parsed {
  DropReason reason;
  FlowKey key;
  PacketMeta meta;
};

// Parses a copy of the bytes in a heap buffer of exactly their size, so that
// an overread lands past the allocation (ASan, valgrind). The key and meta
// start as garbage (`fill`) to prove the parser writes every byte.
Parsed parse(const uint8_t* bytes, size_t len, uint16_t vxlan_port = 0, uint8_t fill = 0xa5) {
  auto buf = std::make_unique<uint8_t[]>(len);
  if (len != 0) std::memcpy(buf.get(), bytes, len);
  Parsed p;
  std::memset(&p.key, fill, sizeof(p.key));
  std::memset(&p.meta, fill, sizeof(p.meta));
  ParseOptions opts;
  opts.vxlan_port = vxlan_port;
  p.reason = parse_frame(buf.get(), static_cast<uint32_t>(len), kInPort, opts, &p.key, &p.meta);
  return p;
}

Parsed parse(const Frame& f, uint16_t vxlan_port = 0) {
  return parse(f.data(), f.size(), vxlan_port);
}

DropReason reason(const Frame& f, uint16_t vxlan_port = 0) { return parse(f, vxlan_port).reason; }

// --- expected keys --------------------------------------------------------------

void put_mac(uint8_t* dst, const char* mac) {
  unsigned b[6];
  ASSERT_EQ(6, std::sscanf(mac, "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]));
  for (int i = 0; i < 6; ++i) dst[i] = static_cast<uint8_t>(b[i]);
}

void put_ip(uint8_t* dst, const char* ip) {
  int family = std::strchr(ip, ':') ? AF_INET6 : AF_INET;
  ASSERT_EQ(1, inet_pton(family, ip, dst)) << ip;
}

uint32_t ip4_be(const char* ip) {
  uint32_t v;
  put_ip(reinterpret_cast<uint8_t*>(&v), ip);
  return v;
}

// A key as the parser starts it: zero, in_port, L2 of the untagged frame A -> B.
FlowKey l2_key(uint16_t dl_type, const char* src = kMacA, const char* dst = kMacB) {
  FlowKey k;
  std::memset(&k, 0, sizeof(k));
  k.in_port = kInPort;
  k.dl_type = dl_type;
  put_mac(k.dl_src, src);
  put_mac(k.dl_dst, dst);
  return k;
}

void set_ip(FlowKey* k, const char* src, const char* dst, uint8_t proto, uint8_t tos = 0,
            uint8_t ttl = 64) {
  put_ip(k->nw_src, src);
  put_ip(k->nw_dst, dst);
  k->nw_proto = proto;
  k->nw_tos = tos;
  k->nw_ttl = ttl;
}

FlowKey ipv4_key(uint8_t proto, uint16_t tp_src, uint16_t tp_dst) {
  FlowKey k = l2_key(kEthTypeIpv4);
  set_ip(&k, "10.0.0.1", "10.0.0.2", proto);
  k.tp_src = tp_src;
  k.tp_dst = tp_dst;
  return k;
}

FlowKey ipv6_key(uint8_t proto, uint16_t tp_src, uint16_t tp_dst) {
  FlowKey k = l2_key(kEthTypeIpv6);
  set_ip(&k, "2001:db8::1", "2001:db8::2", proto);
  k.tp_src = tp_src;
  k.tp_dst = tp_dst;
  return k;
}

const std::string kIp4 = "IP(src='10.0.0.1',dst='10.0.0.2'";  // close with ")"
const std::string kIp6 = "IPv6(src='2001:db8::1',dst='2001:db8::2'";

std::string hex(const uint8_t* p, size_t n) {
  std::string s;
  char b[3];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(b, sizeof(b), "%02x", p[i]);
    s += b;
  }
  return s;
}

// One field a line, so that gtest's diff of two keys names the fields that differ.
std::string describe(const FlowKey& k) {
  char s[512];
  std::snprintf(s, sizeof(s),
                "in_port %u\ndl_type %#06x\ndl_dst %s\ndl_src %s\nvlan_tci %#06x\n"
                "vlan_tpid %#06x\ninner_tci %#06x\nn_tags %u\ntun_vni %#x\ntun_src %#010x\n"
                "tun_dst %#010x\ntun_dport %u\ntun_flags %u\nnw_src %s\nnw_dst %s\n"
                "nw_proto %u\nnw_frag %u\nnw_tos %#04x\nnw_ttl %u\ntp_src %u\ntp_dst %u\n"
                "tcp_flags %#04x\n",
                k.in_port, k.dl_type, hex(k.dl_dst, 6).c_str(), hex(k.dl_src, 6).c_str(),
                k.vlan_tci, k.vlan_tpid, k.inner_tci, k.n_tags, k.tun_vni, k.tun_src, k.tun_dst,
                k.tun_dport, k.tun_flags, hex(k.nw_src, 16).c_str(), hex(k.nw_dst, 16).c_str(),
                k.nw_proto, k.nw_frag, k.nw_tos, k.nw_ttl, k.tp_src, k.tp_dst, k.tcp_flags);
  return s;
}

// Field by field, then as raw bytes: what the flow cache hashes, padding included.
void expect_key(const FlowKey& got, const FlowKey& want) {
  EXPECT_EQ(describe(got), describe(want));
  EXPECT_EQ(0, std::memcmp(&got, &want, sizeof(FlowKey))) << "padding bytes differ";
}

void expect_meta(const PacketMeta& got, uint16_t l2_len, uint16_t l3_ofs, uint16_t l4_ofs,
                 uint16_t inner_ofs = 0) {
  EXPECT_EQ(got.l2_len, l2_len);
  EXPECT_EQ(got.l3_ofs, l3_ofs);
  EXPECT_EQ(got.l4_ofs, l4_ofs);
  EXPECT_EQ(got.inner_ofs, inner_ofs);
}

// Parses `f` expecting success and the given key.
Parsed expect_parses(const Frame& f, const FlowKey& want, uint16_t vxlan_port = 0) {
  Parsed p = parse(f, vxlan_port);
  EXPECT_EQ(p.reason, DropReason::kNone);
  expect_key(p.key, want);
  return p;
}

// ================================ Ethernet and VLAN ================================

TEST(ParseTest, EthernetWithUnknownEthertypeHasOnlyL2) {
  auto f = make({eth("type=0x88b5") + "/Raw(b'\\x01'*46)"});
  Parsed p = expect_parses(f[0], l2_key(0x88b5));
  expect_meta(p.meta, 14, 0, 0);
}

TEST(ParseTest, SingleVlanTag) {
  auto f = make({eth() + "/Dot1Q(prio=5,id=1,vlan=100)/" + kIp4 + ")/UDP(sport=1000,dport=2000)",
                 eth("type=0x9100") + "/Dot1Q(vlan=4095)/" + kIp4 + ")/UDP(sport=1,dport=2)"});
  FlowKey want = ipv4_key(kIpProtoUdp, 1000, 2000);
  want.vlan_tci = (5 << 13) | (1 << 12) | 100;
  want.vlan_tpid = kEthTypeVlan;
  want.n_tags = 1;
  expect_meta(expect_parses(f[0], want).meta, 18, 18, 38);

  want = ipv4_key(kIpProtoUdp, 1, 2);
  want.vlan_tci = 4095;
  want.vlan_tpid = kEthTypeQinQOld;
  want.n_tags = 1;
  expect_parses(f[1], want);
}

TEST(ParseTest, QinqOuterAndInnerTag) {
  auto f = make(
      {eth() + "/Dot1AD(prio=3,vlan=10)/Dot1Q(prio=1,vlan=20)/" + kIp4 + ")/UDP(sport=3,dport=4)",
       eth("type=0x9100") + "/Dot1Q(vlan=30)/Dot1Q(vlan=40)/" + kIp6 + ")/UDP(sport=5,dport=6)"});
  FlowKey want = ipv4_key(kIpProtoUdp, 3, 4);
  want.vlan_tpid = kEthTypeQinQ;
  want.vlan_tci = (3 << 13) | 10;
  want.inner_tci = (1 << 13) | 20;
  want.n_tags = 2;
  expect_meta(expect_parses(f[0], want).meta, 22, 22, 42);

  want = ipv6_key(kIpProtoUdp, 5, 6);
  want.vlan_tpid = kEthTypeQinQOld;
  want.vlan_tci = 30;
  want.inner_tci = 40;
  want.n_tags = 2;
  expect_meta(expect_parses(f[1], want).meta, 22, 22, 62);
}

TEST(ParseTest, ThirdVlanTagDropped) {
  auto f = make({eth() + "/Dot1AD(vlan=1)/Dot1Q(vlan=2)/Dot1Q(vlan=3)/" + kIp4 + ")/UDP()",
                 eth() + "/Dot1Q(vlan=1)/Dot1Q(vlan=2)/Dot1Q(vlan=3)/Dot1Q(vlan=4)/Raw(b'x'*40)"});
  EXPECT_EQ(reason(f[0]), DropReason::kTooManyTags);
  EXPECT_EQ(reason(f[1]), DropReason::kTooManyTags);
  // The third TPID alone is enough: its tag need not even be there.
  EXPECT_EQ(reason(truncated(f[0], 22)), DropReason::kTooManyTags);
}

TEST(ParseTest, VlanTagCutShortDropped) {
  auto f = make({eth() + "/Dot1Q(vlan=5)/" + kIp4 + ")/UDP()",
                 eth() + "/Dot1AD(vlan=5)/Dot1Q(vlan=6)/" + kIp4 + ")/UDP()"});
  for (size_t len = 14; len < 18; ++len) {
    EXPECT_EQ(reason(truncated(f[0], len)), DropReason::kVlanTruncated) << len;
    EXPECT_EQ(reason(truncated(f[1], len)), DropReason::kVlanTruncated) << len;
  }
  for (size_t len = 18; len < 22; ++len) {
    EXPECT_EQ(reason(truncated(f[1], len)), DropReason::kVlanTruncated) << len;
  }
  // Tags complete, nothing after them: an empty IPv4 header.
  EXPECT_EQ(reason(truncated(f[1], 22)), DropReason::kIpv4Truncated);
}

TEST(ParseTest, RuntFramesDropped) {
  auto f = make({eth() + "/" + kIp4 + ")/UDP()"});
  EXPECT_EQ(parse(nullptr, 0).reason, DropReason::kRuntFrame);
  EXPECT_EQ(parse(f[0].data(), 0).reason, DropReason::kRuntFrame);
  EXPECT_EQ(reason(truncated(f[0], 13)), DropReason::kRuntFrame);
  EXPECT_EQ(reason(truncated(f[0], 1)), DropReason::kRuntFrame);
}

// ======================================= ARP =======================================

TEST(ParseTest, ArpRequestAndReplyAddresses) {
  auto f = make({eth() + "/ARP(op=1,hwsrc='" + kMacA +
                     "',psrc='10.0.0.1',hwdst='00:00:00:00:00:00',"
                     "pdst='10.0.0.2')",
                 eth() + "/ARP(op=2,hwsrc='" + kMacC + "',psrc='10.0.0.3',hwdst='" + kMacD +
                     "',pdst='10.0.0.4')"});
  FlowKey want = l2_key(kEthTypeArp);
  want.nw_proto = 1;
  put_ip(want.nw_src, "10.0.0.1");
  put_mac(want.nw_src + 4, kMacA);
  put_ip(want.nw_dst, "10.0.0.2");
  Parsed p = expect_parses(f[0], want);
  expect_meta(p.meta, 14, 14, 0);
  // Ethernet padding after the 28 bytes changes nothing.
  expect_parses(padded(f[0], 60, 0xee), want);

  want = l2_key(kEthTypeArp);
  want.nw_proto = 2;
  put_ip(want.nw_src, "10.0.0.3");
  put_mac(want.nw_src + 4, kMacC);
  put_ip(want.nw_dst, "10.0.0.4");
  put_mac(want.nw_dst + 4, kMacD);
  expect_parses(f[1], want);
}

TEST(ParseTest, ArpOtherThanEthernetIpv4Dropped) {
  auto f = make({eth() + "/ARP(op=1,psrc='10.0.0.1',pdst='10.0.0.2')"});
  const Frame& arp = f[0];
  ASSERT_EQ(reason(arp), DropReason::kNone);
  EXPECT_EQ(reason(with_byte(arp, 15, 6)), DropReason::kArpMalformed);     // htype 6 (IEEE 802)
  EXPECT_EQ(reason(with_byte(arp, 16, 0x86)), DropReason::kArpMalformed);  // ptype 0x8600
  EXPECT_EQ(reason(with_byte(arp, 18, 8)), DropReason::kArpMalformed);     // hlen 8
  EXPECT_EQ(reason(with_byte(arp, 19, 16)), DropReason::kArpMalformed);    // plen 16
  EXPECT_EQ(reason(truncated(arp, 14 + 27)), DropReason::kArpMalformed);
  EXPECT_EQ(reason(truncated(arp, 14)), DropReason::kArpMalformed);
}

// ======================================= IPv4 =======================================

TEST(ParseTest, Ipv4FieldsAndOptionsSkipped) {
  auto f = make(
      {eth() + "/IP(src='192.0.2.1',dst='198.51.100.2',tos=0xb8,ttl=17,"
               "options=[IPOption_Router_Alert()])/UDP(sport=1234,dport=53)",
       eth() + "/" + kIp4 + ",options=[IPOption(b'\\x01'*40)])/TCP(sport=7,dport=8,flags='A')"});
  FlowKey want = l2_key(kEthTypeIpv4);
  set_ip(&want, "192.0.2.1", "198.51.100.2", kIpProtoUdp, 0xb8, 17);
  want.tp_src = 1234;
  want.tp_dst = 53;
  expect_meta(expect_parses(f[0], want).meta, 14, 14, 38);

  want = ipv4_key(kIpProtoTcp, 7, 8);
  want.tcp_flags = 0x10;
  expect_meta(expect_parses(f[1], want).meta, 14, 14, 74);  // IHL 15
}

TEST(ParseTest, Ipv4FirstFragmentHasPortsLaterFragmentsNone) {
  auto f = make({eth() + "/" + kIp4 + ",flags='MF',frag=0)/UDP(sport=5,dport=6)/Raw(b'x'*16)",
                 eth() + "/" + kIp4 + ",flags='MF',frag=2,proto=17)/Raw(b'x'*16)",
                 eth() + "/" + kIp4 + ",frag=4,proto=6)/Raw(b'\\xff'*20)",
                 eth() + "/" + kIp4 + ",flags='DF')/UDP(sport=5,dport=6)"});
  FlowKey want = ipv4_key(kIpProtoUdp, 5, 6);
  want.nw_frag = kFragFirst;
  expect_meta(expect_parses(f[0], want).meta, 14, 14, 34);

  want = ipv4_key(kIpProtoUdp, 0, 0);
  want.nw_frag = kFragLater;
  expect_meta(expect_parses(f[1], want).meta, 14, 14, 0);

  want = ipv4_key(kIpProtoTcp, 0, 0);  // last fragment: no MF, offset > 0
  want.nw_frag = kFragLater;
  expect_parses(f[2], want);

  expect_parses(f[3], ipv4_key(kIpProtoUdp, 5, 6));  // DF is not a fragment
}

TEST(ParseTest, Ipv4HeaderLengthBelowFiveDropped) {
  auto f = make({eth() + "/" + kIp4 + ",ihl=4)/UDP()", eth() + "/" + kIp4 + ",ihl=0)/UDP()"});
  EXPECT_EQ(reason(f[0]), DropReason::kIpv4BadIhl);
  EXPECT_EQ(reason(f[1]), DropReason::kIpv4BadIhl);
}

TEST(ParseTest, Ipv4HeaderLengthBeyondFrameDropped) {
  auto f = make({eth() + "/" + kIp4 + ",ihl=15)/UDP()",  // 60-byte header in 28 bytes
                 eth() + "/" + kIp4 + ",ihl=6,proto=17)"});
  EXPECT_EQ(reason(f[0]), DropReason::kIpv4Truncated);
  EXPECT_EQ(reason(f[1]), DropReason::kIpv4Truncated);
}

TEST(ParseTest, Ipv4HeaderCutShortOrWrongVersionDropped) {
  auto f = make({eth() + "/" + kIp4 + ")/UDP()", eth() + "/" + kIp4 + ",version=6)/UDP()"});
  EXPECT_EQ(reason(truncated(f[0], 14 + 19)), DropReason::kIpv4Truncated);
  EXPECT_EQ(reason(truncated(f[0], 14)), DropReason::kIpv4Truncated);
  EXPECT_EQ(reason(f[1]), DropReason::kIpv4BadVersion);
}

TEST(ParseTest, Ipv4TotalLengthBelowHeaderDropped) {
  auto f = make({eth() + "/" + kIp4 + ",len=19)/UDP()",
                 eth() + "/" + kIp4 + ",len=20,options=[IPOption_Router_Alert()])/UDP()"});
  EXPECT_EQ(reason(f[0]), DropReason::kIpv4BadLength);
  EXPECT_EQ(reason(f[1]), DropReason::kIpv4BadLength);
}

TEST(ParseTest, Ipv4TotalLengthBeyondFrameDropped) {
  auto f = make({eth() + "/" + kIp4 + ",len=29)/UDP()", eth() + "/" + kIp4 + ",len=65535)/UDP()"});
  EXPECT_EQ(reason(f[0]), DropReason::kIpv4Truncated);
  EXPECT_EQ(reason(f[1]), DropReason::kIpv4Truncated);
}

TEST(ParseTest, EthernetPaddingAfterShortIpv4Ignored) {
  auto f = make({eth() + "/" + kIp4 + ")/UDP(sport=9,dport=10)/Raw(b'hi')",
                 eth() + "/" + kIp4 + ",proto=6)",           // 20-byte packet, no TCP header in it
                 eth() + "/" + kIp4 + ")/TCP(dataofs=6)"});  // options beyond the packet
  Parsed p = expect_parses(padded(f[0], 60, 0xff), ipv4_key(kIpProtoUdp, 9, 10));
  expect_meta(p.meta, 14, 14, 34);
  // Padding that looks like a TCP header is still padding.
  EXPECT_EQ(reason(padded(f[1], 60, 0x50)), DropReason::kL4Truncated);
  EXPECT_EQ(reason(padded(f[2], 60, 0x00)), DropReason::kTcpBadOffset);
}

// ======================================= IPv6 =======================================

TEST(ParseTest, Ipv6FieldsThroughExtensionHeaders) {
  auto f = make({eth() + "/" + kIp6 +
                     ",tc=0x28,hlim=9,fl=0xabcde)/IPv6ExtHdrHopByHop()/IPv6ExtHdrRouting()"
                     "/IPv6ExtHdrFragment(m=1,offset=0,id=1)/UDP(sport=546,dport=547)",
                 eth() + "/" + kIp6 +
                     ")/IPv6ExtHdrDestOpt(nh=51)/AH(nh=6,payloadlen=4,icv=b'\\0'*12)"
                     "/TCP(sport=1,dport=2,flags='S')"});
  FlowKey want = ipv6_key(kIpProtoUdp, 546, 547);
  want.nw_tos = 0x28;
  want.nw_ttl = 9;
  want.nw_frag = kFragFirst;
  expect_meta(expect_parses(f[0], want).meta, 14, 14, 14 + 40 + 8 + 8 + 8);

  want = ipv6_key(kIpProtoTcp, 1, 2);
  want.tcp_flags = 0x02;
  expect_meta(expect_parses(f[1], want).meta, 14, 14, 14 + 40 + 8 + 24);
}

TEST(ParseTest, Ipv6LaterFragmentHasNoPorts) {
  auto f = make({eth() + "/" + kIp6 + ")/IPv6ExtHdrFragment(offset=100,m=1,nh=6)/Raw(b'x'*24)",
                 eth() + "/" + kIp6 +
                     ")/IPv6ExtHdrDestOpt()/IPv6ExtHdrFragment(offset=1,nh=17)/Raw(b'x'*8)"});
  FlowKey want = ipv6_key(kIpProtoTcp, 0, 0);
  want.nw_frag = kFragLater;
  expect_meta(expect_parses(f[0], want).meta, 14, 14, 0);
  want = ipv6_key(kIpProtoUdp, 0, 0);
  want.nw_frag = kFragLater;
  expect_parses(f[1], want);
}

TEST(ParseTest, Ipv6EspAndNoNextHeaderEndTheWalk) {
  auto f = make({eth() + "/" + kIp6 + ",nh=50)/Raw(b'\\0'*16)", eth() + "/" + kIp6 + ",nh=59)",
                 eth() + "/" + kIp6 + ")/IPv6ExtHdrHopByHop(nh=59)/Raw(b'\\x11\\x05junk')"});
  Parsed p = expect_parses(f[0], ipv6_key(50, 0, 0));
  expect_meta(p.meta, 14, 14, 0);
  expect_parses(f[1], ipv6_key(59, 0, 0));
  expect_parses(f[2], ipv6_key(59, 0, 0));
}

TEST(ParseTest, Ipv6PayloadLengthBeyondFrameDropped) {
  auto f =
      make({eth() + "/" + kIp6 + ",plen=100)/UDP()", eth() + "/" + kIp6 + ",version=4)/UDP()"});
  EXPECT_EQ(reason(f[0]), DropReason::kIpv6Truncated);
  EXPECT_EQ(reason(truncated(f[0], 14 + 39)), DropReason::kIpv6Truncated);
  EXPECT_EQ(reason(f[1]), DropReason::kIpv6BadVersion);
}

TEST(ParseTest, Ipv6PaddingPastPayloadLengthNotReadAsUdp) {
  auto f = make({eth() + "/" + kIp6 + ",plen=0)/UDP()"});
  EXPECT_EQ(reason(f[0]), DropReason::kL4Truncated);
}

std::string ext_chain(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += i % 2 ? "/IPv6ExtHdrDestOpt()" : "/IPv6ExtHdrHopByHop()";
  return s;
}

TEST(ParseTest, Ipv6ExtensionHeaderLoopDropped) {
  // Eight headers are allowed; a ninth, or a long run of them, is refused
  // before it is read.
  auto f = make({eth() + "/" + kIp6 + ")" + ext_chain(8) + "/UDP(sport=1,dport=2)",
                 eth() + "/" + kIp6 + ")" + ext_chain(9) + "/UDP(sport=1,dport=2)",
                 eth() + "/" + kIp6 + ")" + ext_chain(200) + "/UDP(sport=1,dport=2)"});
  Parsed p = expect_parses(f[0], ipv6_key(kIpProtoUdp, 1, 2));
  expect_meta(p.meta, 14, 14, 14 + 40 + 8 * 8);
  EXPECT_EQ(reason(f[1]), DropReason::kIpv6ExtChain);
  EXPECT_EQ(reason(f[2]), DropReason::kIpv6ExtChain);
}

TEST(ParseTest, Ipv6ExtensionHeaderCutShortDropped) {
  auto f = make({eth() + "/" + kIp6 + ",nh=0)/Raw(b'\\x11\\x05')",       // 48-byte hop-by-hop in 2
                 eth() + "/" + kIp6 + ",nh=44)/Raw(b'\\x11\\0\\0\\0')",  // fragment in 4
                 eth() + "/" + kIp6 + ",nh=60)/Raw(b'\\x11')", eth() + "/" + kIp6 + ",nh=43)",
                 eth() + "/" + kIp6 + ",nh=51)/Raw(b'\\x11\\x04'+b'\\0'*6)",  // 24-byte AH in 8
                 // Complete in the frame but past the payload length.
                 eth() + "/" + kIp6 + ",nh=0,plen=8)/Raw(b'\\x11\\x01'+b'\\0'*14)"});
  for (size_t i = 0; i < f.size(); ++i) {
    EXPECT_EQ(reason(f[i]), DropReason::kIpv6ExtChain) << i;
  }
}

// ==================================== L4 ====================================

TEST(ParseTest, TcpPortsAndFlags) {
  struct Case {
    const char* flags;
    uint8_t want;
  };
  const Case cases[] = {
      {"S", 0x02}, {"SA", 0x12},  {"FA", 0x11},       {"R", 0x04}, {"PA", 0x18},
      {"U", 0x20}, {"SEC", 0xc2}, {"FSRPAUEC", 0xff}, {"NS", 0x02}};  // NS is bit 8: not in the low
                                                                      // 8 bits
  std::vector<std::string> exprs;
  for (const Case& c : cases) {
    exprs.push_back(eth() + "/" + kIp4 + ")/TCP(sport=40000,dport=443,flags='" + c.flags + "')");
  }
  exprs.push_back(eth() + "/" + kIp4 +
                  ")/TCP(sport=40000,dport=443,flags='S',"
                  "options=[('MSS',1460),('NOP',None),('WScale',7)])/Raw(b'data')");
  exprs.push_back(eth() + "/" + kIp6 + ")/TCP(sport=22,dport=50000,flags='PA')");
  auto f = make(exprs);

  for (size_t i = 0; i < std::size(cases); ++i) {
    SCOPED_TRACE(cases[i].flags);
    FlowKey want = ipv4_key(kIpProtoTcp, 40000, 443);
    want.tcp_flags = cases[i].want;
    expect_meta(expect_parses(f[i], want).meta, 14, 14, 34);
  }
  FlowKey want = ipv4_key(kIpProtoTcp, 40000, 443);
  want.tcp_flags = 0x02;
  expect_parses(f[std::size(cases)], want);
  want = ipv6_key(kIpProtoTcp, 22, 50000);
  want.tcp_flags = 0x18;
  expect_meta(expect_parses(f.back(), want).meta, 14, 14, 54);
}

TEST(ParseTest, TcpDataOffsetOutOfRangeDropped) {
  auto f = make({eth() + "/" + kIp4 + ")/TCP(dataofs=3)", eth() + "/" + kIp4 + ")/TCP(dataofs=15)",
                 eth() + "/" + kIp4 + ")/TCP(dataofs=15)/Raw(b'\\0'*40)",  // exactly fits
                 eth() + "/" + kIp6 + ")/TCP(dataofs=4)"});
  EXPECT_EQ(reason(f[0]), DropReason::kTcpBadOffset);
  EXPECT_EQ(reason(f[1]), DropReason::kTcpBadOffset);
  EXPECT_EQ(reason(f[2]), DropReason::kNone);
  EXPECT_EQ(reason(f[3]), DropReason::kTcpBadOffset);
}

TEST(ParseTest, UdpPorts) {
  auto f = make({eth() + "/" + kIp4 + ")/UDP(sport=68,dport=67)/Raw(b'x'*10)",
                 eth() + "/" + kIp6 + ")/UDP(sport=546,dport=547)"});
  expect_meta(expect_parses(f[0], ipv4_key(kIpProtoUdp, 68, 67)).meta, 14, 14, 34);
  expect_meta(expect_parses(f[1], ipv6_key(kIpProtoUdp, 546, 547)).meta, 14, 14, 54);
}

TEST(ParseTest, IcmpTypeAndCode) {
  auto f = make({eth() + "/" + kIp4 + ")/ICMP(type=8,code=0,id=1,seq=1)",
                 eth() + "/" + kIp4 + ")/ICMP(type=3,code=13)",
                 eth() + "/" + kIp6 + ",nh=1)/Raw(b'\\x08\\x00\\0\\0')"});  // not ICMP over IPv6
  expect_meta(expect_parses(f[0], ipv4_key(kIpProtoIcmp, 8, 0)).meta, 14, 14, 34);
  expect_parses(f[1], ipv4_key(kIpProtoIcmp, 3, 13));
  expect_meta(expect_parses(f[2], ipv6_key(kIpProtoIcmp, 0, 0)).meta, 14, 14, 0);
}

TEST(ParseTest, Icmpv6TypeAndCode) {
  auto f = make({eth() + "/" + kIp6 + ")/ICMPv6EchoRequest(id=1,seq=2)",
                 eth() + "/" + kIp6 + ")/ICMPv6EchoReply()",
                 eth() + "/" + kIp6 + ")/ICMPv6DestUnreach(code=4)",
                 eth() + "/" + kIp4 + ",proto=58)/Raw(b'\\x80\\x00\\0\\0')"});  // not over IPv4
  expect_meta(expect_parses(f[0], ipv6_key(kIpProtoIcmpv6, 128, 0)).meta, 14, 14, 54);
  expect_parses(f[1], ipv6_key(kIpProtoIcmpv6, 129, 0));
  expect_parses(f[2], ipv6_key(kIpProtoIcmpv6, 1, 4));
  expect_parses(f[3], ipv4_key(kIpProtoIcmpv6, 0, 0));
}

TEST(ParseTest, L4HeaderCutShortDropped) {
  auto f = make(
      {eth() + "/" + kIp4 + ",proto=6)/Raw(b'\\0'*19)",
       eth() + "/" + kIp4 + ",proto=17)/Raw(b'\\0'*7)",
       eth() + "/" + kIp4 + ",proto=1)/Raw(b'\\0'*3)", eth() + "/" + kIp6 + ",nh=6)/Raw(b'\\0'*19)",
       eth() + "/" + kIp6 + ",nh=17)/Raw(b'\\0'*7)", eth() + "/" + kIp6 + ",nh=58)/Raw(b'\\0'*3)",
       eth() + "/" + kIp4 + ",proto=1)/Raw(b'\\x00\\x00\\0\\0')"});  // 4 bytes: enough
  for (size_t i = 0; i + 1 < f.size(); ++i) {
    EXPECT_EQ(reason(f[i]), DropReason::kL4Truncated) << i;
  }
  EXPECT_EQ(reason(f.back()), DropReason::kNone);
}

TEST(ParseTest, JumboFramesParse) {
  auto f = make(
      {eth() + "/" + kIp4 + ")/UDP(sport=1,dport=2)/Raw(b'x'*(9000-42))",
       eth() + "/Dot1Q(vlan=3)/" + kIp6 + ")/TCP(sport=1,dport=2,flags='A')/Raw(b'x'*(9000-78))"});
  ASSERT_EQ(f[0].size(), 9000u);
  ASSERT_EQ(f[1].size(), 9000u);
  expect_parses(f[0], ipv4_key(kIpProtoUdp, 1, 2));
  FlowKey want = ipv6_key(kIpProtoTcp, 1, 2);
  want.tcp_flags = 0x10;
  want.vlan_tci = 3;
  want.vlan_tpid = kEthTypeVlan;
  want.n_tags = 1;
  expect_meta(expect_parses(f[1], want).meta, 18, 18, 58);
}

// ======================================= VXLAN =======================================

const std::string kVxlanOuter =
    eth() + "/IP(src='192.0.2.1',dst='192.0.2.2')/UDP(sport=49152,dport=4789)";
const std::string kInnerEth = std::string("Ether(src='") + kMacC + "',dst='" + kMacD + "')";

FlowKey with_tunnel(FlowKey k, uint32_t vni) {
  k.tun_vni = vni;
  k.tun_src = ip4_be("192.0.2.1");
  k.tun_dst = ip4_be("192.0.2.2");
  k.tun_dport = kVxlanPort;
  k.tun_flags = kTunValid;
  return k;
}

TEST(ParseTest, VxlanDecodedWhenPortMatches) {
  auto f = make({kVxlanOuter + "/VXLAN(flags=0x08,vni=0x123456)/" + kInnerEth +
                     "/IP(src='10.1.1.1',dst='10.1.1.2',ttl=5)/TCP(sport=1000,dport=22,flags='S')",
                 // Inner tag; scapy's default flags (I plus a reserved bit).
                 eth() +
                     "/IP(src='192.0.2.1',dst='192.0.2.2')/UDP(dport=4789)"
                     "/VXLAN(vni=1)/" +
                     kInnerEth + "/Dot1Q(vlan=9)/" + kIp6 + ")/UDP(sport=3,dport=4)",
                 // An outer tag: the underlay is untagged, so this is a tenant's
                 // own UDP on a VLAN network, not VXLAN for us.
                 eth() + "/Dot1Q(vlan=7)/IP(src='192.0.2.1',dst='192.0.2.2')/UDP(sport=53,dport=4789)"
                         "/VXLAN(vni=1)/" + kInnerEth + "/" + kIp4 + ")/UDP()"});
  FlowKey want = with_tunnel(l2_key(kEthTypeIpv4, kMacC, kMacD), 0x123456);
  set_ip(&want, "10.1.1.1", "10.1.1.2", kIpProtoTcp, 0, 5);
  want.tp_src = 1000;
  want.tp_dst = 22;
  want.tcp_flags = 0x02;
  Parsed p = expect_parses(f[0], want, kVxlanPort);
  expect_meta(p.meta, 14, 64, 84, 50);

  // L2 fields describe the inner frame, its tag included.
  want = with_tunnel(l2_key(kEthTypeIpv6, kMacC, kMacD), 1);
  set_ip(&want, "2001:db8::1", "2001:db8::2", kIpProtoUdp);
  want.tp_src = 3;
  want.tp_dst = 4;
  want.vlan_tci = 9;
  want.vlan_tpid = kEthTypeVlan;
  want.n_tags = 1;
  p = expect_parses(f[1], want, kVxlanPort);
  expect_meta(p.meta, 18, 50 + 18, 50 + 18 + 40, 50);

  want = l2_key(kEthTypeIpv4);
  want.vlan_tci = 7;
  want.vlan_tpid = kEthTypeVlan;
  want.n_tags = 1;
  set_ip(&want, "192.0.2.1", "192.0.2.2", kIpProtoUdp);
  want.tp_src = 53;
  want.tp_dst = kVxlanPort;
  expect_meta(expect_parses(f[2], want, kVxlanPort).meta, 18, 18, 38);
}

TEST(ParseTest, VxlanNotDecodedWithoutMatchingPort) {
  auto f = make({kVxlanOuter + "/VXLAN(flags=0x08,vni=5)/" + kInnerEth + "/" + kIp4 + ")/UDP()"});
  FlowKey want = l2_key(kEthTypeIpv4);
  set_ip(&want, "192.0.2.1", "192.0.2.2", kIpProtoUdp);
  want.tp_src = 49152;
  want.tp_dst = kVxlanPort;
  expect_meta(expect_parses(f[0], want, 0).meta, 14, 14, 34);  // VM ports: just UDP
  expect_meta(expect_parses(f[0], want, 4790).meta, 14, 14, 34);
}

TEST(ParseTest, VxlanNotDecodedForFragmentOrIpv6Outer) {
  auto f = make({eth() +
                     "/IP(src='192.0.2.1',dst='192.0.2.2',flags='MF')/UDP(sport=1,dport=4789)"
                     "/VXLAN(flags=0x08)/" +
                     kInnerEth + "/" + kIp4 + ")/UDP()",
                 eth() + "/" + kIp6 + ")/UDP(sport=1,dport=4789)/VXLAN(flags=0x08)/" + kInnerEth +
                     "/" + kIp4 + ")/UDP()"});
  FlowKey want = l2_key(kEthTypeIpv4);
  set_ip(&want, "192.0.2.1", "192.0.2.2", kIpProtoUdp);
  want.tp_src = 1;
  want.tp_dst = kVxlanPort;
  want.nw_frag = kFragFirst;
  expect_parses(f[0], want, kVxlanPort);
  expect_parses(f[1], ipv6_key(kIpProtoUdp, 1, kVxlanPort), kVxlanPort);
}

TEST(ParseTest, VxlanInsideVxlanDecodedOneLevel) {
  auto f = make({kVxlanOuter + "/VXLAN(flags=0x08,vni=77)/" + kInnerEth + "/" + kIp4 +
                 ")/UDP(sport=9,dport=4789)/VXLAN(flags=0x08,vni=88)/" + eth() + "/" + kIp4 +
                 ")/UDP()"});
  FlowKey want = with_tunnel(l2_key(kEthTypeIpv4, kMacC, kMacD), 77);
  set_ip(&want, "10.0.0.1", "10.0.0.2", kIpProtoUdp);
  want.tp_src = 9;
  want.tp_dst = kVxlanPort;
  expect_meta(expect_parses(f[0], want, kVxlanPort).meta, 14, 64, 84, 50);
}

TEST(ParseTest, VxlanWithoutIFlagDropped) {
  auto f = make({kVxlanOuter + "/VXLAN(flags=0x00,vni=5)/" + kInnerEth + "/" + kIp4 + ")/UDP()",
                 kVxlanOuter + "/VXLAN(flags=0xf7,vni=5)/" + kInnerEth + "/" + kIp4 + ")/UDP()"});
  EXPECT_EQ(reason(f[0], kVxlanPort), DropReason::kVxlanMalformed);
  EXPECT_EQ(reason(f[1], kVxlanPort), DropReason::kVxlanMalformed);
  EXPECT_EQ(reason(f[0], 0), DropReason::kNone);
}

TEST(ParseTest, VxlanHeaderCutShortDropped) {
  auto f = make({kVxlanOuter + "/Raw(b'\\x08\\0\\0\\0\\0\\0\\x05')", kVxlanOuter});
  EXPECT_EQ(reason(f[0], kVxlanPort), DropReason::kVxlanMalformed);
  EXPECT_EQ(reason(f[1], kVxlanPort), DropReason::kVxlanMalformed);
}

TEST(ParseTest, VxlanInnerFrameErrorsKeepTheirReasons) {
  auto f = make(
      {kVxlanOuter + "/VXLAN(flags=0x08)/Raw(b'\\0'*13)",
       kVxlanOuter + "/VXLAN(flags=0x08)/" + kInnerEth + "/" + kIp4 + ",version=5)/UDP()",
       kVxlanOuter + "/VXLAN(flags=0x08)/" + kInnerEth + "/" + kIp4 + ",len=100)/UDP()",
       kVxlanOuter + "/VXLAN(flags=0x08)/" + kInnerEth + "/" + kIp4 + ",proto=6)/Raw(b'x'*3)"});
  EXPECT_EQ(reason(f[0], kVxlanPort), DropReason::kRuntFrame);
  EXPECT_EQ(reason(f[1], kVxlanPort), DropReason::kIpv4BadVersion);
  EXPECT_EQ(reason(f[2], kVxlanPort), DropReason::kIpv4Truncated);
  EXPECT_EQ(reason(f[3], kVxlanPort), DropReason::kL4Truncated);
}

// ================================ hostile input at random ================================

// parse_frame's fast path (untagged IPv4 TCP/UDP) decides every frame as the
// general parser does: same verdict, same key and meta when it passes.
void check_fast_path_agrees(const uint8_t* bytes, uint32_t len, uint32_t frame_len,
                            uint16_t vxlan_port) {
  auto buf = std::make_unique<uint8_t[]>(len + 1);  // +1: len may be 0
  if (len != 0) std::memcpy(buf.get(), bytes, len);
  ParseOptions opts;
  opts.vxlan_port = vxlan_port;
  FlowKey k1, k2;
  PacketMeta m1, m2;
  std::memset(&k1, 0x5a, sizeof k1);
  std::memset(&m1, 0x5a, sizeof m1);
  std::memset(&k2, 0xa5, sizeof k2);
  std::memset(&m2, 0xa5, sizeof m2);
  const DropReason fast = parse_frame(buf.get(), len, frame_len, kInPort, opts, &k1, &m1);
  const DropReason general =
      detail::parse_frame_general(buf.get(), len, frame_len, kInPort, opts, &k2, &m2);
  ASSERT_EQ(drop_reason_name(fast), drop_reason_name(general));
  if (fast != DropReason::kNone) return;
  ASSERT_EQ(0, std::memcmp(&k1, &k2, sizeof k1)) << "keys differ";
  ASSERT_EQ(0, std::memcmp(&m1, &m2, sizeof m1)) << "metas differ";
}

// What a successful parse promises whatever the input.
void check_invariants(const uint8_t* bytes, size_t len, uint16_t vxlan_port) {
  ASSERT_NO_FATAL_FAILURE(
      check_fast_path_agrees(bytes, uint32_t(len), uint32_t(len), vxlan_port));
  Parsed p = parse(bytes, len, vxlan_port, 0xa5);
  if (p.reason != DropReason::kNone) return;
  Parsed q = parse(bytes, len, vxlan_port, 0x00);
  ASSERT_EQ(q.reason, DropReason::kNone);
  ASSERT_EQ(0, std::memcmp(&p.key, &q.key, sizeof(FlowKey))) << "key depends on old contents";
  const FlowKey& k = p.key;
  const PacketMeta& m = p.meta;
  ASSERT_EQ(k.in_port, kInPort);
  ASSERT_LE(k.n_tags, 2);
  ASSERT_EQ(m.l2_len, 14 + 4 * k.n_tags);
  ASSERT_LE(size_t{m.inner_ofs} + m.l2_len, len);
  ASSERT_LE(size_t{m.l3_ofs}, len);
  ASSERT_LE(size_t{m.l4_ofs}, len);
  if (m.l3_ofs != 0) {
    ASSERT_EQ(m.l3_ofs, m.inner_ofs + m.l2_len);
  }
  if (m.l4_ofs != 0) {
    ASSERT_GT(m.l4_ofs, m.l3_ofs);
  }
  ASSERT_EQ(k.tun_flags != 0, m.inner_ofs != 0);
  ASSERT_EQ(k.pad0 | k.pad1 | k.pad2[0] | k.pad2[1] | k.pad2[2], 0);
}

void check_both_ways(const Frame& f) {
  ASSERT_NO_FATAL_FAILURE(check_invariants(f.data(), f.size(), 0));
  ASSERT_NO_FATAL_FAILURE(check_invariants(f.data(), f.size(), kVxlanPort));
}

TEST(ParseTest, RandomBytesNeverReadOutOfBounds) {
  std::mt19937 rng(20240601);
  const uint16_t types[] = {kEthTypeIpv4, kEthTypeIpv6, kEthTypeArp,
                            kEthTypeVlan, kEthTypeQinQ, kEthTypeQinQOld};
  for (int i = 0; i < 20000; ++i) {
    Frame f(rng() % (i % 10 == 0 ? 1600 : 128));
    for (auto& b : f) b = static_cast<uint8_t>(rng());
    // Mostly plausible ethertypes and version nibbles, so the fuzz gets deep.
    if (f.size() >= 14 && rng() % 4 != 0) {
      uint16_t t = types[rng() % std::size(types)];
      f[12] = t >> 8;
      f[13] = t & 0xff;
      if (f.size() > 14 && t == kEthTypeIpv4) f[14] = 0x40 | (f[14] & 0x0f);
      if (f.size() > 14 && t == kEthTypeIpv6) f[14] = 0x60 | (f[14] & 0x0f);
    }
    ASSERT_NO_FATAL_FAILURE(check_both_ways(f)) << "iteration " << i;
  }
}

TEST(ParseTest, TruncatedAndMutatedFramesNeverReadOutOfBounds) {
  auto corpus = make({
      // The fast path's frames, and near misses of them.
      eth() + "/" + kIp4 + ")/TCP(sport=1234,dport=80,flags='PA')/Raw(b'x'*20)",
      eth() + "/" + kIp4 + ")/UDP(sport=1234,dport=4790)/Raw(b'x'*20)",
      eth() + "/" + kIp4 + ")/TCP(sport=1,dport=2,options=[('MSS',1460),('NOP',None)])",
      eth() + "/" + kIp4 + ")/UDP(sport=1,dport=2)",
      eth() + "/Dot1AD(vlan=1)/Dot1Q(vlan=2)/" + kIp4 +
          ",options=[IPOption_Router_Alert()])/TCP(options=[('MSS',1460)])",
      eth() + "/" + kIp4 + ",flags='MF')/UDP()/Raw(b'x'*8)",
      eth() + "/ARP()",
      eth() + "/" + kIp6 +
          ")/IPv6ExtHdrHopByHop()/IPv6ExtHdrRouting()/IPv6ExtHdrFragment(m=1)/ICMPv6EchoRequest()",
      eth() + "/" + kIp6 + ")/IPv6ExtHdrDestOpt(nh=51)/AH(nh=6,payloadlen=4,icv=b'\\0'*12)/TCP()",
      eth() + "/" + kIp4 + ")/ICMP()",
      kVxlanOuter + "/VXLAN(flags=0x08,vni=3)/" + kInnerEth + "/Dot1Q(vlan=3)/" + kIp4 + ")/TCP()",
      kVxlanOuter + "/VXLAN(flags=0x08,vni=3)/" + kInnerEth + "/" + kIp6 +
          ")/IPv6ExtHdrFragment(m=1)/UDP()",
      kVxlanOuter + "/VXLAN(flags=0x08,vni=3)/" + kInnerEth + "/ARP()",
  });
  std::mt19937 rng(7);
  for (size_t n = 0; n < corpus.size(); ++n) {
    const Frame& valid = corpus[n];
    SCOPED_TRACE("corpus frame " + std::to_string(n));
    ASSERT_EQ(reason(valid, kVxlanPort), DropReason::kNone);
    for (size_t len = 0; len <= valid.size(); ++len) {
      ASSERT_NO_FATAL_FAILURE(check_both_ways(truncated(valid, len))) << "length " << len;
    }
    for (int i = 0; i < 3000; ++i) {
      Frame f = valid;
      for (int flips = 1 + rng() % 4; flips > 0; --flips) f[rng() % f.size()] ^= 1u << (rng() % 8);
      if (rng() % 2) f.resize(rng() % (f.size() + 1));
      ASSERT_NO_FATAL_FAILURE(check_both_ways(f)) << "mutation " << i;
    }
  }
}

// A chained frame's first segment, whatever its length and the whole
// frame's: the fast path and the general parser agree.
TEST(ParseTest, FastPathAgreesOnChainedFrames) {
  const auto frames = make({
      eth() + "/IP(src='10.0.0.1',dst='10.0.0.2')/UDP(sport=1,dport=2)/Raw(b'x'*200)",
      eth() + "/IP(src='10.0.0.1',dst='10.0.0.2')/TCP(sport=1,dport=2,dataofs=8)/Raw(b'x'*200)",
  });
  for (const Frame& f : frames) {
    const auto whole = uint32_t(f.size());
    for (uint32_t len = 0; len <= 80; len++)
      for (uint32_t frame_len : {len, uint32_t(40), uint32_t(54), uint32_t(66), whole, whole + 9})
        ASSERT_NO_FATAL_FAILURE(check_fast_path_agrees(f.data(), len, frame_len, kVxlanPort))
            << "len " << len << " frame_len " << frame_len;
  }
}

// A 9000-byte frame in 2 KB mbufs: the parser holds only the first segment.
// Headers come from it; IP and L4 lengths are checked against the whole frame
// (before, the IP payload looked cut short and jumbo frames were dropped).
TEST(ParseTest, ChainedJumboFrameParsesFromItsFirstSegment) {
  const Frame j =
      make({eth() + "/IP(src='10.0.0.1',dst='10.0.0.2')/UDP(sport=1,dport=2)/Raw(b'x'*8958)"})[0];
  ASSERT_EQ(j.size(), 9000u);
  constexpr uint32_t kSeg = 2048;
  auto seg = std::make_unique<uint8_t[]>(kSeg);  // exactly the segment: an overread is past it
  std::memcpy(seg.get(), j.data(), kSeg);
  const auto frame_len = static_cast<uint32_t>(j.size());
  FlowKey key;
  PacketMeta meta;
  auto parse_chained = [&](uint32_t len, uint32_t whole) {
    return parse_frame(seg.get(), len, whole, kInPort, ParseOptions{}, &key, &meta);
  };
  ASSERT_EQ(parse_chained(kSeg, frame_len), DropReason::kNone);
  EXPECT_EQ(key.nw_proto, 17);
  EXPECT_EQ(key.tp_src, 1);
  EXPECT_EQ(key.tp_dst, 2);
  // The first segment taken for the whole frame; a frame shorter than its
  // IP header says; the IP header, then the UDP header, not in the segment.
  EXPECT_EQ(parse_frame(seg.get(), kSeg, kInPort, ParseOptions{}, &key, &meta),
            DropReason::kIpv4Truncated);
  EXPECT_EQ(parse_chained(kSeg, frame_len - 1), DropReason::kIpv4Truncated);
  EXPECT_EQ(parse_chained(30, frame_len), DropReason::kIpv4Truncated);
  EXPECT_EQ(parse_chained(36, frame_len), DropReason::kL4Truncated);
}

// FlowKey is 8-aligned, so a key may lie at 8 mod 16 (a worker's keys of a
// burst do). Zeroing it once used 16-byte vector stores that clang emits as
// movaps, which faulted there (found by tests/fuzz/parse_fuzz.cc).
TEST(ParseTest, KeyAtEightModSixteenParses) {
  const Frame f = make({eth() + "/" + kIp4 + ")/UDP(sport=1,dport=2)"})[0];
  alignas(16) unsigned char store[2 * sizeof(FlowKey) + 8];
  auto* first = new (store) FlowKey;
  auto* second = new (store + sizeof(FlowKey)) FlowKey;  // 88 bytes on: at 8 mod 16
  ASSERT_EQ(reinterpret_cast<uintptr_t>(second) % 16, 8u);
  PacketMeta meta;
  for (FlowKey* key : {first, second}) {
    ASSERT_EQ(parse_frame(f.data(), uint32_t(f.size()), kInPort, ParseOptions{}, key, &meta),
              DropReason::kNone);
    EXPECT_EQ(key->nw_proto, 17);
    EXPECT_EQ(key->tp_dst, 2);
  }
  EXPECT_EQ(std::memcmp(first, second, sizeof(FlowKey)), 0);
}

}  // namespace
}  // namespace strait::dp
