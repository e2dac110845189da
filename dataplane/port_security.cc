// Port security: anti-spoofing and the always-allowed / always-dropped
// traffic of a VM port (port_security.h has the list this follows).
#include "dataplane/port_security.h"

#include <algorithm>
#include <cstring>

namespace strait::dp {
namespace {

constexpr uint16_t kDhcpv4Server = 67, kDhcpv4Client = 68;
constexpr uint16_t kDhcpv6Client = 546, kDhcpv6Server = 547;

// ICMPv6 types (RFC 4443, 4861, 2710, 3810).
constexpr uint8_t kMldQuery = 130, kMldReport = 131, kMldDone = 132, kMldv2Report = 143;
constexpr uint8_t kNdRs = 133, kNdRa = 134, kNdNs = 135, kNdNa = 136;

bool is_mld(uint8_t type) {
  return type == kMldQuery || type == kMldReport || type == kMldDone || type == kMldv2Report;
}

// The parser puts ports (TCP/UDP) or type/code (ICMP) in tp_*; a later
// fragment has neither, so it must never match by them.
bool has_l4(const FlowKey& k) { return k.nw_frag != kFragLater; }
bool is_udp(const FlowKey& k, uint16_t sport, uint16_t dport) {
  return k.nw_proto == kIpProtoUdp && has_l4(k) && k.tp_src == sport && k.tp_dst == dport;
}
bool is_udp_from(const FlowKey& k, uint16_t sport) {
  return k.nw_proto == kIpProtoUdp && has_l4(k) && k.tp_src == sport;
}
// The ICMPv6 type, or -1 when the frame is not ICMPv6 with a header.
int icmpv6_type(const FlowKey& k) {
  return k.nw_proto == kIpProtoIcmpv6 && has_l4(k) ? int(k.tp_src) : -1;
}

// Whether addr (network order, 4 or 16 bytes by family) lies in p.
bool prefix_contains(const SgPrefix& p, SgFamily family, const uint8_t* addr) {
  if (p.family != family) return false;
  const unsigned len = std::min<unsigned>(p.len, sg_max_len(family));
  const unsigned bytes = len / 8, bits = len % 8;
  if (std::memcmp(p.addr.data(), addr, bytes) != 0) return false;
  if (bits == 0) return true;
  const uint8_t mask = uint8_t(0xff << (8 - bits));
  return ((p.addr[bytes] ^ addr[bytes]) & mask) == 0;
}

bool source_allowed(const PortSecurity& sec, uint64_t mac, SgFamily family, const uint8_t* addr) {
  for (const AllowedSource& s : sec.sources)
    if (s.mac == mac && prefix_contains(s.prefix, family, addr)) return true;
  return false;
}

bool is_zero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i]) return false;
  return true;
}

DropReason spoof_check_arp(const PortSecurity& sec, uint64_t mac, const FlowKey& key) {
  const uint8_t* spa = key.nw_src;      // sender protocol address
  const uint8_t* sha = key.nw_src + 4;  // sender hardware address
  if (std::memcmp(sha, key.dl_src, 6) != 0) return DropReason::kSpoofedArp;
  if (is_zero(spa, 4)) return DropReason::kNone;  // ARP probe (RFC 5227)
  return source_allowed(sec, mac, SgFamily::kIpv4, spa) ? DropReason::kNone
                                                        : DropReason::kSpoofedArp;
}

}  // namespace

DropReason spoof_check(const PortSecurity& sec, const FlowKey& key) noexcept {
  const uint64_t mac = mac_to_u64(key.dl_src);
  if (std::find(sec.macs.begin(), sec.macs.end(), mac) == sec.macs.end())
    return DropReason::kSpoofedMac;
  switch (key.dl_type) {
    case kEthTypeArp:
      return spoof_check_arp(sec, mac, key);
    case kEthTypeIpv4:
      // A DHCP client has no address yet.
      if (is_zero(key.nw_src, 4) && is_udp(key, kDhcpv4Client, kDhcpv4Server))
        return DropReason::kNone;
      return source_allowed(sec, mac, SgFamily::kIpv4, key.nw_src) ? DropReason::kNone
                                                                   : DropReason::kSpoofedIp;
    case kEthTypeIpv6: {
      // Duplicate address detection and its MLD reports come from ::.
      const int t = icmpv6_type(key);
      if (is_zero(key.nw_src, 16) && (t == kNdNs || t == kMldReport || t == kMldv2Report))
        return DropReason::kNone;
      return source_allowed(sec, mac, SgFamily::kIpv6, key.nw_src) ? DropReason::kNone
                                                                   : DropReason::kSpoofedIp;
    }
    default:
      return DropReason::kNone;  // egress_class drops other ethertypes
  }
}

