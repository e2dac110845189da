#pragma once
// A hand-built snapshot with port security for pipeline / conntrack-stage
// tests (port_security_eal_test, sg_stage_eal_test). Needs the EAL: the
// classifiers are rte_acl.
//
// One flat network, local VLAN 10, with
//   port 1  VM A  secured, group "web"   02:00:00:00:00:0a  10.0.0.10, fd00::a,
//                 pairs 10.0.1.0/24 with MAC 02:00:00:00:00:aa, 10.0.2.0/23
//   port 2  VM B  secured, group "web"   02:00:00:00:00:0b  10.0.0.11
//   port 3  VM C  port security off      02:00:00:00:00:0c  10.0.0.12
//   port 4  uplink (physnet NIC), the network is its flat network
//   port 5  VM D  secured, no group      02:00:00:00:00:0d  10.0.0.13
// Group "web": ingress TCP 80 and ICMP from anywhere (IPv4), egress anything
// (IPv4 and IPv6). Without `web_ingress_tcp80` the ingress TCP rule is gone
// (a rule removal, F10).
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/parse.h"
#include "dataplane/snapshot.h"
#include "tests/test_util.h"

namespace strait::test {

inline constexpr uint16_t kLvlan = 10;
inline constexpr uint16_t kPortA = 1, kPortB = 2, kPortC = 3, kUplink = 4, kPortD = 5;

inline const char* const kMacA = "02:00:00:00:00:0a";
inline const char* const kMacPair = "02:00:00:00:00:aa";
inline const char* const kMacB = "02:00:00:00:00:0b";
inline const char* const kMacC = "02:00:00:00:00:0c";
inline const char* const kMacD = "02:00:00:00:00:0d";
inline const char* const kMacRemote = "02:00:00:00:99:01";  // behind the uplink, unknown
inline const char* const kLinkLocalA = "fe80::ff:fe00:a";   // EUI-64 of kMacA

inline std::array<uint8_t, 6> parse_mac(const char* s) {
  std::array<uint8_t, 6> m{};
  unsigned v[6];
  EXPECT_EQ(std::sscanf(s, "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]), 6);
  for (int i = 0; i < 6; i++) m[i] = uint8_t(v[i]);
  return m;
}

inline dp::SgPrefix v4_prefix(uint8_t a, uint8_t b, uint8_t c, uint8_t d, uint8_t len) {
  dp::SgPrefix p;
  p.family = dp::SgFamily::kIpv4;
  p.len = len;
  p.addr = {a, b, c, d};
  return p;
}

inline dp::SgPrefix v6_prefix(const char* s, uint8_t len) {
  dp::SgPrefix p;
  p.family = dp::SgFamily::kIpv6;
  p.len = len;
  EXPECT_EQ(inet_pton(AF_INET6, s, p.addr.data()), 1) << s;
  return p;
}

struct SgOptions {
  bool web_ingress_tcp80 = true;
  uint32_t generation = 1;
};

inline std::shared_ptr<const dp::SgClassifier> web_group(const SgOptions& o) {
  using namespace dp;
  std::vector<SgRule> rules;
  if (o.web_ingress_tcp80) {
    SgRule r;
    r.direction = SgDirection::kIngress;
    r.any_proto = false;
    r.proto = kIpProtoTcp;
    r.tp_dst_lo = r.tp_dst_hi = 80;
    rules.push_back(r);
  }
  SgRule icmp;
  icmp.direction = SgDirection::kIngress;
  icmp.any_proto = false;
  icmp.proto = kIpProtoIcmp;
  rules.push_back(icmp);
  SgRule eg4;
  eg4.direction = SgDirection::kEgress;
  rules.push_back(eg4);
  SgRule eg6 = eg4;
  eg6.family = eg6.remote.family = SgFamily::kIpv6;
  rules.push_back(eg6);
  SgBuildResult b = SgClassifier::build(rules, {});
  EXPECT_TRUE(b.classifier) << b.error;
  return std::shared_ptr<const SgClassifier>(std::move(b.classifier));
}

inline std::unique_ptr<dp::Snapshot> sg_snapshot(const SgOptions& o = {}) {
  using namespace dp;
  auto s = std::make_unique<Snapshot>();
  s->generation = s->cache_generation = s->verify_generation = o.generation;
  s->n_workers = 1;
  s->classifiers.push_back(web_group(o));
  const SgClassifier* web = s->classifiers.back().get();

  auto secure = [&](const char* mac, const SgClassifier* sg,
                    std::vector<AllowedSource> extra) -> const PortSecurity* {
    auto sec = std::make_unique<PortSecurity>();
    sec->sg = sg;
    const uint64_t m = mac_to_u64(parse_mac(mac).data());
    sec->macs.push_back(m);
    for (AllowedSource& a : extra) {
      if (std::find(sec->macs.begin(), sec->macs.end(), a.mac) == sec->macs.end())
        sec->macs.push_back(a.mac);
      sec->sources.push_back(a);
    }
    s->security.push_back(std::move(sec));
    return s->security.back().get();
  };
  auto mac_u64 = [](const char* mac) { return mac_to_u64(parse_mac(mac).data()); };
  auto access = [&](uint16_t idx, const char* mac, const PortSecurity* sec) {
    PortEntry& p = s->ports[idx];
    p.present = p.enabled = true;
    p.role = PortRole::kAccess;
    p.lvlan = kLvlan;
    p.key_bytes = kFullKeyBytes;
    const auto m = parse_mac(mac);
    std::copy(m.begin(), m.end(), p.mac);
    p.security = sec;
  };
  access(kPortA, kMacA,
         secure(kMacA, web,
                {{mac_u64(kMacA), v4_prefix(10, 0, 0, 10, 32)},
                 {mac_u64(kMacA), v6_prefix("fd00::a", 128)},
                 {mac_u64(kMacA), v6_prefix(kLinkLocalA, 128)},
                 {mac_u64(kMacPair), v4_prefix(10, 0, 1, 0, 24)},
                 {mac_u64(kMacPair), v6_prefix("fe80::ff:fe00:aa", 128)},
                 {mac_u64(kMacA), v4_prefix(10, 0, 2, 0, 23)}}));
  access(kPortB, kMacB, secure(kMacB, web, {{mac_u64(kMacB), v4_prefix(10, 0, 0, 11, 32)}}));
  access(kPortC, kMacC, nullptr);
  access(kPortD, kMacD, secure(kMacD, nullptr, {{mac_u64(kMacD), v4_prefix(10, 0, 0, 13, 32)}}));

  PortEntry& up = s->ports[kUplink];
  up.present = up.enabled = true;
  up.role = PortRole::kUplink;
  up.uplink_map = 0;
  up.key_bytes = kFullKeyBytes;
  s->uplinks.resize(1);
  s->uplinks[0].flat_lvlan = kLvlan;

  Network& net = s->networks[kLvlan];
  net.present = true;
  net.type = NetType::kFlat;
  net.uplink = kUplink;
  net.flood = {{kPortA, 0}, {kPortB, 0}, {kPortC, 0}, {kUplink, 0}, {kPortD, 0}};

  std::vector<FdbEntry> fdb;
  for (auto [port, mac] : {std::pair{kPortA, kMacA}, std::pair{kPortB, kMacB},
                           std::pair{kPortC, kMacC}, std::pair{kPortD, kMacD}}) {
    FdbEntry e;
    e.key = Fdb::make_key(kLvlan, parse_mac(mac).data());
    e.port = port;
    fdb.push_back(e);
  }
  s->fdb = Fdb(fdb);
  return s;
}

// A frame parsed as if received on in_port.
struct Pkt {
  Frame frame;
  dp::FlowKey key{};
  dp::PacketMeta meta{};
  const uint8_t* l4() const { return meta.l4_ofs ? frame.data() + meta.l4_ofs : nullptr; }
  uint32_t l4_len() const { return meta.l4_ofs ? uint32_t(frame.size() - meta.l4_ofs) : 0; }
};

// Each (in_port, frame) parsed (tests/frame_builder.h makes the frames).
inline std::vector<Pkt> packets(const std::vector<std::pair<uint16_t, Frame>>& list) {
  std::vector<Pkt> out;
  for (size_t i = 0; i < list.size(); i++) {
    Pkt p;
    p.frame = list[i].second;
    EXPECT_EQ(dp::parse_frame(p.frame.data(), uint32_t(p.frame.size()), list[i].first,
                              dp::ParseOptions{}, &p.key, &p.meta),
              dp::DropReason::kNone)
        << "frame " << i;
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace strait::test
