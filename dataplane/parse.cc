// The one frame parser (parse.h).
//
//   parse_frame ─► parse_l2_up: Ethernet, tags ─► ARP | IPv4 | IPv6 + ext ─► TCP | UDP | ICMP
//               └► VXLAN to opts.vxlan_port, outer frame untagged: parse_l2_up again on
//                  the inner frame, same key
//
// Every header is read through Cursor::skip, which refuses to step past
// `end`; headers are copied out with memcpy because a frame may sit at any
// alignment (and the inner frame of a VXLAN packet usually sits at an odd one).
#include "dataplane/parse.h"

#include <rte_arp.h>
#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_tcp.h>
#include <rte_udp.h>
#include <rte_vxlan.h>

#include <cstddef>
#include <cstring>

namespace strait::dp {
namespace {

constexpr uint8_t kMaxVlanTags = 2;
constexpr uint32_t kMaxIpv6ExtHeaders = 8;
// ICMP and ICMPv6 share type, code and checksum; the rest depends on the type.
constexpr uint32_t kIcmpHeaderBytes = 4;
constexpr uint8_t kVxlanFlagI = 0x08;  // RFC 7348: the VNI is valid

constexpr uint8_t kIpv6HopByHop = 0;
constexpr uint8_t kIpv6Routing = 43;
constexpr uint8_t kIpv6Fragment = 44;
constexpr uint8_t kIpv6Ah = 51;
constexpr uint8_t kIpv6DestOpts = 60;

// The bytes still to parse: [ofs, end) of the buffer that starts at `base`.
// Offsets stay relative to the outer buffer, also inside a VXLAN payload.
// `end` shrinks to the IP packet's own end, so Ethernet padding is never
// taken for a header. Headers are read only below `contiguous` (the first
// mbuf segment): in a chained frame `end` lies beyond it, in payload that is
// never read.
struct Cursor {
  const uint8_t* base;
  uint32_t ofs;
  uint32_t end;
  uint32_t contiguous;

