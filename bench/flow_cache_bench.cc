// Flow cache and FDB microbenchmarks: per-packet cost of the worker's fast
// path lookups, a burst of 32 at a time. "cycles/pkt" is TSC ticks per item,
// "ns/pkt" CPU time per item.
//
// Keys are written into a burst array in place, as the parser would leave
// them (only the fields that vary per flow), so the cost measured is hashing
// and the table, not reading a big array of prepared keys.
#include <benchmark/benchmark.h>
#include <rte_cycles.h>

#include <cstring>
#include <random>
#include <vector>

#include "dataplane/fdb.h"
#include "dataplane/flow_cache.h"

namespace strait::dp {
namespace {

constexpr uint32_t kBurst = 32;
constexpr uint32_t kCacheEntries = 64 * 1024;
constexpr uint64_t kSeed = 0x5742414954ull;
constexpr size_t kSeqLen = 1 << 20;  // packets before the flow sequence repeats

FlowKey template_key() {
  FlowKey k{};
  k.in_port = 3;
  k.dl_type = kEthTypeIpv4;
  const uint8_t dst[6] = {0x52, 0x54, 0x00, 0x12, 0x34, 0x56};
  const uint8_t src[6] = {0x52, 0x54, 0x00, 0, 0, 0};
  std::memcpy(k.dl_dst, dst, 6);
  std::memcpy(k.dl_src, src, 6);
  k.nw_src[0] = 10;
  k.nw_dst[0] = 10;
  k.nw_dst[3] = 1;
  k.nw_proto = kIpProtoUdp;
  k.nw_ttl = 64;
  k.tp_dst = 4789;
  return k;
}

// Flow `id` differs from the template in the L2 scope (source MAC) and in the
// L3/L4 part (source IP, source port), so both scopes see `id` distinct flows.
inline void write_flow(FlowKey& k, uint32_t id) {
  std::memcpy(&k.dl_src[2], &id, 4);
  const uint32_t ip = id * 2654435761u;
  std::memcpy(&k.nw_src[0], &ip, 4);
  k.tp_src = uint16_t(id ^ (id >> 16));
}

std::vector<uint32_t> flow_sequence(uint32_t n_flows) {
  std::mt19937 rng(kSeed);
  std::vector<uint32_t> seq(kSeqLen);
  for (uint32_t& f : seq) f = rng() % n_flows;
  return seq;
}

// TSC ticks per packet, read once per burst. The bench machine is shared: a
// burst the scheduler interrupted (far longer than any burst of lookups, even
// all missing to DRAM) is left out of cycles/pkt and counted apart.
class BurstTsc {
 public:
  static constexpr uint64_t kPreemptedTicks = 200000;

