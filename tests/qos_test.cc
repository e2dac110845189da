// QoS meters and DSCP marking (dataplane/qos.h), on a virtual clock: what
// a burst lets through, the rate over time, and the bytes marking leaves.
#include "dataplane/qos.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tests/frame_builder.h"

namespace strait::dp {
namespace {

constexpr uint64_t kHz = 1'000'000'000;  // a 1 GHz TSC

// A meter of `per_s` units a second with `burst` units of burst, as
// snapshot_builder compiles one.
QosMeter meter(uint64_t per_s, uint64_t burst) {
  QosMeter m;
  m.cost = (kHz << kQosShift) / per_s;
  m.tau = kHz * burst / per_s;
  return m;
}

TEST(QosMeter, AnIdleMeterPassesItsBurstAndOneMoreAtOnce) {
  std::atomic<uint64_t> tat{0};
  const QosMeter m = meter(1000, 10);  // 1000 frames/s, burst 10
  int passed = 0;
  for (int i = 0; i < 100; i++) passed += qos_conform(tat, m, 1, 5 * kHz);
  EXPECT_EQ(passed, 11);
  // A refused frame charged nothing: 1 ms later exactly one more passes.
  EXPECT_TRUE(qos_conform(tat, m, 1, 5 * kHz + kHz / 1000));
  EXPECT_FALSE(qos_conform(tat, m, 1, 5 * kHz + kHz / 1000));
}

TEST(QosMeter, OverTimeThePassedRateIsTheLimit) {
  std::atomic<uint64_t> tat{0};
  const QosMeter m = meter(125'000, 1500);  // 1 Mbit/s in bytes, burst one frame
  // 1500-byte frames offered every 100 us (15 MB/s, 120x the limit) for 10 s.
  uint64_t bytes = 0;
  for (uint64_t t = kHz; t < 11 * kHz; t += kHz / 10'000)
    if (qos_conform(tat, m, 1500, t)) bytes += 1500;
  // 10 s at 125 kB/s, plus at most the burst and a frame.
  EXPECT_GE(bytes, 1'250'000u);
  EXPECT_LE(bytes, 1'250'000u + 3000);
}

TEST(QosMeter, FramesBelowTheLimitAllPass) {
  std::atomic<uint64_t> tat{0};
  const QosMeter m = meter(1000, 0);  // no burst at all
  for (uint64_t t = kHz; t < 2 * kHz; t += kHz / 500) EXPECT_TRUE(qos_conform(tat, m, 1, t));
}

TEST(QosPolice, PacketRateIsCheckedFirstAndEachLimitCountsItsOwnReason) {
  PortQos q;
  q.packets[unsigned(QosDir::kEgress)] = meter(1000, 2);
  q.bytes[unsigned(QosDir::kEgress)] = meter(100'000, 3000);
  QosPortState st;
  EXPECT_TRUE(q.polices(QosDir::kEgress));
  EXPECT_FALSE(q.polices(QosDir::kIngress));
  std::vector<QosVerdict> v;
  for (int i = 0; i < 4; i++) v.push_back(qos_police(q, st, QosDir::kEgress, 1000, kHz));
  // Frames 1-3 fit both (3000 bytes, 3 frames); the 4th is over the packet rate.
  EXPECT_EQ(v, (std::vector<QosVerdict>{QosVerdict::kPass, QosVerdict::kPass, QosVerdict::kPass,
                                        QosVerdict::kPacketRate}));
  // 3 ms later the packet meter has room for 3 more frames, the byte meter
  // (30 ms of bytes charged, 30 ms of burst) for one.
  const uint64_t later = kHz + 3 * kHz / 1000;
  EXPECT_EQ(qos_police(q, st, QosDir::kEgress, 1000, later), QosVerdict::kPass);
  EXPECT_EQ(qos_police(q, st, QosDir::kEgress, 1000, later), QosVerdict::kBandwidth);
  // Ingress has no limit.
  EXPECT_EQ(qos_police(q, st, QosDir::kIngress, 9000, kHz), QosVerdict::kPass);
}

uint16_t ipv4_checksum(const uint8_t* h) {
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += uint32_t(h[i] << 8 | h[i + 1]);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return uint16_t(~sum);
}

TEST(QosDscp, Ipv4MarkKeepsEcnAndTheChecksumRight) {
  for (uint8_t tos : {0x00, 0x01, 0x03, 0xb8, 0x2a}) {
    const test::Frame f = test::Eth("02:00:00:00:00:01", "02:00:00:00:00:02")
                              .ipv4("10.0.0.1", "10.0.0.2", 7, 64, tos)
                              .udp(1, 2)
                              .frame();
    test::Frame marked = f;
    qos_mark_dscp(marked.data() + 14, false, 26);
    // What a sender marking 26 itself would have sent: byte for byte.
    const test::Frame want = test::Eth("02:00:00:00:00:01", "02:00:00:00:00:02")
                                 .ipv4("10.0.0.1", "10.0.0.2", 7, 64, uint8_t(26 << 2 | (tos & 3)))
                                 .udp(1, 2)
                                 .frame();
    EXPECT_EQ(marked, want) << int(tos);
    EXPECT_EQ(ipv4_checksum(marked.data() + 14), 0) << int(tos);
  }
}

TEST(QosDscp, Ipv6MarkSetsTheTrafficClassAndNothingElse) {
  test::Frame f = test::Eth("02:00:00:00:00:01", "02:00:00:00:00:02")
                      .ipv6("2001:db8::1", "2001:db8::2")
                      .udp(1, 2)
                      .frame();
  // Traffic class 0x03 (ECN CE), flow label 0xabcde.
  f[14] = 0x60;
  f[15] = 0x3a;
  f[16] = 0xbc;
  f[17] = 0xde;
  test::Frame marked = f;
  qos_mark_dscp(marked.data() + 14, true, 46);
  const uint8_t tc = uint8_t(46 << 2 | 3);
  EXPECT_EQ(marked[14], 0x60 | (tc >> 4));
  EXPECT_EQ(marked[15], uint8_t((tc << 4) | 0x0a));
  marked[14] = f[14];
  marked[15] = f[15];
  EXPECT_EQ(marked, f);  // the rest untouched
}

}  // namespace
}  // namespace strait::dp
