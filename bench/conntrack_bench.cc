// Conntrack microbenchmarks: the per-packet cost of a known connection
// (lookup + update) over table sizes, and new connections per second per
// worker (create, with the control thread's expiry and deferred reuse in the
// loop so the table never fills). Single thread, fixed seed.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "dataplane/conntrack.h"

namespace strait::dp {
namespace {

constexpr uint64_t kSeed = 0x5742414954ull;

CtPacket udp(uint32_t id) {
  CtPacket p;
  p.kind = CtPacketKind::kConn;
  p.tuple = CtTuple{};
  const uint32_t src = 0x0a000000u | (id & 0xffff), dst = 0x0a010000u | (id >> 16);
  for (int i = 0; i < 4; i++) {
    p.tuple.src[i] = uint8_t(src >> (24 - 8 * i));
    p.tuple.dst[i] = uint8_t(dst >> (24 - 8 * i));
  }
  p.tuple.sport = uint16_t(id * 2654435761u >> 16);
  p.tuple.dport = 53;
  p.tuple.zone = 1;
  p.tuple.family = kCtIpv4;
  p.tuple.proto = kIpProtoUdp;
  return p;
}

// A packet of one of n established connections, alternating directions.
void BM_ConntrackEstablished(benchmark::State& state) {
  const uint32_t n = uint32_t(state.range(0));
  CtConfig cfg;
  cfg.capacity = n + n / 4;
  Conntrack ct(cfg);
  std::vector<CtPacket> pkts;
  for (uint32_t i = 0; i < n; i++) {
    pkts.push_back(udp(i));
    ct.create(pkts.back(), 1, 0, 0);
  }
  for (uint32_t i = 0; i < n; i += 2)
    std::swap(pkts[i].tuple.src, pkts[i].tuple.dst),
        std::swap(pkts[i].tuple.sport, pkts[i].tuple.dport);
  std::mt19937 rng(kSeed);
  std::vector<uint32_t> seq(1 << 16);
  for (auto& s : seq) s = rng() % n;
  uint64_t i = 0, now = 0;
  for (auto _ : state) {
    const CtPacket& p = pkts[seq[i++ & 0xffff]];
    CtLookup l = ct.lookup(p.tuple, now);
    benchmark::DoNotOptimize(ct.update(l.entry, p, now));
    now += (i & 1023) == 0;  // ~1 ms per 1024 packets
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ConntrackEstablished)->RangeMultiplier(16)->Range(16, 1 << 20);

// The same a burst of 32 at a time, as a worker would: probe (hash +
// prefetch buckets) the burst, prefetch the candidate entries, then look up
// and update each packet.
void BM_ConntrackEstablishedBurst(benchmark::State& state) {
  const uint32_t n = uint32_t(state.range(0));
  CtConfig cfg;
  cfg.capacity = n + n / 4;
  Conntrack ct(cfg);
  std::vector<CtPacket> pkts;
  for (uint32_t i = 0; i < n; i++) {
    pkts.push_back(udp(i));
    ct.create(pkts.back(), 1, 0, 0);
  }
  std::mt19937 rng(kSeed);
  std::vector<uint32_t> seq(1 << 16);
  for (auto& s : seq) s = rng() % n;
  uint64_t i = 0, now = 0;
  CtProbe probes[32];
  for (auto _ : state) {
    for (uint32_t j = 0; j < 32; j++) ct.probe(pkts[seq[(i + j) & 0xffff]].tuple, &probes[j]);
    for (uint32_t j = 0; j < 32; j++) ct.prefetch_entries(probes[j]);
    for (uint32_t j = 0; j < 32; j++) {
      CtLookup l = ct.lookup(probes[j], now);
      benchmark::DoNotOptimize(ct.update(l.entry, pkts[seq[(i + j) & 0xffff]], now));
    }
    i += 32;
    now += (i & 1023) == 0;
  }
  state.SetItemsProcessed(state.iterations() * 32);
}
BENCHMARK(BM_ConntrackEstablishedBurst)->RangeMultiplier(16)->Range(16, 1 << 20);

// New connections: lookup miss + create; the table is swept and recycled
// every 4096 creations (outside the timed part).
void BM_ConntrackNewConnection(benchmark::State& state) {
  CtConfig cfg;
  cfg.capacity = 1 << 16;
  cfg.timeouts.udp = 1;
  Conntrack ct(cfg);
  uint32_t id = 0;
  uint64_t now = 0;
  for (auto _ : state) {
    const CtPacket p = udp(id++);
    if (ct.lookup(p.tuple, now).entry == nullptr) benchmark::DoNotOptimize(ct.create(p, 1, now, 0));
    if ((id & 4095) == 0) {
      state.PauseTiming();
      now += 2000;
      ct.expire(now);
      if (ct.retire_begin()) ct.retire_end();  // single thread: no reader to wait for
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["refused"] = double(ct.stats().refused_full);
}
BENCHMARK(BM_ConntrackNewConnection);

// A SYN flood against a full table: the cost of a refusal.
void BM_ConntrackRefusedFull(benchmark::State& state) {
  CtConfig cfg;
  cfg.capacity = 1024;
  Conntrack ct(cfg);
  for (uint32_t i = 0; i < 4096; i++) ct.create(udp(i), 1, 0, 0);
  uint32_t id = 1 << 20;
  for (auto _ : state) benchmark::DoNotOptimize(ct.create(udp(id++), 1, 0, 0));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ConntrackRefusedFull);

}  // namespace
}  // namespace strait::dp
