#pragma once
// The ports and uplinks as the datapath has them: each one's datapath index,
// its rx queues and the workers that poll them, its device, and what libvirt
// last said of its instance. The table keeps its bookkeeping (PortSlots) in
// step with its entries: a port's rx queues count on their workers while it
// has them and are given back when it loses them, and an index is taken
// before a device opens and given back only once no worker can hold a
// snapshot that names it (free_index, after a grace period). Devices are
// opened and closed by the Switch: nothing here calls DPDK.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "control/devices/capture_dev.h"
#include "control/devices/ethdev.h"
#include "control/switch/port_slots.h"
#include "control/switch/snapshot_builder.h"

namespace strait::ctl {

// A bound port's live side.
struct PortRuntime {
  DpPort dp;
  Ethdev dev;                  // kEthdev attachments
  std::vector<uint64_t> base;  // counters at bind (datapath indexes are reused)
  std::string vhost_path;      // kVhost attachments
  std::optional<CaptureDev> capture;  // kVhost: its stand-in for dpdk-dumpcap (dp.capture)
  bool has_device = false;     // an ethdev was opened / a socket registered
  bool announced = false;      // port-up went out: live in every worker
  // The instance this port is an interface of, as libvirt last told.
  std::string domain_uuid, domain_name, domain_alias;
  const char* domain_state = nullptr;  // running, paused, stopped, undefined; null: none seen
};

// A physnet's NIC.
struct Uplink {
  DpPort dp;
  Ethdev dev;
};

class PortTable {
 public:
  PortTable(uint16_t n_indexes, uint16_t n_workers) : slots_(n_indexes, n_workers) {}

  // Datapath indexes (dp::kMaxPorts of them, ports and uplinks alike).
  std::optional<uint16_t> alloc_index() { return slots_.alloc_index(); }
  void free_index(uint16_t index) { slots_.free_index(index); }
  // The workers of n new rx queues (an ethdev's, as it opens): each on the
  // worker polling the fewest.
  std::vector<uint16_t> assign_rx_queues(uint16_t n) { return slots_.assign_rx_queues(n); }
  // p's rx queues leave their workers (its device closes or goes).
  void release_rx_queues(DpPort& p);
  // Rx queues each worker polls.
  const std::vector<uint32_t>& rx_queues() const { return slots_.rx_queues(); }

  // Bound ports by id (canonical, as the model has it).
  PortRuntime* find(const std::string& id);
  const PortRuntime* find(const std::string& id) const;
  void add(const std::string& id, PortRuntime rt);
  // The port leaves the table, and its rx queues their workers; its index
  // stays taken (free_index once no worker can see it).
  PortRuntime take(const std::string& id);
  // The vhost port on socket `path`, or whose device is `vid`; *id gets its id.
  PortRuntime* by_vhost_path(const std::string& path, std::string* id);
  PortRuntime* by_vid(int vid, std::string* id);
  // A vhost port's guest driver is ready with nq queue pairs (a device of
  // its that was never seen to go is replaced), or its device is gone.
  void vhost_ready(PortRuntime& p, int vid, uint16_t nq);
  void vhost_gone(PortRuntime& p);

  // Physnet uplinks: the NIC opened, an index and its rx queues taken.
  Status add_uplink(const std::string& physnet, const Ethdev& dev);
  Uplink* uplink(const std::string& physnet);

  std::map<std::string, PortRuntime>& ports() { return ports_; }
  const std::map<std::string, PortRuntime>& ports() const { return ports_; }
  const std::map<std::string, Uplink>& uplinks() const { return uplinks_; }
  // Every port's and uplink's datapath side, by name: a port's id or
  // "physnet:NAME" (uplinks first).
  void for_each_dp(const std::function<void(const std::string& name, DpPort& p)>& fn);
  void for_each_dp(const std::function<void(const std::string& name, const DpPort& p)>& fn) const;
  // The name (as above) of a datapath index; empty when nothing has it.
  std::string name_of(uint16_t dp) const;
  // What the snapshot build needs of the ports and uplinks.
  void fill(BuildInput& in) const;

  // A rebalance moves queue q of p to worker `to`. The queue is polled by
  // nobody until unpause_all(), which the caller publishes a grace period
  // after the snapshot that took it from its old worker.
  void move_rx_queue(DpPort& p, uint16_t q, uint16_t to);
  void unpause_all();

  // Everything goes (straitd stops: the devices are closed already).
  void clear();

 private:
  std::map<std::string, PortRuntime> ports_;  // by port id
  std::map<std::string, Uplink> uplinks_;     // by physnet
  PortSlots slots_;
};

}  // namespace strait::ctl
