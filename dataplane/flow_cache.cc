#include "dataplane/flow_cache.h"

#include <rte_hash_crc.h>
#include <rte_prefetch.h>

#include <cassert>
#include <cstring>
#include <new>
#include <type_traits>

namespace strait::dp {
namespace {

// Any fixed values; not 0, so an all-zero key does not hash to 0.
constexpr uint32_t kHashSeed = 0x5f3759dfu;
constexpr uint32_t kLaneSeed[3] = {kHashSeed, 0x9e3779b9u, 0x7f4a7c15u};

[[maybe_unused]] bool valid_key_bytes(uint32_t key_bytes) {
  return key_bytes != 0 && key_bytes <= kFullKeyBytes && key_bytes % 8 == 0;
}

uint64_t load_word(const uint8_t* p) {
  uint64_t w;
  std::memcpy(&w, p, sizeof w);
  return w;
}

// CRC32C of the full key in three interleaved lanes (words 0-3, 4-7, 8-10)
// folded by a last crc32: one chain over 11 words waits on crc32's 3-cycle
// latency at every step, three chains overlap. 88-byte hash ~5.0 -> ~3.8 ns
// on the development machine (bench/flow_cache_bench.cc, BM_FlowCacheHash).
// The result stays a linear (CRC) function of the key, as good for bucket
// selection as one chain.
uint32_t hash_full_key(const FlowKey& key) {
  const auto* p = reinterpret_cast<const uint8_t*>(&key);
  uint32_t a = kLaneSeed[0], b = kLaneSeed[1], c = kLaneSeed[2];
  for (uint32_t i = 0; i < 3; i++) {
    a = rte_hash_crc_8byte(load_word(p + 8 * i), a);
    b = rte_hash_crc_8byte(load_word(p + 8 * (i + 4)), b);
    c = rte_hash_crc_8byte(load_word(p + 8 * (i + 8)), c);
  }
  a = rte_hash_crc_8byte(load_word(p + 8 * 3), a);
  b = rte_hash_crc_8byte(load_word(p + 8 * 7), b);
  return rte_hash_crc_8byte((uint64_t(b) << 32) | c, a);
}
static_assert(kFullKeyBytes == 11 * 8, "hash_full_key's lanes cover 11 words");

// Equality of the first N bytes, one XOR per 8-byte word and a single branch
// at the end: cheaper than memcmp's ordering work, and the constant N lets the
// compiler unroll (and vectorise) the loop.
template <uint32_t N>
[[gnu::always_inline]] inline bool prefix_equal(const FlowKey& a, const FlowKey& b) {
  static_assert(N % 8 == 0 && N <= sizeof(FlowKey));
  const auto* pa = reinterpret_cast<const uint8_t*>(&a);
  const auto* pb = reinterpret_cast<const uint8_t*>(&b);
  uint64_t diff = 0;
  for (uint32_t i = 0; i < N; i += 8) diff |= load_word(pa + i) ^ load_word(pb + i);
  return diff == 0;
}

bool prefix_equal_any(const FlowKey& a, const FlowKey& b, uint32_t key_bytes) {
  const auto* pa = reinterpret_cast<const uint8_t*>(&a);
  const auto* pb = reinterpret_cast<const uint8_t*>(&b);
  uint64_t diff = 0;
  for (uint32_t i = 0; i < key_bytes; i += 8) diff |= load_word(pa + i) ^ load_word(pb + i);
  return diff == 0;
}

// The two scopes the pipeline uses get their own unrolled compare. Forced
// inline: as a call from the way loop it cost ~1 ns per lookup.
[[gnu::always_inline]] inline bool keys_equal(const FlowKey& a, const FlowKey& b,
                                              uint32_t key_bytes) {
  if (key_bytes == kFullKeyBytes) return prefix_equal<kFullKeyBytes>(a, b);
  if (key_bytes == kL2KeyBytes) return prefix_equal<kL2KeyBytes>(a, b);
  return prefix_equal_any(a, b, key_bytes);
}

}  // namespace

FlowCache::FlowCache(uint32_t entries) {
  uint64_t n = kWays;
  while (n < entries) n <<= 1;
  n_buckets_ = static_cast<uint32_t>(n / kWays);
  mask_ = n_buckets_ - 1;
  // Runs on the control thread before the worker starts, without EAL (unit
  // tests run without it); huge pages: lookups land anywhere in it.
  buckets_ = HugeArray<Bucket>(n_buckets_);
}

FlowCache::~FlowCache() = default;

uint32_t FlowCache::hash(const FlowKey& key, uint32_t key_bytes) noexcept {
  assert(valid_key_bytes(key_bytes) && "key_bytes must be a multiple of 8 within FlowKey");
  if (key_bytes == kFullKeyBytes) return hash_full_key(key);
  const auto* p = reinterpret_cast<const uint8_t*>(&key);
  uint32_t h = kHashSeed;
  if (key_bytes == kL2KeyBytes) {  // constant trip count: three crc32q, no loop
    for (uint32_t i = 0; i < kL2KeyBytes; i += 8) h = rte_hash_crc_8byte(load_word(p + i), h);
    return h;
  }
  for (uint32_t i = 0; i < key_bytes; i += 8) h = rte_hash_crc_8byte(load_word(p + i), h);
  return h;
}

void FlowCache::prefetch(uint32_t hash) const noexcept {
  rte_prefetch0(&buckets_[hash & mask_]);
}

void FlowCache::prefetch_way(uint32_t hash, uint32_t key_bytes, uint32_t gen) const noexcept {
  const Bucket& b = buckets_[hash & mask_];
  uint32_t way = kWays;
  for (uint32_t w = 0; w < kWays; w++) {
    if (b.gen[w] != gen) {
      if (way == kWays) way = w;  // where insert() would go, unless a way matches
    } else if (b.hash[w] == hash && b.key_bytes[w] == key_bytes) {
      way = w;
      break;
    }
  }
  if (way == kWays) way = b.cursor;  // insert()'s victim: keep the two choices alike
  const auto* p = reinterpret_cast<const uint8_t*>(&b.slot[way]);
  rte_prefetch0(p);
  rte_prefetch0(p + sizeof(Slot) - 1);
}

CachedFlow* FlowCache::lookup(const FlowKey& key, uint32_t hash, uint32_t key_bytes,
                              uint32_t gen, uint32_t* stamp) noexcept {
  assert(gen != 0 && "generation 0 marks an empty entry");
  assert(valid_key_bytes(key_bytes) && "key_bytes must be a multiple of 8 within FlowKey");
  Bucket& b = buckets_[hash & mask_];
  for (uint32_t w = 0; w < kWays; w++) {
    // Rejected on the probe line before the way's own lines are touched.
    if (b.hash[w] == hash && b.gen[w] == gen && b.key_bytes[w] == key_bytes &&
        keys_equal(b.slot[w].key, key, key_bytes)) {
      *stamp = b.stamp[w];
      return &b.slot[w].flow;
    }
  }
  return nullptr;
}

CachedFlow* FlowCache::insert(const FlowKey& key, uint32_t hash, uint32_t key_bytes,
                              uint32_t gen, uint32_t stamp, const Action& action,
                              bool* evicted) noexcept {
  assert(gen != 0 && "generation 0 marks an empty entry");
  assert(valid_key_bytes(key_bytes) && "key_bytes must be a multiple of 8 within FlowKey");
  Bucket& b = buckets_[hash & mask_];
  int free_way = -1;  // first empty or other-generation way
  for (uint32_t w = 0; w < kWays; w++) {
    if (b.gen[w] != gen) {
      if (free_way < 0) free_way = int(w);
    } else if (b.hash[w] == hash && b.key_bytes[w] == key_bytes &&
               keys_equal(b.slot[w].key, key, key_bytes)) {
      b.slot[w].flow.action = action;  // already cached under gen: refresh in place
      b.stamp[w] = stamp;
      *evicted = false;
      return &b.slot[w].flow;
    }
  }
  // prefetch_way() makes this same choice ahead of time: keep the two alike.
  *evicted = false;
  uint32_t w;
  if (free_way >= 0) {
    w = uint32_t(free_way);
  } else {
    // Every way is live: replace the oldest insertion (round robin).
    w = b.cursor;
    b.cursor = (b.cursor + 1) & (kWays - 1);
    *evicted = true;
  }
  // The whole key, though only key_bytes are compared: a dump of an L2-scope
  // entry then shows the packet that created it.
  b.slot[w].key = key;
  b.slot[w].flow = {action, CtHint{}};
  b.hash[w] = hash;
  b.gen[w] = gen;
  b.stamp[w] = stamp;
  b.key_bytes[w] = uint8_t(key_bytes);
  return &b.slot[w].flow;
}

void FlowCache::clear() noexcept {
  for (uint32_t b = 0; b < n_buckets_; b++) {
    for (uint32_t& g : buckets_[b].gen) g = 0;
    buckets_[b].cursor = 0;
  }
}

}  // namespace strait::dp
