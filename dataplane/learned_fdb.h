#pragma once
// MACs learned from traffic, apart from the snapshot (issue 22): a learned
// MAC or one that ages out changes the decision of the flows that name it,
// and of no other. Two parts, both in DataplaneShared:
//
//   - the learned FDB: an immutable Fdb that the control thread builds and
//     publishes by one pointer swap, freed after a grace period like a
//     snapshot, but without rebuilding the snapshot;
//   - the epochs: one counter per bucket of MAC values (a hash of the MAC,
//     whatever the network). The control thread bumps the bucket of every
//     MAC a new learned FDB added, dropped or moved, after publishing it.
//
// A flow-cache entry whose decision read the learned FDB (a destination or
// a source that no bound port or tunnel FDB entry names) keeps the stamp of
// its two MACs' epochs, taken before the learned FDB was read; a hit whose
// stamp no longer matches is stale and decided again. A bump that the
// stamp missed makes the entry stale; one that it saw was published before,
// so the decision read the new FDB (the release / acquire pair of the two
// stores orders them). Other entries, and every other flow, stay cached.
#include <atomic>
#include <cstdint>
#include <cstring>

#include "dataplane/fdb.h"
#include "dataplane/flow_key.h"

namespace strait::dp {

// 2^16 buckets (256 KB, of which a worker touches the lines of the MACs
// it forwards): a flow whose MAC shares a bucket with a churning one is
// decided again for nothing, so the buckets outnumber the 8192 learned MACs.
inline constexpr uint32_t kLearnEpochBits = 16;
inline constexpr uint32_t kLearnEpochs = 1u << kLearnEpochBits;

// The epoch bucket of a MAC (6 bytes).
inline uint32_t learn_epoch_index(const uint8_t* mac) noexcept {
  uint64_t v = 0;
  std::memcpy(&v, mac, 6);
  return uint32_t((v * 0x9e3779b97f4a7c15ull) >> (64 - kLearnEpochBits));
}

struct LearnedState {
  // The live learned FDB; null: nothing learned yet.
  std::atomic<const Fdb*> fdb{nullptr};
  std::atomic<uint32_t> epoch[kLearnEpochs] = {};

  // The stamp of a key's two MACs: never 0 (0 marks a cache entry that
  // depends on no learned MAC).
  uint32_t stamp(const FlowKey& key) const noexcept {
    const uint32_t s = epoch[learn_epoch_index(key.dl_src)].load(std::memory_order_acquire) +
                       epoch[learn_epoch_index(key.dl_dst)].load(std::memory_order_acquire);
    return (s << 1) | 1;
  }
  // Control thread, after publishing an FDB that changed `mac`.
  void bump(const uint8_t* mac) noexcept {
    epoch[learn_epoch_index(mac)].fetch_add(1, std::memory_order_release);
  }
};

// What a decision had of the learned FDB (pipeline.h): the table, if any,
// and whether the decision looked anything up in it; then its flow-cache
// entry must carry the stamp.
struct LearnedLookup {
  const Fdb* fdb = nullptr;
  bool used = false;

  const FdbEntry* find(uint16_t lvlan, const uint8_t* mac) noexcept {
    used = true;
    return fdb ? fdb->find(lvlan, mac) : nullptr;
  }
};

}  // namespace strait::dp
