#pragma once
// neutron's QoS rules on a port (issue 25): a bandwidth limit and a
// packet-rate limit per direction, policed (a frame over the limit is
// dropped and counted, as OVS polices DPDK ports), and DSCP marking of what
// the VM sends.
//
// A limit is a GCRA meter (the virtual-scheduling form of a token bucket):
// one 64-bit theoretical arrival time (TAT) in TSC units per port and limit,
// in memory every worker shares, advanced by compare-and-swap. A frame
// conforms when TAT - now <= tau (its burst tolerance) and then moves TAT
// past max(TAT, now) by its cost; one that does not changes nothing. So a
// port's limit holds whichever workers handle its frames (two workers do not
// get twice the rate), and an idle meter saves up at most `burst`.
#include <atomic>
#include <cstdint>
#include <memory>

namespace strait::dp {

// neutron's directions, the VM's view: egress leaves the VM, ingress reaches it.
enum class QosDir : uint8_t { kEgress = 0, kIngress = 1 };

inline constexpr unsigned kQosShift = 16;  // QosMeter::cost is fixed point

struct QosMeter {
  uint64_t cost = 0;  // TSC per unit (byte or frame), << kQosShift; 0: no limit
  uint64_t tau = 0;   // burst tolerance in TSC: `burst` units beyond the first
  bool operator==(const QosMeter&) const = default;
};

// A port's QoS, compiled from its rules for this host's TSC (snapshot_builder).
struct PortQos {
  QosMeter bytes[2];    // bandwidth limit, by QosDir (bytes: the whole frame, L2 header included)
  QosMeter packets[2];  // packet-rate limit, by QosDir
  int16_t dscp = -1;    // DSCP (0..63) set on the IPv4/IPv6 frames the VM sends; -1: none
  bool polices(QosDir d) const {
    return bytes[unsigned(d)].cost != 0 || packets[unsigned(d)].cost != 0;
  }
  bool operator==(const PortQos&) const = default;
};

// The shared state of one port's meters, [direction][bytes, packets].
struct alignas(64) QosPortState {
  std::atomic<uint64_t> tat[2][2] = {};
};

// Whether `units` conform to meter m at TSC `now`; charges the meter if so.
inline bool qos_conform(std::atomic<uint64_t>& tat, const QosMeter& m, uint64_t units,
                        uint64_t now) noexcept {
  const uint64_t cost = (units * m.cost) >> kQosShift;
  uint64_t t = tat.load(std::memory_order_relaxed);
  for (;;) {
    const uint64_t start = t > now ? t : now;
    if (start - now > m.tau) return false;
    if (tat.compare_exchange_weak(t, start + cost, std::memory_order_relaxed)) return true;
  }
}

enum class QosVerdict : uint8_t { kPass, kPacketRate, kBandwidth };

// Both limits of one direction for a frame of `bytes`. The packet-rate
// meter is charged first; a frame it passes and the bandwidth meter refuses
// has still used its packet (the limits are each exact, their sum a bound).
inline QosVerdict qos_police(const PortQos& q, QosPortState& st, QosDir d, uint32_t bytes,
                             uint64_t now) noexcept {
  const unsigned i = unsigned(d);
  if (q.packets[i].cost && !qos_conform(st.tat[i][1], q.packets[i], 1, now))
    return QosVerdict::kPacketRate;
  if (q.bytes[i].cost && !qos_conform(st.tat[i][0], q.bytes[i], bytes, now))
    return QosVerdict::kBandwidth;
  return QosVerdict::kPass;
}

// Sets the DSCP of an IPv4 or IPv6 packet at `l3` (ECN kept; IPv4's header
// checksum updated incrementally, RFC 1624).
inline void qos_mark_dscp(uint8_t* l3, bool ipv6, uint8_t dscp) noexcept {
  if (ipv6) {
    // Version (4 bits), traffic class (8), flow label (20).
    const uint8_t tc = uint8_t(((l3[0] & 0x0f) << 4) | (l3[1] >> 4));
    const uint8_t next = uint8_t((dscp << 2) | (tc & 3));
    l3[0] = uint8_t((l3[0] & 0xf0) | (next >> 4));
    l3[1] = uint8_t((l3[1] & 0x0f) | (next << 4));
    return;
  }
  const uint8_t tos = l3[1];
  const uint8_t next = uint8_t((dscp << 2) | (tos & 3));
  if (next == tos) return;
  // The 16-bit word holding the TOS: version/IHL, TOS.
  const uint16_t old_word = uint16_t(l3[0] << 8 | tos), new_word = uint16_t(l3[0] << 8 | next);
  uint32_t sum = uint16_t(~(l3[10] << 8 | l3[11])) + uint16_t(~old_word) + new_word;
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  const uint16_t csum = uint16_t(~sum);
  l3[1] = next;
  l3[10] = uint8_t(csum >> 8);
  l3[11] = uint8_t(csum);
}

}  // namespace strait::dp
