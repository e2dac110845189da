#pragma once
// Frames for C++ tests, made in C++: Ethernet with 802.1Q tags, ARP, IPv4
// (and its fragments), IPv6, UDP, TCP, ICMP, ICMPv6, BOOTP and VXLAN, lengths
// and checksums filled in.
// Defaults are scapy's (IP() is 127.0.0.1 -> 127.0.0.1, id 1, TTL 64;
// UDP() is 53 -> 53; TCP() is 20 -> 80, SYN; ICMP() an echo request), and
// frame_builder_test checks the bytes against scapy's. Layers are added in
// wire order:
//   Eth(kMacA, kMacB).vlan(100).ipv4("10.0.0.1", "10.0.0.2").udp(1000, 80).fill('x', 40).frame()
#include <arpa/inet.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace strait::test {

class Eth {
 public:
  // Ethernet: "02:00:00:00:00:0a" style addresses.
  Eth(const std::string& src, const std::string& dst) {
    put_mac(dst);
    put_mac(src);
  }
  // An 802.1Q tag (tpid 0x88a8 for an S-tag).
  Eth& vlan(uint16_t vid, uint8_t pcp = 0, uint16_t tpid = 0x8100) {
    put16(tpid);
    put16(uint16_t(pcp << 13 | (vid & 0xfff)));
    return *this;
  }
  // Just the EtherType and what the caller appends after it.
  Eth& type(uint16_t ethertype) {
    put16(ethertype);
    return *this;
  }
  Eth& ipv4(const std::string& src = "127.0.0.1", const std::string& dst = "127.0.0.1",
            uint16_t id = 1, uint8_t ttl = 64, uint8_t tos = 0) {
    put16(0x0800);
    l3_ = f_.size();
    v6_ = false;
    const uint8_t h[12] = {0x45, tos, 0, 0, uint8_t(id >> 8), uint8_t(id), 0, 0, ttl, 0, 0, 0};
    f_.insert(f_.end(), h, h + 12);
    put_ip(AF_INET, src);
    put_ip(AF_INET, dst);
    return *this;
  }
  Eth& ipv6(const std::string& src = "::1", const std::string& dst = "::1", uint8_t hlim = 64) {
    put16(0x86dd);
    l3_ = f_.size();
    v6_ = true;
    const uint8_t h[8] = {0x60, 0, 0, 0, 0, 0, 0, hlim};
    f_.insert(f_.end(), h, h + 8);
    put_ip(AF_INET6, src);
    put_ip(AF_INET6, dst);
    return *this;
  }
  // ARP for IPv4 over Ethernet; op 1 request, 2 reply. hwsrc defaults to
  // the frame's source MAC.
  Eth& arp(uint16_t op = 1, const std::string& psrc = "0.0.0.0", const std::string& pdst = "0.0.0.0",
           std::string hwsrc = "", const std::string& hwdst = "00:00:00:00:00:00") {
    char src[18];
    std::snprintf(src, sizeof src, "%02x:%02x:%02x:%02x:%02x:%02x", f_[6], f_[7], f_[8], f_[9],
                  f_[10], f_[11]);
    if (hwsrc.empty()) hwsrc = src;
    put16(0x0806);
    put16(1);
    put16(0x0800);
    f_.push_back(6);
    f_.push_back(4);
    put16(op);
    put_mac(hwsrc);
    put_ip(AF_INET, psrc);
    put_mac(hwdst);
    put_ip(AF_INET, pdst);
    return *this;
  }
  Eth& udp(uint16_t sport = 53, uint16_t dport = 53) {
    l4(17);
    put16(sport);
    put16(dport);
    put16(0);
    put16(0);
    return *this;
  }
  // flags: TCP's flag bits (0x02 SYN, 0x10 ACK, 0x12 SYN+ACK, 0x04 RST, 0x01 FIN).
  Eth& tcp(uint16_t sport = 20, uint16_t dport = 80, uint8_t flags = 0x02, uint32_t seq = 0,
           uint32_t ack = 0) {
    l4(6);
    put16(sport);
    put16(dport);
    put32(seq);
    put32(ack);
    f_.push_back(0x50);
    f_.push_back(flags);
    put16(8192);  // window
    put16(0);     // checksum
    put16(0);     // urgent pointer
    return *this;
  }
  Eth& icmp(uint8_t type = 8, uint8_t code = 0, uint16_t id = 0, uint16_t seq = 0) {
    l4(1);
    f_.push_back(type);
    f_.push_back(code);
    put16(0);
    put16(id);
    put16(seq);
    return *this;
  }
  // ICMPv6 with its message body after type, code and checksum.
  Eth& icmp6(uint8_t type, uint8_t code = 0, const std::vector<uint8_t>& body = {}) {
    l4(58);
    f_.push_back(type);
    f_.push_back(code);
    put16(0);
    f_.insert(f_.end(), body.begin(), body.end());
    return *this;
  }
  // BOOTP (after udp()): op 1 a request, 2 a reply; scapy's BOOTP()
  // otherwise (236 bytes, no options).
  Eth& bootp(uint8_t op = 1) {
    std::vector<uint8_t> b(236, 0);
    b[0] = op;
    b[1] = 1;  // htype Ethernet
    b[2] = 6;  // hlen
    return bytes(b);
  }
  // After ipv4(): a fragment at `offset8` (8-byte units) of a `proto`
  // datagram, with no L4 header of its own; append its bytes.
  Eth& fragment(uint8_t proto, uint16_t offset8, bool more = false) {
    if (l3_ == 0 || v6_) throw std::logic_error("fragment() needs ipv4() first");
    proto_ = proto;
    f_[l3_ + 6] = uint8_t((more ? 0x20 : 0) | (offset8 >> 8 & 0x1f));
    f_[l3_ + 7] = uint8_t(offset8);
    return *this;
  }
  // VXLAN (after udp(.., 4789)) carrying `inner`.
  Eth& vxlan(uint32_t vni, const Frame& inner) {
    put32(0x08000000);
    put32(vni << 8);
    return bytes(inner);
  }
  Eth& bytes(const std::vector<uint8_t>& b) {
    f_.insert(f_.end(), b.begin(), b.end());
    return *this;
  }
  Eth& fill(char c, size_t n) {
    f_.insert(f_.end(), n, uint8_t(c));
    return *this;
  }

