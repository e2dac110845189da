#pragma once
// VXLAN (RFC 7348) on the wire: the outer headers a worker puts in front of
// a tenant frame, and the ARP it speaks on the underlay for its VTEP address.
// Pure byte work on one mbuf; the decisions are the pipeline's.
//
//   outer Ethernet  dst next hop, src our underlay MAC, type IPv4        14
//   outer IPv4      src local_ip, dst the remote VTEP, DF, ttl, proto UDP 20
//   outer UDP       src 49152 + hash(inner flow) % 16384, dst udp_port,
//                   checksum 0 (allowed for IPv4, RFC 7348 section 5)   8
//   VXLAN           flags I, VNI                                          8
//   inner frame     untagged                                            = 50 bytes
#include <cstdint>

#include "dataplane/flow_key.h"
#include "dataplane/snapshot.h"

struct rte_mbuf;
struct rte_mempool;

namespace strait::dp {

inline constexpr uint32_t kVxlanOverhead = 50;        // outer Ethernet + IPv4 + UDP + VXLAN
inline constexpr uint16_t kVxlanSrcPortBase = 49152;  // IANA dynamic range, as Linux uses
inline constexpr uint16_t kVxlanSrcPortRange = 16384;
inline constexpr uint16_t kArpOpRequest = 1;
inline constexpr uint16_t kArpOpReply = 2;

// Hash of an inner frame's flow for the outer UDP source port (ECMP
// entropy): MACs, ethertype, addresses, protocol and ports; nothing that
// changes within a flow (TCP flags, TTL, TOS, the ingress port).
uint32_t vxlan_flow_hash(const FlowKey& inner) noexcept;
inline uint16_t vxlan_src_port(uint32_t flow_hash) noexcept {
  return uint16_t(kVxlanSrcPortBase + flow_hash % kVxlanSrcPortRange);
}

// Fills remote->outer and outer_ip_sum from our VTEP and the remote's
// address and next hop (resolved): done once per snapshot, not per frame.
void vxlan_outer_template(const VtepConfig& vtep, RemoteVtep* remote) noexcept;

// Puts the 50 outer bytes in front of the frame in m (in its headroom, or
// in a header mbuf from `pool` chained in front when there is none): the
// remote's template with this frame's lengths, checksum, source port and
// VNI. Returns the frame to send, or nullptr (no mbuf: m is untouched,
// still the caller's). `remote` must be resolved, its template filled.
rte_mbuf* vxlan_encap(rte_mbuf* m, rte_mempool* pool, const RemoteVtep& remote, uint32_t vni,
                      uint32_t flow_hash) noexcept;

// Rewrites m (whatever it held; single segment afterwards) into a 60-byte
// Ethernet/ARP frame from sender_mac (our underlay MAC, or the remote port's
// for the ARP responder): a request (eth_dst broadcast,
// target MAC zero) or a reply (eth_dst = target_mac). Addresses are IPv4 in
// network order. Returns false when m cannot hold it.
bool arp_build(rte_mbuf* m, uint16_t op, const uint8_t* sender_mac, uint32_t sender_ip,
               const uint8_t* target_mac, uint32_t target_ip) noexcept;

// The index in Snapshot::vteps of the remote VTEP at `ip` (network order),
// kNoPort when none.
uint16_t vtep_index_of(const Snapshot& s, uint32_t ip) noexcept;

// Whether an ARP frame received on `port` is for our VTEP (the pipeline's
// kVtepArp): untagged on the underlay NIC and for local_ip, or any reply
// there when the physnet has no flat network to take it.
bool is_vtep_arp(const Snapshot& snap, const PortEntry& port, const FlowKey& key) noexcept;

// The ARP responder (the pipeline's kArpReply): the remote port a local VM's
// broadcast ARP request in network `net` asks for; null when the network
// does not answer it (not vxlan, responder off or no addresses, not a
// broadcast request, a gratuitous one, an address no FDB entry names).
const ArpEntry* arp_responder_entry(const Network& net, const FlowKey& key) noexcept;

// The addresses of a parsed ARP frame (FlowKey: nw_src = SPA + SHA,
// nw_dst = TPA + THA), IPv4 in network order.
inline uint32_t arp_sender_ip(const FlowKey& k) noexcept {
  uint32_t ip;
  __builtin_memcpy(&ip, k.nw_src, 4);
  return ip;
}
inline uint32_t arp_target_ip(const FlowKey& k) noexcept {
  uint32_t ip;
  __builtin_memcpy(&ip, k.nw_dst, 4);
  return ip;
}
inline const uint8_t* arp_sender_mac(const FlowKey& k) noexcept { return k.nw_src + 4; }

}  // namespace strait::dp
