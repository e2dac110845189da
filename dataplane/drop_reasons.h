#pragma once
// Every reason the dataplane drops a frame, in one list (VPP's
// foreach_l2fwd_error). Each has a per-worker and a per-port counter; the
// name is what straitctl, telemetry and Prometheus show.
#include <cstdint>
#include <string_view>

#define STRAIT_FOREACH_DROP_REASON(_)                                               \
  _(kNone, "none", "not dropped")                                                   \
  /* parser: malformed or hostile frames */                                         \
  _(kRuntFrame, "runt_frame", "shorter than an Ethernet header")                    \
  _(kTooManyTags, "too_many_vlan_tags", "more than two VLAN tags")                  \
  _(kVlanTruncated, "vlan_truncated", "VLAN tag cut short")                         \
  _(kArpMalformed, "arp_malformed", "not an Ethernet/IPv4 ARP of 28 bytes")         \
  _(kIpv4Truncated, "ipv4_truncated", "IPv4 header or payload beyond the frame")    \
  _(kIpv4BadVersion, "ipv4_bad_version", "IPv4 ethertype, version field not 4")     \
  _(kIpv4BadIhl, "ipv4_bad_ihl", "IPv4 header length below 20 bytes")               \
  _(kIpv4BadLength, "ipv4_bad_total_length", "IPv4 total length below its header")  \
  _(kIpv6Truncated, "ipv6_truncated", "IPv6 header or payload beyond the frame")    \
  _(kIpv6BadVersion, "ipv6_bad_version", "IPv6 ethertype, version field not 6")     \
  _(kIpv6ExtChain, "ipv6_ext_chain", "IPv6 extension headers too many or cut short") \
  _(kL4Truncated, "l4_truncated", "TCP/UDP/ICMP header beyond the packet")          \
  _(kTcpBadOffset, "tcp_bad_offset", "TCP data offset below 5 or beyond the packet") \
  _(kVxlanMalformed, "vxlan_malformed", "VXLAN header cut short or I flag clear")   \
  /* pipeline */                                                                    \
  _(kUnknownPort, "unknown_port", "frame from a port not in the snapshot")          \
  _(kPortDown, "port_down", "port not ready (binding or device not live)")          \
  _(kInvalidSourceMac, "invalid_src_mac", "multicast or zero source MAC")           \
  _(kTaggedOnAccess, "tagged_on_access_port", "VLAN-tagged frame from a VM port")   \
  _(kUnknownVlan, "unknown_vlan", "VLAN id of no network on this physnet")          \
  _(kNoFlatNetwork, "no_flat_network", "untagged frame, physnet has no flat network") \
  _(kNestedVlan, "nested_vlan", "tag left after removing the network's tag")        \
  _(kSamePort, "same_port", "destination is behind the ingress port")               \
  _(kFloodNoTarget, "flood_no_target", "broadcast/unknown with no other port")      \
  _(kMtuExceeded, "mtu_exceeded", "frame above the network MTU")                    \
  /* VXLAN */                                                                       \
  _(kUnknownVni, "unknown_vni", "VXLAN VNI of no network on this host")             \
  _(kVxlanNotOurs, "vxlan_not_ours", "VXLAN to another address than our VTEP")      \
  _(kVtepUnresolved, "vtep_unresolved", "remote VTEP's next hop not resolved yet (ARP asked)") \
  _(kTunnelNoVtep, "tunnel_no_vtep", "frame for a VXLAN network but no VTEP configured") \
  /* port security and security groups */                                           \
  _(kSpoofedMac, "spoofed_mac", "source MAC not the port's or an allowed pair's")    \
  _(kSpoofedIp, "spoofed_ip", "source IP not a fixed IP, allowed pair or link-local of the port") \
  _(kSpoofedArp, "spoofed_arp", "ARP sender MAC or IP not the port's")              \
  _(kDhcpServerFromVm, "dhcp_server_from_vm", "DHCP/DHCPv6 server reply sent by a VM") \
  _(kRaFromVm, "ra_from_vm", "IPv6 router advertisement sent by a VM")               \
  _(kEthertypeDenied, "ethertype_denied", "neither ARP, IPv4 nor IPv6, port security on") \
  _(kSgEgressDenied, "sg_egress_denied", "no egress rule of the sending port allows it") \
  _(kSgIngressDenied, "sg_ingress_denied", "no ingress rule of the receiving port allows it") \
  _(kCtRevoked, "ct_revoked", "connection no longer allowed by the rules: ended")   \
  _(kCtInvalid, "ct_invalid", "cannot open a connection and belongs to none")       \
  _(kCtFull, "ct_full", "connection table full: new connection refused")            \
  /* QoS (neutron's rules, policed) */                                               \
  _(kQosPacketRate, "qos_packet_rate", "over the port's packet-rate limit (QoS)")    \
  _(kQosBandwidth, "qos_bandwidth", "over the port's bandwidth limit (QoS)")         \
  /* actions */                                                                     \
  _(kNoMbuf, "no_mbuf", "mbuf pool empty while replicating a flood")                \
  _(kTxFull, "tx_full", "output queue full, frame not sent")

namespace strait::dp {

enum class DropReason : uint8_t {
#define STRAIT_DR_ENUM(e, n, d) e,
  STRAIT_FOREACH_DROP_REASON(STRAIT_DR_ENUM)
#undef STRAIT_DR_ENUM
};

inline constexpr unsigned kNumDropReasons = 0
#define STRAIT_DR_COUNT(e, n, d) +1
    STRAIT_FOREACH_DROP_REASON(STRAIT_DR_COUNT)
#undef STRAIT_DR_COUNT
    ;

// Stable snake_case name, as shown to users ("tx_full").
constexpr std::string_view drop_reason_name(DropReason r) {
  switch (r) {
#define STRAIT_DR_NAME(e, n, d) \
  case DropReason::e:           \
    return n;
    STRAIT_FOREACH_DROP_REASON(STRAIT_DR_NAME)
#undef STRAIT_DR_NAME
  }
  return "?";
}

constexpr std::string_view drop_reason_help(DropReason r) {
  switch (r) {
#define STRAIT_DR_HELP(e, n, d) \
  case DropReason::e:           \
    return d;
    STRAIT_FOREACH_DROP_REASON(STRAIT_DR_HELP)
#undef STRAIT_DR_HELP
  }
  return "?";
}

}  // namespace strait::dp
