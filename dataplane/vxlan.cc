// VXLAN encapsulation and the underlay's ARP (vxlan.h).
#include "dataplane/vxlan.h"

#include <rte_arp.h>
#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_hash_crc.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>
#include <rte_vxlan.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace strait::dp {
namespace {

constexpr uint32_t kVxlanFlagI = 0x08000000;  // RFC 7348: the VNI is valid
constexpr uint32_t kArpFrameBytes = 60;       // Ethernet minimum without FCS: padded

struct __attribute__((packed, aligned(2))) OuterHeaders {
  rte_ether_hdr eth;
  rte_ipv4_hdr ip;
  rte_udp_hdr udp;
  rte_vxlan_hdr vxlan;
};
static_assert(sizeof(OuterHeaders) == kVxlanOverhead);

static_assert(sizeof(RemoteVtep::outer) == sizeof(OuterHeaders));

// The remote's template, then what differs per frame. The IPv4 checksum is
// the template's sum plus the total length, folded (the other fields it
// covers are in the template and do not change).
void write_outer(uint8_t* at, uint32_t inner_len, const RemoteVtep& remote, uint32_t vni,
                 uint32_t flow_hash) noexcept {
  std::memcpy(at, remote.outer, kVxlanOverhead);
  auto* h = reinterpret_cast<OuterHeaders*>(at);
  const uint32_t l3_len = kVxlanOverhead - sizeof(rte_ether_hdr) + inner_len;
  h->ip.total_length = rte_cpu_to_be_16(uint16_t(l3_len));
  const uint16_t sum = __rte_raw_cksum_reduce(remote.outer_ip_sum + h->ip.total_length);
  h->ip.hdr_checksum = sum == 0xffff ? sum : uint16_t(~sum);  // as rte_ipv4_cksum
  h->udp.src_port = rte_cpu_to_be_16(vxlan_src_port(flow_hash));
  h->udp.dgram_len = rte_cpu_to_be_16(uint16_t(l3_len - sizeof(rte_ipv4_hdr)));
  h->vxlan.vx_vni = rte_cpu_to_be_32(vni << 8);
}

}  // namespace

void vxlan_outer_template(const VtepConfig& vtep, RemoteVtep* remote) noexcept {
  OuterHeaders h{};
  std::memcpy(&h.eth.dst_addr, remote->next_hop_mac, RTE_ETHER_ADDR_LEN);
  std::memcpy(&h.eth.src_addr, vtep.mac, RTE_ETHER_ADDR_LEN);
  h.eth.ether_type = rte_cpu_to_be_16(kEthTypeIpv4);
  h.ip.version_ihl = RTE_IPV4_VHL_DEF;
  h.ip.fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
  h.ip.time_to_live = vtep.ttl;
  h.ip.next_proto_id = kIpProtoUdp;
  h.ip.src_addr = vtep.local_ip;
  h.ip.dst_addr = remote->ip;
  h.udp.dst_port = rte_cpu_to_be_16(vtep.udp_port);  // checksum 0: none (RFC 7348 5)
  h.vxlan.vx_flags = rte_cpu_to_be_32(kVxlanFlagI);
  std::memcpy(remote->outer, &h, sizeof h);
  remote->outer_ip_sum = __rte_raw_cksum(&h.ip, sizeof h.ip, 0);
}

// Per frame: seven crc32q over whole words of the key in three independent
// chains (rte_hash_crc over the byte ranges took twice as long), the bytes
// that may change within a flow masked out.
uint32_t vxlan_flow_hash(const FlowKey& k) noexcept {
  static_assert(offsetof(FlowKey, dl_type) == 2 && offsetof(FlowKey, dl_src) == 10 &&
                offsetof(FlowKey, nw_src) == 40 && offsetof(FlowKey, nw_dst) == 56 &&
                offsetof(FlowKey, nw_proto) == 72 && offsetof(FlowKey, tp_src) == 76 &&
                offsetof(FlowKey, tp_dst) == 78);
  const auto* p = reinterpret_cast<const uint8_t*>(&k);
  auto word = [p](size_t at) {
    uint64_t w;
    std::memcpy(&w, p + at, sizeof w);
    return w;
  };
  constexpr uint64_t kNotInPort = ~uint64_t{0xffff};         // bytes 0-1: in_port
  constexpr uint64_t kProtoPorts = 0xffffffff000000ffULL;    // nw_proto, tp_src, tp_dst
  uint32_t a = rte_hash_crc_8byte(word(0) & kNotInPort, 0);  // dl_type, dl_dst
  uint32_t b = rte_hash_crc_8byte(word(40), 1);              // nw_src
  uint32_t c = rte_hash_crc_8byte(word(56), 2);              // nw_dst
  a = rte_hash_crc_8byte(word(8), a);                        // dl_dst, dl_src
  b = rte_hash_crc_8byte(word(48), b);
  c = rte_hash_crc_8byte(word(64), c);
  a = rte_hash_crc_8byte(word(72) & kProtoPorts, a);
  return rte_hash_crc_8byte((uint64_t(b) << 32) | c, a);
}

