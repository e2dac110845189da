#pragma once
// Security groups as the switch holds them: the API of groups, their rules
// and remote members, and the compiled classifier of every group set bound
// ports use (SgCache). Every change goes through the switch's apply()
// (ChangePath): computed on a copy of the model, compiled, saved, and only
// then made live in one snapshot, so a refused request changes nothing and
// every packet sees the old rule set or the new one (F7). Replies go out
// once no worker runs an older snapshot: the new rules are then live.
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "control/secgroup/sg_cache.h"
#include "control/switch/change_path.h"

namespace strait::ctl {

class SecurityGroups {
 public:
  explicit SecurityGroups(ChangePath& sw) : sw_(sw) {}

  // apply()'s compile step: the classifiers model `m` needs, built aside
  // (refused: rte_acl memory, too many remote groups). commit() once the
  // change is accepted.
  Result<SgCache::Sets> prepare(const Model& m) const { return cache_.prepare(m); }
  void commit(SgCache::Sets sets) { cache_.commit(std::move(sets)); }
  // For the snapshot build (BuildInput::classifiers).
  auto classifiers() const { return cache_.classifiers(); }

  // The API (docs/api.md): security_group.create, .delete, .update (the
  // whole rule list at once), .list, .show, .remote_member, and
  // security_group_rule.create, .delete.
  void create(const nlohmann::json& params, Done done);
  void remove(const nlohmann::json& params, Done done);
  void update(const nlohmann::json& params, Done done);
  void list(const nlohmann::json& params, Done done);
  void show(const nlohmann::json& params, Done done);
  void remote_member(const nlohmann::json& params, Done done);
  void rule_create(const nlohmann::json& params, Done done);
  void rule_delete(const nlohmann::json& params, Done done);

  // For `show`: the groups, the compiled sets and how they were built.
  nlohmann::json status() const;

 private:
  nlohmann::json group_json(const SecurityGroup& g) const;
  // apply() of `change` to group `id` (its rules or members): the group is
  // saved as the changed model has it.
  Status change_group(const std::string& id, const std::function<Status(Model&)>& change);
  // Answers with group `id` as it is once the change is live.
  void reply_when_live(const std::string& id, Done done);

  ChangePath& sw_;
  SgCache cache_;
};

}  // namespace strait::ctl
