// The worker's per-packet path without devices, per burst of 32: parse +
// flow-cache hit (the fast path), and cache miss + pipeline + insert (the
// slow path), over 1, 1k and 100k flows. Run with --benchmark_counters_tabular=true.
#include <cstring>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>
#include <rte_cycles.h>

#include "dataplane/flow_cache.h"
#include "dataplane/parse.h"
#include "dataplane/pipeline.h"

namespace strait::dp {
namespace {

constexpr uint8_t kMacA[6] = {2, 0, 0, 0, 0, 0xa};
constexpr uint8_t kMacB[6] = {2, 0, 0, 0, 0, 0xb};

// A VLAN network with two VM ports and a physnet uplink.
Snapshot make_snapshot() {
  Snapshot s;
  s.n_workers = 1;
  s.rx_by_worker.resize(1);
  for (uint16_t i : {0, 1}) {
    PortEntry& p = s.ports[i];
    p.present = p.enabled = true;
    p.role = PortRole::kAccess;
    p.lvlan = 1;
    std::memcpy(p.mac, i ? kMacB : kMacA, 6);
  }
  PortEntry& up = s.ports[2];
  up.present = up.enabled = true;
  up.role = PortRole::kUplink;
  s.uplinks.emplace_back();
  s.uplinks[0].vid_to_lvlan[100] = 1;
  Network& n = s.networks[1];
  n.present = true;
  n.type = NetType::kVlan;
  n.seg_id = 100;
  n.uplink = 2;
  n.flood = {{0, 0}, {1, 0}, {2, 100}};
  s.fdb = Fdb({{Fdb::make_key(1, kMacA), 0, kNoSlot}, {Fdb::make_key(1, kMacB), 1, kNoSlot}});
  return s;
}

// 64-byte Ethernet/IPv4/UDP frames from VM A to VM B, flow i varies the
// source address and port (as the whole-switch generator does).
std::vector<std::vector<uint8_t>> make_frames(uint32_t flows) {
  std::vector<std::vector<uint8_t>> frames;
  for (uint32_t i = 0; i < flows; i++) {
    std::vector<uint8_t> f(60, 0);
    std::memcpy(&f[0], kMacB, 6);
    std::memcpy(&f[6], kMacA, 6);
    f[12] = 0x08;
    f[14] = 0x45;
    f[16] = 0;
    f[17] = 46;  // total length
    f[22] = 64;
    f[23] = 17;  // UDP
    f[26] = 10;
    f[27] = 0;
    f[28] = uint8_t(i >> 8);
    f[29] = uint8_t(i);
    f[30] = 10, f[33] = 1;
    f[34] = uint8_t((1024 + i / 65536) >> 8), f[35] = uint8_t(1024 + i / 65536);
    f[36] = 0x13, f[37] = 0x89;
    f[38] = 0, f[39] = 26;
    frames.push_back(std::move(f));
  }
  return frames;
}

void run(benchmark::State& state, uint32_t key_bytes, bool miss) {
  const uint32_t flows = static_cast<uint32_t>(state.range(0));
  Snapshot snap = make_snapshot();
  auto frames = make_frames(flows);
  FlowCache cache(65536);
  std::mt19937 rng(42);
  std::vector<uint32_t> order(1 << 16);
  for (auto& o : order) o = rng() % flows;
  size_t next = 0;
  uint32_t gen = 1;
  uint64_t cycles = 0, pkts = 0;
  for (auto _ : state) {
    // A publish before every burst (the worst case): each flow's first
    // packet in the burst misses and runs the pipeline.
    if (miss) gen = gen == UINT32_MAX ? 1 : gen + 1;
    uint64_t t0 = rte_rdtsc();
    for (int i = 0; i < 32; i++) {
      const auto& f = frames[order[next++ & 0xffff]];
      FlowKey key;
      PacketMeta meta;
      parse_frame(f.data(), static_cast<uint32_t>(f.size()), 0, ParseOptions{}, &key, &meta);
      uint32_t h = FlowCache::hash(key, key_bytes);
      uint32_t stamp;
      const CachedFlow* a = cache.lookup(key, h, key_bytes, gen, &stamp);
      if (!a) {
        Action d = pipeline_decide(snap, key);
        bool evicted;
        cache.insert(key, h, key_bytes, gen, 0, d, &evicted);
        benchmark::DoNotOptimize(d);
      } else {
        benchmark::DoNotOptimize(a);
      }
    }
    cycles += rte_rdtsc() - t0;
    pkts += 32;
  }
  state.SetItemsProcessed(static_cast<int64_t>(pkts));
  state.counters["cycles/pkt"] = double(cycles) / double(pkts);
}

void BM_ParseCacheHitL2(benchmark::State& s) { run(s, kL2KeyBytes, false); }
void BM_ParseCacheHitFullKey(benchmark::State& s) { run(s, kFullKeyBytes, false); }
void BM_NewSnapshotEveryBurst(benchmark::State& s) { run(s, kFullKeyBytes, true); }

BENCHMARK(BM_ParseCacheHitL2)->Arg(1)->Arg(1000)->Arg(100000);
BENCHMARK(BM_ParseCacheHitFullKey)->Arg(1)->Arg(1000)->Arg(100000);
BENCHMARK(BM_NewSnapshotEveryBurst)->Arg(1)->Arg(1000)->Arg(100000);

}  // namespace
}  // namespace strait::dp