  void start() { last_ = rte_rdtsc(); }
  void burst_done(uint32_t packets) {
    const uint64_t now = rte_rdtsc();
    const uint64_t ticks = now - last_;
    last_ = now;
    if (ticks < kPreemptedTicks) {
      ticks_ += ticks;
      packets_ += packets;
    } else {
      preempted_++;
    }
  }
  void report(benchmark::State& state, uint64_t packets) const {
    state.SetItemsProcessed(int64_t(packets));
    state.counters["cycles/pkt"] = packets_ ? double(ticks_) / double(packets_) : 0;
    state.counters["ns/pkt"] = benchmark::Counter(
        double(packets), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    state.counters["preempted"] = double(preempted_);
  }

 private:
  uint64_t last_ = 0, ticks_ = 0, packets_ = 0, preempted_ = 0;
};

// Hash + lookup of a burst of packets spread over range(0) flows, all cached
// before the timed loop (with more flows than entries, some stay misses).
// range(1) = key scope in bytes.
void BM_FlowCacheHit(benchmark::State& state) {
  const auto n_flows = uint32_t(state.range(0));
  const auto key_bytes = uint32_t(state.range(1));
  const uint32_t gen = 1;
  FlowCache cache(kCacheEntries);
  bool evicted;
  FlowKey k = template_key();
  for (uint32_t f = 0; f < n_flows; f++) {
    write_flow(k, f);
    cache.insert(k, FlowCache::hash(k, key_bytes), key_bytes, gen, 0, Action{}, &evicted);
  }
  const std::vector<uint32_t> seq = flow_sequence(n_flows);
  FlowKey burst[kBurst];
  for (FlowKey& b : burst) b = template_key();
  uint32_t hashes[kBurst];
  size_t pos = 0;
  uint64_t packets = 0, hits = 0;
  BurstTsc tsc;
  tsc.start();
  uint32_t stamp;
  for (auto _ : state) {
    for (uint32_t i = 0; i < kBurst; i++) write_flow(burst[i], seq[(pos + i) & (kSeqLen - 1)]);
    pos += kBurst;
    for (uint32_t i = 0; i < kBurst; i++) hashes[i] = FlowCache::hash(burst[i], key_bytes);
    for (uint32_t i = 0; i < kBurst; i++) {
      const CachedFlow* a = cache.lookup(burst[i], hashes[i], key_bytes, gen, &stamp);
      benchmark::DoNotOptimize(a);
      hits += a != nullptr;
    }
    packets += kBurst;
    tsc.burst_done(kBurst);
  }
  tsc.report(state, packets);
  state.counters["hit_ratio"] = double(hits) / double(packets);
}
BENCHMARK(BM_FlowCacheHit)
    ->RangeMultiplier(1000)
    ->Ranges({{1, 100000}, {kL2KeyBytes, kFullKeyBytes}});

// The miss path minus the pipeline: hash, lookup (miss), insert, for flows
// never seen before, into a cache kept full of live entries (every insert
// evicts, the steady state of a cache that is too small).
void BM_FlowCacheMissInsert(benchmark::State& state) {
  const auto key_bytes = uint32_t(state.range(0));
  const uint32_t gen = 1;
  FlowCache cache(kCacheEntries);
  FlowKey burst[kBurst];
  for (FlowKey& b : burst) b = template_key();
  uint32_t next_flow = 0;
  bool evicted;
  for (; next_flow < 4 * kCacheEntries; next_flow++) {
    write_flow(burst[0], next_flow);
    cache.insert(burst[0], FlowCache::hash(burst[0], key_bytes), key_bytes, gen, 0, Action{},
                 &evicted);
  }
  uint32_t hashes[kBurst];
  uint64_t packets = 0, evictions = 0;
  Action action;
  action.kind = ActionKind::kOutput;
  action.out_port = 1;
  BurstTsc tsc;
  tsc.start();
  uint32_t stamp;
  for (auto _ : state) {
    for (uint32_t i = 0; i < kBurst; i++) write_flow(burst[i], next_flow++);
    for (uint32_t i = 0; i < kBurst; i++) hashes[i] = FlowCache::hash(burst[i], key_bytes);
    for (uint32_t i = 0; i < kBurst; i++) {
      if (!cache.lookup(burst[i], hashes[i], key_bytes, gen, &stamp)) {
        cache.insert(burst[i], hashes[i], key_bytes, gen, 0, action, &evicted);
        evictions += evicted;
      }
    }
    packets += kBurst;
    tsc.burst_done(kBurst);
  }
  tsc.report(state, packets);
  state.counters["evictions/pkt"] = double(evictions) / double(packets);
}
BENCHMARK(BM_FlowCacheMissInsert)->Arg(kL2KeyBytes)->Arg(kFullKeyBytes);

// Hashing alone, for the breakdown of the two benchmarks above.
void BM_FlowCacheHash(benchmark::State& state) {
  const auto key_bytes = uint32_t(state.range(0));
  FlowKey burst[kBurst];
  for (uint32_t i = 0; i < kBurst; i++) {
    burst[i] = template_key();
    write_flow(burst[i], i);
  }
  uint64_t packets = 0;
  BurstTsc tsc;
  tsc.start();
  for (auto _ : state) {
    for (uint32_t i = 0; i < kBurst; i++) {
      benchmark::DoNotOptimize(burst[i]);
      uint32_t h = FlowCache::hash(burst[i], key_bytes);
      benchmark::DoNotOptimize(h);
    }
    packets += kBurst;
    tsc.burst_done(kBurst);
  }
  tsc.report(state, packets);
}
BENCHMARK(BM_FlowCacheHash)->Arg(kL2KeyBytes)->Arg(kFullKeyBytes);

// FDB lookups of present (lvlan, MAC) pairs in a table of range(0) entries.
void BM_FdbFind(benchmark::State& state) {
  const auto n = size_t(state.range(0));
  struct Query {
    uint16_t lvlan;
    uint8_t mac[6];
  };
  std::mt19937_64 rng(kSeed);
  std::vector<FdbEntry> entries;
  std::vector<Query> present;
  for (size_t i = 0; i < n; i++) {
    Query q;
    q.lvlan = uint16_t(1 + rng() % 100);
    uint64_t mac = rng();
    for (int b = 0; b < 6; b++) q.mac[b] = uint8_t(mac >> (8 * b));
    q.mac[0] &= 0xfe;  // unicast
    FdbEntry e;
    e.key = Fdb::make_key(q.lvlan, q.mac);
    e.port = uint16_t(i);
    entries.push_back(e);
    present.push_back(q);
  }
  const Fdb fdb(entries);
  std::vector<Query> seq(kSeqLen);
  for (Query& q : seq) q = present[rng() % n];
  size_t pos = 0;
  uint64_t packets = 0, found = 0;
  BurstTsc tsc;
  tsc.start();
  for (auto _ : state) {
    for (uint32_t i = 0; i < kBurst; i++) {
      const Query& q = seq[(pos + i) & (kSeqLen - 1)];
      const FdbEntry* e = fdb.find(q.lvlan, q.mac);
      benchmark::DoNotOptimize(e);
      found += e != nullptr;
    }
    pos += kBurst;
    packets += kBurst;
    tsc.burst_done(kBurst);
  }
  tsc.report(state, packets);
  if (found != packets) state.SkipWithError("FDB lost a key");
}
BENCHMARK(BM_FdbFind)->RangeMultiplier(100)->Range(1000, 100000);

}  // namespace
}  // namespace strait::dp
