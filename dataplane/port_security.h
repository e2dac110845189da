#pragma once
// Port security (anti-spoofing) and the traffic neutron always allows or
// always drops on a port with port security on, plus the rule lookups the
// pipeline and the worker share. Pure functions of a parsed frame and the
// snapshot: the pipeline's decisions on them are cached per flow.
//
// From a VM (egress), in order:
//   source MAC not in PortSecurity::macs                   -> kSpoofedMac
//   ARP: sender MAC != source MAC, or (sender MAC, sender IP) not an
//        allowed source (sender IP 0.0.0.0, an ARP probe, is fine) -> kSpoofedArp
//   IPv4/IPv6: (source MAC, source IP) not an allowed source -> kSpoofedIp,
//        except 0.0.0.0 for a DHCPv4 client request (UDP 68 -> 67) and
//        :: for IPv6 DAD and MLD (ICMPv6 NS 135, MLD 131/143)
//   UDP from port 67 (DHCPv4 server) or 547 (DHCPv6 server) -> kDhcpServerFromVm
//   ICMPv6 router advertisement (134)                       -> kRaFromVm
//   another ethertype                                       -> kEthertypeDenied
//   always allowed, untracked: ARP, DHCPv4 client (UDP 68 -> 67), DHCPv6
//        client (UDP 546 -> 547), ICMPv6 RS/NS/NA (133, 135, 136) and MLD
//        (130, 131, 132, 143)
//   any other IP: the egress rules and conntrack decide
// To a VM (ingress):
//   always allowed, untracked: ARP, DHCPv4 replies (UDP 67 -> 68), DHCPv6
//        replies (UDP 547 -> 546), ICMPv6 RA/NS/NA (134, 135, 136) and MLD
//   another ethertype                                       -> kEthertypeDenied
//   any other IP: the ingress rules and conntrack decide
#include "dataplane/drop_reasons.h"
#include "dataplane/flow_key.h"
#include "dataplane/snapshot.h"

namespace strait::dp {

enum class SgClass : uint8_t {
  kAllow,  // always allowed, not tracked
  kRules,  // IP traffic for the rules and conntrack
  kDeny,   // always dropped (the reason is set)
};

// Anti-spoofing of a frame from a port with port security: kNone or the
// spoof reason.
DropReason spoof_check(const PortSecurity& sec, const FlowKey& key) noexcept;

// Class of a frame from (egress) / to (ingress) a port with port security.
// *why is set for kDeny.
SgClass egress_class(const FlowKey& key, DropReason* why) noexcept;
SgClass ingress_class(const FlowKey& key, DropReason* why) noexcept;

// Whether the port's rules let `key` open a connection in direction dir
// (false without a classifier: a port without groups allows nothing).
inline bool rules_allow(const PortSecurity& sec, SgDirection dir, const FlowKey& key) noexcept {
  return sec.sg && sec.sg->allows(dir, key);
}

// The key of the packet that opened the connection `reply` answers: addresses
// and ports swapped, ICMP echo reply turned into the echo request (types 0 ->
// 8, 129 -> 128), in_port = the port the original came from. For re-checking
// a connection against changed rules from one of its replies (F10).
FlowKey reverse_key(const FlowKey& reply, uint16_t original_in_port) noexcept;

}  // namespace strait::dp
