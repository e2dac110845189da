#pragma once
// The control thread's side of the conntrack table (dataplane/conntrack.h):
// the table, its expiry and deferred reuse on the control tick, the rate of
// new connections, and the flush of a port's connections once no worker
// runs a snapshot in which the port could still open one (F10).
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "control/model/model.h"
#include "control/switch/publisher.h"
#include "dataplane/conntrack.h"

namespace strait::ctl {

class ConntrackUpkeep {
 public:
  ConntrackUpkeep(const dp::CtConfig& cfg, Publisher& publisher);
  dp::Conntrack& table() { return *ct_; }

  // The connections of a port's addresses (all, or only `only`) in zone
  // lvlan go once the snapshot published now is live everywhere: no worker
  // can open one for it again behind the flush.
  void flush_port_after_grace(const PortSpec& p, uint16_t lvlan, std::vector<IpAddr> only = {});
  // Every connection of zone lvlan (its network left the host), likewise.
  void flush_zone_after_grace(uint16_t lvlan);
  // Control tick: due flushes, a slice of expiry, deferred reuse, the rate.
  void poll();
  nlohmann::json json() const;

 private:
  std::unique_ptr<dp::Conntrack> ct_;
  Publisher& publisher_;
  bool retiring_ = false;  // a batch of removed entries waits for a grace period
  uint64_t last_expire_ms_ = 0;
  // New connections per second (created + reopened) over the last second:
  // the counters at the last sample, and the rate.
  uint64_t rate_ms_ = 0, rate_opened_ = 0;
  double new_per_s_ = 0;
  // Addresses whose grace period is over: their connections go at the next
  // poll, one table walk per zone.
  std::map<uint16_t, std::vector<std::array<uint8_t, 16>>> flush_ready_;
};

}  // namespace strait::ctl
