// physnet.restart: a physnet NIC stopped and started from the control thread,
// then its rte_flow rules replayed (control/devices/flow_offload.h). A stop may lose
// a NIC's rules; this is also how to get them back after one.
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <spdlog/spdlog.h>

#include "control/api/api_reply.h"
#include "control/switch/switch.h"

namespace strait::ctl {

using nlohmann::json;

// params: {"name": PHYSNET}. Workers poll and transmit on the NIC: it goes
// down in a snapshot first (not polled; frames to it are port_down drops),
// and is stopped only once no worker runs an older one. It comes back up in
// the next snapshot; the answer goes out once that one is live everywhere.
void Switch::physnet_restart(const json& params, Done done) {
  if (!params.is_object() || !params.contains("name") || !params["name"].is_string())
    return done(error_reply(invalid("name: required string (a physnet)")));
  const std::string name = params["name"].get<std::string>();
  Uplink* up = ports_.uplink(name);
  if (!up) return done(error_reply(not_found("physnet " + name + " is not configured")));
  if (!restarting_.insert(name).second)
    return done(error_reply(conflict("physnet " + name + " is already restarting")));
  up->dp.live = false;
  republish();
  spdlog::info("physnet {}: restarting its NIC once no worker polls it", name);
  publisher_.after_grace([this, name, done = std::move(done)]() mutable {
    Uplink& u = *ports_.uplink(name);
    const uint16_t port = u.dev.port_id;
    int rc = rte_eth_dev_stop(port);
    if (rc == 0) rc = rte_eth_dev_start(port);
    restarting_.erase(name);
    if (rc != 0) {
      // Left down: a later physnet.restart may bring it back.
      spdlog::error("physnet {}: restart failed: {}", name, rte_strerror(-rc));
      republish();
      return done(error_reply(Error{"device_error", "physnet " + name + ": restart failed: " +
                                                        rte_strerror(-rc) + " (left down)"}));
    }
    rte_eth_promiscuous_enable(port);
    offload_.replay(name);
    u.dp.live = true;
    republish();
    publisher_.after_grace([this, name, done = std::move(done)] {
      spdlog::info("physnet {}: restarted", name);
      done(ok_reply({{"name", name}, {"flow_offload", offload_.json(name)}}));
    });
  });
}

}  // namespace strait::ctl
