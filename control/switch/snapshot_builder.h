#pragma once
// Compiles the desired state (Model) plus what is live on this host (devices,
// datapath indexes, queue owners) into one immutable Snapshot, and learned
// MACs into the learned FDB that workers read beside it (dp/learned_fdb.h).
// Pure: no DPDK calls, so it is tested without an EAL.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "control/model/model.h"
#include "dataplane/snapshot.h"

namespace strait::ctl {

// A device-backed datapath port as the builder needs it.
struct DpPort {
  uint16_t dp = dp::kNoPort;          // datapath index
  uint16_t ethdev = 0;                // DPDK port id (kEthdev)
  std::vector<uint16_t> rxq_worker;   // owning worker of each rx queue (stable: see Switch)
  uint16_t n_txq = 1;                 // tx queues (kVhost: queue pairs)
  bool live = false;                  // device started and usable
  dp::PortKind kind = dp::PortKind::kEthdev;
  int vid = -1;                       // kVhost: the rte_vhost device while it exists
  uint32_t rxq_paused = 0;            // bit q: queue q is polled by nobody (being moved)
  uint16_t capture = dp::kNoCapture;  // kVhost: its capture stand-in's ethdev id
};

struct LearnedMac {
  uint16_t lvlan;
  Mac mac;
  uint16_t port;  // datapath index of the uplink it was seen on, or kVtepPortBase + VTEP index
  uint16_t slot;  // learned-slot index (worker aging counters)
};

// This host's VTEP and the remote VTEPs as the Switch tracks them (issue 6).
struct VtepInput {
  dp::VtepConfig config;                // all but `uplink`, which the builder fills
  std::string physnet;                  // the underlay physnet (its NIC carries the tunnels)
  std::vector<dp::RemoteVtep> remotes;  // by VTEP index, with their resolution
  std::map<uint32_t, uint16_t> index;   // remote VTEP IPv4 (network order) -> VTEP index
};

struct BuildInput {
  const Model* model = nullptr;
  uint16_t n_workers = 1;
  std::map<std::string, DpPort> ports;    // by port id (bound ports with a device)
  std::map<std::string, DpPort> uplinks;  // by physnet name
  // The compiled rules of each canonical group set (canonical_group_set)
  // that a bound port with port security uses (SgCache). A set missing here
  // (or a port without groups) gets PortSecurity::sg == null: nothing allowed.
  std::map<std::vector<std::string>, std::shared_ptr<const dp::SgClassifier>> classifiers;
  // [vtep] configured: vxlan networks get their VNI, FDB entries of remote
  // MACs (port kVtepPortBase + VTEP index) and flood VTEPs from the model's
  // tunnel state; the underlay uplink caches flows by the full key (the
  // tunnel fields lie past the L2 prefix).
  std::optional<VtepInput> vtep;
  // The workers' TSC rate: QoS limits are meters in TSC units (0: no
  // limit is policed; DSCP marking still applies).
  uint64_t tsc_hz = 0;
};

// Ports with port security get a PortSecurity (dp/port_security.h says what
// it enforces). Every port of a network with a port-security port, and every
// uplink carrying such a network, gets the full flow-cache key scope (the
// rules look at L3/L4).
std::unique_ptr<dp::Snapshot> build_snapshot(const BuildInput& in);

// A port's QoS rules as workers apply them (dp/qos.h).
dp::PortQos compile_qos(const std::vector<QosRule>& rules, uint64_t tsc_hz);

// The learned FDB of these MACs. The snapshot's FDB (bound ports, remote
// MACs) wins over it: the pipeline looks there first.
std::unique_ptr<dp::Fdb> build_learned_fdb(const std::vector<LearnedMac>& learned);

// The allowed sources of a port with port security (dp::AllowedSource).
std::vector<dp::AllowedSource> allowed_sources(const PortSpec& p);

// Which tx queue worker `w` uses on a device with n_txq queues, and whether
// another worker uses it too (then it is locked per burst).
dp::TxQueue tx_queue_for(uint16_t worker, uint16_t n_workers, uint16_t n_txq);

}  // namespace strait::ctl
