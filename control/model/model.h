#pragma once
// The desired state: networks and port bindings as the orchestrator gave
// them. Owned by the control thread. Every mutation validates everything
// first and either applies the whole change or returns an error and changes
// nothing (STYLE.md rule 8).
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "control/model/net_addr.h"
#include "control/model/secgroup.h"
#include "control/model/vlan_allocator.h"
#include "dataplane/result.h"
#include "dataplane/snapshot.h"

namespace strait::ctl {

struct NetworkSpec {
  std::string id;                       // UUID or name: [A-Za-z0-9][A-Za-z0-9_.:-]{0,63}
  dp::NetType type = dp::NetType::kLocal;
  std::string physnet;                  // kFlat, kVlan: a physnet of the config
  uint32_t seg_id = 0;                  // kVlan: VLAN id 1..4094; kVxlan: VNI 1..16777215
  uint16_t mtu = 1500;                  // 68..9000; kVxlan: 0 until the model gives the default
  // kVxlan: ARP requests of local VMs for a remote port's IP (its tunnel FDB
  // entry names it) are answered here and not flooded (neutron's
  // arp_responder). Default on; only a vxlan network has the field.
  bool arp_responder = true;
};

inline constexpr uint32_t kMaxVni = 16777215;
inline constexpr uint16_t kVxlanOverhead = 50;  // outer Ethernet + IPv4 + UDP + VXLAN

// What the model needs of the config's [vtep] (control/daemon/config.h).
struct VxlanSettings {
  bool enabled = false;       // [vtep] is configured: vxlan networks may exist
  IpAddr local_ip;            // ours: never a remote VTEP
  uint16_t underlay_mtu = 1500;
  uint16_t max_mtu() const { return static_cast<uint16_t>(underlay_mtu - kVxlanOverhead); }
};

// The l2population state of one vxlan network (issue 6): remote MACs and the
// VTEP (IPv4) behind each, and the VTEPs that get a copy of broadcast,
// unknown unicast and multicast. `ips`: the IPv4 address of the remote port
// of some of the MACs (l2population's fdb entries carry it), what the ARP
// responder answers with; an address belongs to one MAC at most.
struct TunnelSpec {
  std::map<Mac, IpAddr> fdb;
  std::map<Mac, IpAddr> ips;  // keys are keys of fdb
  std::set<IpAddr> flood;
  bool empty() const { return fdb.empty() && flood.empty(); }
  bool operator==(const TunnelSpec&) const = default;
};

// One tunnel.fdb.add entry.
struct TunnelFdbEntry {
  Mac mac{};
  IpAddr vtep;
  std::optional<IpAddr> ip;  // the remote port's IPv4 address (ARP responder)
};

// tunnel.* requests, parsed and checked field by field (no state consulted).
struct TunnelFdbRequest {
  std::string network;
  std::vector<TunnelFdbEntry> entries;  // delete: only the MACs
};
struct TunnelFloodRequest {
  std::string network;
  std::vector<IpAddr> vteps;
};
Result<TunnelFdbRequest> parse_tunnel_fdb(const nlohmann::json& params, bool add);
Result<TunnelFloodRequest> parse_tunnel_flood(const nlohmann::json& params);
// The stored form ({"fdb": [{"mac", "vtep", "ip"?}], "flood": [ip...]}) and back.
nlohmann::json to_json(const TunnelSpec& t);
Result<TunnelSpec> parse_tunnel(const nlohmann::json& j);
// IPv4 in network order as a dataplane uint32_t (its bytes as they are in memory).
uint32_t ipv4_be32(const IpAddr& ip);
IpAddr ipv4_from_be32(uint32_t be);

// How a port's frames reach it: its own device (an ethdev, a vhost-user
// socket), or, for a trunk's subport (neutron's VLAN-aware VMs), its parent
// port's device with the subport's VLAN tag on the wire.
struct Attachment {
  enum class Kind { kEthdev, kVhost, kSubport };
  enum class Mode { kClient, kServer };  // kVhost: our side of the socket
  Kind kind = Kind::kEthdev;
  std::string devargs;  // kEthdev: vdev devargs ("net_ring0", "net_pcap0,rx_pcap=..") or PCI address
  std::string path;     // kVhost: absolute socket path (< 108 bytes), as normal_socket_path()
  Mode mode = Mode::kClient;  // kVhost: client (QEMU is the server: libvirt mode='server') or server
  std::string parent;   // kSubport: the trunk's parent port (a bound port with a device)
  uint16_t vid = 0;     // kSubport: its segmentation id, the VLAN of its frames on the parent, 1..4094
};

// An absolute socket path without empty or "." components
// ("/run//a/./b.sock/" is "/run/a/b.sock"; "/" when none is left). ".." is
// kept: after a symlink, dropping it would name another file.
std::string normal_socket_path(const std::string& path);

// A neutron allowed address pair: the port may also send from `ip_address`
// (an address or a CIDR), with `mac_address`.
struct AddressPair {
  IpPrefix ip_address;
  Mac mac_address{};  // the port's MAC when the request names none
  bool operator==(const AddressPair&) const = default;
};

// A neutron QoS rule of a port (issue 25). bandwidth_limit and
// packet_rate_limit police one direction (neutron's, the VM's view: egress
// leaves the VM) at `max` kbit/s or kilo-frames/s with a burst of `burst`
// kbit or kilo-frames (0: 80 % of max, what neutron's OVS agent takes; max
// 0: no limit, as neutron's OVS agent takes it);
// dscp_marking sets `dscp` on the IP frames the VM sends.
struct QosRule {
  enum class Type { kBandwidthLimit, kPacketRateLimit, kDscpMarking };
  Type type = Type::kBandwidthLimit;
  dp::QosDir direction = dp::QosDir::kEgress;
  uint32_t max = 0;
  uint32_t burst = 0;
  uint8_t dscp = 0;
  bool operator==(const QosRule&) const = default;
};
// A port's rules: at most one of each type and direction (parse_port checks).
Result<std::vector<QosRule>> parse_qos_rules(const nlohmann::json& v);
nlohmann::json qos_json(const std::vector<QosRule>& rules);

struct PortSpec {
  std::string id;       // canonical lowercase UUID (36 chars)
  std::string network;  // NetworkSpec::id
  Mac mac{};            // unicast, not zero
  std::vector<IpAddr> fixed_ips;
  Attachment attach;
  // Port security (issue 5). security_groups: group ids in the order given,
  // no repeats. port_security_enabled: when the request omits it, true if
  // it names groups or address pairs, else false (a plain switch port).
  // false with groups or pairs is refused (neutron: the same).
  std::vector<std::string> security_groups;
  std::vector<AddressPair> allowed_address_pairs;
  bool port_security_enabled = false;
  std::vector<QosRule> qos;  // neutron's QoS policy of the port, as its rules
};

// The fields of a port a live port may change (port.update): each present
// one replaces the port's value; the result is validated as a whole.
struct PortUpdate {
  std::string id;
  std::optional<std::vector<IpAddr>> fixed_ips;
  std::optional<std::vector<std::string>> security_groups;
  std::optional<std::vector<AddressPair>> allowed_address_pairs;
  std::optional<bool> port_security_enabled;
  std::optional<std::vector<QosRule>> qos;
};

// Field-level parsing and validation of API parameters (no state consulted).
Result<NetworkSpec> parse_network(const nlohmann::json& params);
Result<PortSpec> parse_port(const nlohmann::json& params);
Result<PortUpdate> parse_port_update(const nlohmann::json& params);
// What a port's security fields must satisfy together (neutron's rules): no
// pair listed twice; port security enabled when the port has groups or pairs.
Status check_port_security(const PortSpec& p);
// Per port, far above neutron's defaults (5 fixed IPs, 10 address pairs) and
// low enough that checking a port stays cheap (pairs are compared pairwise).
inline constexpr size_t kMaxFixedIps = 256;
inline constexpr size_t kMaxAddressPairs = 256;
inline constexpr size_t kMaxPortGroups = 64;
// resource_exhausted, naming the field, when a port is past one of them.
Status check_port_limits(const PortSpec& p);
// A random (version 4) UUID, lowercase: ids of rules created without one.
std::string new_uuid();
nlohmann::json to_json(const NetworkSpec& n);
nlohmann::json to_json(const PortSpec& p);
nlohmann::json attach_json(const Attachment& a);
const char* net_type_name(dp::NetType t);
// The ethdev name DPDK gives devargs: the part before the first comma.
std::string devargs_name(const std::string& devargs);

class Model {
 public:
  // physnet name -> devargs of its NIC (from the config)
  explicit Model(std::map<std::string, std::string> physnets);
  // [vtep] as configured; before any network is added.
  void set_vxlan(const VxlanSettings& v) { vxlan_ = v; }
  const VxlanSettings& vxlan() const { return vxlan_; }

