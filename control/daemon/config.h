#pragma once
// straitd's own configuration (TOML; layout in docs/api.md). Loaded once at
// start; a bad file stops the daemon with a message naming the key.
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "control/model/net_addr.h"
#include "control/model/vlan_allocator.h"
#include "dataplane/result.h"

namespace strait::ctl {

// [vtep]: this host's VXLAN tunnel endpoint (issue 6). Absent: no vxlan
// networks. The underlay is `physnet`'s NIC, untagged.
struct VtepSettings {
  IpAddr local_ip;                  // IPv4 unicast
  std::string physnet;              // a [physnets] name
  uint16_t udp_port = 4789;
  uint8_t ttl = 64;
  std::optional<IpAddr> next_hop;   // a gateway to the remote VTEPs; none: on-link
  std::optional<Mac> next_hop_mac;  // static next-hop MAC: no ARP
  bool learning = false;            // learn remote MACs from decapsulated frames
  uint16_t underlay_mtu = 1500;     // vxlan networks' MTU is at most this - 50
};

// [privileges]: whom straitd becomes once started (control/daemon/privileges.h).
// Looked up when the config is read: an unknown user or group stops straitd
// before anything starts.
struct PrivilegeSettings {
  std::string user;               // its name in the password database
  uid_t uid = 0;
  std::string group;              // the primary group's name (its number if it has none)
  gid_t gid = 0;
  std::vector<int> capabilities;  // CAP_* kept after the switch (privileges.h lists those allowed)
};

// [etcd]: desired state from etcd, written there by neutron's ML2 driver
// (networking-strait/), and this host's liveness and port states written
// back (control/etcd/, docs/openstack.md). Absent: the API is the only source.
struct EtcdSettings {
  std::vector<std::string> endpoints;  // etcd client URLs (http:// or https://), tried in turn
  std::string host;                    // this host's name, as neutron's binding:host_id says it
  std::string prefix = "/strait";      // every key straitd reads or writes starts with it
  uint32_t lease_ttl_s = 10;           // the liveness key goes this long after straitd does
};

struct Config {
  std::string state_dir = "/var/lib/strait";
  std::string api_socket = "/run/strait/api.sock";
  std::vector<unsigned> worker_lcores = {1};    // [datapath] workers
  uint32_t flow_cache_entries = 262144;         // per worker (32 MiB each)
  uint32_t idle_sleep_us = 0;                   // 0: busy-poll
  uint32_t mac_aging_s = 300;                   // learned physnet MACs expire after this idle time
  uint32_t rebalance_interval_s = 0;            // automatic rx-queue rebalance; 0: off
  uint32_t rebalance_improvement_pct = 25;      // ... when the busiest worker gains this much
  std::map<std::string, std::string> physnets;  // name -> device devargs
  // [physnets.NAME] vlan_ranges, as neutron's network_vlan_ranges: the VLAN
  // ids a new vlan network of NAME may have (no entry: 1..4094).
  std::map<std::string, std::vector<VlanRange>> vlan_ranges;
  // [libvirt]: the instance lifecycle follows this connection's domain events.
  bool libvirt_enabled = true;
  std::string libvirt_uri = "qemu:///system";
  // [vhost]: server-mode sockets (the switch creates them). A relative
  // socket path in a binding is resolved in socket_dir; each socket gets
  // socket_mode and, when set, socket_owner / socket_group (name or number).
  std::string vhost_socket_dir = "/run/strait/vhost";
  std::string vhost_socket_owner;
  std::string vhost_socket_group;
  uint32_t vhost_socket_mode = 0660;
  // [metrics]: the Prometheus endpoint (control/ops/metrics.h), `listen` split
  // into a numeric address (IPv4, or IPv6 without brackets) and a port.
  bool metrics_enabled = true;
  std::string metrics_address = "127.0.0.1";
  uint16_t metrics_port = 9464;
  // [conntrack]: the connection table of security groups (shared by the
  // workers). tcp_loose: pick up a TCP connection from its first packet
  // seen mid-stream (after a restart or a rule re-added), not only a SYN.
  uint32_t ct_capacity = 262144;
  bool ct_tcp_loose = true;
  std::optional<VtepSettings> vtep;
  // [offload] rte_flow: physnet NICs that implement rte_flow get rules that
  // do work of the workers (control/devices/flow_offload.h); false: none are asked.
  bool offload_rte_flow = true;
  std::optional<PrivilegeSettings> privileges;  // absent: straitd stays as it was started
  std::optional<EtcdSettings> etcd;
};

// Reads and validates a config file. Errors are invalid_argument, with
// messages "config PATH: KEY.PATH: problem" (or "config PATH:LINE:COL: ..."
// for a TOML syntax error).
Result<Config> load_config(const std::string& path);
// The same for text already in memory; `origin` stands for the path in messages.
Result<Config> parse_config(std::string_view toml_text, const std::string& origin);

}  // namespace strait::ctl
