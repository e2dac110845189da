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

}  // namespace strait::dp