  // Per physnet, the VLAN ids its NIC carries (config); none listed: 1..4094.
  void set_vlan_ranges(std::map<std::string, std::vector<VlanRange>> r) { vlan_ranges_ = std::move(r); }
  // invalid_argument when a new vlan network's VLAN is outside its physnet's
  // ranges. Not part of add_network: a saved network is restored as it was.
  Status check_vlan_range(const NetworkSpec& n) const;
  Status add_network(const NetworkSpec& n);
  Status remove_network(const std::string& id);  // conflict while ports are bound
  // Checks that add_port would succeed; changes nothing.
  Status check_add_port(const PortSpec& p) const;
  // Binds; allocates the network's local VLAN when it is its first port here.
  // resource_exhausted when a group of the port would have more than
  // kMaxGroupAddresses member addresses (update_port too).
  Status add_port(const PortSpec& p);
  // Unbinds; releases the local VLAN with the network's last port. A
  // trunk's parent is refused (conflict) while it has subports.
  Status remove_port(const std::string& id);
  // Restoring persisted state after a restart: binds like add_port, but when
  // this is the network's first port its local VLAN is `local_vlan` (so it
  // keeps its number, F4); when the network already has one it must be the
  // same. conflict when taken by another network; changes nothing on error.
  // A vhost socket another restored port holds (rows saved before paths
  // were normalised) and groups past kMaxGroupAddresses are let through.
  Status restore_port(const PortSpec& p, uint16_t local_vlan);

