#pragma once
// workers.rebalance and the automatic rebalance: rx queues moved between
// workers by the load measured on them (the plan: rxq_balance.h). A queue
// being moved is polled by nobody for one grace period: the snapshot that
// takes it from its old worker is live everywhere before the one that gives
// it to its new worker is published, so two workers never read one queue,
// and its frames wait in its ring meanwhile (none is lost). Control thread
// only.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "control/ops/rxq_balance.h"
#include "control/switch/port_table.h"
#include "dataplane/worker.h"

namespace strait::ctl {

class Rebalancer {
 public:
  // Publishes a snapshot of the port table as it is now, and runs `then`
  // once every worker runs it.
  using Publish = std::function<void(std::function<void()> then)>;
  // `interval_s` 0: no automatic rebalance ([datapath] rebalance_interval_s,
  // rebalance_improvement_pct).
  Rebalancer(const std::vector<std::unique_ptr<dp::Worker>>& workers, PortTable& ports,
             uint32_t interval_s, uint32_t improvement_pct, Publish publish);

  // workers.rebalance; params {"dry_run": bool} (optional). The load of a
  // queue is what it cost since the last rebalance (or start). Answers with
  // the moves once the queues are polled by their new workers.
  void request(const nlohmann::json& params, std::function<void(nlohmann::json reply)> done);
  // The control tick: every interval, the plan for the interval's load is
  // applied when it lowers the busiest worker's load by improvement_pct.
  void poll(uint32_t now_sec);

  // A queue's cycles and packets in every worker, since start.
  uint64_t cycles(uint16_t dp, uint16_t q) const;
  uint64_t packets(uint16_t dp, uint16_t q) const;
  nlohmann::json status() const;  // for show

 private:
  struct Queue {
    std::string name;  // port id, or physnet:NAME
    DpPort* port;
    RxqLoad load;  // cycles since the last rebalance (or start)
  };
  struct Plan {
    std::vector<Queue> queues;
    std::vector<uint16_t> owner;                    // by queue: its worker after the plan
    std::vector<uint64_t> load_before, load_after;  // by worker
  };
  std::vector<Queue> live_queues();
  void reset_window();
  // Owners unchanged unless the plan lowers the busiest worker's load.
  Plan plan();
  // Moves the planned queues (two snapshots a grace period apart); `then`
  // runs once the new workers poll them.
  void move(const Plan& plan, std::function<void()> then);

  const std::vector<std::unique_ptr<dp::Worker>>& workers_;
  PortTable& ports_;
  const uint32_t interval_s_, improvement_pct_;
  Publish publish_;
  std::map<uint64_t, uint64_t> base_;  // (dp << 16 | queue) -> cycles at the window's start
  bool moving_ = false;                // queues are being moved
  uint32_t last_sec_ = 0;              // the automatic one's last look
  uint64_t automatic_ = 0;             // automatic rebalances done
};

}  // namespace strait::ctl
