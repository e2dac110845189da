#pragma once
// The switch as the control thread sees it: desired state (Model), what is
// live (devices, datapath indexes, learned MACs), the workers, and the
// publisher. Every change of desired state takes one path, apply(): validate
// all -> compile -> open devices -> persist -> commit -> publish one
// snapshot -> answer after the grace period (docs/design.md). Ports,
// networks and the switch as a whole are its own; security groups, tunnels
// and the instance lifecycle are components that reach it through
// ChangePath.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <rte_mempool.h>

#include "control/daemon/config.h"
#include "control/devices/capture_dev.h"
#include "control/devices/ethdev.h"
#include "control/devices/flow_offload.h"
#include "control/lifecycle/lifecycle.h"
#include "control/model/model.h"
#include "control/model/store.h"
#include "control/ops/cache_dumps.h"
#include "control/ops/event_log.h"
#include "control/ops/rebalancer.h"
#include "control/secgroup/security_groups.h"
#include "control/switch/change_path.h"
#include "control/switch/conntrack_upkeep.h"
#include "control/switch/mac_table.h"
#include "control/switch/port_table.h"
#include "control/switch/publisher.h"
#include "control/switch/snapshot_builder.h"
#include "control/tunnel/tunnels.h"
#include "dataplane/worker.h"

namespace strait::ctl {

class Switch final : private ChangePath {
 public:
  // EAL must be initialised and the config's worker lcores enabled.
  static Result<std::unique_ptr<Switch>> create(const Config& cfg);
  ~Switch();

  void start_workers();
  void stop_workers();
  // straitd is stopping: the workers stop and every port that forwarded goes
  // down with a port-down event, while subscribers are still connected.
  void shut_down_ports();

  // Who asked: a local client (the API socket, straitctl) or etcd's intake
  // (control/etcd/intake.h).
  enum class Origin { kLocal, kEtcd };
  // Runs one API request. `done` is called exactly once: at once for
  // queries and refusals, after the grace period for changes.
  void call(const std::string& method, const nlohmann::json& params, Done done,
            Origin origin = Origin::kLocal);
  // The API's methods (control/api/switch_api.cc), in the order docs/api.md
  // lists them. Changes are logged with their outcome. events.subscribe is
  // the API server's own.
  enum class Kind {
    kQuery,    // changes nothing
    kDesired,  // changes desired state (persisted; etcd's alone on a host etcd drives)
    kLive,     // changes live state only (capture, queues, NIC restart, log level)
  };
  struct Method {
    const char* name;
    void (*handler)(Switch& sw, const nlohmann::json& params, Done done);
    Kind kind;
  };
  static const std::vector<Method>& methods();
  // Desired state comes from etcd (`source` names it in refusals): local
  // requests that would change it are refused, so that the host cannot
  // drift from what neutron holds.
  void set_desired_state_source(std::string source) { desired_source_ = std::move(source); }
  // Whether the port is forwarding in every worker (port-up went out).
  bool port_up(const std::string& id) const;
  // Control-loop tick: grace periods, learned MACs, aging. Never blocks.
  void poll();
  // Whether poll() has work waiting on a grace period (poll more often).
  bool busy() const { return publisher_.busy() || dumps_.busy(); }

  const Model& model() const override { return model_; }
  const Publisher& publisher() const override { return publisher_; }
  void after_grace(std::function<void()> fn) override { publisher_.after_grace(std::move(fn)); }
  const std::vector<std::unique_ptr<dp::Worker>>& workers() const { return workers_; }
  nlohmann::json show() const;
  nlohmann::json stats() const;

  // The event stream (port-up, vif-plugged, port-down, port-unbound): every
  // subscriber gets every event, in order, on the control thread.
  EventLog& events() { return events_; }

  // The instance lifecycle: where libvirt's domain events go.
  Lifecycle& lifecycle() { return lifecycle_; }
  // Another part of straitd `show` reports on, under `key` (etcd); empty: none.
  void set_status(std::string key, std::function<nlohmann::json()> status) {
    status_key_ = std::move(key);
    status_ = std::move(status);
  }

 private:
  explicit Switch(const Config& cfg);
  nlohmann::json show_switch() const;  // show() but set_status's part
  Status open_physnets();
  // Rebuilds networks and bindings, with their local VLANs, from the store
  // (F4, F11). A device that cannot be opened leaves its port bound and down.
  Status restore(const Store::Saved& saved);
  // Opens the port's device (ethdev) or socket (vhost) under datapath index dp.
  Result<PortRuntime> attach(const PortSpec& spec, uint16_t dp);
  void detach(const PortRuntime& rt);
  void close_and_retire(const Ethdev& dev);
  void free_retired_pools();
  // ChangePath (control/switch/change_path.h).
  Store& store() override { return *store_; }
  Status apply(const Change& c) override;
  void republish() override;