  // Security groups (issue 5). A rule's remote group must exist (or be the
  // rule's own group); a group in use by a port or named as a remote group
  // by another group's rule cannot be deleted (conflict). Rule ids are
  // unique switch-wide; a rule matching like one of its group's is refused.
  // A group has at most kMaxRulesPerGroup rules (resource_exhausted).
  Status add_security_group(const SecurityGroup& g);
  Status remove_security_group(const std::string& id);
  Status add_sg_rule(const std::string& group_id, const SecurityGroupRule& r);
  // Group g.id takes g's name and rules, all at once (its remote members
  // stay): each rule checked as add_sg_rule checks it against the others of
  // the new list; a rule of the group's old list may keep its id. not_found
  // without the group.
  Status update_security_group(const SecurityGroup& g);
  // A member of the group on another host, or (no addresses) no longer one.
  // not_found without the group; resource_exhausted past kMaxGroupAddresses.
  Status set_remote_member(const RemoteMember& m);
  Status remove_sg_rule(const std::string& rule_id);
  // Start-up: the saved groups, all or none. Rules may name as remote groups
  // any group of the set (cycles included), so the set is checked as a whole.
  Status restore_security_groups(const std::vector<SecurityGroup>& groups);
  // The port after applying u (not_found, or the error the result fails
  // with); changes nothing.
  Result<PortSpec> updated_port(const PortUpdate& u) const;
  // Replaces a bound port's spec with one of the same id, network, MAC and
  // attachment (what updated_port returns).
  Status update_port(const PortSpec& p);

  // VXLAN tunnel state (model_tunnel.cc). The network must exist and be a
  // vxlan network; a remote VTEP is an IPv4 unicast address, not ours. Add
  // replaces an existing MAC's VTEP and IP (an entry without `ip` leaves the
  // MAC without one); an IP another MAC of the network has is a conflict;
  // delete refuses an unknown MAC (not_found); flood replaces the list. All
  // or nothing.
  Status add_tunnel_fdb(const std::string& network, const std::vector<TunnelFdbEntry>& entries);
  Status remove_tunnel_fdb(const std::string& network, const std::vector<Mac>& macs);
  Status set_tunnel_flood(const std::string& network, const std::vector<IpAddr>& vteps);
  // Start-up: a saved network's whole tunnel state, checked like the above.
  Status restore_tunnel(const std::string& network, const TunnelSpec& t);
  // The network's tunnel state, null when it has none.
  const TunnelSpec* tunnel(const std::string& network) const;
  const std::map<std::string, TunnelSpec>& tunnels() const { return tunnels_; }
  // Every remote VTEP some network's FDB or flood list names.
  std::set<IpAddr> remote_vteps() const;

