#pragma once
// The forwarding database of one snapshot: (local VLAN, MAC) -> port.
// Immutable once built (the control thread builds it, workers read it), so it
// is a flat open-addressed table with linear probing and no locks.
#include <cstdint>
#include <vector>

#include "dataplane/action.h"

namespace strait::dp {

struct FdbEntry {
  uint64_t key = 0;            // make_key(); 0 = empty slot
  uint16_t port = kNoPort;     // datapath port index
  uint16_t learn_slot = kNoSlot;  // kNoSlot for static (bound port) entries
  uint16_t pad[2] = {};
  bool operator==(const FdbEntry&) const = default;
};

class Fdb {
 public:
  Fdb() = default;
  // Builds from entries; a later entry with an existing key replaces it.
  explicit Fdb(const std::vector<FdbEntry>& entries);

  // Key of (lvlan 1..4094, mac): never 0.
  static uint64_t make_key(uint16_t lvlan, const uint8_t* mac) noexcept;

  const FdbEntry* find(uint16_t lvlan, const uint8_t* mac) const noexcept;
  size_t size() const { return size_; }
  // All entries, for show/dump (control thread).
  std::vector<FdbEntry> entries() const;
  // Same entries (built from the same list, same slots).
  bool operator==(const Fdb& o) const { return size_ == o.size_ && slots_ == o.slots_; }

 private:
  std::vector<FdbEntry> slots_;  // power-of-two size, load <= 1/2
  uint64_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace strait::dp
