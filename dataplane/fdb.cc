#include "dataplane/fdb.h"

#include <cassert>

#include "dataplane/flow_key.h"

namespace strait::dp {
namespace {

// Fibonacci hashing: the multiply carries every key bit into the high half,
// which is folded down so that the low bits (the slot index) see it all.
uint64_t slot_hash(uint64_t key) {
  uint64_t h = key * 0x9e3779b97f4a7c15ull;
  return h ^ (h >> 32);
}

}  // namespace

Fdb::Fdb(const std::vector<FdbEntry>& entries) {
  if (entries.empty()) return;
  // Sized for the input count, an upper bound of the distinct keys: load <= 1/2
  // keeps probe chains short and guarantees an empty slot ends every probe.
  size_t cap = 2;
  while (cap < 2 * entries.size()) cap <<= 1;
  slots_.assign(cap, FdbEntry{});
  mask_ = cap - 1;
  for (const FdbEntry& in : entries) {
    assert(in.key != 0 && "FDB keys come from make_key(), which is never 0");
    if (in.key == 0) continue;
    uint64_t i = slot_hash(in.key) & mask_;
    while (slots_[i].key != 0 && slots_[i].key != in.key) i = (i + 1) & mask_;
    if (slots_[i].key == 0) size_++;
    slots_[i] = in;  // a later duplicate replaces the earlier entry
  }
}

uint64_t Fdb::make_key(uint16_t lvlan, const uint8_t* mac) noexcept {
  assert(lvlan >= 1 && lvlan <= 4094 && "local VLAN out of range");
  return (uint64_t(lvlan) << 48) | mac_to_u64(mac);
}

const FdbEntry* Fdb::find(uint16_t lvlan, const uint8_t* mac) const noexcept {
  if (slots_.empty()) return nullptr;
  const uint64_t key = make_key(lvlan, mac);
  const FdbEntry* slots = slots_.data();
  // Terminates: load <= 1/2 leaves empty slots. Testing for the empty slot
  // first means even an out-of-contract key 0 (lvlan 0) finds nothing.
  for (uint64_t i = slot_hash(key) & mask_;; i = (i + 1) & mask_) {
    if (slots[i].key == 0) return nullptr;
    if (slots[i].key == key) return &slots[i];
  }
}

std::vector<FdbEntry> Fdb::entries() const {
  std::vector<FdbEntry> out;
  out.reserve(size_);
  for (const FdbEntry& e : slots_)
    if (e.key != 0) out.push_back(e);
  return out;
}

}  // namespace strait::dp
