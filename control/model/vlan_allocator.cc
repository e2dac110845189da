#include "control/model/vlan_allocator.h"

namespace strait::ctl {

// A linear scan over 4094 bits is a few hundred nanoseconds and runs once per
// network that gains its first port on this host: not worth a free list.
std::optional<uint16_t> VlanAllocator::allocate() {
  for (uint16_t v = kMin; v <= kMax; ++v) {
    if (!used_[v]) {
      used_[v] = true;
      return v;
    }
  }
  return std::nullopt;
}

bool VlanAllocator::reserve(uint16_t vlan) {
  if (vlan < kMin || vlan > kMax || used_[vlan]) return false;
  used_[vlan] = true;
  return true;
}

void VlanAllocator::release(uint16_t vlan) {
  if (vlan >= kMin && vlan <= kMax) used_[vlan] = false;
}

}  // namespace strait::ctl
