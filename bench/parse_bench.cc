// parse_frame over bursts of 32 frames, as a worker sees them after rx.
// Frames are built by hand here (no scapy, no python) and checked to parse
// the intended way before timing. Reports ns/pkt (items/s) and cycles/pkt.
#include <benchmark/benchmark.h>
#include <rte_cycles.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "dataplane/parse.h"

namespace strait::dp {
namespace {

constexpr int kBurst = 32;
constexpr uint16_t kVxlanPort = 4789;

// Appends headers in network order. Checksums stay zero: the parser never
// reads them.
class FrameBuilder {
 public:
  FrameBuilder& u8(uint8_t v) {
    bytes_.push_back(v);
    return *this;
  }
  FrameBuilder& u16(uint16_t v) { return u8(v >> 8).u8(v & 0xff); }
  FrameBuilder& u32(uint32_t v) { return u16(v >> 16).u16(v & 0xffff); }
  FrameBuilder& fill(size_t n, uint8_t v = 0) {
    bytes_.insert(bytes_.end(), n, v);
    return *this;
  }
  FrameBuilder& eth(uint16_t type, uint8_t host = 0x0a) {
    u16(0x0200).u32(0x0b).u16(0x0200).u32(host);  // dst 02::0b, src 02::<host>
    return u16(type);
  }
  FrameBuilder& vlan(uint16_t tci, uint16_t type) { return u16(tci).u16(type); }
  FrameBuilder& ipv4(uint8_t proto, uint16_t payload_len, uint32_t src = 0x0a000001) {
    u8(0x45).u8(0).u16(20 + payload_len).u16(0).u16(0x4000 /* DF */);
    return u8(64).u8(proto).u16(0).u32(src).u32(0x0a000002);
  }
  FrameBuilder& ipv6(uint8_t next_header, uint16_t payload_len) {
    u32(0x60000000).u16(payload_len).u8(next_header).u8(64);
    return u32(0x20010db8).fill(11).u8(1).u32(0x20010db8).fill(11).u8(2);
  }
  FrameBuilder& udp(uint16_t sport, uint16_t dport, uint16_t payload_len) {
    return u16(sport).u16(dport).u16(8 + payload_len).u16(0);
  }
  FrameBuilder& tcp(uint16_t sport, uint16_t dport, uint8_t flags) {
    u16(sport).u16(dport).u32(1).u32(0);
    return u8(5 << 4).u8(flags).u16(65535).u16(0).u16(0);
  }
  FrameBuilder& vxlan(uint32_t vni) { return u32(0x08000000).u32(vni << 8); }
  std::vector<uint8_t> take() { return std::move(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

enum class Case { kUdp4, kVlanUdp4, kTcp6, kVxlan, kMixed };

// Frame i of a burst: the flows differ by source port, as they would.
std::vector<uint8_t> make_frame(Case c, int i) {
  const uint16_t sport = static_cast<uint16_t>(10000 + i);
  FrameBuilder b;
  switch (c) {
    case Case::kUdp4:  // 60 bytes, 64 on the wire with the FCS
      return b.eth(kEthTypeIpv4).ipv4(kIpProtoUdp, 8 + 18).udp(sport, 53, 18).fill(18).take();
    case Case::kVlanUdp4:  // 64 bytes
      b.eth(kEthTypeVlan).vlan(100, kEthTypeIpv4);
      return b.ipv4(kIpProtoUdp, 8 + 18).udp(sport, 53, 18).fill(18).take();
    case Case::kTcp6:  // 74 bytes
      return b.eth(kEthTypeIpv6).ipv6(kIpProtoTcp, 20).tcp(sport, 443, 0x10).take();
    case Case::kVxlan: {
      constexpr uint16_t kInner = 14 + 20 + 20;
      b.eth(kEthTypeIpv4).ipv4(kIpProtoUdp, 8 + 8 + kInner, 0xc0000201);
      b.udp(sport, kVxlanPort, 8 + kInner).vxlan(5001);
      return b.eth(kEthTypeIpv4, 0x0c).ipv4(kIpProtoTcp, 20).tcp(sport, 22, 0x10).take();
    }
    case Case::kMixed:
      return make_frame(static_cast<Case>(i % 4), i);
  }
  return {};
}

void BM_ParseBurst(benchmark::State& state, Case c) {
  std::vector<std::vector<uint8_t>> frames;
  for (int i = 0; i < kBurst; ++i) frames.push_back(make_frame(c, i));
  ParseOptions opts;
  opts.vxlan_port = kVxlanPort;
  std::array<FlowKey, kBurst> keys;
  std::array<PacketMeta, kBurst> metas;
  for (int i = 0; i < kBurst; ++i) {
    const bool tunnelled = c == Case::kVxlan || (c == Case::kMixed && i % 4 == 3);
    const auto& f = frames[i];
    if (parse_frame(f.data(), f.size(), 0, opts, &keys[i], &metas[i]) != DropReason::kNone ||
        (keys[i].tun_flags == kTunValid) != tunnelled || metas[i].l4_ofs == 0) {
      state.SkipWithError("benchmark frame does not parse as intended");
      return;
    }
  }

  // Cycles are read around each burst: the average is what the burst costs,
  // the minimum what it costs when no other thread shares the core (the
  // TSC keeps counting while this thread is descheduled).
  uint64_t cycles = 0;
  uint64_t best = UINT64_MAX;
  for (auto _ : state) {
    const uint64_t t0 = rte_rdtsc();
    for (int i = 0; i < kBurst; ++i) {
      const auto& f = frames[i];
      DropReason r =
          parse_frame(f.data(), static_cast<uint32_t>(f.size()), 0, opts, &keys[i], &metas[i]);
      benchmark::DoNotOptimize(r);
    }
    benchmark::ClobberMemory();
    const uint64_t dt = rte_rdtsc() - t0;
    cycles += dt;
    best = std::min(best, dt);
  }

  state.SetItemsProcessed(state.iterations() * kBurst);
  state.counters["cycles/pkt"] =
      benchmark::Counter(static_cast<double>(cycles) / kBurst, benchmark::Counter::kAvgIterations);
  state.counters["min_cycles/pkt"] = static_cast<double>(best) / kBurst;
  state.counters["ns/pkt"] = benchmark::Counter(
      static_cast<double>(kBurst),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

BENCHMARK_CAPTURE(BM_ParseBurst, udp4_64B, Case::kUdp4);
BENCHMARK_CAPTURE(BM_ParseBurst, vlan_udp4, Case::kVlanUdp4);
BENCHMARK_CAPTURE(BM_ParseBurst, tcp6, Case::kTcp6);
BENCHMARK_CAPTURE(BM_ParseBurst, vxlan_tcp4, Case::kVxlan);
BENCHMARK_CAPTURE(BM_ParseBurst, mixed, Case::kMixed);

}  // namespace
}  // namespace strait::dp
