#pragma once
// The compiled classifier of every set of security groups that bound ports
// with port security use. Ports with the same set share one classifier; a
// change recompiles only what it touched: same compile input -> the same
// classifier, same rules with other members -> SgClassifier::with_address_sets
// (F8: addresses re-indexed, rules kept), else a new build. Control thread.
//
// Every API change prepares first (which can fail: rte_acl memory, too many
// remote groups) and commits only once the change is accepted, so a refused
// request leaves the classifiers as they were.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "control/model/model.h"
#include "control/model/secgroup.h"
#include "dataplane/result.h"
#include "dataplane/sg_classifier.h"

namespace strait::ctl {

class SgCache {
 public:
  struct Compiled {
    SgCompileInput input;
    std::shared_ptr<const dp::SgClassifier> classifier;
  };
  using Sets = std::map<std::vector<std::string>, Compiled>;  // by canonical group set

  // The classifiers `m` needs. Errors name the group set and the reason.
  Result<Sets> prepare(const Model& m) const;
  void commit(Sets sets) { sets_ = std::move(sets); }

  const Sets& sets() const { return sets_; }
  // For BuildInput::classifiers.
  std::map<std::vector<std::string>, std::shared_ptr<const dp::SgClassifier>> classifiers() const;
  // Builds done over the cache's life, by kind (show / tests: a membership
  // change must not rebuild rules).
  struct Counts {
    uint64_t built = 0, reindexed = 0, reused = 0;
  };
  Counts counts() const { return counts_; }

 private:
  Sets sets_;
  mutable Counts counts_;
};

}  // namespace strait::ctl
