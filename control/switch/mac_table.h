#pragma once
// MACs learned from traffic: behind a physnet's NIC, or behind a remote VTEP
// (decapsulated VXLAN). Workers report a source MAC they do not know; the
// control thread decides here whether to learn it, and the next learned FDB
// (dp/learned_fdb.h) carries it. Each learned MAC holds one of the workers' aging slots, where
// workers stamp when they last saw it. Bookkeeping only: no DPDK.
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "control/switch/snapshot_builder.h"
#include "dataplane/fdb.h"

namespace strait::ctl {

class MacTable {
 public:
  // `slots`: aging slots in all (dp::kMaxLearned); `per_vlan`: the most one
  // local VLAN may hold, so one network's flood of sources cannot take every
  // slot from the others.
  MacTable(uint16_t slots, size_t per_vlan);

  // A worker saw `mac` behind datapath port `port` in local VLAN `lvlan`
  // (`now`: seconds). False when it is known already, or there is no room
  // (its frames go on flooding).
  bool learn(uint16_t lvlan, const Mac& mac, uint16_t port, uint32_t now);
  bool contains(uint16_t lvlan, const Mac& mac) const;
  // Forgets the MACs of every local VLAN not in `live`: a VLAN released with
  // its network's last port may go to another network at once.
  void keep_vlans(const std::set<uint16_t>& live);
  // Forgets each MAC last seen more than `max_age_s` before `now`: when it
  // was learned, or `seen(slot)`, the latest sighting any worker stamped.
  // True if any went.
  bool age(uint32_t now, uint32_t max_age_s, const std::function<uint32_t(uint16_t slot)>& seen);

  // What the next learned FDB carries, in (lvlan, mac) order.
  std::vector<LearnedMac> entries() const;
  size_t size() const { return macs_.size(); }
  // The MACs learned or forgotten since the last call (each once): whose
  // flows the next learned FDB changes.
  std::vector<Mac> take_changes();
  bool changed() const { return !changes_.empty(); }

 private:
  struct Learned {
    uint16_t port;
    uint16_t slot;
    uint32_t created;
  };
  void forget(std::map<uint64_t, Learned>::iterator& it);

  size_t per_vlan_;
  std::map<uint64_t, Learned> macs_;     // by dp::Fdb::make_key (lvlan << 48 | mac)
  std::map<uint16_t, size_t> in_vlan_;   // learned MACs per local VLAN
  std::vector<uint16_t> free_slots_;
  std::set<Mac> changes_;
};

}  // namespace strait::ctl