SgClass egress_class(const FlowKey& key, DropReason* why) noexcept {
  switch (key.dl_type) {
    case kEthTypeArp:
      return SgClass::kAllow;
    case kEthTypeIpv4:
      if (is_udp_from(key, kDhcpv4Server)) {
        *why = DropReason::kDhcpServerFromVm;
        return SgClass::kDeny;
      }
      return is_udp(key, kDhcpv4Client, kDhcpv4Server) ? SgClass::kAllow : SgClass::kRules;
    case kEthTypeIpv6: {
      if (is_udp_from(key, kDhcpv6Server)) {
        *why = DropReason::kDhcpServerFromVm;
        return SgClass::kDeny;
      }
      if (is_udp(key, kDhcpv6Client, kDhcpv6Server)) return SgClass::kAllow;
      const int t = icmpv6_type(key);
      if (t == kNdRa) {
        *why = DropReason::kRaFromVm;
        return SgClass::kDeny;
      }
      if (t == kNdRs || t == kNdNs || t == kNdNa || (t >= 0 && is_mld(uint8_t(t))))
        return SgClass::kAllow;
      return SgClass::kRules;
    }
    default:
      *why = DropReason::kEthertypeDenied;
      return SgClass::kDeny;
  }
}

SgClass ingress_class(const FlowKey& key, DropReason* why) noexcept {
  switch (key.dl_type) {
    case kEthTypeArp:
      return SgClass::kAllow;
    case kEthTypeIpv4:
      return is_udp(key, kDhcpv4Server, kDhcpv4Client) ? SgClass::kAllow : SgClass::kRules;
    case kEthTypeIpv6: {
      if (is_udp(key, kDhcpv6Server, kDhcpv6Client)) return SgClass::kAllow;
      const int t = icmpv6_type(key);
      if (t == kNdRa || t == kNdNs || t == kNdNa || (t >= 0 && is_mld(uint8_t(t))))
        return SgClass::kAllow;
      return SgClass::kRules;
    }
    default:
      *why = DropReason::kEthertypeDenied;
      return SgClass::kDeny;
  }
}

FlowKey reverse_key(const FlowKey& reply, uint16_t original_in_port) noexcept {
  FlowKey k = reply;
  k.in_port = original_in_port;
  std::memcpy(k.dl_src, reply.dl_dst, 6);
  std::memcpy(k.dl_dst, reply.dl_src, 6);
  std::memcpy(k.nw_src, reply.nw_dst, 16);
  std::memcpy(k.nw_dst, reply.nw_src, 16);
  const uint8_t icmp = reply.dl_type == kEthTypeIpv6 ? kIpProtoIcmpv6 : kIpProtoIcmp;
  if (reply.nw_proto == icmp && has_l4(reply)) {
    // tp_src/tp_dst are type and code, not ports: a query reply's type
    // becomes its request's (echo, and IPv4's timestamp, information and
    // address mask, which conntrack tracks alike).
    if (reply.dl_type == kEthTypeIpv4) {
      if (reply.tp_src == 0) k.tp_src = 8;
      else if (reply.tp_src == 14 || reply.tp_src == 16 || reply.tp_src == 18) k.tp_src--;
    } else if (reply.tp_src == 129) {
      k.tp_src = 128;
    }
  } else {
    k.tp_src = reply.tp_dst;
    k.tp_dst = reply.tp_src;
  }
  return k;
}

}  // namespace strait::dp
