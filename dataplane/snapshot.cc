// Snapshot lookups that are not one-liners (snapshot.h).
#include "dataplane/snapshot.h"

#include <algorithm>

namespace strait::dp {

uint16_t Snapshot::lvlan_of_vni(uint32_t vni) const {
  auto it = std::lower_bound(vni_to_lvlan.begin(), vni_to_lvlan.end(), vni,
                             [](const std::pair<uint32_t, uint16_t>& e, uint32_t v) {
                               return e.first < v;
                             });
  return it != vni_to_lvlan.end() && it->first == vni ? it->second : 0;
}

namespace {

bool same_security(const PortSecurity* a, const PortSecurity* b) {
  if (!a || !b) return a == b;
  return a->macs == b->macs && a->sources == b->sources;
}

bool same_trunk(const TrunkMap* a, const TrunkMap* b) {
  if (!a || !b) return a == b;
  return *a == *b;
}

bool same_port(const PortEntry& a, const PortEntry& b) {
  return a.present == b.present && a.enabled == b.enabled && a.role == b.role &&
         a.kind == b.kind && a.ethdev == b.ethdev && a.vid == b.vid && a.capture == b.capture &&
         a.lvlan == b.lvlan && a.uplink_map == b.uplink_map && a.key_bytes == b.key_bytes &&
         std::equal(a.mac, a.mac + 6, b.mac) && same_security(a.security, b.security) &&
         a.parent == b.parent && a.trunk_vid == b.trunk_vid && same_trunk(a.trunk, b.trunk);
}

bool same_remote(const RemoteVtep& a, const RemoteVtep& b) {
  return a.present == b.present && a.ip == b.ip;
}

}  // namespace

bool same_forwarding(const Snapshot& a, const Snapshot& b) {
  return a.vtep == b.vtep && a.vni_to_lvlan == b.vni_to_lvlan && a.uplinks == b.uplinks &&
         a.fdb == b.fdb &&
         std::equal(a.ports.begin(), a.ports.end(), b.ports.begin(), b.ports.end(), same_port) &&
         std::equal(a.vteps.begin(), a.vteps.end(), b.vteps.begin(), b.vteps.end(),
                    same_remote) &&
         a.networks == b.networks;
}

}  // namespace strait::dp
