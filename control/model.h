#pragma once
// The desired state: networks and port bindings as the orchestrator gave
// them. Owned by the control thread. Every mutation validates everything
// first and either applies the whole change or returns an error and changes
// nothing (STYLE.md rule 8).
#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "control/result.h"
#include "control/vlan_allocator.h"
#include "dataplane/snapshot.h"

namespace strait::ctl {

using Mac = std::array<uint8_t, 6>;

struct IpAddr {
  uint8_t family = 4;  // 4 or 6
  std::array<uint8_t, 16> bytes{};  // IPv4 in the first 4 bytes, network order
  bool operator==(const IpAddr&) const = default;
  auto operator<=>(const IpAddr&) const = default;
};

struct NetworkSpec {
  std::string id;                       // UUID or name: [A-Za-z0-9][A-Za-z0-9_.:-]{0,63}
  dp::NetType type = dp::NetType::kLocal;
  std::string physnet;                  // kFlat, kVlan: a physnet of the config
  uint16_t seg_id = 0;                  // kVlan: 1..4094
  uint16_t mtu = 1500;                  // 68..9000
};

struct Attachment {
  enum class Kind { kEthdev, kVhost };
  enum class Mode { kClient, kServer };  // kVhost: our side of the socket
  Kind kind = Kind::kEthdev;
  std::string devargs;  // kEthdev: vdev devargs ("net_ring0", "net_pcap0,rx_pcap=..") or PCI address
  std::string path;     // kVhost: absolute socket path (< 108 bytes)
  Mode mode = Mode::kClient;  // kVhost: client (QEMU is the server: libvirt mode='server') or server
};

struct PortSpec {
  std::string id;       // canonical lowercase UUID (36 chars)
  std::string network;  // NetworkSpec::id
  Mac mac{};            // unicast, not zero
  std::vector<IpAddr> fixed_ips;
  Attachment attach;
};

// Field-level parsing and validation of API parameters (no state consulted).
Result<NetworkSpec> parse_network(const nlohmann::json& params);
Result<PortSpec> parse_port(const nlohmann::json& params);
nlohmann::json to_json(const NetworkSpec& n);
nlohmann::json to_json(const PortSpec& p);
nlohmann::json attach_json(const Attachment& a);
std::string mac_to_string(const Mac& m);
Result<Mac> parse_mac(const std::string& s);
std::string ip_to_string(const IpAddr& ip);
Result<IpAddr> parse_ip(const std::string& s);
const char* net_type_name(dp::NetType t);
// The ethdev name DPDK gives devargs: the part before the first comma.
std::string devargs_name(const std::string& devargs);

class Model {
 public:
  // physnet name -> devargs of its NIC (from the config)
  explicit Model(std::map<std::string, std::string> physnets);

  Status add_network(const NetworkSpec& n);
  Status remove_network(const std::string& id);  // conflict while ports are bound
  // Checks that add_port would succeed; changes nothing.
  Status check_add_port(const PortSpec& p) const;
  // Binds; allocates the network's local VLAN when it is its first port here.
  Status add_port(const PortSpec& p);
  // Unbinds; releases the local VLAN with the network's last port.
  Status remove_port(const std::string& id);
  // Restoring persisted state after a restart: binds like add_port, but when
  // this is the network's first port its local VLAN is `local_vlan` (so it
  // keeps its number, F4); when the network already has one it must be the
  // same. conflict when taken by another network; changes nothing on error.
  Status restore_port(const PortSpec& p, uint16_t local_vlan);

  const NetworkSpec* network(const std::string& id) const;
  const PortSpec* port(const std::string& id) const;
  // The network's local VLAN, 0 while no port of it is bound here.
  uint16_t local_vlan(const std::string& network_id) const;
  const std::map<std::string, NetworkSpec>& networks() const { return networks_; }
  const std::map<std::string, PortSpec>& ports() const { return ports_; }
  const std::map<std::string, std::string>& physnets() const { return physnets_; }
  size_t ports_on(const std::string& network_id) const;

 private:
  std::map<std::string, std::string> physnets_;
  std::map<std::string, NetworkSpec> networks_;
  std::map<std::string, PortSpec> ports_;
  std::map<std::string, uint16_t> lvlan_;  // network id -> local VLAN, while it has ports
  VlanAllocator vlans_;
};

}  // namespace strait::ctl
