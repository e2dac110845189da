#pragma once
// The fixed-layout key of one frame. Only the parser (parse.h) writes it;
// the flow cache hashes and compares it, the pipeline decides on it.
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace strait::dp {

inline constexpr uint16_t kEthTypeIpv4 = 0x0800;
inline constexpr uint16_t kEthTypeArp = 0x0806;
inline constexpr uint16_t kEthTypeVlan = 0x8100;  // 802.1Q C-tag
inline constexpr uint16_t kEthTypeQinQ = 0x88a8;  // 802.1ad S-tag
inline constexpr uint16_t kEthTypeQinQOld = 0x9100;
inline constexpr uint16_t kEthTypeIpv6 = 0x86dd;

inline constexpr uint8_t kIpProtoIcmp = 1;
inline constexpr uint8_t kIpProtoTcp = 6;
inline constexpr uint8_t kIpProtoUdp = 17;
inline constexpr uint8_t kIpProtoIcmpv6 = 58;

// nw_frag values.
inline constexpr uint8_t kFragNone = 0;
inline constexpr uint8_t kFragFirst = 1;  // offset 0, more fragments follow
inline constexpr uint8_t kFragLater = 2;  // offset > 0: no L4 header here

// tun_flags bits.
inline constexpr uint8_t kTunValid = 1;  // VXLAN decoded: L2..L4 below describe the inner frame

inline bool mac_is_multicast(const uint8_t* mac) { return mac[0] & 1; }
inline bool mac_is_zero(const uint8_t* mac) {
  return (mac[0] | mac[1] | mac[2] | mac[3] | mac[4] | mac[5]) == 0;
}
inline uint64_t mac_to_u64(const uint8_t* mac) {
  return (uint64_t(mac[0]) << 40) | (uint64_t(mac[1]) << 32) | (uint64_t(mac[2]) << 24) |
         (uint64_t(mac[3]) << 16) | (uint64_t(mac[4]) << 8) | uint64_t(mac[5]);
}

// All multi-byte integer fields are host order unless marked otherwise.
// The L2 part comes first: ports whose decisions depend on L2 alone hash and
// compare only the first kL2KeyBytes (FlowCache), so L3/L4 variety of their
// traffic does not multiply cache entries.
struct alignas(8) FlowKey {
  // ---- L2 scope ------------------------------------------------------
  uint16_t in_port;    // datapath port index (Snapshot::ports), not an ethdev id
  uint16_t dl_type;    // ethertype after all VLAN tags
  uint8_t dl_dst[6];
  uint8_t dl_src[6];
  uint16_t vlan_tci;   // outer tag's TCI (PCP, DEI, VID); 0 when untagged
  uint16_t vlan_tpid;  // outer tag's TPID (0x8100, 0x88a8, 0x9100); 0 when untagged
  uint16_t inner_tci;  // second tag's TCI when double tagged
  uint8_t n_tags;      // VLAN tags present (0..2)
  uint8_t pad0;
  // ---- tunnel: outer headers when VXLAN was decoded --------------------
  uint32_t tun_vni;    // 24-bit VNI
  uint32_t tun_src;    // outer IPv4 source, network order
  uint32_t tun_dst;    // outer IPv4 destination, network order
  uint16_t tun_dport;  // outer UDP destination port
  uint8_t tun_flags;   // kTunValid
  uint8_t pad1;
  // ---- L3 / L4 -------------------------------------------------------
  // IPv4: first 4 bytes, network order, the rest zero. ARP: nw_src = SPA
  // (bytes 0..3) + SHA (bytes 4..9), nw_dst = TPA + THA.
  uint8_t nw_src[16];
  uint8_t nw_dst[16];
  uint8_t nw_proto;    // IP protocol / IPv6 upper-layer header; ARP: opcode
  uint8_t nw_frag;     // kFragNone / kFragFirst / kFragLater
  uint8_t nw_tos;      // DSCP+ECN (IPv4 TOS, IPv6 traffic class)
  uint8_t nw_ttl;      // TTL / hop limit
  uint16_t tp_src;     // TCP/UDP source port; ICMP/ICMPv6 type
  uint16_t tp_dst;     // TCP/UDP destination port; ICMP/ICMPv6 code
  uint8_t tcp_flags;   // FIN SYN RST PSH ACK URG ECE CWR (low 8 bits)
  uint8_t pad2[3];
};

inline constexpr uint32_t kL2KeyBytes = 24;
inline constexpr uint32_t kFullKeyBytes = 88;
static_assert(sizeof(FlowKey) == kFullKeyBytes, "FlowKey layout is part of the cache format");
static_assert(offsetof(FlowKey, tun_vni) == kL2KeyBytes, "L2 scope must be a prefix");

// Whether two keys have the same destination and source MAC (12 bytes).
inline bool same_macs(const FlowKey& a, const FlowKey& b) {
  static_assert(offsetof(FlowKey, dl_src) == offsetof(FlowKey, dl_dst) + 6);
  const auto* pa = reinterpret_cast<const uint8_t*>(&a) + offsetof(FlowKey, dl_dst);
  const auto* pb = reinterpret_cast<const uint8_t*>(&b) + offsetof(FlowKey, dl_dst);
  uint64_t a8, b8;
  uint32_t a4, b4;
  std::memcpy(&a8, pa, 8);
  std::memcpy(&b8, pb, 8);
  std::memcpy(&a4, pa + 8, 4);
  std::memcpy(&b4, pb + 8, 4);
  return ((a8 ^ b8) | (a4 ^ b4)) == 0;
}

// Per-packet facts the parser found that are not part of the key (they do
// not change the decision, only how actions touch the bytes).
struct PacketMeta {
  uint16_t l2_len;     // Ethernet header + tags of the frame the key describes
  uint16_t l3_ofs;     // offset of the IP/ARP header from the start of the buffer
  uint16_t l4_ofs;     // offset of the L4 header, 0 when none
  uint16_t inner_ofs;  // offset of the inner Ethernet header when VXLAN decoded, else 0
};

}  // namespace strait::dp
