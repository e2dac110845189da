#pragma once
// cache.dump: the live entries of workers' flow caches, copied by each
// worker itself between bursts into its mailbox (dataplane/cache_dump.h).
// Requests are served in order, one at a time: a mailbox holds one. A
// worker that does not answer in time fails the request, and its mailbox
// stays its own until it does answer (the copy is still being written).
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataplane/action.h"
#include "dataplane/drop_reasons.h"
#include "dataplane/worker.h"

namespace strait::ctl {

class CacheDumps {
 public:
  using Done = std::function<void(nlohmann::json reply)>;
  // {"dp_port", "name"} of a datapath port index.
  using PortRef = std::function<nlohmann::json(uint16_t dp)>;

  // Queues a dump of the caches of `workers`; `done` gets the reply.
  void request(std::vector<uint16_t> workers, Done done);
  // Asks the workers, collects what they copied, answers finished requests.
  // `running`: the workers poll; stopped ones are served here (their cache
  // is then the control thread's to read).
  void poll(const std::vector<std::unique_ptr<dp::Worker>>& workers, bool running,
            const PortRef& port_ref);
  // A request waits for workers (poll often).
  bool busy() const { return !pending_.empty(); }

 private:
  struct Pending {
    std::vector<uint16_t> workers;
    std::vector<uint8_t> state;  // per worker: 0 to ask, 1 asked, 2 answered
    nlohmann::json out;          // per worker, once answered
    uint64_t deadline_tsc = 0;
    Done done;
  };
  std::deque<Pending> pending_;  // the first one is in flight
};

// The names the API gives dataplane values.
nlohmann::json drop_reason_json(dp::DropReason r);  // null for none
const char* action_kind_name(dp::ActionKind k);
nlohmann::json vlan_json(uint16_t vid);  // null for untagged

}  // namespace strait::ctl
