#include "control/model/net_addr.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>

#include "control/api/json_fields.h"

namespace strait::ctl {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string mac_to_string(const Mac& m) { return mac_to_string(m.data()); }

std::string mac_to_string(const uint8_t* m) {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4],
                m[5]);
  return buf;
}

// Syntax only: multicast and zero addresses parse (an FDB holds them); the
// port rules (unicast, not zero) are parse_port's.
Result<Mac> parse_mac(const std::string& s) {
  Error bad = invalid(json_quoted(s) + " is not a MAC address (aa:bb:cc:dd:ee:ff)");
  if (s.size() != 17) return bad;
  Mac m{};
  for (size_t i = 0; i < 6; ++i) {
    int hi = hex_value(s[3 * i]), lo = hex_value(s[3 * i + 1]);
    if (hi < 0 || lo < 0 || (i < 5 && s[3 * i + 2] != ':')) return bad;
    m[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return m;
}

std::string ip_to_string(const IpAddr& ip) {
  char buf[INET6_ADDRSTRLEN];
  if (!inet_ntop(ip.family == 6 ? AF_INET6 : AF_INET, ip.bytes.data(), buf, sizeof buf)) return "?";
  return buf;
}

Result<IpAddr> parse_ip(const std::string& s) {
  IpAddr ip;
  if (inet_pton(AF_INET, s.c_str(), ip.bytes.data()) == 1) {
    ip.family = 4;
    return ip;
  }
  if (inet_pton(AF_INET6, s.c_str(), ip.bytes.data()) == 1) {
    ip.family = 6;
    return ip;
  }
  return invalid(json_quoted(s) + " is not an IPv4 or IPv6 address");
}

Result<IpPrefix> parse_prefix(const std::string& s) {
  const size_t slash = s.find('/');
  auto ip = parse_ip(s.substr(0, slash));
  if (!ip) return invalid(json_quoted(s) + " is not a CIDR prefix (address/length)");
  const int max = ip->family == 4 ? 32 : 128;
  int len = max;
  if (slash != std::string::npos) {
    const std::string l = s.substr(slash + 1);
    if (l.empty() || l.size() > 3 ||
        !std::all_of(l.begin(), l.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        std::stoi(l) > max)
      return invalid(json_quoted(s) + " has no valid prefix length (0.." + std::to_string(max) +
                     ")");
    len = std::stoi(l);
  }
  IpPrefix p{*ip, static_cast<uint8_t>(len)};
  for (int bit = len; bit < max; bit++) p.addr.bytes[bit / 8] &= ~(0x80 >> (bit % 8));
  return p;
}

std::string prefix_to_string(const IpPrefix& p) {
  return ip_to_string(p.addr) + "/" + std::to_string(p.len);
}

IpPrefix host_prefix(const IpAddr& ip) {
  return {ip, static_cast<uint8_t>(ip.family == 4 ? 32 : 128)};
}

IpAddr ipv6_link_local(const Mac& m) {
  return {6, {0xfe, 0x80, 0, 0, 0, 0, 0, 0, uint8_t(m[0] ^ 2), m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]}};
}

}  // namespace strait::ctl