  // API methods (control/api/switch_api.cc).
  void network_create(const nlohmann::json& params, Done done);
  void network_delete(const nlohmann::json& params, Done done);
  void network_list(const nlohmann::json& params, Done done);
  void port_bind(const nlohmann::json& params, Done done);
  Status bind_all(const std::vector<PortSpec>& specs, bool bulk);
  void port_list(const nlohmann::json& params, Done done);
  void port_show(const nlohmann::json& params, Done done);
  void show_method(const nlohmann::json& params, Done done);
  void stats_method(const nlohmann::json& params, Done done);
  void log_level(const nlohmann::json& params, Done done);
  // physnet.restart (switch_offload.cc): the NIC stopped and started with no
  // worker polling it, its rte_flow rules replayed.
  void physnet_restart(const nlohmann::json& params, Done done);
  nlohmann::json mempool_json() const;
  void port_unbind(const nlohmann::json& params, Done done);
  // port.capture (switch_capture.cc): a vhost port's capture stand-in on or off.
  void port_capture(const nlohmann::json& params, Done done);
  nlohmann::json capture_json(const PortRuntime& p) const;
  // A bound port's addresses, groups or port security, changed live.
  void port_update(const nlohmann::json& params, Done done);
  // Observability (switch_inspect.cc): trace and cache.dump.
  void trace(const nlohmann::json& params, Done done);
  void cache_dump(const nlohmann::json& params, Done done);
  void poll_cache_dumps();
  nlohmann::json dp_port_ref(uint16_t dp) const;  // {"dp_port", "name"}
  nlohmann::json network_json(const NetworkSpec& n) const;
  nlohmann::json port_json(const PortSpec& p) const;

  std::vector<uint64_t> port_counter_sums(uint16_t dp) const;
  void drain_learn_events();
  // A local VLAN released with its network's last port may be reused by
  // another network at once: what was learned in it must not carry over.
  void forget_learned_of_released_vlans();
  void age_learned();
  // The learned FDB, when MACs were learned or forgotten since the last
  // (not the snapshot: learned_fdb.h).
  void publish_learned();
  void drain_vhost_events();
  void emit(const char* event, const std::string& port_id);
  // Stops the port forwarding (its device, if any, stays registered); port-down
  // goes out once no worker forwards for it. Nothing when it is not live.
  void take_down(const std::string& id, PortRuntime& p);
  // Lifecycle::PortActions.
  bool replug(const std::string& id, PortRuntime& p);
  void unplug(const std::string& id, PortRuntime& p);
  // Whether the device that carries the port's frames is live: its own, or
  // for a trunk's subport, its parent's.
  bool device_live(const std::string& id) const;
  // Once the snapshot published now is live everywhere: announce the port
  // (port-up, vif-plugged) if it is still bound and its device still there.
  void announce_up_when_live(const std::string& id);

  Config cfg_;
  Model model_;
  std::unique_ptr<ConntrackUpkeep> ct_;  // the conntrack table and its upkeep
  std::unique_ptr<Store> store_;
  Store::RecordedConfig recorded_;  // physnets and [vtep] in force, as recorded at start
  dp::DataplaneShared shared_;
  Publisher publisher_;
  rte_mempool* pool_ = nullptr;              // shared: vhost rx, copies, tunnel headers
  std::vector<rte_mempool*> retired_pools_;  // of closed ethdevs, until their buffers are back
  std::vector<std::unique_ptr<dp::Worker>> workers_;
  bool running_ = false;

  PortTable ports_;  // ports and uplinks as the datapath has them
  Rebalancer rebalancer_;  // rx queues between workers by their load
  MacTable learned_;  // MACs learned behind physnets and remote VTEPs
  EventLog events_;
  uint64_t start_tsc_ = 0;
  uint32_t last_age_sec_ = 0;
  CacheDumps dumps_;  // cache.dump requests
  FlowOffload offload_;               // the physnet NICs' rte_flow rules, synced at republish
  std::set<std::string> restarting_;  // physnets in a physnet.restart
  std::string desired_source_;        // set_desired_state_source; empty: local requests
  std::string status_key_;            // set_status
  std::function<nlohmann::json()> status_;
  // The components (after what they refer to).
  SecurityGroups groups_;
  Tunnels tunnels_;
  Lifecycle lifecycle_;
};

}  // namespace strait::ctl
