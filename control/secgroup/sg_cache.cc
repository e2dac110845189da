#include "control/secgroup/sg_cache.h"

#include <set>

#include <nlohmann/json.hpp>

namespace strait::ctl {

Result<SgCache::Sets> SgCache::prepare(const Model& m) const {
  std::set<std::vector<std::string>> wanted;
  for (const auto& [id, p] : m.ports())
    if (p.port_security_enabled && !p.security_groups.empty())
      wanted.insert(canonical_group_set(p.security_groups));
  Sets out;
  if (wanted.empty()) return out;
  const GroupMembers members = m.group_members();
  for (const std::vector<std::string>& set : wanted) {
    auto input = compile_group_set(set, m.security_groups(), members);
    if (!input) return input.error();
    Compiled c{std::move(*input), nullptr};
    auto old = sets_.find(set);
    if (old != sets_.end() && old->second.input == c.input) {
      c.classifier = old->second.classifier;
      counts_.reused++;
    } else if (old != sets_.end() && old->second.input.rules == c.input.rules &&
               old->second.input.remote_groups == c.input.remote_groups) {
      // Members changed, rules did not: re-index the addresses only (F8).
      dp::SgBuildResult r = old->second.classifier->with_address_sets(c.input.address_sets);
      if (!r.classifier)
        return exhausted("security groups " + nlohmann::json(set).dump() + ": " + r.error);
      c.classifier = std::move(r.classifier);
      counts_.reindexed++;
    } else {
      dp::SgBuildResult r = dp::SgClassifier::build(c.input.rules, c.input.address_sets);
      if (!r.classifier)
        return exhausted("security groups " + nlohmann::json(set).dump() + ": " + r.error);
      c.classifier = std::move(r.classifier);
      counts_.built++;
    }
    out.emplace(set, std::move(c));
  }
  return out;
}

std::map<std::vector<std::string>, std::shared_ptr<const dp::SgClassifier>> SgCache::classifiers()
    const {
  std::map<std::vector<std::string>, std::shared_ptr<const dp::SgClassifier>> out;
  for (const auto& [set, c] : sets_) out.emplace(set, c.classifier);
  return out;
}

}  // namespace strait::ctl
