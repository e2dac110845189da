// Compiled security groups: per-packet cost of the worker's path (fill_key,
// which includes the remote-group address lookup, then one rte_acl_classify
// per burst of 32) at 10, 100 and 1000 rules, and the control thread's build
// time. rte_acl needs the EAL: it is started once, without hugepages.
//
// The policy is neutron-shaped: mostly ingress TCP/UDP port rules from
// prefixes, a quarter of them from one of 4 remote groups of 1000 members
// (fixed IPs), a few any-protocol rules. Half of the packets are aimed at a
// rule, half are random.
#include <benchmark/benchmark.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "dataplane/sg_classifier.h"

namespace strait::dp {
namespace {

constexpr uint32_t kBurst = 32;
constexpr uint64_t kSeed = 0x5347ull;
// Few enough keys to stay in L2: the cost measured is the classifier, not DRAM.
constexpr size_t kPackets = 1 << 10;
constexpr uint32_t kGroups = 4, kMembers = 1000;

void ensure_eal() {
  static const bool ok = [] {
    std::string prefix = "--file-prefix=strait-bench-sg-" + std::to_string(getpid());
    std::vector<std::string> args = {
        "sg_classifier_bench",       "--no-huge", "-m", "512", "--no-pci",
        "--log-level=lib.eal:error", prefix};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    return rte_eal_init(int(argv.size()), argv.data()) >= 0;
  }();
  if (!ok) {
    std::fprintf(stderr, "rte_eal_init failed\n");
    std::exit(1);
  }
}

struct Policy {
  std::vector<SgRule> rules;
  std::vector<SgAddressSet> sets;
};

std::array<uint8_t, 16> addr(SgFamily f, uint32_t host, uint8_t net) {
  std::array<uint8_t, 16> a{};
  if (f == SgFamily::kIpv4) {
    a = {10, net, uint8_t(host >> 8), uint8_t(host)};
  } else {
    a[0] = 0xfd;
    a[7] = net;
    a[14] = uint8_t(host >> 8);
    a[15] = uint8_t(host);
  }
  return a;
}

Policy make_policy(size_t n_rules, SgFamily f, std::mt19937_64& rng) {
  Policy p;
  for (uint32_t g = 0; g < kGroups; g++) {
    SgAddressSet s;
    for (uint32_t m = 0; m < kMembers; m++)
      s.push_back({f, sg_max_len(f), addr(f, m, uint8_t(100 + g))});
    p.sets.push_back(s);
  }
  for (size_t i = 0; i < n_rules; i++) {
    SgRule r;
    r.direction = rng() % 8 ? SgDirection::kIngress : SgDirection::kEgress;
    r.family = f;
    r.remote.family = f;
    const uint32_t kind = rng() % 16;
    if (kind > 0) {
      r.any_proto = false;
      r.proto = rng() % 2 ? 6 : 17;
      r.tp_dst_lo = uint16_t(1 + rng() % 30000);
      r.tp_dst_hi = rng() % 4 ? r.tp_dst_lo : uint16_t(r.tp_dst_lo + rng() % 1000);
    }
    if (kind < 4) {
      r.remote_set = uint16_t(rng() % kGroups);
    } else {
      const uint8_t len = uint8_t(f == SgFamily::kIpv4 ? 8 + rng() % 25 : 32 + rng() % 97);
      r.remote = {f, len, addr(f, uint32_t(rng()), uint8_t(rng() % 8))};
    }
    p.rules.push_back(r);
  }
  return p;
}

std::vector<FlowKey> make_packets(const Policy& p, SgFamily f, std::mt19937_64& rng) {
  std::vector<FlowKey> pkts(kPackets);
  for (FlowKey& k : pkts) {
    k = FlowKey{};
    k.dl_type = f == SgFamily::kIpv4 ? kEthTypeIpv4 : kEthTypeIpv6;
    const SgRule& r = p.rules[rng() % p.rules.size()];
    const bool aimed = rng() % 2;
    std::array<uint8_t, 16> remote = addr(f, uint32_t(rng()), uint8_t(rng() % 8));
    if (aimed && r.remote_set != kSgNoSet)
      remote = p.sets[r.remote_set][rng() % kMembers].addr;
    else if (aimed)
      remote = r.remote.addr;
    const std::array<uint8_t, 16> local = addr(f, 5, 0);
    std::memcpy(k.nw_src, remote.data(), 16);  // ingress: the remote is the source
    std::memcpy(k.nw_dst, local.data(), 16);
    k.nw_proto = aimed && !r.any_proto ? r.proto : (rng() % 2 ? 6 : 17);
    k.tp_src = uint16_t(1024 + rng() % 60000);
    k.tp_dst = aimed ? r.tp_dst_lo : uint16_t(rng());
  }
  return pkts;
}

// fill_key for a burst of ingress packets, then one classify: what a worker
// does per burst. range(0) = rules, range(1) = family (4 or 6).
void BM_SgClassifyBurst(benchmark::State& state) {
  ensure_eal();
  const auto n_rules = size_t(state.range(0));
  const SgFamily f = state.range(1) == 4 ? SgFamily::kIpv4 : SgFamily::kIpv6;
  std::mt19937_64 rng(kSeed);
  const Policy p = make_policy(n_rules, f, rng);
  SgBuildResult b = SgClassifier::build(p.rules, p.sets);
  if (!b.classifier) {
    state.SkipWithError(b.error.c_str());
    return;
  }
  const SgClassifier& c = *b.classifier;
  const std::vector<FlowKey> pkts = make_packets(p, f, rng);
  SgKey keys[kBurst];
  const uint8_t* key_ptrs[kBurst];
  for (uint32_t i = 0; i < kBurst; i++) key_ptrs[i] = reinterpret_cast<const uint8_t*>(&keys[i]);
  uint32_t results[kBurst];
  size_t pos = 0;
  uint64_t packets = 0, allowed = 0, ticks = 0;
  for (auto _ : state) {
    const uint64_t t0 = rte_rdtsc();
    SgFamily fam;
    for (uint32_t i = 0; i < kBurst; i++)
      c.fill_key(SgDirection::kIngress, pkts[(pos + i) & (kPackets - 1)], &keys[i], &fam);
    c.classify(SgDirection::kIngress, f, key_ptrs, kBurst, results);
    ticks += rte_rdtsc() - t0;
    for (uint32_t r : results) allowed += r != 0;
    pos += kBurst;
    packets += kBurst;
  }
  state.SetItemsProcessed(int64_t(packets));
  state.counters["cycles/pkt"] = double(ticks) / double(packets);
  state.counters["ns/pkt"] = benchmark::Counter(
      double(packets), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["allowed"] = double(allowed) / double(packets);
}
BENCHMARK(BM_SgClassifyBurst)->ArgsProduct({{10, 100, 1000}, {4, 6}});

// The breakdown of BM_SgClassifyBurst: keys only (address lookup included),
// and rte_acl_classify only, on keys filled before the timed loop.
void BM_SgFillKey(benchmark::State& state) {
  ensure_eal();
  std::mt19937_64 rng(kSeed);
  const Policy p = make_policy(size_t(state.range(0)), SgFamily::kIpv4, rng);
  SgBuildResult b = SgClassifier::build(p.rules, p.sets);
  if (!b.classifier) {
    state.SkipWithError(b.error.c_str());
    return;
  }
  const std::vector<FlowKey> pkts = make_packets(p, SgFamily::kIpv4, rng);
  SgKey keys[kBurst];
  size_t pos = 0;
  for (auto _ : state) {
    SgFamily fam;
    for (uint32_t i = 0; i < kBurst; i++)
      b.classifier->fill_key(SgDirection::kIngress, pkts[(pos + i) & (kPackets - 1)], &keys[i],
                             &fam);
    benchmark::DoNotOptimize(keys);
    pos += kBurst;
  }
  state.SetItemsProcessed(int64_t(state.iterations() * kBurst));
}
BENCHMARK(BM_SgFillKey)->Arg(100);

void BM_SgClassifyOnly(benchmark::State& state) {
  ensure_eal();
  const SgFamily f = state.range(1) == 4 ? SgFamily::kIpv4 : SgFamily::kIpv6;
  std::mt19937_64 rng(kSeed);
  const Policy p = make_policy(size_t(state.range(0)), f, rng);
  SgBuildResult b = SgClassifier::build(p.rules, p.sets);
  if (!b.classifier) {
    state.SkipWithError(b.error.c_str());
    return;
  }
  const std::vector<FlowKey> pkts = make_packets(p, f, rng);
  std::vector<SgKey> keys(kPackets);
  std::vector<const uint8_t*> ptrs(kPackets);
  for (size_t i = 0; i < kPackets; i++) {
    SgFamily fam;
    b.classifier->fill_key(SgDirection::kIngress, pkts[i], &keys[i], &fam);
    ptrs[i] = reinterpret_cast<const uint8_t*>(&keys[i]);
  }
  uint32_t results[kBurst];
  size_t pos = 0;
  for (auto _ : state) {
    b.classifier->classify(SgDirection::kIngress, f, &ptrs[pos & (kPackets - 1)], kBurst, results);
    benchmark::DoNotOptimize(results);
    pos += kBurst;
  }
  state.SetItemsProcessed(int64_t(state.iterations() * kBurst));
}
BENCHMARK(BM_SgClassifyOnly)->ArgsProduct({{10, 100, 1000}, {4, 6}});

// One packet at a time (match): the slow path's and trace's use.
void BM_SgMatchOne(benchmark::State& state) {
  ensure_eal();
  const auto n_rules = size_t(state.range(0));
  std::mt19937_64 rng(kSeed);
  const Policy p = make_policy(n_rules, SgFamily::kIpv4, rng);
  SgBuildResult b = SgClassifier::build(p.rules, p.sets);
  if (!b.classifier) {
    state.SkipWithError(b.error.c_str());
    return;
  }
  const std::vector<FlowKey> pkts = make_packets(p, SgFamily::kIpv4, rng);
  size_t pos = 0;
  for (auto _ : state) {
    uint32_t r = b.classifier->match(SgDirection::kIngress, pkts[pos++ & (kPackets - 1)]);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(int64_t(state.iterations()));
}
BENCHMARK(BM_SgMatchOne)->Arg(10)->Arg(100)->Arg(1000);

// Control thread: compile rules + index 4 x 1000 members (build), and a
// membership change alone (with_address_sets).
void BM_SgBuild(benchmark::State& state) {
  ensure_eal();
  const auto n_rules = size_t(state.range(0));
  const SgFamily f = state.range(1) == 4 ? SgFamily::kIpv4 : SgFamily::kIpv6;
  std::mt19937_64 rng(kSeed);
  const Policy p = make_policy(n_rules, f, rng);
  for (auto _ : state) {
    SgBuildResult b = SgClassifier::build(p.rules, p.sets);
    if (!b.classifier) state.SkipWithError(b.error.c_str());
    benchmark::DoNotOptimize(b.classifier.get());
  }
}
BENCHMARK(BM_SgBuild)->ArgsProduct({{10, 100, 1000}, {4, 6}})->Unit(benchmark::kMillisecond);

void BM_SgMembershipChange(benchmark::State& state) {
  ensure_eal();
  std::mt19937_64 rng(kSeed);
  const Policy p = make_policy(100, SgFamily::kIpv4, rng);
  SgBuildResult b = SgClassifier::build(p.rules, p.sets);
  if (!b.classifier) {
    state.SkipWithError(b.error.c_str());
    return;
  }
  for (auto _ : state) {
    SgBuildResult n = b.classifier->with_address_sets(p.sets);
    benchmark::DoNotOptimize(n.classifier.get());
  }
  state.counters["members"] = double(kGroups * kMembers);
}
BENCHMARK(BM_SgMembershipChange)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace strait::dp