  // The frame, with IP lengths and checksums, L4 lengths and checksums.
  Frame frame() const {
    Frame f = f_;
    if (l3_ == 0) return f;
    const size_t l3_len = f.size() - l3_;
    if (!v6_) {
      set16(f, l3_ + 2, uint16_t(l3_len));
      if (proto_) f[l3_ + 9] = proto_;
      set16(f, l3_ + 10, 0);
      set16(f, l3_ + 10, fold(sum(f, l3_, 20)));
    } else {
      set16(f, l3_ + 4, uint16_t(l3_len - 40));
      if (proto_) f[l3_ + 6] = proto_;
    }
    if (!l4_) return f;
    const size_t len = f.size() - l4_;
    uint32_t pseudo = proto_ + uint32_t(len);
    if (v6_) {
      pseudo += sum(f, l3_ + 8, 32);
    } else {
      pseudo += sum(f, l3_ + 12, 8);
    }
    if (proto_ == 17) {
      set16(f, l4_ + 4, uint16_t(len));
      uint16_t c = fold(pseudo + sum(f, l4_, len));
      set16(f, l4_ + 6, c == 0 ? 0xffff : c);
    } else if (proto_ == 6) {
      set16(f, l4_ + 16, fold(pseudo + sum(f, l4_, len)));
    } else if (proto_ == 1) {
      set16(f, l4_ + 2, fold(sum(f, l4_, len)));
    } else if (proto_ == 58) {
      set16(f, l4_ + 2, fold(pseudo + sum(f, l4_, len)));
    }
    return f;
  }
  operator Frame() const { return frame(); }

 private:
  void put16(uint16_t v) {
    f_.push_back(uint8_t(v >> 8));
    f_.push_back(uint8_t(v));
  }
  void put32(uint32_t v) {
    put16(uint16_t(v >> 16));
    put16(uint16_t(v));
  }
  void put_mac(const std::string& s) {
    unsigned m[6];
    if (std::sscanf(s.c_str(), "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) != 6)
      throw std::invalid_argument("not a MAC: " + s);
    for (unsigned b : m) f_.push_back(uint8_t(b));
  }
  void put_ip(int family, const std::string& s) {
    uint8_t a[16];
    if (inet_pton(family, s.c_str(), a) != 1) throw std::invalid_argument("not an address: " + s);
    f_.insert(f_.end(), a, a + (family == AF_INET ? 4 : 16));
  }
  void l4(uint8_t proto) {
    if (l3_ == 0) throw std::logic_error("an L4 header needs ipv4() or ipv6() first");
    l4_ = f_.size();
    proto_ = proto;
  }
  static void set16(Frame& f, size_t at, uint16_t v) {
    f[at] = uint8_t(v >> 8);
    f[at + 1] = uint8_t(v);
  }
  static uint32_t sum(const Frame& f, size_t at, size_t n) {
    uint32_t s = 0;
    for (size_t i = 0; i + 1 < n; i += 2) s += uint32_t(f[at + i] << 8 | f[at + i + 1]);
    if (n & 1) s += uint32_t(f[at + n - 1] << 8);
    return s;
  }
  static uint16_t fold(uint32_t s) {
    while (s >> 16) s = (s & 0xffff) + (s >> 16);
    return uint16_t(~s);
  }

  Frame f_;
  size_t l3_ = 0, l4_ = 0;  // header offsets, 0: none
  bool v6_ = false;
  uint8_t proto_ = 0;
};

}  // namespace strait::test
