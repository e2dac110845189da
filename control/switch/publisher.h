#pragma once
// Publishes snapshots (and the learned FDB, dp/learned_fdb.h) to the workers
// by one pointer swap and reclaims old ones after an rte_rcu_qsbr grace
// period. Never blocks: grace periods are polled from the control loop, and
// whatever must wait for one (freeing a snapshot, answering an API call,
// closing a device) is queued behind it. A snapshot inherits from the one
// before it the generations that its change left alone (snapshot.h).
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>

#include "control/model/net_addr.h"
#include "dataplane/snapshot.h"
#include "dataplane/worker.h"

namespace strait::ctl {

class Publisher {
 public:
  // `shared->qsbr` must be initialised for the workers that will run.
  explicit Publisher(dp::DataplaneShared* shared);
  ~Publisher();

  // Makes `s` the live snapshot; assigns and returns its generation. The
  // previous snapshot is freed once every worker has passed a quiescent point.
  uint32_t publish(std::unique_ptr<dp::Snapshot> s);
  // Makes `fdb` the live learned FDB, then bumps the epochs of `changed`,
  // the MACs it learned, moved or forgot (dp/learned_fdb.h). The previous
  // one is freed after a grace period. The snapshot stays as it is.
  void publish_learned(std::unique_ptr<dp::Fdb> fdb, const std::vector<Mac>& changed);
  // Runs `fn` (on the control thread, from poll()) once every worker has
  // moved past everything published so far.
  void after_grace(std::function<void()> fn);
  // Completes the grace periods that are over. Call from the control loop.
  void poll();
  bool busy() const { return !retired_.empty() || !waiting_.empty(); }

  const dp::Snapshot* current() const { return current_.get(); }
  const dp::Fdb* learned() const { return learned_.get(); }
  uint32_t generation() const { return generation_; }

 private:
  struct Retired {
    uint64_t token;
    std::unique_ptr<dp::Snapshot> snapshot;
    std::unique_ptr<dp::Fdb> learned;
  };
  struct Waiting {
    uint64_t token;
    std::function<void()> fn;
  };
  dp::DataplaneShared* shared_;
  std::unique_ptr<dp::Snapshot> current_;
  std::unique_ptr<dp::Fdb> learned_;
  std::deque<Retired> retired_;
  std::deque<Waiting> waiting_;
  uint32_t generation_ = 0;
};

}  // namespace strait::ctl
