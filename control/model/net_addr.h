#pragma once
// Addresses as the API gives them: MACs, IP addresses, prefixes (net_addr.cc).
#include <array>
#include <compare>
#include <cstdint>
#include <string>

#include "dataplane/result.h"

namespace strait::ctl {

using Mac = std::array<uint8_t, 6>;

struct IpAddr {
  uint8_t family = 4;               // 4 or 6
  std::array<uint8_t, 16> bytes{};  // IPv4 in the first 4 bytes, network order
  bool operator==(const IpAddr&) const = default;
  auto operator<=>(const IpAddr&) const = default;
};

struct IpPrefix {
  IpAddr addr;      // host bits zero
  uint8_t len = 0;  // 0..32 or 0..128
  bool operator==(const IpPrefix&) const = default;
  auto operator<=>(const IpPrefix&) const = default;
};

std::string mac_to_string(const Mac& m);
// Six bytes as a frame or a snapshot holds them.
std::string mac_to_string(const uint8_t* bytes);
Result<Mac> parse_mac(const std::string& s);
std::string ip_to_string(const IpAddr& ip);
Result<IpAddr> parse_ip(const std::string& s);
// "10.0.0.0/8", "2001:db8::/32"; a bare address is a host prefix. Host bits
// are cleared (neutron normalises them too).
Result<IpPrefix> parse_prefix(const std::string& s);
std::string prefix_to_string(const IpPrefix& p);
// The /32 or /128 of one address.
IpPrefix host_prefix(const IpAddr& ip);
// fe80::/64 with the modified EUI-64 of the MAC (RFC 4291 appendix A): the
// link-local address a VM derives from its MAC.
IpAddr ipv6_link_local(const Mac& m);

}  // namespace strait::ctl
