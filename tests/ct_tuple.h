#pragma once
// Connection tuples for conntrack tests: an IPv4 tuple from host-order
// addresses, and the same connection seen from the other side.
#include <cstdint>
#include <cstring>
#include <utility>

#include "dataplane/conntrack.h"

namespace strait::test {

using dp::CtTuple;
using dp::kCtIpv4;

inline CtTuple v4(uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport, uint8_t proto,
                  uint16_t zone) {
  CtTuple t{};
  for (int i = 0; i < 4; i++) {
    t.src[i] = uint8_t(src >> (24 - 8 * i));
    t.dst[i] = uint8_t(dst >> (24 - 8 * i));
  }
  t.sport = sport;
  t.dport = dport;
  t.zone = zone;
  t.family = kCtIpv4;
  t.proto = proto;
  return t;
}

inline CtTuple reversed(const CtTuple& t) {
  CtTuple r = t;
  std::memcpy(r.src, t.dst, 16);
  std::memcpy(r.dst, t.src, 16);
  std::swap(r.sport, r.dport);
  return r;
}

}  // namespace strait::test