rte_mbuf* vxlan_encap(rte_mbuf* m, rte_mempool* pool, const RemoteVtep& remote, uint32_t vni,
                      uint32_t flow_hash) noexcept {
  const uint32_t inner_len = rte_pktmbuf_pkt_len(m);
  if (char* at = rte_pktmbuf_prepend(m, kVxlanOverhead)) {
    write_outer(reinterpret_cast<uint8_t*>(at), inner_len, remote, vni, flow_hash);
    return m;
  }
  // No headroom (an mbuf from elsewhere): the headers in a segment of their own.
  rte_mbuf* h = pool ? rte_pktmbuf_alloc(pool) : nullptr;
  if (!h) return nullptr;
  char* at = rte_pktmbuf_append(h, kVxlanOverhead);
  if (!at || rte_pktmbuf_chain(h, m) != 0) {
    rte_pktmbuf_free(h);
    return nullptr;
  }
  write_outer(reinterpret_cast<uint8_t*>(at), inner_len, remote, vni, flow_hash);
  return h;
}

bool arp_build(rte_mbuf* m, uint16_t op, const uint8_t* sender_mac, uint32_t sender_ip,
               const uint8_t* target_mac, uint32_t target_ip) noexcept {
  if (m->next) {
    rte_pktmbuf_free(m->next);
    m->next = nullptr;
  }
  rte_pktmbuf_reset(m);
  char* at = rte_pktmbuf_append(m, kArpFrameBytes);
  if (!at) return false;
  std::memset(at, 0, kArpFrameBytes);
  auto* eth = reinterpret_cast<rte_ether_hdr*>(at);
  auto* arp = reinterpret_cast<rte_arp_hdr*>(at + sizeof(rte_ether_hdr));
  const bool request = op == kArpOpRequest;
  if (request)
    std::memset(&eth->dst_addr, 0xff, RTE_ETHER_ADDR_LEN);
  else
    std::memcpy(&eth->dst_addr, target_mac, RTE_ETHER_ADDR_LEN);
  std::memcpy(&eth->src_addr, sender_mac, RTE_ETHER_ADDR_LEN);
  eth->ether_type = rte_cpu_to_be_16(kEthTypeArp);
  arp->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
  arp->arp_protocol = rte_cpu_to_be_16(kEthTypeIpv4);
  arp->arp_hlen = RTE_ETHER_ADDR_LEN;
  arp->arp_plen = sizeof(uint32_t);
  arp->arp_opcode = rte_cpu_to_be_16(op);
  std::memcpy(&arp->arp_data.arp_sha, sender_mac, RTE_ETHER_ADDR_LEN);
  arp->arp_data.arp_sip = sender_ip;
  if (!request) std::memcpy(&arp->arp_data.arp_tha, target_mac, RTE_ETHER_ADDR_LEN);
  arp->arp_data.arp_tip = target_ip;
  return true;
}

uint16_t vtep_index_of(const Snapshot& s, uint32_t ip) noexcept {
  for (size_t i = 0; i < s.vteps.size(); i++)
    if (s.vteps[i].present && s.vteps[i].ip == ip) return uint16_t(i);
  return kNoPort;
}

bool is_vtep_arp(const Snapshot& snap, const PortEntry& port, const FlowKey& key) noexcept {
  const VtepConfig& v = snap.vtep;
  if (!v.enabled || key.in_port != v.uplink || key.n_tags != 0 || key.dl_type != kEthTypeArp)
    return false;
  if (arp_target_ip(key) == v.local_ip) return true;
  // Other replies are ours too when no flat network of the physnet could
  // want them (a gratuitous reply of the next hop).
  return key.nw_proto == kArpOpReply && port.role == PortRole::kUplink &&
         snap.uplinks[port.uplink_map].flat_lvlan == 0;
}

const ArpEntry* arp_responder_entry(const Network& net, const FlowKey& key) noexcept {
  static constexpr uint8_t kBroadcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  if (net.type != NetType::kVxlan || net.arp.empty() || key.dl_type != kEthTypeArp ||
      key.nw_proto != kArpOpRequest || std::memcmp(key.dl_dst, kBroadcast, 6) != 0)
    return nullptr;
  const uint32_t ip = arp_target_ip(key);
  // A gratuitous request announces the sender to everyone: flooded as before.
  if (ip == arp_sender_ip(key)) return nullptr;
  auto it = std::lower_bound(net.arp.begin(), net.arp.end(), ip,
                             [](const ArpEntry& e, uint32_t v) { return e.ip < v; });
  return it != net.arp.end() && it->ip == ip ? &*it : nullptr;
}

}  // namespace strait::dp
