// VXLAN (issue 6) in the dataplane: the encap/ARP helpers byte by byte
// against scapy, pipeline_decide (and its trace) on a hand-built snapshot
// with a VXLAN network, and one worker driven over net_ring ethdevs.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/parse.h"
#include "dataplane/pipeline.h"
#include "dataplane/trace.h"
#include "dataplane/vxlan.h"
#include "dataplane/worker.h"
#include "tests/sg_fixture.h"

namespace strait::dp {
namespace {

using test::Frame;
using test::parse_mac;

constexpr uint16_t kNet = 20;   // the VXLAN network's local VLAN
constexpr uint16_t kFlat = 10;  // a flat network on the underlay's physnet
constexpr uint16_t kA = 1, kB = 2, kC = 3, kUnder = 4;
constexpr uint32_t kVni = 5000;
constexpr uint16_t kMtu = 1450;
constexpr uint16_t kVtep1 = kVtepPortBase + 0;  // resolved
constexpr uint16_t kVtep2 = kVtepPortBase + 1;  // next hop not resolved

const char* const kMacA = "02:00:00:00:00:0a";     // VM A, no port security
const char* const kMacB = "02:00:00:00:00:0b";     // VM B, secured, group "web"
const char* const kMacC = "02:00:00:00:00:0c";     // VM C on the flat network
const char* const kMacR1 = "02:00:00:00:50:01";    // remote VM behind VTEP 1
const char* const kMacR2 = "02:00:00:00:50:02";    // remote VM, not in the FDB
const char* const kVtepMac = "02:00:00:00:99:01";  // our underlay NIC
const char* const kHopMac = "02:00:00:00:77:02";   // VTEP 1's next hop
const char* const kBcast = "ff:ff:ff:ff:ff:ff";
const char* const kLocalIp = "10.99.0.1";
const char* const kVtep1Ip = "10.99.0.2";
const char* const kVtep2Ip = "10.99.0.3";

uint32_t ip4(const char* s) {
  uint32_t a = 0;
  EXPECT_EQ(inet_pton(AF_INET, s, &a), 1) << s;
  return a;
}

rte_mempool* pool() {
  static rte_mempool* p =
      rte_pktmbuf_pool_create("vxlan_test", 4095, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
  return p;
}

rte_mbuf* mbuf_of(const Frame& f) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool());
  EXPECT_NE(m, nullptr);
  std::memcpy(rte_pktmbuf_append(m, uint16_t(f.size())), f.data(), f.size());
  return m;
}

Frame bytes_of(const rte_mbuf* m) {
  Frame f(rte_pktmbuf_pkt_len(m));
  const void* p = rte_pktmbuf_read(m, 0, uint32_t(f.size()), f.data());
  if (p != f.data()) std::memcpy(f.data(), p, f.size());
  return f;
}

std::string eth(const char* src, const char* dst, const std::string& rest) {
  return std::string("Ether(src='") + src + "',dst='" + dst + "')/" + rest;
}

// An underlay VXLAN frame from VTEP `from` to `to`.
std::string vxlan(const std::string& inner, uint32_t vni = kVni, const char* to = kLocalIp,
                  const char* from = kVtep1Ip) {
  return eth(kHopMac, kVtepMac,
             std::string("IP(src='") + from + "',dst='" + to + "')/UDP(sport=50000,dport=4789)" +
                 "/VXLAN(flags=0x08,vni=" + std::to_string(vni) + ")/" + inner);
}

void set_mac(uint8_t* out, const char* s) {
  const auto m = parse_mac(s);
  std::memcpy(out, m.data(), 6);
}

VtepConfig vtep_config() {
  VtepConfig v;
  v.enabled = true;
  v.local_ip = ip4(kLocalIp);
  v.uplink = kUnder;
  v.udp_port = 4789;
  v.ttl = 33;
  v.learning = true;
  set_mac(v.mac, kVtepMac);
  return v;
}

RemoteVtep remote(const char* ip, bool resolved) {
  RemoteVtep r;
  r.present = true;
  r.ip = r.arp_ip = ip4(ip);
  r.resolved = resolved;
  if (resolved) {
    set_mac(r.next_hop_mac, kHopMac);
    vxlan_outer_template(vtep_config(), &r);
  }
  return r;
}

// ======================================= helpers ======================================

TEST(VxlanHelpers, EncapMatchesScapyByteForByte) {
  const std::string inner =
      eth(kMacA, kMacR1, "IP(src='10.0.0.10',dst='10.0.0.99')/TCP(sport=1234,dport=80,flags='S')");
  const Frame in = test::scapy("[" + inner + "]").at(0);
  FlowKey ik;
  PacketMeta im;
  ASSERT_EQ(parse_frame(in.data(), uint32_t(in.size()), kA, {}, &ik, &im), DropReason::kNone);
  const uint32_t hash = vxlan_flow_hash(ik);
  const uint16_t sport = vxlan_src_port(hash);

  rte_mbuf* m = mbuf_of(in);
  rte_mbuf* out = vxlan_encap(m, pool(), remote(kVtep1Ip, true), kVni, hash);
  ASSERT_EQ(out, m);  // in the headroom
  const Frame got = bytes_of(out);
  rte_pktmbuf_free(out);

  const Frame want =
      test::scapy("[" +
                  eth(kVtepMac, kHopMac,
                      std::string("IP(src='") + kLocalIp + "',dst='" + kVtep1Ip +
                          "',ttl=33,flags='DF',id=0,tos=0)/UDP(sport=" + std::to_string(sport) +
                          ",dport=4789,chksum=0)/VXLAN(flags=0x08,vni=" + std::to_string(kVni) +
                          ")/" + inner) +
                  "]")
          .at(0);
  ASSERT_EQ(got.size(), in.size() + kVxlanOverhead);
  for (size_t i = 0; i < want.size(); i++) EXPECT_EQ(got[i], want[i]) << "byte " << i;

  // The header checksum verifies; DF, TTL.
  rte_ipv4_hdr ip;
  std::memcpy(&ip, got.data() + 14, sizeof ip);
  const uint16_t c = rte_ipv4_cksum(&ip);
  EXPECT_TRUE(c == 0 || c == 0xffff) << c;
  EXPECT_EQ(rte_be_to_cpu_16(ip.fragment_offset), RTE_IPV4_HDR_DF_FLAG);
  EXPECT_EQ(ip.time_to_live, 33);
  EXPECT_GE(sport, 49152);

  // Parsed back on the underlay: the tunnel fields, and the inner key as a
  // VM port saw it.
  FlowKey k;
  PacketMeta pm;
  ASSERT_EQ(parse_frame(got.data(), uint32_t(got.size()), kUnder, ParseOptions{4789}, &k, &pm),
            DropReason::kNone);
  EXPECT_EQ(k.tun_flags, kTunValid);
  EXPECT_EQ(k.tun_vni, kVni);
  EXPECT_EQ(k.tun_src, ip4(kLocalIp));
  EXPECT_EQ(k.tun_dst, ip4(kVtep1Ip));
  EXPECT_EQ(k.tun_dport, 4789);
  EXPECT_EQ(pm.inner_ofs, kVxlanOverhead);
  FlowKey inner_only = k;
  inner_only.in_port = kA;
  inner_only.tun_vni = inner_only.tun_src = inner_only.tun_dst = 0;
  inner_only.tun_dport = 0;
  inner_only.tun_flags = 0;
  EXPECT_EQ(std::memcmp(&inner_only, &ik, sizeof ik), 0);
}

TEST(VxlanHelpers, EncapWithoutHeadroomChainsAHeaderSegment) {
  const Frame in = test::scapy("[" + eth(kMacA, kMacR1, "IP()/UDP()") + "]").at(0);
  rte_mbuf* m = rte_pktmbuf_alloc(pool());
  ASSERT_NE(m, nullptr);
  m->data_off = 10;  // less headroom than the outer headers need
  std::memcpy(rte_pktmbuf_append(m, uint16_t(in.size())), in.data(), in.size());
  rte_mbuf* out = vxlan_encap(m, pool(), remote(kVtep1Ip, true), 7, 1);
  ASSERT_NE(out, nullptr);
  EXPECT_NE(out, m);
  EXPECT_EQ(out->nb_segs, 2);
  const Frame got = bytes_of(out);
  rte_pktmbuf_free(out);
  ASSERT_EQ(got.size(), in.size() + kVxlanOverhead);
  EXPECT_EQ(std::memcmp(got.data() + kVxlanOverhead, in.data(), in.size()), 0);
  FlowKey k;
  PacketMeta pm;
  ASSERT_EQ(parse_frame(got.data(), uint32_t(got.size()), kUnder, ParseOptions{4789}, &k, &pm),
            DropReason::kNone);
  EXPECT_EQ(k.tun_vni, 7u);
}

TEST(VxlanHelpers, SourcePortStablePerFlowSpreadAcrossFlows) {
  FlowKey k{};
  k.dl_type = kEthTypeIpv4;
  k.nw_proto = kIpProtoTcp;
  k.tp_dst = 80;
  std::set<uint16_t> ports;
  for (uint16_t p = 0; p < 2000; p++) {
    k.tp_src = uint16_t(10000 + p);
    const uint16_t sp = vxlan_src_port(vxlan_flow_hash(k));
    EXPECT_GE(sp, 49152);
    ports.insert(sp);
    // Nothing that varies inside one flow moves it.
    FlowKey same = k;
    same.tcp_flags = 0x10;
    same.nw_ttl = 3;
    same.in_port = 9;
    EXPECT_EQ(vxlan_src_port(vxlan_flow_hash(same)), sp);
  }
  EXPECT_GT(ports.size(), 1800u);  // 2000 flows into 16384 ports
}

TEST(VxlanHelpers, ArpRequestAndReply) {
  uint8_t ours[6], theirs[6];
  set_mac(ours, kVtepMac);
  set_mac(theirs, kHopMac);
  rte_mbuf* m = rte_pktmbuf_alloc(pool());
  ASSERT_TRUE(arp_build(m, kArpOpRequest, ours, ip4(kLocalIp), theirs, ip4("10.99.0.254")));
  const Frame req = bytes_of(m);
  ASSERT_TRUE(arp_build(m, kArpOpReply, ours, ip4(kLocalIp), theirs, ip4("10.99.0.254")));
  const Frame rep = bytes_of(m);
  rte_pktmbuf_free(m);
  const std::vector<Frame> want = test::scapy(
      "[" +
      eth(kVtepMac, kBcast,
          std::string("ARP(op=1,hwsrc='") + kVtepMac + "',psrc='" + kLocalIp +
              "',hwdst='00:00:00:00:00:00',pdst='10.99.0.254')/Padding(load=b'\\0'*18)") +
      "," +
      eth(kVtepMac, kHopMac,
          std::string("ARP(op=2,hwsrc='") + kVtepMac + "',psrc='" + kLocalIp + "',hwdst='" +
              kHopMac + "',pdst='10.99.0.254')/Padding(load=b'\\0'*18)") +
      "]");
  ASSERT_EQ(want.size(), 2u);
  EXPECT_EQ(req, want[0]);
  EXPECT_EQ(rep, want[1]);
}

// ======================================= pipeline =====================================

struct VxOptions {
  bool vtep = true;
  bool flat = true;      // the underlay's physnet also has a flat network
  uint16_t eth_a = 0;    // ethdevs (worker test)
  uint16_t eth_b = 0;
  uint16_t eth_under = 0;
};

// Local VLAN 20: VXLAN VNI 5000, VMs A (port 1) and B (port 2, secured),
// remote R1 behind VTEP 1 (resolved), flood VTEPs 1 and 2 (unresolved).
// Local VLAN 10: flat on the underlay NIC (port 4) with VM C (port 3).
std::unique_ptr<Snapshot> vx_snapshot(const VxOptions& o = {}) {
  auto s = std::make_unique<Snapshot>();
  s->n_workers = 1;
  s->classifiers.push_back(test::web_group({}));
  auto access = [&](uint16_t idx, const char* mac, uint16_t lvlan, uint16_t ethdev) {
    PortEntry& p = s->ports[idx];
    p.present = p.enabled = true;
    p.role = PortRole::kAccess;
    p.lvlan = lvlan;
    p.ethdev = ethdev;
    p.key_bytes = kFullKeyBytes;
    set_mac(p.mac, mac);
  };
  access(kA, kMacA, kNet, o.eth_a);
  access(kB, kMacB, kNet, o.eth_b);
  access(kC, kMacC, kFlat, 0);
  auto sec = std::make_unique<PortSecurity>();
  sec->sg = s->classifiers.back().get();
  sec->macs.push_back(mac_to_u64(parse_mac(kMacB).data()));
  sec->sources.push_back({sec->macs[0], test::v4_prefix(10, 0, 0, 11, 32)});
  s->ports[kB].security = sec.get();
  s->security.push_back(std::move(sec));

  PortEntry& up = s->ports[kUnder];
  up.present = up.enabled = true;
  up.role = PortRole::kUplink;
  up.ethdev = o.eth_under;
  up.key_bytes = kFullKeyBytes;
  s->uplinks.resize(1);
  if (o.flat) {
    s->uplinks[0].flat_lvlan = kFlat;
    Network& f = s->networks[kFlat];
    f.present = true;
    f.type = NetType::kFlat;
    f.uplink = kUnder;
    f.flood = {{kC, 0}, {kUnder, 0}};
  }
  Network& n = s->networks[kNet];
  n.present = true;
  n.type = NetType::kVxlan;
  n.vni = kVni;
  n.mtu = kMtu;
  n.flood = {{kA, 0}, {kB, 0}};
  n.flood_vteps = {0, 1};

  if (o.vtep) s->vtep = vtep_config();
  s->vteps = {remote(kVtep1Ip, true), remote(kVtep2Ip, false)};
  s->vni_to_lvlan = {{kVni, kNet}};

  std::vector<FdbEntry> fdb;
  auto add = [&](uint16_t lvlan, const char* mac, uint16_t port) {
    FdbEntry e;
    e.key = Fdb::make_key(lvlan, parse_mac(mac).data());
    e.port = port;
    fdb.push_back(e);
  };
  add(kNet, kMacA, kA);
  add(kNet, kMacB, kB);
  add(kNet, kMacR1, kVtep1);
  add(kFlat, kMacC, kC);
  s->fdb = Fdb(fdb);
  s->rx_by_worker = {{{kA, 0}, {kUnder, 0}}};
  return s;
}

constexpr uint8_t kFlagsSeen = kActDecap | kActLearn | kActTrack | kActNewOk;

struct Expect {
  ActionKind kind;
  DropReason reason = DropReason::kNone;
  uint8_t flags = 0;  // of kFlagsSeen
  uint16_t out_port = kNoPort;
};
Expect drop(DropReason r) { return {ActionKind::kDrop, r}; }
Expect out(uint16_t port, uint8_t flags = 0, DropReason r = DropReason::kNone) {
  return {ActionKind::kOutput, r, flags, port};
}
Expect flood(uint8_t flags = 0) { return {ActionKind::kFlood, DropReason::kNone, flags}; }
Expect encap(uint16_t vtep) { return {ActionKind::kEncap, DropReason::kNone, 0, vtep}; }
Expect vtep_arp() { return {ActionKind::kVtepArp}; }

struct Case {
  const char* name;
  uint16_t in_port;
  std::string frame;
  Expect want;
};

// Parses each frame as the worker does (VXLAN on the underlay NIC), then
// checks pipeline_decide and that the trace explains it.
void check(const Snapshot& s, const std::vector<Case>& cases) {
  std::string exprs = "[";
  for (const Case& c : cases) exprs += c.frame + ",";
  const std::vector<Frame> frames = test::scapy(exprs + "]");
  ASSERT_EQ(frames.size(), cases.size());
  for (size_t i = 0; i < cases.size(); i++) {
    const Case& c = cases[i];
    SCOPED_TRACE(std::string(c.name) + ": " + c.frame);
    const ParseOptions opts{uint16_t(s.vtep.enabled && c.in_port == s.vtep.uplink ? 4789 : 0)};
    FlowKey k;
    PacketMeta pm;
    ASSERT_EQ(parse_frame(frames[i].data(), uint32_t(frames[i].size()), c.in_port, opts, &k, &pm),
              DropReason::kNone);
    const Action a = pipeline_decide(s, k);
    EXPECT_EQ(int(a.kind), int(c.want.kind));
    EXPECT_EQ(drop_reason_name(a.reason), drop_reason_name(c.want.reason));
    EXPECT_EQ(a.flags & kFlagsSeen, c.want.flags);
    if (c.want.out_port != kNoPort) {
      EXPECT_EQ(a.out_port, c.want.out_port);
    }
    if (a.kind == ActionKind::kEncap || (a.flags & kActDecap) ||
        (a.kind == ActionKind::kFlood && c.in_port == kA)) {
      EXPECT_EQ(a.lvlan, kNet);
    }
    if (a.kind == ActionKind::kEncap) {
      EXPECT_EQ(a.mtu, kMtu);
    }

    const TraceResult t =
        trace_frame(s, frames[i].data(), uint32_t(frames[i].size()), c.in_port);
    EXPECT_TRUE(t.consistent);
    std::string steps;
    for (const TraceStep& st : t.steps) steps += std::string(trace_stage_name(st.stage)) + ": " + st.detail + "\n";
    SCOPED_TRACE(steps);
    if (a.kind == ActionKind::kDrop) {
      EXPECT_EQ(drop_reason_name(t.drop), drop_reason_name(a.reason));
    }
    if (a.flags & kActDecap) {
      EXPECT_NE(steps.find("decap: "), std::string::npos);
    }
    if (a.kind == ActionKind::kEncap) {
      EXPECT_NE(steps.find("encap: "), std::string::npos);
      ASSERT_EQ(t.outputs.size(), 1u);
      EXPECT_EQ(t.outputs[0].port, kUnder);
      EXPECT_EQ(t.outputs[0].vtep, a.out_port);
    }
    if (a.kind == ActionKind::kFlood && (a.flags & kActDecap)) {
      for (const TraceOutput& o : t.outputs) EXPECT_NE(o.port, kUnder) << "flood from a tunnel into one";
    }
  }
}

const std::string kIcmp = "IP(src='10.0.0.10',dst='10.0.0.99')/ICMP()";
const std::string kIcmpIn = "IP(src='10.0.0.99',dst='10.0.0.10')/ICMP()";

TEST(VxlanPipeline, FromAVm) {
  auto s = vx_snapshot();
  check(*s, {
      {"to a remote MAC", kA, eth(kMacA, kMacR1, kIcmp), encap(kVtep1)},
      {"to a local VM", kA, eth(kMacA, kMacB, "IP(src='10.0.0.10',dst='10.0.0.11')/ICMP()"),
       out(kB, kActTrack | kActNewOk)},
      {"broadcast", kA, eth(kMacA, kBcast, "ARP(psrc='10.0.0.10',pdst='10.0.0.99')"), flood()},
      {"unknown unicast", kA, eth(kMacA, kMacR2, kIcmp), flood()},
  });
  auto off = vx_snapshot({.vtep = false});
  check(*off, {
      {"to a remote MAC without a VTEP", kA, eth(kMacA, kMacR1, kIcmp),
       drop(DropReason::kTunnelNoVtep)},
      {"broadcast without a VTEP: local ports only", kA, eth(kMacA, kBcast, kIcmp), flood()},
  });
}

TEST(VxlanPipeline, FromTheUnderlay) {
  auto s = vx_snapshot();
  const std::string tcp80 = "IP(src='10.0.0.99',dst='10.0.0.11')/TCP(sport=999,dport=80,flags='S')";
  const std::string tcp22 = "IP(src='10.0.0.99',dst='10.0.0.11')/TCP(sport=999,dport=22,flags='S')";
  check(*s, {
      {"known remote to A", kUnder, vxlan(eth(kMacR1, kMacA, kIcmpIn)), out(kA, kActDecap)},
      {"unknown remote to A: learned", kUnder, vxlan(eth(kMacR2, kMacA, kIcmpIn)),
       out(kA, kActDecap | kActLearn)},
      {"unknown remote from an unknown VTEP: not learned", kUnder,
       vxlan(eth(kMacR2, kMacA, kIcmpIn), kVni, kLocalIp, "10.99.0.77"), out(kA, kActDecap)},
      {"to secured B, allowed", kUnder, vxlan(eth(kMacR1, kMacB, tcp80)),
       out(kB, kActDecap | kActTrack | kActNewOk)},
      {"to secured B, denied", kUnder, vxlan(eth(kMacR1, kMacB, tcp22)),
       out(kB, kActDecap | kActTrack, DropReason::kSgIngressDenied)},
      {"broadcast: local ports only", kUnder, vxlan(eth(kMacR1, kBcast, kIcmpIn)),
       flood(kActDecap)},
      {"to a remote MAC: never back into a tunnel, its unknown source learned", kUnder,
       vxlan(eth(kMacR2, kMacR1, kIcmpIn)),
       Expect{ActionKind::kDrop, DropReason::kSamePort, kActDecap | kActLearn}},
      {"to another VTEP address", kUnder, vxlan(eth(kMacR1, kMacA, kIcmpIn), kVni, "10.99.0.7"),
       drop(DropReason::kVxlanNotOurs)},
      {"unknown VNI", kUnder, vxlan(eth(kMacR1, kMacA, kIcmpIn), 777),
       drop(DropReason::kUnknownVni)},
      {"tagged inner frame", kUnder, vxlan(eth(kMacR1, kMacA, "Dot1Q(vlan=5)/" + kIcmpIn)),
       drop(DropReason::kNestedVlan)},
      {"multicast inner source", kUnder, vxlan(eth("01:00:5e:00:00:01", kMacA, kIcmpIn)),
       drop(DropReason::kInvalidSourceMac)},
      // The physnet's flat network works as before on the same NIC.
      {"flat traffic to C", kUnder, eth("02:00:00:00:88:01", kMacC, kIcmpIn),
       out(kC, kActLearn)},
      {"UDP 4789 in a VLAN tag is not decoded", kUnder,
       eth(kHopMac, kVtepMac,
           "Dot1Q(vlan=3)/IP(src='10.99.0.2',dst='10.99.0.1')/UDP(dport=4789)/"
           "VXLAN(flags=0x08,vni=5000)/" + eth(kMacR1, kMacA, kIcmpIn)),
       drop(DropReason::kUnknownVlan)},
  });
}

TEST(VxlanPipeline, ArpOnTheUnderlay) {
  const std::string req = "ARP(op=1,hwsrc='02:00:00:00:77:02',psrc='10.99.0.254',pdst='";
  const std::string rep = "ARP(op=2,hwsrc='02:00:00:00:77:02',psrc='10.99.0.254',pdst='";
  auto s = vx_snapshot();
  check(*s, {
      {"request for our VTEP", kUnder, eth(kHopMac, kBcast, req + kLocalIp + "')"), vtep_arp()},
      {"reply to our VTEP", kUnder, eth(kHopMac, kVtepMac, rep + kLocalIp + "')"), vtep_arp()},
      {"request for someone on the flat network", kUnder,
       eth(kHopMac, kBcast, req + "10.0.0.12')"), flood(kActLearn)},
      {"gratuitous reply, flat network there", kUnder,
       eth(kHopMac, kBcast, rep + "10.99.0.254')"), flood(kActLearn)},
  });
  auto no_flat = vx_snapshot({.flat = false});
  check(*no_flat, {
      {"gratuitous reply, no flat network", kUnder, eth(kHopMac, kBcast, rep + "10.99.0.254')"),
       vtep_arp()},
      {"request for another address", kUnder, eth(kHopMac, kBcast, req + "10.99.0.9')"),
       drop(DropReason::kNoFlatNetwork)},
  });
}

TEST(VxlanPipeline, LvlanOfVni) {
  Snapshot s;
  s.vni_to_lvlan = {{1, 5}, {70, 6}, {16777215, 7}};
  EXPECT_EQ(s.lvlan_of_vni(1), 5);
  EXPECT_EQ(s.lvlan_of_vni(70), 6);
  EXPECT_EQ(s.lvlan_of_vni(16777215), 7);
  EXPECT_EQ(s.lvlan_of_vni(0), 0);
  EXPECT_EQ(s.lvlan_of_vni(69), 0);
  EXPECT_EQ(s.lvlan_of_vni(71), 0);
}

// ======================================= worker =======================================

// A net_ring ethdev: frames in through `in`, out through `out`.
struct Ring {
  std::string name;
  rte_ring* in = nullptr;
  rte_ring* out = nullptr;
  uint16_t port = 0;

