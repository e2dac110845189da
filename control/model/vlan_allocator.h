#pragma once
// Local VLANs 1..4094: one per network present on this host. It is also the
// network's conntrack zone, so a network keeps its number while in use (F4).
#include <bitset>
#include <cstdint>
#include <optional>

namespace strait::ctl {

// VLAN ids MIN..MAX, inclusive: a physnet's vlan_ranges ([physnets.NAME]).
struct VlanRange {
  uint16_t min, max;
  bool operator==(const VlanRange&) const = default;
};

class VlanAllocator {
 public:
  static constexpr uint16_t kMin = 1, kMax = 4094;
  // Lowest free VLAN, or nullopt when all 4094 are in use.
  std::optional<uint16_t> allocate();
  // Takes a specific VLAN (restoring persisted state); false if taken or out of range.
  bool reserve(uint16_t vlan);
  void release(uint16_t vlan);
  bool in_use(uint16_t vlan) const { return vlan >= kMin && vlan <= kMax && used_[vlan]; }
  unsigned count() const { return static_cast<unsigned>(used_.count()); }

 private:
  std::bitset<4096> used_;
};

}  // namespace strait::ctl
