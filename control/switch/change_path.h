#pragma once
// What a topic component (security groups, tunnels, the instance lifecycle)
// may use of the switch: the committed model, the one path that changes it,
// and the publisher. Switch implements it; a component holds a reference to
// it and sees nothing else of the switch's state (docs/design.md section 3).
#include <functional>
#include <nlohmann/json.hpp>

#include "control/model/model.h"
#include "control/model/store.h"
#include "control/switch/publisher.h"

namespace strait::ctl {

// Reply to one API request: {"ok": true, "result": ...} or {"ok": false, "error": ...}.
using Done = std::function<void(nlohmann::json reply)>;

// One change of desired state. Each step may refuse, and a refusal at any
// step leaves the model, the store, the devices and the datapath as they
// were: `model` changes a copy of the model (validating everything), the
// security-group classifiers the copy needs are compiled, `open` opens the
// devices it needs (`close` undoes what `open` did, also part way), `save`
// persists it; then the copy becomes the model, `commit` records what is
// live, and one snapshot is published. The caller answers after the grace
// period (after_grace), when every worker forwards by it.
struct Change {
  std::function<Status(Model&)> model;
  std::function<Status(const Model&)> open;
  std::function<void()> close;
  std::function<Status(const Model&)> save;
  std::function<void()> commit;
};

class ChangePath {
 public:
  virtual const Model& model() const = 0;
  virtual Store& store() = 0;
  virtual const Publisher& publisher() const = 0;
  // Runs `c`, or refuses it and leaves everything as it was.
  virtual Status apply(const Change& c) = 0;
  // Publishes a snapshot of what is live now (desired state unchanged).
  virtual void republish() = 0;
  // Runs `fn` on the control thread once every worker has moved past
  // everything published so far.
  virtual void after_grace(std::function<void()> fn) = 0;

 protected:
  ~ChangePath() = default;
};

}  // namespace strait::ctl
