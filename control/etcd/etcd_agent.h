#pragma once
// straitd's side of etcd ([etcd] in the config; keys in intake.h and
// docs/openstack.md). Two threads of its own make every etcd call, so the
// control thread never waits on the network:
//  - the watcher reads this host's desired state, hands it to the control
//    thread (EtcdIntake applies it), and watches it from the revision it
//    read. After a broken stream or a compacted revision it reads everything
//    again: a resync, reconciled in place (nothing unchanged is touched).
//  - the writer holds this host's liveness key (a lease of lease_ttl_s, kept
//    alive every third of it; revoked when straitd stops) and writes the
//    port and group states the intake reports. After etcd comes back it
//    writes them all again, and deletes state keys this host no longer has.
// With etcd unreachable the switch forwards and follows libvirt with what it
// has, and a restart comes back from its SQLite store; changes catch up on
// reconnect.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "control/daemon/config.h"
#include "control/etcd/etcd_client.h"
#include "control/etcd/intake.h"

namespace strait::ctl {

class EventLoop;
class Switch;

// The keys of one host under a prefix.
struct EtcdKeys {
  EtcdKeys(const std::string& prefix, const std::string& host);
  std::string ports;   // PREFIX/nodes/HOST/ports/ (desired, from neutron)
  std::string groups;  // PREFIX/global/secgroups/ (desired, from neutron)
  std::string members; // PREFIX/global/remote_group/ (desired, from neutron)
  std::string alive;   // PREFIX/states/HOST/alive (ours, with a lease)
  std::string states;  // PREFIX/states/HOST/: ports/ID, secgroups/ID (ours, as alive)
};

// The liveness key's value: what this host offers neutron's driver to bind
// by (physnets, VTEP, vhost socket directory, version).
nlohmann::json alive_json(const Config& cfg);

class EtcdAgent {
 public:
  // `alive` is the liveness key's value (what this host offers: physnets,
  // VTEP, socket directory; the ML2 driver binds by it).
  EtcdAgent(const EtcdSettings& s, EventLoop& loop, Switch& sw, nlohmann::json alive);
  ~EtcdAgent();  // revokes the lease, stops both threads
  EtcdAgent(const EtcdAgent&) = delete;
  EtcdAgent& operator=(const EtcdAgent&) = delete;

  void start();
  // For `show` (control thread).
  nlohmann::json status() const;

 private:
  struct Inbound {
    bool resync = false;
    std::vector<KeyValue> ports, groups, members;  // resync: everything
    std::vector<WatchEvent> events;       // else: changes, in order
    int64_t revision = 0;
  };
  void watcher_main();
  void writer_main();
  void post(Inbound in);         // watcher -> control thread
  void on_inbound();             // control thread
  void write_state(const std::string& rel, const nlohmann::json* state);  // control thread; rel: ports/ID...
  void sleep_for(std::chrono::milliseconds d);  // stops early when stopping
  void set_error(const std::string& who, const std::string& error);

  EtcdSettings cfg_;
  EtcdKeys keys_;
  EventLoop& loop_;
  Switch& sw_;
  EtcdIntake intake_;
  const std::string alive_value_;
  int wake_fd_ = -1;
  uint64_t events_token_ = 0;  // the switch's event stream
  std::atomic<bool> stop_{false};
  std::thread watcher_, writer_;

  mutable std::mutex mu_;  // guards what follows
  std::condition_variable cv_;
  std::vector<Inbound> inbox_;
  std::map<std::string, std::optional<std::string>> outbox_;  // state key -> value (null: delete)
  std::map<std::string, std::string> written_;  // every state key's value, for a rewrite
  bool watching_ = false, alive_ = false;
  bool reported_ = false;  // the intake has reported on a whole resync
  int64_t revision_ = 0, lease_ = 0;
  uint64_t full_reads_ = 0, writes_ = 0;
  std::string last_error_;
};

}  // namespace strait::ctl
