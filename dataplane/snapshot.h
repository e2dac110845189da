#pragma once
// The immutable configuration every worker forwards by. The control thread
// builds a new Snapshot for every change and publishes it with one pointer
// swap (publisher in control/); workers only read it. Nothing in here is ever
// modified after publication, so no field needs synchronisation.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/action.h"
#include "dataplane/fdb.h"
#include "dataplane/flow_key.h"
#include "dataplane/qos.h"
#include "dataplane/sg_classifier.h"

namespace strait::dp {

inline constexpr uint16_t kMaxPorts = 2048;   // datapath port indexes 0..kMaxPorts-1
inline constexpr uint16_t kMaxWorkers = 64;
inline constexpr uint16_t kMaxVlan = 4094;

enum class PortRole : uint8_t {
  kAccess,  // a VM's NIC: untagged, in exactly one network
  kUplink,  // a physnet NIC: carries VLAN and flat networks of one physnet
};

enum class PortKind : uint8_t {
  kEthdev,  // a DPDK ethdev (NIC or vdev)
  kVhost,   // a vhost-user device on rte_vhost (a VM's virtio-net)
};

inline constexpr uint16_t kMaxVhostQueues = 16;  // queue pairs used per vhost port
inline constexpr uint16_t kMaxRxQueues = kMaxVhostQueues;  // rx queues polled per port
inline constexpr uint16_t kNoCapture = 0xffff;  // PortEntry::capture: none

enum class NetType : uint8_t { kLocal, kFlat, kVlan, kVxlan };

// Remote VTEPs are reached like ports: FDB entries and actions name VTEP v
// as datapath port kVtepPortBase + v (v indexes Snapshot::vteps).
inline constexpr uint16_t kVtepPortBase = kMaxPorts;
inline constexpr uint16_t kMaxVteps = 4096;
inline bool is_vtep_port(uint16_t port) {
  return port >= kVtepPortBase && port < kVtepPortBase + kMaxVteps;
}

// This host's VXLAN tunnel endpoint (issue 6). Outer headers: Ethernet
// (src = the underlay NIC's MAC, dst = the next hop's), IPv4 (src local_ip,
// DF, ttl), UDP (src from a hash of the inner flow, dst udp_port), VXLAN
// (I flag, VNI); the inner frame untagged.
struct VtepConfig {
  bool enabled = false;
  uint32_t local_ip = 0;       // IPv4, network order
  uint16_t uplink = kNoPort;   // datapath port of the underlay NIC (a physnet's NIC, untagged)
  uint16_t udp_port = 4789;
  uint8_t ttl = 64;
  bool learning = false;       // learn inner source MACs of decapsulated frames
  uint8_t mac[6] = {};         // the underlay NIC's MAC
  bool operator==(const VtepConfig&) const = default;
};

// A remote VTEP as workers reach it. Stable index while referenced.
struct RemoteVtep {
  bool present = false;
  uint32_t ip = 0;             // the VTEP's IPv4 address, network order
  uint32_t arp_ip = 0;         // who to ARP for its next hop: ip, or the configured gateway
  bool resolved = false;       // next_hop_mac known (static or learned by ARP)
  uint8_t next_hop_mac[6] = {};
  // Once resolved (the snapshot builder fills them, vxlan_outer_template):
  // the 50 outer header bytes of frames to this VTEP, lengths, IPv4
  // checksum, UDP source port and VNI zero (set per frame), and the
  // ones'-complement sum of that IPv4 header, so a frame's checksum is an
  // addition, not a pass over the header.
  uint8_t outer[50] = {};
  uint32_t outer_ip_sum = 0;
};

// One source a VM port may send from: a MAC and the addresses it may use
// with it (port security). The port's MAC with each fixed IP (host prefix)
// and with its IPv6 link-local address (fe80::/64 + EUI-64 of the MAC); each
// allowed address pair's MAC (the port's when the pair names none) with the
// pair's prefix and that MAC's link-local address.
struct AllowedSource {
  uint64_t mac;      // mac_to_u64
  SgPrefix prefix;   // family, length, network-order address
  bool operator==(const AllowedSource&) const = default;
};

// Port security of one VM port (port_security_enabled = true): anti-spoofing,
// the always-allowed traffic, and its security groups. Owned by the Snapshot.
struct PortSecurity {
  // The compiled rules of the port's set of groups, shared by every port with
  // the same set; null when the port has no group (no rule allows anything:
  // only the always-allowed traffic and nothing stateful passes).
  const SgClassifier* sg = nullptr;
  std::vector<uint64_t> macs;            // allowed source MACs (mac_to_u64)
  std::vector<AllowedSource> sources;    // allowed (MAC, source address) pairs
};

// How a worker transmits to one port.
struct TxQueue {
  uint16_t queue = 0;
  bool shared = false;  // other workers use this queue too: take the port's tx lock per burst
  bool operator==(const TxQueue&) const = default;
};

// A trunk parent's subports by VLAN id (kNoPort: none), issue 25.
using TrunkMap = std::array<uint16_t, 4096>;

struct PortEntry {
  bool present = false;  // index in use in this snapshot
  bool enabled = false;  // forwards: binding complete and device live (F6)
  PortRole role = PortRole::kAccess;
  PortKind kind = PortKind::kEthdev;
  uint16_t ethdev = 0;       // DPDK port id (kEthdev)
  int vid = -1;              // rte_vhost device id (kVhost); rx queue q = vring 2q+1, tx = 2q
  uint16_t capture = kNoCapture;  // kVhost being captured: its stand-in ethdev (capture.h)
  uint16_t lvlan = 0;        // kAccess: the network's local VLAN
  uint16_t uplink_map = 0;   // kUplink: index into Snapshot::uplinks
  uint32_t key_bytes = kL2KeyBytes;  // flow-cache key scope of frames from this port
  uint8_t mac[6] = {};
  // kAccess with port security on: what the port may send and receive
  // (points into Snapshot::security); null: no filtering, no anti-spoofing.
  const PortSecurity* security = nullptr;
  // With security: the generation of the snapshot that gave the port its
  // rules (security->sg); connections through the port verified before it
  // are checked again (rules_floor, sg_stage.h). The publisher sets it.
  uint32_t rules_gen = 1;
  // A trunk's subport (neutron's VLAN-aware VMs): an access port whose
  // frames travel on its parent's device with an 802.1Q tag of trunk_vid.
  // The device fields (kind, ethdev, vid, capture, txq) are the parent's;
  // the parent's rx queues carry its frames (the worker strips the tag and
  // takes them as the subport's), and frames to it leave tagged trunk_vid.
  uint16_t parent = kNoPort;  // kNoPort: a port with a device of its own
  uint16_t trunk_vid = 0;
  // A trunk's parent: its subports by VLAN (points into Snapshot::trunks);
  // null: not a trunk, every tagged frame from it is dropped.
  const TrunkMap* trunk = nullptr;
  // kAccess with QoS rules (points into Snapshot::qos): policed per frame in
  // the worker, never part of a cached decision; null: none.
  const PortQos* qos = nullptr;
  std::array<TxQueue, kMaxWorkers> txq{};  // indexed by worker
  // The datapath index whose device this port sends on (tx queue locks).
  uint16_t device_port(uint16_t self) const { return parent == kNoPort ? self : parent; }
};

// The subport of trunk parent `in` whose VLAN the frame's outer 802.1Q tag
// carries, or kNoPort (not a trunk, untagged, another TPID, no such subport).
inline uint16_t trunk_subport(const PortEntry& in, const uint8_t* frame, uint32_t len) noexcept {
  if (!in.trunk || len < 18 || frame[12] != 0x81 || frame[13] != 0x00) return kNoPort;
  return (*in.trunk)[((frame[14] & 0x0f) << 8) | frame[15]];
}

// A physnet NIC's VLAN id -> network map.
struct UplinkMap {
  std::array<uint16_t, 4096> vid_to_lvlan{};  // 0 = no network
  uint16_t flat_lvlan = 0;                    // untagged frames; 0 = none
  bool operator==(const UplinkMap&) const = default;
};

// A remote port's IPv4 address and MAC, from the tunnel FDB: what the ARP
// responder answers a local VM's request for `ip` with.
struct ArpEntry {
  uint32_t ip;     // network order
  uint8_t mac[6];
  bool operator==(const ArpEntry&) const = default;
};

struct FloodTarget {
  uint16_t port;
  uint16_t egress_vid;  // 0 = untagged
  bool operator==(const FloodTarget&) const = default;
};

struct Network {
  bool present = false;
  NetType type = NetType::kLocal;
  uint16_t seg_id = 0;       // VLAN id on the physnet (kVlan)
  uint32_t vni = 0;          // kVxlan: the segmentation id
  // kVxlan: remote VTEPs (indexes into Snapshot::vteps) that get a copy of
  // broadcast, unknown unicast and multicast (head-end replication); never
  // for a frame that came out of a tunnel (split horizon).
  std::vector<uint16_t> flood_vteps;
  // kVxlan with the ARP responder on: the remote ports' addresses, sorted by
  // ip. A broadcast ARP request of a local VM for one of them is answered to
  // the VM (Action::out_port indexes this) and goes nowhere else.
  std::vector<ArpEntry> arp;
  uint16_t mtu = 1500;
  uint16_t uplink = kNoPort;  // datapath port of the physnet NIC (kVlan, kFlat)
  std::vector<FloodTarget> flood;  // every port of the network, uplink included (kVxlan: local ports)
  bool operator==(const Network&) const = default;
};

struct RxQueue {
  uint16_t port;   // datapath port index
  uint16_t queue;  // rx queue id on that port
};

struct Snapshot {
  uint32_t generation = 1;  // never 0 (0 marks an empty flow-cache entry)
  // Generations that change less often than `generation` (issue 22), set by
  // the publisher from the snapshot before (same_forwarding):
  //   cache_generation: what flow caches key their entries by; a snapshot
  //     that changed only security-group rules keeps it (cached actions leave
  //     the rules to conntrack, sg_stage.h), so its flows stay cached.
  //   verify_generation: conntrack re-checks every connection verified
  //     before it against the rules (F10); after a change of rules only, just
  //     those of ports whose rules changed (PortEntry::rules_gen).
  uint32_t cache_generation = 1;
  uint32_t verify_generation = 1;
  uint16_t n_workers = 0;
  std::vector<PortEntry> ports;                  // size kMaxPorts, by datapath index
  std::array<Network, 4096> networks{};          // by local VLAN (1..4094)
  std::vector<UplinkMap> uplinks;
  Fdb fdb;  // remote MACs of VXLAN networks map to kVtepPortBase + VTEP index
  VtepConfig vtep;
  std::vector<RemoteVtep> vteps;                    // by VTEP index
  std::vector<std::pair<uint32_t, uint16_t>> vni_to_lvlan;  // sorted by VNI
  std::vector<std::vector<RxQueue>> rx_by_worker;  // what each worker polls
  // Port security of the ports that have it (PortEntry::security), and the
  // classifiers they use: a classifier shared with older and newer snapshots
  // lives while any of them does (freed on the control thread, never by a
  // worker: workers hold plain pointers until their next quiescent report).
  std::vector<std::unique_ptr<PortSecurity>> security;
  std::vector<std::shared_ptr<const SgClassifier>> classifiers;
  std::vector<std::unique_ptr<TrunkMap>> trunks;  // PortEntry::trunk
  std::vector<std::unique_ptr<PortQos>> qos;       // PortEntry::qos

  Snapshot() : ports(kMaxPorts) {}
  const PortEntry* port(uint16_t idx) const {
    return idx < ports.size() && ports[idx].present ? &ports[idx] : nullptr;
  }
  const RemoteVtep* vtep_of(uint16_t port) const {
    if (!is_vtep_port(port) || size_t(port - kVtepPortBase) >= vteps.size()) return nullptr;
    const RemoteVtep& v = vteps[port - kVtepPortBase];
    return v.present ? &v : nullptr;
  }
  // The local VLAN of a VNI, 0 when no network of it is on this host.
  uint16_t lvlan_of_vni(uint32_t vni) const;
};

// Whether every flow gets the same pipeline decision (pipeline.h) from a as
// from b: everything the pipeline reads is equal, security-group rules
// (PortSecurity::sg) aside; what only the worker's per-packet work reads
// (tx queues, rx queue owners, remote VTEPs' next hops) is not compared.
bool same_forwarding(const Snapshot& a, const Snapshot& b);

}  // namespace strait::dp
