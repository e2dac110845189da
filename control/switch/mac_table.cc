#include "control/switch/mac_table.h"

#include <algorithm>

namespace strait::ctl {
namespace {

// The MAC of a dp::Fdb::make_key key (its low 48 bits).
Mac mac_of(uint64_t key) {
  Mac mac;
  for (int i = 0; i < 6; i++) mac[i] = static_cast<uint8_t>(key >> (8 * (5 - i)));
  return mac;
}

}  // namespace

MacTable::MacTable(uint16_t slots, size_t per_vlan) : per_vlan_(per_vlan) {
  for (uint16_t s = slots; s > 0; s--) free_slots_.push_back(s - 1);  // slot 0 first
}

bool MacTable::learn(uint16_t lvlan, const Mac& mac, uint16_t port, uint32_t now) {
  const uint64_t k = dp::Fdb::make_key(lvlan, mac.data());
  if (macs_.count(k)) return false;
  size_t& n = in_vlan_[lvlan];
  if (n >= per_vlan_ || free_slots_.empty()) {
    if (n == 0) in_vlan_.erase(lvlan);
    return false;
  }
  macs_.emplace(k, Learned{port, free_slots_.back(), now});
  free_slots_.pop_back();
  n++;
  changes_.insert(mac);
  return true;
}

bool MacTable::contains(uint16_t lvlan, const Mac& mac) const { return macs_.count(dp::Fdb::make_key(lvlan, mac.data())); }

void MacTable::forget(std::map<uint64_t, Learned>::iterator& it) {
  const auto lvlan = static_cast<uint16_t>(it->first >> 48);
  if (--in_vlan_[lvlan] == 0) in_vlan_.erase(lvlan);
  changes_.insert(mac_of(it->first));
  free_slots_.push_back(it->second.slot);
  it = macs_.erase(it);
}

void MacTable::keep_vlans(const std::set<uint16_t>& live) {
  for (auto it = macs_.begin(); it != macs_.end();) {
    if (live.count(static_cast<uint16_t>(it->first >> 48))) {
      ++it;
    } else {
      forget(it);
    }
  }
}

bool MacTable::age(uint32_t now, uint32_t max_age_s, const std::function<uint32_t(uint16_t)>& seen) {
  bool changed = false;
  for (auto it = macs_.begin(); it != macs_.end();) {
    const uint32_t last = std::max(it->second.created, seen(it->second.slot));
    if (now - last > max_age_s) {
      forget(it);
      changed = true;
    } else {
      ++it;
    }
  }
  return changed;
}

std::vector<Mac> MacTable::take_changes() {
  std::vector<Mac> out(changes_.begin(), changes_.end());
  changes_.clear();
  return out;
}

std::vector<LearnedMac> MacTable::entries() const {
  std::vector<LearnedMac> out;
  out.reserve(macs_.size());
  for (const auto& [k, l] : macs_)
    out.push_back({static_cast<uint16_t>(k >> 48), mac_of(k), l.port, l.slot});
  return out;
}

}  // namespace strait::ctl