  explicit Ring(const std::string& base) : name("net_ring_" + base) {
    in = rte_ring_create(("vin_" + base).c_str(), 1024, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
    out = rte_ring_create(("vout_" + base).c_str(), 1024, 0, 0);
    EXPECT_GE(rte_eth_from_rings(base.c_str(), &in, 1, &out, 1, 0), 0);
    EXPECT_EQ(rte_eth_dev_get_port_by_name(name.c_str(), &port), 0);
    rte_eth_conf conf{};
    EXPECT_EQ(rte_eth_dev_configure(port, 1, 1, &conf), 0);
    EXPECT_EQ(rte_eth_rx_queue_setup(port, 0, 1024, 0, nullptr, pool()), 0);
    EXPECT_EQ(rte_eth_tx_queue_setup(port, 0, 1024, 0, nullptr), 0);
    EXPECT_EQ(rte_eth_dev_start(port), 0);
  }
  ~Ring() {
    rte_eth_dev_stop(port);
    rte_eth_dev_close(port);
    void* m;
    while (rte_ring_dequeue(in, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
    while (rte_ring_dequeue(out, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
    rte_ring_free(in);
    rte_ring_free(out);
  }
  void send(const std::vector<Frame>& frames) {
    for (const Frame& f : frames) ASSERT_EQ(rte_ring_enqueue(in, mbuf_of(f)), 0);
  }
  // Waits (up to 2 s) for n frames transmitted here, then a little longer
  // for any that should not come.
  std::vector<Frame> take(size_t n) {
    std::vector<Frame> got;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    auto drain = [&] {
      void* m;
      while (rte_ring_dequeue(out, &m) == 0) {
        got.push_back(bytes_of(static_cast<rte_mbuf*>(m)));
        rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
      }
    };
    while (got.size() < n && std::chrono::steady_clock::now() < deadline) {
      drain();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    drain();
    return got;
  }
};

class VxlanWorker : public ::testing::Test {
 protected:
  void SetUp() override {
    snap_ = vx_snapshot({.eth_a = a_.port, .eth_b = b_.port, .eth_under = under_.port});
    shared_.pool = pool();
    qsbr_.reset(static_cast<rte_rcu_qsbr*>(
        rte_zmalloc("vxlan_test_qsbr", rte_rcu_qsbr_get_memsize(1), RTE_CACHE_LINE_SIZE)));
    ASSERT_EQ(rte_rcu_qsbr_init(qsbr_.get(), 1), 0);
    shared_.qsbr = qsbr_.get();
    shared_.snapshot.store(snap_.get(), std::memory_order_release);
    worker_ = std::make_unique<Worker>(0, lcore_, &shared_, 1024, 0);
    ASSERT_EQ(rte_eal_remote_launch(Worker::lcore_main, worker_.get(), lcore_), 0);
  }
  void TearDown() override {
    shared_.stop.store(true);
    rte_eal_wait_lcore(lcore_);
  }
  // The worker's drop count of reason r once it reaches n (or after 1 s).
  uint64_t drops(DropReason r, uint64_t n) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    uint64_t v;
    while ((v = read(worker_->stats().drops[unsigned(r)])) < n &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    return v;
  }

  struct FreeDeleter {
    void operator()(void* p) const { rte_free(p); }
  };
  Ring a_{"vxa"};
  Ring b_{"vxb"};
  Ring under_{"vxu"};
  unsigned lcore_ = rte_get_next_lcore(-1, 1, 0);
  DataplaneShared shared_;
  std::unique_ptr<rte_rcu_qsbr, FreeDeleter> qsbr_;
  std::unique_ptr<Snapshot> snap_;
  std::unique_ptr<Worker> worker_;
};

TEST_F(VxlanWorker, EncapDecapFloodAndArp) {
  const std::string to_r1 = eth(kMacA, kMacR1, kIcmp);
  const std::string from_r1 = eth(kMacR1, kMacA, kIcmpIn);
  const std::string big_in = eth(kMacR1, kMacA, "IP(src='10.0.0.99',dst='10.0.0.10')/UDP()/Raw(b'x'*1423)");  // L3 1451
  const std::string max_in = eth(kMacR1, kMacA, "IP(src='10.0.0.99',dst='10.0.0.10')/UDP()/Raw(b'x'*1422)");  // L3 1450
  const std::vector<Frame> f = test::scapy(
      "[" + to_r1 + "," + vxlan(from_r1) + "," + eth(kMacA, kBcast, kIcmp) + "," +
      vxlan(big_in) + "," + vxlan(max_in) + "," +
      eth(kHopMac, kBcast,
          std::string("ARP(op=1,hwsrc='") + kHopMac + "',psrc='10.99.0.254',pdst='" + kLocalIp +
              "')") +
      "," + vxlan(from_r1, 777) + "]");
  ASSERT_EQ(f.size(), 7u);
  const Frame inner_from_r1 = test::scapy("[" + from_r1 + "]").at(0);
  const Frame inner_max = test::scapy("[" + max_in + "]").at(0);

  // VM -> remote: encapsulated out of the underlay NIC.
  a_.send({f[0]});
  std::vector<Frame> got = under_.take(1);
  ASSERT_EQ(got.size(), 1u);
  FlowKey k;
  PacketMeta pm;
  ASSERT_EQ(parse_frame(got[0].data(), uint32_t(got[0].size()), kUnder, ParseOptions{4789}, &k,
                        &pm),
            DropReason::kNone);
  EXPECT_EQ(k.tun_vni, kVni);
  EXPECT_EQ(k.tun_dst, ip4(kVtep1Ip));
  EXPECT_EQ(std::memcmp(got[0].data(), parse_mac(kHopMac).data(), 6), 0);
  EXPECT_EQ(Frame(got[0].begin() + kVxlanOverhead, got[0].end()), f[0]);

  // Remote -> VM: decapsulated, the inner frame exactly.
  under_.send({f[1]});
  got = a_.take(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], inner_from_r1);

  // Broadcast from A: B gets it; the underlay one copy to VTEP 1 and an ARP
  // request for VTEP 2 (unresolved).
  a_.send({f[2]});
  EXPECT_EQ(b_.take(1).size(), 1u);
  got = under_.take(2);
  ASSERT_EQ(got.size(), 2u);
  int vx = 0, arp = 0;
  for (const Frame& g : got) {
    ASSERT_EQ(parse_frame(g.data(), uint32_t(g.size()), kUnder, ParseOptions{4789}, &k, &pm),
              DropReason::kNone);
    if (k.tun_flags & kTunValid) {
      vx++;
      EXPECT_EQ(k.tun_dst, ip4(kVtep1Ip));
    } else {
      arp++;
      EXPECT_EQ(k.dl_type, kEthTypeArp);
      EXPECT_EQ(k.nw_proto, kArpOpRequest);
      EXPECT_EQ(arp_target_ip(k), ip4(kVtep2Ip));
      EXPECT_EQ(arp_sender_ip(k), ip4(kLocalIp));
    }
  }
  EXPECT_EQ(vx, 1);
  EXPECT_EQ(arp, 1);
  EXPECT_EQ(drops(DropReason::kVtepUnresolved, 1), 1u);
  // Again within the second: no second ARP request.
  a_.send({f[2]});
  EXPECT_EQ(b_.take(1).size(), 1u);
  EXPECT_EQ(under_.take(1).size(), 1u);
  EXPECT_EQ(drops(DropReason::kVtepUnresolved, 2), 2u);

  // MTU on the inner frame.
  under_.send({f[3], f[4]});
  got = a_.take(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], inner_max);
  EXPECT_EQ(drops(DropReason::kMtuExceeded, 1), 1u);

  // ARP for our VTEP address: answered, and reported.
  under_.send({f[5]});
  got = under_.take(1);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(parse_frame(got[0].data(), uint32_t(got[0].size()), kUnder, {}, &k, &pm),
            DropReason::kNone);
  EXPECT_EQ(k.nw_proto, kArpOpReply);
  EXPECT_EQ(arp_sender_ip(k), ip4(kLocalIp));
  EXPECT_EQ(std::memcmp(arp_sender_mac(k), parse_mac(kVtepMac).data(), 6), 0);
  EXPECT_EQ(std::memcmp(k.dl_dst, parse_mac(kHopMac).data(), 6), 0);
  ArpEvent ev;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  bool popped = false;
  while (!(popped = worker_->arp_queue().pop(ev)) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  ASSERT_TRUE(popped);
  EXPECT_EQ(ev.ip, ip4("10.99.0.254"));
  EXPECT_EQ(std::memcmp(ev.mac, parse_mac(kHopMac).data(), 6), 0);

  // Unknown VNI: dropped with its reason.
  under_.send({f[6]});
  EXPECT_EQ(drops(DropReason::kUnknownVni, 1), 1u);
  EXPECT_EQ(a_.take(0).size(), 0u);
}

}  // namespace
}  // namespace strait::dp