  uint32_t left() const noexcept { return end - ofs; }
  // The one bounds check (OVS data_try_pull): consumes n bytes, or nothing
  // and returns false when fewer remain.
  bool skip(uint32_t n) noexcept {
    if (left() < n) return false;
    ofs += n;
    return true;
  }
  // Copies the next header out and consumes it; false when it is cut short.
  template <typename Hdr>
  bool pull(Hdr* h) noexcept {
    const uint8_t* p = base + ofs;
    if (ofs > contiguous || contiguous - ofs < sizeof(Hdr)) return false;
    if (!skip(sizeof(Hdr))) return false;
    std::memcpy(h, p, sizeof(Hdr));
    return true;
  }
};

inline uint16_t be16(rte_be16_t v) noexcept { return rte_be_to_cpu_16(v); }

// Zeroes a key with five 16-byte stores and one 8-byte store. memset() of
// the 88 bytes compiles to `rep stosq` under DPDK's -march=corei7, which
// costs ~30 cycles to start on current cores: once per frame.
inline void zero_key(FlowKey* key) noexcept {
  // Five 16-byte stores and one of 8. Through memcpy, which promises no
  // alignment: a FlowKey is 8-aligned, and clang turns a store through a
  // 16-byte vector type into movaps, which faults on a key at 8 mod 16
  // (found by tests/fuzz/parse_fuzz.cc; ParseTest.KeyAtEightModSixteenParses).
  using V16 = uint8_t __attribute__((vector_size(16)));
  static_assert(sizeof(FlowKey) == 5 * 16 + 8 && alignof(FlowKey) == 8);
  auto* p = reinterpret_cast<uint8_t*>(key);
  const V16 zero16{};
  for (int i = 0; i < 5; i++) std::memcpy(p + 16 * i, &zero16, sizeof zero16);
  const uint64_t zero = 0;
  std::memcpy(p + 80, &zero, sizeof zero);
}

// A key and meta as parsing starts: zeroed whole (the flow cache hashes and
// compares raw bytes, padding included), the ingress port set.
inline void start_key(FlowKey* key, uint16_t in_port, PacketMeta* meta) noexcept {
  zero_key(key);
  key->in_port = in_port;
  *meta = PacketMeta{};
}

inline bool is_vlan_tpid(uint16_t type) noexcept {
  return type == kEthTypeVlan || type == kEthTypeQinQ || type == kEthTypeQinQOld;
}

DropReason parse_ethernet(Cursor& c, FlowKey* key, PacketMeta* meta) noexcept {
  rte_ether_hdr eth;
  if (!c.pull(&eth)) return DropReason::kRuntFrame;
  std::memcpy(key->dl_dst, &eth.dst_addr, RTE_ETHER_ADDR_LEN);
  std::memcpy(key->dl_src, &eth.src_addr, RTE_ETHER_ADDR_LEN);
  uint16_t type = be16(eth.ether_type);
  while (is_vlan_tpid(type)) {
    if (key->n_tags == kMaxVlanTags) return DropReason::kTooManyTags;
    rte_vlan_hdr tag;
    if (!c.pull(&tag)) return DropReason::kVlanTruncated;
    if (key->n_tags == 0) {
      key->vlan_tpid = type;
      key->vlan_tci = be16(tag.vlan_tci);
    } else {
      key->inner_tci = be16(tag.vlan_tci);
    }
    key->n_tags++;
    type = be16(tag.eth_proto);
  }
  key->dl_type = type;
  meta->l2_len = sizeof(rte_ether_hdr) + sizeof(rte_vlan_hdr) * key->n_tags;
  return DropReason::kNone;
}

DropReason parse_arp(Cursor& c, FlowKey* key) noexcept {
  rte_arp_hdr arp;
  if (!c.pull(&arp) || be16(arp.arp_hardware) != RTE_ARP_HRD_ETHER ||
      be16(arp.arp_protocol) != kEthTypeIpv4 || arp.arp_hlen != RTE_ETHER_ADDR_LEN ||
      arp.arp_plen != sizeof(uint32_t)) {
    return DropReason::kArpMalformed;
  }
  const rte_arp_ipv4& a = arp.arp_data;
  key->nw_proto = static_cast<uint8_t>(be16(arp.arp_opcode));
  std::memcpy(key->nw_src, &a.arp_sip, 4);
  std::memcpy(key->nw_src + 4, &a.arp_sha, RTE_ETHER_ADDR_LEN);
  std::memcpy(key->nw_dst, &a.arp_tip, 4);
  std::memcpy(key->nw_dst + 4, &a.arp_tha, RTE_ETHER_ADDR_LEN);
  return DropReason::kNone;
}

DropReason parse_ipv4(Cursor& c, FlowKey* key) noexcept {
  const uint32_t l3 = c.ofs;
  rte_ipv4_hdr ip;
  if (!c.pull(&ip)) return DropReason::kIpv4Truncated;
  if ((ip.version_ihl >> 4) != 4) return DropReason::kIpv4BadVersion;
  const uint32_t hdr_len = (ip.version_ihl & RTE_IPV4_HDR_IHL_MASK) * RTE_IPV4_IHL_MULTIPLIER;
  if (hdr_len < sizeof(rte_ipv4_hdr)) return DropReason::kIpv4BadIhl;
  if (!c.skip(hdr_len - sizeof(rte_ipv4_hdr))) return DropReason::kIpv4Truncated;  // options
  const uint32_t total_len = be16(ip.total_length);
  if (total_len < hdr_len) return DropReason::kIpv4BadLength;
  if (total_len > c.end - l3) return DropReason::kIpv4Truncated;
  c.end = l3 + total_len;  // anything after is Ethernet padding

  key->nw_proto = ip.next_proto_id;
  key->nw_tos = ip.type_of_service;
  key->nw_ttl = ip.time_to_live;
  std::memcpy(key->nw_src, &ip.src_addr, sizeof(ip.src_addr));
  std::memcpy(key->nw_dst, &ip.dst_addr, sizeof(ip.dst_addr));
  const uint16_t frag = be16(ip.fragment_offset);
  if (frag & RTE_IPV4_HDR_OFFSET_MASK) {
    key->nw_frag = kFragLater;
  } else if (frag & RTE_IPV4_HDR_MF_FLAG) {
    key->nw_frag = kFragFirst;
  }
  return DropReason::kNone;
}

// Hop-by-hop, routing, destination options and AH: skipped by their length.
bool skip_ipv6_ext_header(Cursor& c, uint8_t type, uint8_t* next) noexcept {
  struct ExtHeaderStart {
    uint8_t next_header;
    uint8_t len;
  } h;
  const uint32_t start = c.ofs;
  if (!c.pull(&h)) return false;
  // AH counts 4-byte units minus 2 (RFC 4302), the others 8-byte units minus 1.
  const uint32_t len = type == kIpv6Ah ? (h.len + 2u) * 4u : (h.len + 1u) * 8u;
  *next = h.next_header;
  return c.skip(len - (c.ofs - start));
}

// Walks the extension headers to the upper-layer protocol. Stops early at a
// later fragment (its payload has no L4 header), ESP (encrypted) and No Next
// Header: each leaves its own protocol number in nw_proto.
DropReason parse_ipv6_ext_headers(Cursor& c, uint8_t next, FlowKey* key) noexcept {
  for (uint32_t n = 0;; ++n) {
    const bool is_ext = next == kIpv6HopByHop || next == kIpv6Routing || next == kIpv6DestOpts ||
                        next == kIpv6Ah || next == kIpv6Fragment;
    if (!is_ext) break;
    if (n == kMaxIpv6ExtHeaders) return DropReason::kIpv6ExtChain;
    if (next != kIpv6Fragment) {
      if (!skip_ipv6_ext_header(c, next, &next)) return DropReason::kIpv6ExtChain;
      continue;
    }
    rte_ipv6_fragment_ext frag;
    if (!c.pull(&frag)) return DropReason::kIpv6ExtChain;
    const uint16_t frag_data = be16(frag.frag_data);
    next = frag.next_header;
    if (RTE_IPV6_GET_FO(frag_data) != 0) {
      key->nw_frag = kFragLater;
      break;
    }
    if (RTE_IPV6_GET_MF(frag_data)) key->nw_frag = kFragFirst;
  }
  key->nw_proto = next;
  return DropReason::kNone;
}

DropReason parse_ipv6(Cursor& c, FlowKey* key) noexcept {
  rte_ipv6_hdr ip;
  if (!c.pull(&ip)) return DropReason::kIpv6Truncated;
  const uint32_t vtc_flow = rte_be_to_cpu_32(ip.vtc_flow);
  if ((vtc_flow >> 28) != 6) return DropReason::kIpv6BadVersion;
  const uint32_t payload_len = be16(ip.payload_len);
  if (payload_len > c.left()) return DropReason::kIpv6Truncated;
  c.end = c.ofs + payload_len;  // anything after is Ethernet padding

  key->nw_tos = static_cast<uint8_t>(vtc_flow >> RTE_IPV6_HDR_TC_SHIFT);
  key->nw_ttl = ip.hop_limits;
  std::memcpy(key->nw_src, ip.src_addr, sizeof(ip.src_addr));
  std::memcpy(key->nw_dst, ip.dst_addr, sizeof(ip.dst_addr));
  return parse_ipv6_ext_headers(c, ip.proto, key);
}

DropReason parse_tcp(Cursor& c, FlowKey* key) noexcept {
  const uint32_t avail = c.left();
  rte_tcp_hdr tcp;
  if (!c.pull(&tcp)) return DropReason::kL4Truncated;
  const uint32_t hdr_len = (tcp.data_off >> 4) * 4u;
  if (hdr_len < sizeof(rte_tcp_hdr) || hdr_len > avail) return DropReason::kTcpBadOffset;
  key->tp_src = be16(tcp.src_port);
  key->tp_dst = be16(tcp.dst_port);
  key->tcp_flags = tcp.tcp_flags;
  return DropReason::kNone;
}

DropReason parse_udp(Cursor& c, FlowKey* key) noexcept {
  rte_udp_hdr udp;
  if (!c.pull(&udp)) return DropReason::kL4Truncated;
  key->tp_src = be16(udp.src_port);
  key->tp_dst = be16(udp.dst_port);
  return DropReason::kNone;
}

DropReason parse_icmp(Cursor& c, FlowKey* key) noexcept {
  uint8_t icmp[kIcmpHeaderBytes];
  if (!c.pull(&icmp)) return DropReason::kL4Truncated;
  key->tp_src = icmp[0];  // type
  key->tp_dst = icmp[1];  // code
  return DropReason::kNone;
}

// Leaves `c` just past the L4 header: at the UDP payload for VXLAN.
DropReason parse_l4(Cursor& c, FlowKey* key, PacketMeta* meta) noexcept {
  if (key->nw_frag == kFragLater) return DropReason::kNone;
  const uint8_t icmp = key->dl_type == kEthTypeIpv6 ? kIpProtoIcmpv6 : kIpProtoIcmp;
  const uint32_t l4 = c.ofs;
  DropReason r;
  if (key->nw_proto == kIpProtoTcp) {
    r = parse_tcp(c, key);
  } else if (key->nw_proto == kIpProtoUdp) {
    r = parse_udp(c, key);
  } else if (key->nw_proto == icmp) {
    r = parse_icmp(c, key);
  } else {
    return DropReason::kNone;
  }
  if (r == DropReason::kNone) meta->l4_ofs = static_cast<uint16_t>(l4);
  return r;
}

// Parses one Ethernet frame starting at c.ofs, down to L4. Any other
// ethertype is not an error: the key then holds only L2 and l3_ofs stays 0.
DropReason parse_l2_up(Cursor& c, FlowKey* key, PacketMeta* meta) noexcept {
  if (DropReason r = parse_ethernet(c, key, meta); r != DropReason::kNone) return r;
  const uint32_t l3 = c.ofs;
  DropReason r;
  switch (key->dl_type) {
    case kEthTypeArp:
      meta->l3_ofs = static_cast<uint16_t>(l3);
      return parse_arp(c, key);
    case kEthTypeIpv4:
      r = parse_ipv4(c, key);
      break;
    case kEthTypeIpv6:
      r = parse_ipv6(c, key);
      break;
    default:
      return DropReason::kNone;
  }
  if (r != DropReason::kNone) return r;
  meta->l3_ofs = static_cast<uint16_t>(l3);
  return parse_l4(c, key, meta);
}

// The underlay is untagged: a tagged frame to the VXLAN port is some
// provider network's UDP, not ours to decode.
bool is_vxlan(const FlowKey& key, const ParseOptions& opts) noexcept {
  return opts.vxlan_port != 0 && key.n_tags == 0 && key.dl_type == kEthTypeIpv4 &&
         key.nw_proto == kIpProtoUdp && key.nw_frag == kFragNone &&
         key.tp_dst == opts.vxlan_port;
}

// `c` is at the outer UDP payload. The key is restarted for the inner frame:
// only in_port and the tun_* fields survive from the outer headers. The inner
// frame is never decoded as VXLAN again (one level only).
DropReason parse_vxlan(Cursor& c, FlowKey* key, PacketMeta* meta) noexcept {
  rte_vxlan_hdr vx;
  if (!c.pull(&vx) || !((rte_be_to_cpu_32(vx.vx_flags) >> 24) & kVxlanFlagI)) {
    return DropReason::kVxlanMalformed;
  }
  const uint16_t in_port = key->in_port;
  const uint16_t dport = key->tp_dst;
  uint32_t tun_src;
  uint32_t tun_dst;
  std::memcpy(&tun_src, key->nw_src, sizeof(tun_src));
  std::memcpy(&tun_dst, key->nw_dst, sizeof(tun_dst));

  start_key(key, in_port, meta);
  key->tun_vni = rte_be_to_cpu_32(vx.vx_vni) >> 8;
  key->tun_src = tun_src;
  key->tun_dst = tun_dst;
  key->tun_dport = dport;
  key->tun_flags = kTunValid;
  meta->inner_ofs = static_cast<uint16_t>(c.ofs);
  return parse_l2_up(c, key, meta);
}

// The frames nearly all traffic is: untagged IPv4 without options, TCP or
// UDP (not to the VXLAN port), not a fragment, every header in the first
// segment (`len` bytes) and inside the IP packet and the frame (`end`
// bytes). One length check, then straight-line reads into the zeroed key.
// False, with nothing but the key's zeroed bytes written, for any other
// frame or anything amiss with this one: the general parser then decides it,
// drop reason included. parse_test checks that both agree on every frame.
[[gnu::always_inline]] inline bool parse_common(const uint8_t* d, uint32_t len, uint32_t end,
                                                const ParseOptions& opts, FlowKey* key,
                                                PacketMeta* meta) noexcept {
  constexpr uint32_t kL3 = sizeof(rte_ether_hdr);
  constexpr uint32_t kL4 = kL3 + sizeof(rte_ipv4_hdr);
  if (len < kL4 + sizeof(rte_udp_hdr)) return false;
  uint16_t type, total_be, frag_be;
  std::memcpy(&type, d + offsetof(rte_ether_hdr, ether_type), 2);
  const uint8_t* ip = d + kL3;
  std::memcpy(&total_be, ip + offsetof(rte_ipv4_hdr, total_length), 2);
  std::memcpy(&frag_be, ip + offsetof(rte_ipv4_hdr, fragment_offset), 2);
  const uint32_t total = be16(total_be);
  if (type != RTE_BE16(kEthTypeIpv4) || ip[0] != 0x45 || total < sizeof(rte_ipv4_hdr) ||
      total > end - kL3 || (be16(frag_be) & (RTE_IPV4_HDR_OFFSET_MASK | RTE_IPV4_HDR_MF_FLAG)))
    return false;
  const uint8_t proto = ip[offsetof(rte_ipv4_hdr, next_proto_id)];
  const uint32_t l4_left = total - sizeof(rte_ipv4_hdr);  // the IP payload's bytes
  const uint8_t* l4 = d + kL4;
  uint16_t sport, dport;
  std::memcpy(&sport, l4, 2);
  std::memcpy(&dport, l4 + 2, 2);
  if (proto == kIpProtoUdp) {
    if (l4_left < sizeof(rte_udp_hdr) || (opts.vxlan_port != 0 && be16(dport) == opts.vxlan_port))
      return false;
  } else if (proto == kIpProtoTcp) {
    if (len < kL4 + sizeof(rte_tcp_hdr) || l4_left < sizeof(rte_tcp_hdr)) return false;
    const uint32_t hdr_len = (l4[offsetof(rte_tcp_hdr, data_off)] >> 4) * 4u;
    if (hdr_len < sizeof(rte_tcp_hdr) || hdr_len > l4_left) return false;
    key->tcp_flags = l4[offsetof(rte_tcp_hdr, tcp_flags)];
  } else {
    return false;
  }
  std::memcpy(key->dl_dst, d, 2 * RTE_ETHER_ADDR_LEN);  // dl_dst, dl_src
  key->dl_type = kEthTypeIpv4;
  key->nw_proto = proto;
  key->nw_tos = ip[offsetof(rte_ipv4_hdr, type_of_service)];
  key->nw_ttl = ip[offsetof(rte_ipv4_hdr, time_to_live)];
  std::memcpy(key->nw_src, ip + offsetof(rte_ipv4_hdr, src_addr), 4);
  std::memcpy(key->nw_dst, ip + offsetof(rte_ipv4_hdr, dst_addr), 4);
  key->tp_src = be16(sport);
  key->tp_dst = be16(dport);
  meta->l2_len = kL3;
  meta->l3_ofs = kL3;
  meta->l4_ofs = kL4;
  return true;
}
static_assert(offsetof(FlowKey, dl_src) == offsetof(FlowKey, dl_dst) + RTE_ETHER_ADDR_LEN);

// Every frame, header by header; the key zeroed but for in_port, the meta
// zeroed. `end`: the frame's length, at least `len`.
DropReason parse_general(const uint8_t* data, uint32_t len, uint32_t end,
                         const ParseOptions& opts, FlowKey* key, PacketMeta* meta) noexcept {
  Cursor c{data, 0, end, len};
  DropReason r = parse_l2_up(c, key, meta);
  if (r != DropReason::kNone || !is_vxlan(*key, opts)) return r;
  return parse_vxlan(c, key, meta);
}

}  // namespace

DropReason parse_frame(const uint8_t* data, uint32_t len, uint16_t in_port,
                       const ParseOptions& opts, FlowKey* key, PacketMeta* meta) noexcept {
  return parse_frame(data, len, len, in_port, opts, key, meta);
}

DropReason parse_frame(const uint8_t* data, uint32_t len, uint32_t frame_len, uint16_t in_port,
                       const ParseOptions& opts, FlowKey* key, PacketMeta* meta) noexcept {
  start_key(key, in_port, meta);  // parse_common writes into a started key
  const uint32_t end = frame_len < len ? len : frame_len;
  if (parse_common(data, len, end, opts, key, meta)) return DropReason::kNone;
  return parse_general(data, len, end, opts, key, meta);
}

DropReason detail::parse_frame_general(const uint8_t* data, uint32_t len, uint32_t frame_len,
                                       uint16_t in_port, const ParseOptions& opts, FlowKey* key,
                                       PacketMeta* meta) noexcept {
  start_key(key, in_port, meta);
  return parse_general(data, len, frame_len < len ? len : frame_len, opts, key, meta);
}

}  // namespace strait::dp