  const NetworkSpec* network(const std::string& id) const;
  const PortSpec* port(const std::string& id) const;
  // The network's local VLAN, 0 while no port of it is bound here.
  uint16_t local_vlan(const std::string& network_id) const;
  const std::map<std::string, NetworkSpec>& networks() const { return networks_; }
  const std::map<std::string, PortSpec>& ports() const { return ports_; }
  const std::map<std::string, std::string>& physnets() const { return physnets_; }
  size_t ports_on(const std::string& network_id) const;
  // The subports of a trunk's parent port (ids), by segmentation id.
  std::map<uint16_t, std::string> subports_of(const std::string& parent) const;
  const std::map<std::string, SecurityGroup>& security_groups() const { return groups_; }
  const SecurityGroup* security_group(const std::string& id) const;
  // The group a rule id belongs to, "" when none.
  std::string group_of_rule(const std::string& rule_id) const;
  // Remote-group members: every group with a member -> the fixed IPs (host
  // prefixes) and allowed pairs' prefixes of its bound ports, and the
  // addresses of its remote members.
  GroupMembers group_members() const;
  // Ports (ids) that are members of a group.
  std::vector<std::string> ports_in_group(const std::string& group_id) const;

 private:
  Status check_vxlan_network(const NetworkSpec& n) const;
  Status check_tunnel_target(const std::string& network) const;
  Status check_remote_vtep(const IpAddr& ip, const std::string& field) const;
  // check_add_port; restoring: what restore_port lets through.
  Status check_port_fits(const PortSpec& p, bool restoring) const;
  // A subport's parent is bound and no subport itself.
  Status check_subport(const PortSpec& p) const;
  // conflict when another port of p's network has one of p's fixed IPs.
  Status check_fixed_ips_free(const PortSpec& p) const;
  // resource_exhausted when p would take a group past kMaxGroupAddresses.
  Status check_group_addresses(const PortSpec& p) const;
  // The addresses group `id` has now: its bound ports' (holders_) and its
  // remote members', but those of remote member `except`.
  size_t group_addresses(const std::string& id, const std::string& except = "") const;
  // Keep holders_ in step with ports_.
  void index(const PortSpec& p);
  void unindex(const PortSpec& p);

  std::map<std::string, std::string> physnets_;
  std::map<std::string, std::vector<VlanRange>> vlan_ranges_;
  VxlanSettings vxlan_;
  std::map<std::string, NetworkSpec> networks_;
  std::map<std::string, TunnelSpec> tunnels_;  // vxlan networks with tunnel state
  std::map<std::string, PortSpec> ports_;
  // Who holds what among ports_, so that a bind is checked against the
  // other ports without walking them all (a bulk bind of N ports was
  // O(N^2): 11 ms of a 1000-port bind, 190 ms at 4000).
  struct Holders {
    std::map<std::string, std::string> attach;                   // attach_key() -> port id
    std::map<std::string, std::string> attach_of;                // port id -> its attach_key()
    std::map<std::pair<std::string, Mac>, std::string> mac;      // (network, MAC) -> port id
    std::map<std::pair<std::string, IpAddr>, std::string> ip;    // (network, fixed IP) -> port id
    std::map<std::string, size_t> per_network;                   // network -> ports bound
    std::map<std::string, size_t> group_addresses;  // group -> its members' fixed IPs + pairs
    std::map<std::string, std::map<uint16_t, std::string>> subports;  // parent -> vid -> subport
  } holders_;
  std::map<std::string, SecurityGroup> groups_;
  std::map<std::string, uint16_t> lvlan_;  // network id -> local VLAN, while it has ports
  VlanAllocator vlans_;
};

}  // namespace strait::ctl
