#pragma once
// Per-worker exact-match flow cache (OVS's EMC, VPP's l2 input cache):
// FlowKey -> Action. Owned by one worker, no sharing, no locks.
//
// Entries carry the generation of the snapshot their action was computed
// from; a lookup under another generation is a miss, so publishing a snapshot
// invalidates everything without walking the table (STYLE.md rule 7).
//
// Each entry also keeps a stamp its inserter gives it (the worker's: the
// epochs of the learned MACs the decision read, learned_fdb.h; 0 for
// none), returned by lookup() for the caller to judge.
//
// Layout: 4-way set-associative buckets. A bucket's first cache line holds
// every way's hash, generation, stamp and scope: a probe that misses reads that
// line alone, and the worker prefetches it for a whole burst (prefetch())
// before the first lookup. Eviction policy, when a bucket is full: reuse an
// entry of another generation first, else replace the way named by the
// bucket's round-robin cursor (oldest insertion).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "dataplane/action.h"
#include "dataplane/conntrack.h"
#include "dataplane/flow_key.h"
#include "dataplane/huge_array.h"

namespace strait::dp {

// What the cache holds for a key.
struct CachedFlow {
  Action action;
  // The connection the flow's packets belong to, as the worker last found
  // it (sg_track keeps it); none when inserted.
  CtHint ct;
};

class FlowCache {
 public:
  static constexpr uint32_t kWays = 4;

  // `entries` is rounded up to a power of two (at least kWays).
  explicit FlowCache(uint32_t entries);
  ~FlowCache();
  FlowCache(const FlowCache&) = delete;
  FlowCache& operator=(const FlowCache&) = delete;

  // Hash of the first key_bytes of key (kL2KeyBytes or kFullKeyBytes).
  static uint32_t hash(const FlowKey& key, uint32_t key_bytes) noexcept;

  // Starts loading the bucket of `hash` (its first line: enough to tell a miss).
  void prefetch(uint32_t hash) const noexcept;

  // Then, once that line is in: starts loading the way a lookup of this
  // hash would compare, or the one an insert would overwrite, so the burst's
  // lookups and inserts that follow find their lines loaded.
  void prefetch_way(uint32_t hash, uint32_t key_bytes, uint32_t gen) const noexcept;

  // What is cached for this key under generation gen, or nullptr; *stamp:
  // the entry's. The pointer stays this key's until the next insert() that
  // evicts.
  CachedFlow* lookup(const FlowKey& key, uint32_t hash, uint32_t key_bytes, uint32_t gen,
                     uint32_t* stamp) noexcept;
  // Caches action for key under gen with `stamp` and returns the entry;
  // *evicted: a live entry (same generation, other key) had to make room
  // (the pointer of an earlier lookup may now name this key).
  CachedFlow* insert(const FlowKey& key, uint32_t hash, uint32_t key_bytes, uint32_t gen,
                     uint32_t stamp, const Action& action, bool* evicted) noexcept;
  void clear() noexcept;

  uint32_t capacity() const { return n_buckets_ * kWays; }

  // Visits every entry of generation gen in buckets [first, last) (straitctl
  // cache dump, a slice at a time).
  template <typename F>
  void for_each(uint32_t gen, uint32_t first, uint32_t last, F&& f) const;
  template <typename F>
  void for_each(uint32_t gen, F&& f) const {
    for_each(gen, 0, n_buckets_, std::forward<F>(f));
  }
  uint32_t buckets() const { return n_buckets_; }

 private:
  struct Slot {
    FlowKey key;
    CachedFlow flow;
  };
  struct alignas(64) Bucket {
    // The probe line.
    uint32_t hash[kWays];
    uint32_t gen[kWays];  // 0 = empty (generations start at 1)
    uint32_t stamp[kWays];
    uint8_t key_bytes[kWays];  // at most kFullKeyBytes
    uint32_t cursor;
    alignas(64) Slot slot[kWays];
  };
  static_assert(offsetof(Bucket, slot) == 64, "the probe line is the bucket's first");
  static_assert(sizeof(Bucket) == 512, "four slots and the probe line in eight lines");
  HugeArray<Bucket> buckets_;
  uint32_t n_buckets_ = 0;
  uint32_t mask_ = 0;
};

template <typename F>
void FlowCache::for_each(uint32_t gen, uint32_t first, uint32_t last, F&& f) const {
  for (uint32_t b = first; b < last && b < n_buckets_; b++) {
    const Bucket& k = buckets_[b];
    for (uint32_t w = 0; w < kWays; w++)
      if (k.gen[w] == gen) f(k.slot[w].key, k.key_bytes[w], k.slot[w].flow.action);
  }
}

}  // namespace strait::dp
