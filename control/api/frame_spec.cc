#include "control/api/frame_spec.h"

#include <arpa/inet.h>

#include <cstdio>
#include <set>
#include <string>

#include "control/api/json_fields.h"

namespace strait::ctl {
namespace {

using nlohmann::json;

constexpr size_t kEthHeader = 14;
constexpr size_t kMinFrame = 60;  // without FCS
constexpr size_t kIpv4Header = 20;

Error frame_error(const std::string& field, const std::string& problem) {
  return invalid("frame" + (field.empty() ? "" : "." + field) + ": " + problem);
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Result<std::vector<uint8_t>> from_hex(const std::string& s) {
  std::string digits;
  for (char c : s)
    if (c != ':' && c != '-' && c != ' ' && c != '\n' && c != '\t') digits.push_back(c);
  if (digits.size() % 2 != 0) return frame_error("", "odd number of hex digits");
  if (digits.size() / 2 > kMaxTraceFrame)
    return frame_error("", "longer than " + std::to_string(kMaxTraceFrame) + " bytes");
  std::vector<uint8_t> out;
  for (size_t i = 0; i < digits.size(); i += 2) {
    const int hi = hex_digit(digits[i]), lo = hex_digit(digits[i + 1]);
    // Quoted with json_quoted: the two bytes may be half of a UTF-8
    // character, and the message goes into a JSON reply (dump() would throw).
    if (hi < 0 || lo < 0) return frame_error("", "not hex: " + json_quoted(digits.substr(i, 2)));
    out.push_back(static_cast<uint8_t>(hi << 4 | lo));
  }
  return out;
}

Result<int64_t> int_field(const json& f, const char* name, int64_t lo, int64_t hi, int64_t def) {
  if (!f.contains(name)) return def;
  const json& v = f[name];
  int64_t n;
  if (v.is_number_integer()) {
    n = v.get<int64_t>();
  } else if (v.is_string()) {  // "0x0806" or "2054"
    const std::string s = v.get<std::string>();
    char* end = nullptr;
    n = std::strtoll(s.c_str(), &end, 0);
    if (s.empty() || *end != '\0') return frame_error(name, "expected a number, got \"" + s + "\"");
  } else {
    return frame_error(name, "expected a number");
  }
  if (n < lo || n > hi)
    return frame_error(name, std::to_string(n) + " is outside " + std::to_string(lo) + ".." +
                                 std::to_string(hi));
  return n;
}

Result<Mac> mac_field(const json& f, const char* name, const std::optional<Mac>& def) {
  if (!f.contains(name)) {
    if (def) return *def;
    return frame_error(name, "required");
  }
  if (!f[name].is_string()) return frame_error(name, "expected a MAC address string");
  auto m = parse_mac(f[name].get<std::string>());
  if (!m) return frame_error(name, m.error().message);
  return *m;
}

Result<std::array<uint8_t, 4>> ipv4_field(const json& f, const char* name) {
  std::array<uint8_t, 4> a{};
  if (!f.contains(name)) return a;
  if (!f[name].is_string()) return frame_error(name, "expected an IPv4 address string");
  auto ip = parse_ip(f[name].get<std::string>());
  if (!ip || ip->family != 4)
    return frame_error(name, "expected an IPv4 address (use a hex frame for anything else)");
  std::copy(ip->bytes.begin(), ip->bytes.begin() + 4, a.begin());
  return a;
}

Result<int64_t> proto_field(const json& f) {
  if (f.contains("proto") && f["proto"].is_string()) {
    const std::string p = f["proto"].get<std::string>();
    if (p == "tcp") return int64_t{dp::kIpProtoTcp};
    if (p == "udp") return int64_t{dp::kIpProtoUdp};
    if (p == "icmp") return int64_t{dp::kIpProtoIcmp};
  }
  return int_field(f, "proto", 0, 255, dp::kIpProtoUdp);
}

void put16(std::vector<uint8_t>& b, size_t at, uint16_t v) {
  b[at] = static_cast<uint8_t>(v >> 8);
  b[at + 1] = static_cast<uint8_t>(v);
}

uint16_t ipv4_checksum(const uint8_t* h) {
  uint32_t sum = 0;
  for (size_t i = 0; i < kIpv4Header; i += 2) sum += uint32_t(h[i] << 8 | h[i + 1]);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

// IPv4 + L4 header at `l3` (frame already sized).
void build_ipv4(std::vector<uint8_t>& b, size_t l3, const std::array<uint8_t, 4>& src,
                const std::array<uint8_t, 4>& dst, uint8_t proto, uint16_t sport, uint16_t dport) {
  const uint16_t total = static_cast<uint16_t>(b.size() - l3);
  b[l3] = 0x45;
  put16(b, l3 + 2, total);
  b[l3 + 8] = 64;  // TTL
  b[l3 + 9] = proto;
  std::copy(src.begin(), src.end(), b.begin() + l3 + 12);
  std::copy(dst.begin(), dst.end(), b.begin() + l3 + 16);
  put16(b, l3 + 10, ipv4_checksum(&b[l3]));
  const size_t l4 = l3 + kIpv4Header;
  if (proto == dp::kIpProtoTcp) {
    put16(b, l4, sport);
    put16(b, l4 + 2, dport);
    b[l4 + 12] = 5 << 4;  // data offset
    b[l4 + 13] = 0x02;    // SYN
    put16(b, l4 + 14, 65535);
  } else if (proto == dp::kIpProtoUdp) {
    put16(b, l4, sport);
    put16(b, l4 + 2, dport);
    put16(b, l4 + 4, static_cast<uint16_t>(total - kIpv4Header));
  } else if (proto == dp::kIpProtoIcmp) {
    b[l4] = 8;  // echo request
  }
}

void build_arp(std::vector<uint8_t>& b, size_t l3, const Mac& sha,
               const std::array<uint8_t, 4>& spa, const std::array<uint8_t, 4>& tpa) {
  put16(b, l3, 1);        // Ethernet
  put16(b, l3 + 2, 0x0800);
  b[l3 + 4] = 6;
  b[l3 + 5] = 4;
  put16(b, l3 + 6, 1);    // request
  std::copy(sha.begin(), sha.end(), b.begin() + l3 + 8);
  std::copy(spa.begin(), spa.end(), b.begin() + l3 + 14);
  std::copy(tpa.begin(), tpa.end(), b.begin() + l3 + 24);
}

Result<std::vector<uint8_t>> from_fields(const json& f, const std::optional<Mac>& default_src) {
  static const std::set<std::string> kKnown = {"dst", "src", "vlan", "pcp", "ethertype", "ip_src",
                                               "ip_dst", "proto", "sport", "dport", "length"};
  for (const auto& [k, v] : f.items())
    if (!kKnown.count(k)) return frame_error(k, "unknown field");
  auto dst = mac_field(f, "dst", Mac{0xff, 0xff, 0xff, 0xff, 0xff, 0xff});
  auto src = mac_field(f, "src", default_src);
  auto vlan = int_field(f, "vlan", 0, 4095, -1);
  auto pcp = int_field(f, "pcp", 0, 7, 0);
  auto type = int_field(f, "ethertype", 0x600, 0xffff, dp::kEthTypeIpv4);
  auto ip_src = ipv4_field(f, "ip_src");
  auto ip_dst = ipv4_field(f, "ip_dst");
  auto proto = proto_field(f);
  auto sport = int_field(f, "sport", 0, 65535, 1024);
  auto dport = int_field(f, "dport", 0, 65535, 80);
  auto length = int_field(f, "length", 0, kMaxTraceFrame, 0);
  for (const Error* e : {dst ? nullptr : &dst.error(), src ? nullptr : &src.error(),
                         vlan ? nullptr : &vlan.error(), pcp ? nullptr : &pcp.error(),
                         type ? nullptr : &type.error(), ip_src ? nullptr : &ip_src.error(),
                         ip_dst ? nullptr : &ip_dst.error(), proto ? nullptr : &proto.error(),
                         sport ? nullptr : &sport.error(), dport ? nullptr : &dport.error(),
                         length ? nullptr : &length.error()})
    if (e) return *e;
  const size_t l3 = kEthHeader + (*vlan >= 0 ? 4 : 0);
  size_t headers = l3;
  if (*type == dp::kEthTypeIpv4) {
    headers += kIpv4Header + (*proto == dp::kIpProtoTcp ? 20 : *proto == dp::kIpProtoUdp ? 8
                                                            : *proto == dp::kIpProtoIcmp ? 8 : 0);
  } else if (*type == dp::kEthTypeArp) {
    headers += 28;
  }
  if (*length != 0 && static_cast<size_t>(*length) < headers)
    return frame_error("length", std::to_string(*length) + " is below the " +
                                     std::to_string(headers) + " bytes of the headers");
  std::vector<uint8_t> b(*length ? static_cast<size_t>(*length) : std::max(headers, kMinFrame), 0);
  std::copy(dst->begin(), dst->end(), b.begin());
  std::copy(src->begin(), src->end(), b.begin() + 6);
  if (*vlan >= 0) {
    put16(b, 12, dp::kEthTypeVlan);
    put16(b, 14, static_cast<uint16_t>(*pcp << 13 | *vlan));
  }
  put16(b, l3 - 2, static_cast<uint16_t>(*type));
  if (*type == dp::kEthTypeIpv4)
    build_ipv4(b, l3, *ip_src, *ip_dst, static_cast<uint8_t>(*proto),
               static_cast<uint16_t>(*sport), static_cast<uint16_t>(*dport));
  else if (*type == dp::kEthTypeArp)
    build_arp(b, l3, *src, *ip_src, *ip_dst);
  return b;
}

std::string ip_str(const uint8_t* b, bool v6) {
  char buf[INET6_ADDRSTRLEN];
  return inet_ntop(v6 ? AF_INET6 : AF_INET, b, buf, sizeof buf) ? buf : "?";
}

std::string hex16(uint16_t v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%04x", v);
  return buf;
}

}  // namespace

Result<std::vector<uint8_t>> frame_from_params(const json& frame,
                                               const std::optional<Mac>& default_src) {
  if (frame.is_string()) return from_hex(frame.get<std::string>());
  if (frame.is_object()) return from_fields(frame, default_src);
  return frame_error("", "expected a hex string or an object of header fields");
}

json flow_key_json(const dp::FlowKey& k) {
  json j = {{"in_port", k.in_port},
            {"dl_src", mac_to_string(k.dl_src)},
            {"dl_dst", mac_to_string(k.dl_dst)},
            {"dl_type", hex16(k.dl_type)},
            {"n_tags", k.n_tags}};
  if (k.n_tags)
    j["vlan"] = {
        {"tpid", hex16(k.vlan_tpid)}, {"vid", k.vlan_tci & 0xfff}, {"pcp", k.vlan_tci >> 13}};
  if (k.dl_type == dp::kEthTypeArp) {
    j["arp_op"] = k.nw_proto;
    j["arp_spa"] = ip_str(k.nw_src, false);
    j["arp_tpa"] = ip_str(k.nw_dst, false);
    return j;
  }
  if (k.dl_type != dp::kEthTypeIpv4 && k.dl_type != dp::kEthTypeIpv6) return j;
  const bool v6 = k.dl_type == dp::kEthTypeIpv6;
  j["nw_src"] = ip_str(k.nw_src, v6);
  j["nw_dst"] = ip_str(k.nw_dst, v6);
  j["nw_proto"] = k.nw_proto;
  j["nw_ttl"] = k.nw_ttl;
  if (k.nw_frag) j["nw_frag"] = k.nw_frag == dp::kFragFirst ? "first" : "later";
  const uint8_t p = k.nw_proto;
  if (p == dp::kIpProtoTcp || p == dp::kIpProtoUdp) {
    j["tp_src"] = k.tp_src;
    j["tp_dst"] = k.tp_dst;
  } else if (p == dp::kIpProtoIcmp || p == dp::kIpProtoIcmpv6) {
    j["icmp_type"] = k.tp_src;
    j["icmp_code"] = k.tp_dst;
  }
  if (p == dp::kIpProtoTcp) j["tcp_flags"] = hex16(k.tcp_flags);
  return j;
}

std::string to_hex(const std::vector<uint8_t>& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(2 * bytes.size());
  for (uint8_t b : bytes) {
    s.push_back(kDigits[b >> 4]);
    s.push_back(kDigits[b & 15]);
  }
  return s;
}

}  // namespace strait::ctl
