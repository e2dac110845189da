#include "dataplane/flow_cache.h"
#include "dataplane/cache_dump.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

namespace strait::dp {
namespace {

FlowKey make_flow(uint32_t src_ip, uint16_t sport, uint16_t in_port = 1) {
  FlowKey k{};
  k.in_port = in_port;
  k.dl_type = kEthTypeIpv4;
  const uint8_t dst[6] = {0x02, 0, 0, 0, 0, 0x02};
  const uint8_t src[6] = {0x02, 0, 0, 0, 0, 0x01};
  std::memcpy(k.dl_dst, dst, 6);
  std::memcpy(k.dl_src, src, 6);
  std::memcpy(k.nw_src, &src_ip, 4);
  k.nw_dst[0] = 10;
  k.nw_proto = kIpProtoUdp;
  k.tp_src = sport;
  k.tp_dst = 53;
  return k;
}

FlowKey random_key(std::mt19937_64& rng) {
  FlowKey k{};
  auto* p = reinterpret_cast<uint8_t*>(&k);
  for (size_t i = 0; i < sizeof k; i += 8) {
    uint64_t w = rng();
    std::memcpy(p + i, &w, 8);
  }
  return k;
}

Action output(uint16_t port) {
  Action a;
  a.kind = ActionKind::kOutput;
  a.out_port = port;
  a.lvlan = 7;
  return a;
}

bool same_action(const Action& a, const Action& b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// FlowCache::insert, as whether it evicted.
bool insert(FlowCache& c, const FlowKey& k, uint32_t h, uint32_t kb, uint32_t gen,
            const Action& a) {
  bool evicted;
  const CachedFlow* f = c.insert(k, h, kb, gen, 0, a, &evicted);
  EXPECT_TRUE(f && same_action(f->action, a));
  return evicted;
}

// FlowCache::lookup's action, or null.
const Action* lookup(FlowCache& c, const FlowKey& k, uint32_t h, uint32_t kb, uint32_t gen) {
  uint32_t stamp;
  const CachedFlow* f = c.lookup(k, h, kb, gen, &stamp);
  return f ? &f->action : nullptr;
}

// Random full-scope keys whose bucket is `bucket`. Relies on the bucket index
// being the low bits of the hash (flow_cache.cc).
std::vector<FlowKey> keys_in_bucket(const FlowCache& cache, uint32_t bucket, size_t n) {
  const uint32_t mask = cache.capacity() / FlowCache::kWays - 1;
  std::mt19937_64 rng(42);
  std::vector<FlowKey> out;
  while (out.size() < n) {
    FlowKey k = random_key(rng);
    if ((FlowCache::hash(k, kFullKeyBytes) & mask) == bucket) out.push_back(k);
  }
  return out;
}

size_t count_entries(const FlowCache& cache, uint32_t gen) {
  size_t n = 0;
  cache.for_each(gen, [&](const FlowKey&, uint32_t, const Action&) { n++; });
  return n;
}

TEST(FlowCacheTest, MissThenHit) {
  FlowCache cache(1024);
  FlowKey k = make_flow(0x0a000001, 1000);
  uint32_t h = FlowCache::hash(k, kFullKeyBytes);
  EXPECT_EQ(lookup(cache, k, h, kFullKeyBytes, 1), nullptr);
  EXPECT_FALSE(insert(cache, k, h, kFullKeyBytes, 1, output(3)));
  const Action* a = lookup(cache, k, h, kFullKeyBytes, 1);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(same_action(*a, output(3)));
  // Another flow is still a miss.
  FlowKey other = make_flow(0x0a000001, 1001);
  EXPECT_EQ(lookup(cache, other, FlowCache::hash(other, kFullKeyBytes), kFullKeyBytes, 1), nullptr);
}

TEST(FlowCacheTest, HashCoversOnlyTheScope) {
  FlowKey a = make_flow(0x0a000001, 1000);
  FlowKey b = make_flow(0x0a000002, 2000);  // differs only in L3/L4
  EXPECT_EQ(FlowCache::hash(a, kL2KeyBytes), FlowCache::hash(b, kL2KeyBytes));
  EXPECT_NE(FlowCache::hash(a, kFullKeyBytes), FlowCache::hash(b, kFullKeyBytes));
  FlowKey c = a;
  c.in_port = 2;  // L2 field
  EXPECT_NE(FlowCache::hash(a, kL2KeyBytes), FlowCache::hash(c, kL2KeyBytes));
}

// The worker keeps a flow's conntrack hint in its entry: it must stay with
// that key and generation, and start empty for anything inserted.
TEST(FlowCacheTest, ConntrackHintStaysWithItsKeyAndGeneration) {
  FlowCache cache(64);
  auto keys = keys_in_bucket(cache, 2, 5);
  auto h = [](const FlowKey& k) { return FlowCache::hash(k, kFullKeyBytes); };
  bool evicted;
  uint32_t stamp;
  for (size_t i = 0; i < 4; i++) {
    CachedFlow* f = cache.insert(keys[i], h(keys[i]), kFullKeyBytes, 1, 0, output(i), &evicted);
    EXPECT_EQ(f->ct, CtHint{});
    f->ct = CtHint{uint32_t(i + 1), 7};
  }
  for (size_t i = 0; i < 4; i++)
    EXPECT_EQ(cache.lookup(keys[i], h(keys[i]), kFullKeyBytes, 1, &stamp)->ct,
              (CtHint{uint32_t(i + 1), 7}));
  // A refresh of the same key in the same generation keeps it.
  EXPECT_EQ(cache.insert(keys[1], h(keys[1]), kFullKeyBytes, 1, 0, output(9), &evicted)->ct,
            (CtHint{2, 7}));
  EXPECT_FALSE(evicted);
  // The key that takes an evicted entry gets none of its hint.
  CachedFlow* f = cache.insert(keys[4], h(keys[4]), kFullKeyBytes, 1, 0, output(4), &evicted);
  EXPECT_TRUE(evicted);
  EXPECT_EQ(f->ct, CtHint{});
  // Nor does the same key under the next generation.
  EXPECT_EQ(cache.insert(keys[2], h(keys[2]), kFullKeyBytes, 2, 0, output(2), &evicted)->ct,
            CtHint{});
}

TEST(FlowCacheTest, OtherGenerationIsAMiss) {
  FlowCache cache(1024);
  FlowKey k = make_flow(0x0a000001, 1000);
  uint32_t h = FlowCache::hash(k, kFullKeyBytes);
  insert(cache, k, h, kFullKeyBytes, 1, output(3));
  EXPECT_EQ(lookup(cache, k, h, kFullKeyBytes, 2), nullptr);
  EXPECT_NE(lookup(cache, k, h, kFullKeyBytes, 1), nullptr);
  // Re-inserting under the new generation gives the new action there.
  EXPECT_FALSE(insert(cache, k, h, kFullKeyBytes, 2, output(4)));
  ASSERT_NE(lookup(cache, k, h, kFullKeyBytes, 2), nullptr);
  EXPECT_EQ(lookup(cache, k, h, kFullKeyBytes, 2)->out_port, 4);
}

TEST(FlowCacheTest, L2ScopeIgnoresL3Fields) {
  FlowCache cache(1024);
  FlowKey a = make_flow(0x0a000001, 1000);
  FlowKey b = make_flow(0x0a000002, 2000);
  b.tun_vni = 99;  // first byte past the L2 scope
  insert(cache, a, FlowCache::hash(a, kL2KeyBytes), kL2KeyBytes, 1, output(5));
  const Action* hit = lookup(cache, b, FlowCache::hash(b, kL2KeyBytes), kL2KeyBytes, 1);
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->out_port, 5);
  // An L2 difference (last byte of the scope) is another flow.
  FlowKey c = a;
  c.pad0 = 1;
  EXPECT_EQ(lookup(cache, c, FlowCache::hash(c, kL2KeyBytes), kL2KeyBytes, 1), nullptr);
}

TEST(FlowCacheTest, L2EntryNotReturnedToFullScopeLookup) {
  FlowCache cache(1024);
  FlowKey k = make_flow(0x0a000001, 1000);
  uint32_t h24 = FlowCache::hash(k, kL2KeyBytes);
  insert(cache, k, h24, kL2KeyBytes, 1, output(5));
  EXPECT_EQ(lookup(cache, k, FlowCache::hash(k, kFullKeyBytes), kFullKeyBytes, 1), nullptr);
  // Same hash, same bucket, same bytes: only key_bytes differs.
  EXPECT_EQ(lookup(cache, k, h24, kFullKeyBytes, 1), nullptr);
  EXPECT_NE(lookup(cache, k, h24, kL2KeyBytes, 1), nullptr);
  // And the other way round.
  FlowCache full(1024);
  uint32_t h88 = FlowCache::hash(k, kFullKeyBytes);
  insert(full, k, h88, kFullKeyBytes, 1, output(6));
  EXPECT_EQ(lookup(full, k, h88, kL2KeyBytes, 1), nullptr);
}

// Keys are matched on the stored hash first; the byte compare only matters on
// a full hash collision, which this forces by passing one hash for all keys.
TEST(FlowCacheTest, CompareCoversEveryByteOfTheScope) {
  std::mt19937_64 rng(3);
  const FlowKey k = random_key(rng);
  for (uint32_t kb : {kL2KeyBytes, kFullKeyBytes}) {
    FlowCache cache(64);
    const uint32_t h = FlowCache::hash(k, kb);
    insert(cache, k, h, kb, 1, output(1));
    for (uint32_t i = 0; i < sizeof(FlowKey); i++) {
      FlowKey other = k;
      reinterpret_cast<uint8_t*>(&other)[i] ^= 0x10;
      const Action* a = lookup(cache, other, h, kb, 1);
      if (i < kb)
        EXPECT_EQ(a, nullptr) << "byte " << i << " ignored in scope " << kb;
      else
        EXPECT_NE(a, nullptr) << "byte " << i << " compared outside scope " << kb;
    }
  }
}

TEST(FlowCacheTest, SameKeyInsertRefreshesInPlace) {
  FlowCache cache(64);
  auto keys = keys_in_bucket(cache, 3, 4);
  for (const FlowKey& k : keys)
    EXPECT_FALSE(insert(cache, k, FlowCache::hash(k, kFullKeyBytes), kFullKeyBytes, 1, output(1)));
  // The bucket is full; re-inserting a cached key must not evict anything.
  uint32_t h = FlowCache::hash(keys[2], kFullKeyBytes);
  EXPECT_FALSE(insert(cache, keys[2], h, kFullKeyBytes, 1, output(9)));
  EXPECT_EQ(lookup(cache, keys[2], h, kFullKeyBytes, 1)->out_port, 9);
  EXPECT_EQ(count_entries(cache, 1), 4u);
  for (const FlowKey& k : keys)
    EXPECT_NE(lookup(cache, k, FlowCache::hash(k, kFullKeyBytes), kFullKeyBytes, 1), nullptr);
}

TEST(FlowCacheTest, FullBucketEvictsRoundRobin) {
  FlowCache cache(64);  // 16 buckets
  const uint32_t kBucket = 5;
  auto keys = keys_in_bucket(cache, kBucket, 9);
  auto h = [](const FlowKey& k) { return FlowCache::hash(k, kFullKeyBytes); };
  auto cached = [&](size_t i) { return lookup(cache, keys[i], h(keys[i]), kFullKeyBytes, 1); };
  // A neighbour in another bucket must survive everything below.
  FlowKey other = keys_in_bucket(cache, kBucket + 1, 1)[0];
  insert(cache, other, h(other), kFullKeyBytes, 1, output(100));

  for (size_t i = 0; i < 4; i++)  // ways 0..3
    EXPECT_FALSE(insert(cache, keys[i], h(keys[i]), kFullKeyBytes, 1, output(i)));
  // Victims follow the cursor: way 0 (keys[0]), way 1 (keys[1]), ...
  for (size_t i = 4; i < 9; i++) {
    EXPECT_TRUE(insert(cache, keys[i], h(keys[i]), kFullKeyBytes, 1, output(i))) << i;
    EXPECT_EQ(cached(i - 4), nullptr) << "victim of insert " << i;
    for (size_t j = i - 3; j <= i; j++) {
      ASSERT_NE(cached(j), nullptr) << "key " << j << " after insert " << i;
      EXPECT_EQ(cached(j)->out_port, j);
    }
  }
  // Insert 8 wrapped the cursor: it replaced keys[4] in way 0.
  EXPECT_EQ(count_entries(cache, 1), 5u);
  EXPECT_NE(lookup(cache, other, h(other), kFullKeyBytes, 1), nullptr);
}

TEST(FlowCacheTest, StaleGenerationReusedBeforeLiveEntries) {
  FlowCache cache(64);
  auto keys = keys_in_bucket(cache, 9, 9);
  auto h = [](const FlowKey& k) { return FlowCache::hash(k, kFullKeyBytes); };
  for (size_t i = 0; i < 4; i++) insert(cache, keys[i], h(keys[i]), kFullKeyBytes, 1, output(i));
  // Generation 2: four inserts take the four stale ways, none is an eviction.
  for (size_t i = 4; i < 8; i++) {
    EXPECT_FALSE(insert(cache, keys[i], h(keys[i]), kFullKeyBytes, 2, output(i))) << i;
    // The gen-2 entries inserted so far are never the ones replaced.
    for (size_t j = 4; j <= i; j++)
      EXPECT_NE(lookup(cache, keys[j], h(keys[j]), kFullKeyBytes, 2), nullptr) << j;
  }
  EXPECT_EQ(count_entries(cache, 1), 0u);
  EXPECT_EQ(count_entries(cache, 2), 4u);
  // Now all ways are live: the next one evicts, at the cursor (way 0 = keys[4]).
  EXPECT_TRUE(insert(cache, keys[8], h(keys[8]), kFullKeyBytes, 2, output(8)));
  EXPECT_EQ(lookup(cache, keys[4], h(keys[4]), kFullKeyBytes, 2), nullptr);
  for (size_t j = 5; j < 9; j++)
    EXPECT_NE(lookup(cache, keys[j], h(keys[j]), kFullKeyBytes, 2), nullptr) << j;
}

TEST(FlowCacheTest, StaleWayWinsOverTheCursorWay) {
  FlowCache cache(64);
  auto keys = keys_in_bucket(cache, 0, 10);
  auto h = [](const FlowKey& k) { return FlowCache::hash(k, kFullKeyBytes); };
  auto put = [&](size_t i, uint32_t gen) {
    return insert(cache, keys[i], h(keys[i]), kFullKeyBytes, gen, output(i));
  };
  auto live = [&](size_t i, uint32_t gen) {
    return lookup(cache, keys[i], h(keys[i]), kFullKeyBytes, gen) != nullptr;
  };
  for (size_t i = 0; i < 4; i++) put(i, 1);
  EXPECT_TRUE(put(4, 1));  // evicts way 0, the cursor moves to way 1
  // Generation 2 takes ways 0 and 1; ways 2 and 3 still hold generation 1.
  EXPECT_FALSE(put(5, 2));
  EXPECT_FALSE(put(6, 2));
  // The cursor names way 1 (keys[6], live) but the stale way 2 goes first.
  EXPECT_FALSE(put(7, 2));
  EXPECT_TRUE(live(6, 2));
  EXPECT_FALSE(put(8, 2));  // way 3
  for (size_t j = 5; j < 9; j++) EXPECT_TRUE(live(j, 2)) << j;
  // All live now: the cursor's way 1 (keys[6]) is the victim.
  EXPECT_TRUE(put(9, 2));
  EXPECT_FALSE(live(6, 2));
  for (size_t j : {5, 7, 8, 9}) EXPECT_TRUE(live(j, 2)) << j;
}

TEST(FlowCacheTest, Clear) {
  FlowCache cache(256);
  std::mt19937_64 rng(1);
  std::vector<FlowKey> keys;
  for (int i = 0; i < 100; i++) {
    keys.push_back(random_key(rng));
    insert(cache, keys.back(), FlowCache::hash(keys.back(), kFullKeyBytes), kFullKeyBytes, 3,
                 output(i));
  }
  EXPECT_GT(count_entries(cache, 3), 0u);
  cache.clear();
  EXPECT_EQ(count_entries(cache, 3), 0u);
  for (const FlowKey& k : keys)
    EXPECT_EQ(lookup(cache, k, FlowCache::hash(k, kFullKeyBytes), kFullKeyBytes, 3), nullptr);
  // Usable again afterwards, and nothing counts as an eviction in a cleared cache.
  for (const FlowKey& k : keys)
    insert(cache, k, FlowCache::hash(k, kFullKeyBytes), kFullKeyBytes, 3, output(1));
  EXPECT_NE(lookup(cache, keys[0], FlowCache::hash(keys[0], kFullKeyBytes), kFullKeyBytes, 3),
            nullptr);
}

TEST(FlowCacheTest, CapacityRoundsUpToPowerOfTwo) {
  EXPECT_EQ(FlowCache(0).capacity(), 4u);
  EXPECT_EQ(FlowCache(1).capacity(), 4u);
  EXPECT_EQ(FlowCache(4).capacity(), 4u);
  EXPECT_EQ(FlowCache(5).capacity(), 8u);
  EXPECT_EQ(FlowCache(1000).capacity(), 1024u);
  EXPECT_EQ(FlowCache(65536).capacity(), 65536u);
  EXPECT_EQ(FlowCache(65537).capacity(), 131072u);
}

TEST(FlowCacheTest, SingleBucketCacheWorks) {
  FlowCache cache(1);
  std::mt19937_64 rng(5);
  int evictions = 0;
  for (int i = 0; i < 10; i++) {
    FlowKey k = random_key(rng);
    evictions += insert(cache, k, FlowCache::hash(k, kFullKeyBytes), kFullKeyBytes, 1, output(i));
  }
  EXPECT_EQ(evictions, 6);
  EXPECT_EQ(count_entries(cache, 1), 4u);
}

TEST(FlowCacheTest, ForEachVisitsOnlyItsGeneration) {
  FlowCache cache(1024);
  std::vector<FlowKey> keys;
  for (uint16_t i = 0; i < 10; i++) keys.push_back(make_flow(0x0a000000 + i, 1000 + i));
  for (uint16_t i = 0; i < 10; i++) {
    uint32_t kb = i % 2 ? kL2KeyBytes : kFullKeyBytes;
    keys[i].in_port = i;  // distinct in L2 scope as well
    insert(cache, keys[i], FlowCache::hash(keys[i], kb), kb, i < 6 ? 1 : 2, output(i));
  }
  std::vector<bool> seen(10);
  cache.for_each(1, [&](const FlowKey& k, uint32_t key_bytes, const Action& a) {
    ASSERT_LT(a.out_port, 6);
    EXPECT_FALSE(seen[a.out_port]);
    seen[a.out_port] = true;
    EXPECT_EQ(key_bytes, a.out_port % 2 ? kL2KeyBytes : kFullKeyBytes);
    EXPECT_EQ(std::memcmp(&k, &keys[a.out_port], key_bytes), 0);
  });
  for (int i = 0; i < 6; i++) EXPECT_TRUE(seen[i]) << i;
  EXPECT_EQ(count_entries(cache, 2), 4u);
  EXPECT_EQ(count_entries(cache, 3), 0u);
}

// Reference model key: the scope's bytes (their length is the scope).
std::string ref_key(const FlowKey& k, uint32_t key_bytes) {
  return std::string(reinterpret_cast<const char*>(&k), key_bytes);
}

// 100k random lookups and inserts on a small cache against an unordered_map.
// A hit must return the reference's action; a miss on a key the reference
// holds is allowed only for an entry some insert reported evicting, and the
// cache's live entries must always be the reference minus undiscovered
// evictions.
TEST(FlowCacheTest, DifferentialAgainstUnorderedMap) {
  std::mt19937_64 rng(20240611);
  FlowCache cache(256);
  // Keys share L2 prefixes, so L2-scope entries alias across L3 variety.
  std::vector<FlowKey> pool;
  for (int i = 0; i < 400; i++) {
    FlowKey k = random_key(rng);
    if (i % 3 && !pool.empty()) std::memcpy(&k, &pool[rng() % pool.size()], kL2KeyBytes);
    pool.push_back(k);
  }
  std::unordered_map<std::string, Action> ref;  // entries of the current generation
  uint32_t gen = 1;
  size_t evictions = 0, evicted_misses = 0, hits = 0, inserts = 0, total_evictions = 0;
  auto check_live_count = [&] {
    size_t live = 0;
    cache.for_each(gen, [&](const FlowKey& k, uint32_t kb, const Action& a) {
      live++;
      auto it = ref.find(ref_key(k, kb));
      ASSERT_NE(it, ref.end());
      EXPECT_TRUE(same_action(a, it->second));
    });
    EXPECT_EQ(live, ref.size() - (evictions - evicted_misses));
  };
  for (int op = 0; op < 100000; op++) {
    if (rng() % 5000 == 0) {  // a new snapshot: everything cached goes stale
      gen++;
      ref.clear();
      evictions = evicted_misses = 0;
    }
    const FlowKey& k = pool[rng() % pool.size()];
    const uint32_t kb = rng() % 2 ? kL2KeyBytes : kFullKeyBytes;
    const uint32_t h = FlowCache::hash(k, kb);
    auto it = ref.find(ref_key(k, kb));
    if (rng() % 10 < 6) {
      const Action* a = lookup(cache, k, h, kb, gen);
      if (a) {
        hits++;
        ASSERT_NE(it, ref.end()) << "hit on a key never inserted under gen " << gen;
        ASSERT_TRUE(same_action(*a, it->second)) << "op " << op;
      } else if (it != ref.end()) {
        evicted_misses++;
        ASSERT_LE(evicted_misses, evictions) << "lost an entry no insert evicted, op " << op;
        ref.erase(it);
      }
    } else {
      Action a = output(uint16_t(rng()));
      a.flags = uint8_t(rng());
      inserts++;
      // Re-inserting an evicted key makes it live again: its eviction is found.
      if (it != ref.end() && !lookup(cache, k, h, kb, gen)) evicted_misses++;
      if (insert(cache, k, h, kb, gen, a)) {
        evictions++;
        total_evictions++;
      }
      ASSERT_LE(evicted_misses, evictions) << "lost an entry no insert evicted, op " << op;
      const Action* now = lookup(cache, k, h, kb, gen);
      ASSERT_TRUE(now && same_action(*now, a)) << "insert did not stick, op " << op;
      ref[ref_key(k, kb)] = a;
    }
    if (op % 997 == 0) check_live_count();
    if (HasFatalFailure()) return;
  }
  check_live_count();
  // The run exercised what it claims to.
  EXPECT_GT(hits, 10000u);
  EXPECT_GT(inserts, 30000u);
  EXPECT_GT(total_evictions, 5000u);
  EXPECT_GE(gen, 10u);
  std::printf("hits %zu inserts %zu evictions %zu generations %u\n", hits, inserts, total_evictions,
              gen);
}

// straitctl cache dump copies the cache a slice per serve() call (the worker
// calls it once per loop iteration): several calls for a large cache, every
// live entry of the generation counted, each copied one a cached entry.
TEST(CacheDump, CopiesTheWholeCacheASliceAtATime) {
  FlowCache cache(1u << 16);  // 16384 buckets: 16 slices
  Action a;
  a.kind = ActionKind::kOutput;
  std::unordered_map<uint32_t, bool> inserted;  // by source IP
  for (uint32_t i = 0; i < 3000; i++) {
    a.out_port = uint16_t(i);
    insert(cache, make_flow(i, 1000), FlowCache::hash(make_flow(i, 1000), kFullKeyBytes),
                 kFullKeyBytes, 7, a);
  }
  // Another generation's entries are not copied.
  insert(cache, make_flow(99999, 1), FlowCache::hash(make_flow(99999, 1), kFullKeyBytes),
               kFullKeyBytes, 6, a);
  uint32_t live = 0;
  cache.for_each(7, [&](const FlowKey&, uint32_t, const Action&) { live++; });

  CacheDumpSlot slot;
  ASSERT_TRUE(slot.request());
  EXPECT_FALSE(slot.request()) << "one request at a time";
  int calls = 0;
  while (!slot.ready()) {
    slot.serve(cache, 7);
    ASSERT_LT(++calls, 1000);
  }
  EXPECT_EQ(calls, int(cache.buckets() / CacheDumpSlot::kBucketsPerServe));
  EXPECT_EQ(slot.generation(), 7u);
  EXPECT_EQ(slot.live(), live);
  EXPECT_GT(live, 2900u);  // a few evicted by full buckets, no more
  ASSERT_EQ(slot.size(), live);
  for (uint32_t i = 0; i < slot.size(); i++) {
    const CacheDumpEntry& e = slot.entries()[i];
    uint32_t ip;
    std::memcpy(&ip, e.key.nw_src, 4);
    EXPECT_EQ(e.action.out_port, ip);
    EXPECT_EQ(e.generation, 7u);
    EXPECT_FALSE(inserted[ip]) << "copied twice: " << ip;
    inserted[ip] = true;
  }
  // The next request walks again from the start.
  ASSERT_TRUE(slot.request());
  while (!slot.ready()) slot.serve(cache, 7);
  EXPECT_EQ(slot.live(), live);
}

// The worker judges an entry by the stamp it inserted it with (the epochs of
// the learned MACs its decision read): lookup gives it back, and a refresh of
// the same key replaces it in place rather than taking another way.
TEST(FlowCacheTest, StampStaysWithItsEntryAndARefreshReplacesIt) {
  FlowCache cache(64);
  auto keys = keys_in_bucket(cache, 3, 4);
  auto h = [](const FlowKey& k) { return FlowCache::hash(k, kFullKeyBytes); };
  bool evicted;
  uint32_t stamp = 0;
  for (size_t i = 0; i < 4; i++)
    cache.insert(keys[i], h(keys[i]), kFullKeyBytes, 1, uint32_t(2 * i + 1), output(i), &evicted);
  for (size_t i = 0; i < 4; i++) {
    ASSERT_NE(cache.lookup(keys[i], h(keys[i]), kFullKeyBytes, 1, &stamp), nullptr);
    EXPECT_EQ(stamp, 2 * i + 1);
  }
  cache.insert(keys[1], h(keys[1]), kFullKeyBytes, 1, 99, output(7), &evicted);
  EXPECT_FALSE(evicted) << "the bucket is full: a new way would have evicted";
  const CachedFlow* f = cache.lookup(keys[1], h(keys[1]), kFullKeyBytes, 1, &stamp);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(stamp, 99u);
  EXPECT_EQ(f->action.out_port, 7);
  for (size_t i : {0, 2, 3})
    EXPECT_NE(cache.lookup(keys[i], h(keys[i]), kFullKeyBytes, 1, &stamp), nullptr) << i;
}

}  // namespace
}  // namespace strait::dp
