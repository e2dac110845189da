#pragma once
// rte_flow offload of the physnet NICs (issue 6). Control thread only: no
// worker ever calls rte_flow.
//
// What the NIC is asked to do. A frame tagged 802.1Q on a physnet whose VLAN
// id maps to no network here is dropped by the pipeline (unknown_vlan): a
// NIC that implements rte_flow can drop it instead, before it costs a
// descriptor, an mbuf and a worker's parse. The rule set per physnet NIC:
//
//   priority 0: ETH / VLAN vid=X / END -> QUEUE 0 (one rx queue) or RSS over
//               all rx queues: one per VLAN id mapped on this host (a vlan
//               network of the physnet with a port bound here)
//   priority 1: ETH / VLAN / END       -> DROP: every other 802.1Q frame
//
// The allow rules must end the NIC's lookup, so they steer (QUEUE, RSS);
// PASSTHRU would fall through to the DROP (rte_flow's meaning, and net_tap's:
// TC's "continue"). Untagged frames (flat networks, the VXLAN underlay) match
// neither rule. The DROP goes in only while every allow rule is in: a VLAN
// whose allow rule a NIC refuses would otherwise be dropped by the NIC.
//
// Every rule is validated before it is created. A rule the NIC refuses (no
// rte_flow at all, like net_ring, or not this rule) is left to software,
// which does the same thing: counted (refusals), logged once per rule, shown.
// A port restart may lose a NIC's rules: replay() flushes and re-creates.
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "control/model/model.h"

struct rte_flow;

namespace strait::ctl {

// One rule as the switch wants it, independent of any NIC.
struct FlowRule {
  enum class Kind : uint8_t { kAllowVlan, kDropOtherVlans };
  Kind kind = Kind::kDropOtherVlans;
  uint16_t vid = 0;  // kAllowVlan: 1..4094
  auto operator<=>(const FlowRule&) const = default;
  std::string describe() const;  // "allow vlan 100", "drop other vlans"
};

// The rules a physnet's NIC should hold for this model, allow rules first.
std::vector<FlowRule> desired_flow_rules(const Model& model, const std::string& physnet);

// The NIC side of the rules: rte_flow, or a stand-in in tests. Each returns
// 0 or a negative errno and says why in *err.
class FlowDevice {
 public:
  virtual ~FlowDevice() = default;
  virtual int validate(uint16_t port, uint16_t n_rxq, const FlowRule& r, std::string* err) = 0;
  virtual rte_flow* create(uint16_t port, uint16_t n_rxq, const FlowRule& r, std::string* err) = 0;
  virtual int destroy(uint16_t port, rte_flow* flow, std::string* err) = 0;
  virtual int flush(uint16_t port, std::string* err) = 0;
};
std::unique_ptr<FlowDevice> make_rte_flow_device();

class FlowOffload {
 public:
  // enabled: [offload] rte_flow. Disabled: nothing is ever asked of a NIC.
  explicit FlowOffload(bool enabled, std::unique_ptr<FlowDevice> dev = make_rte_flow_device());
  ~FlowOffload();  // leaves the rules in the NICs: call clear() before closing them

  // A physnet NIC, once opened.
  void add_port(const std::string& physnet, uint16_t port_id, uint16_t n_rxq);
  // Brings the NIC's rules to `desired` (desired_flow_rules). Nothing is
  // asked of the NIC when `desired` is what the last sync or replay had.
  void sync(const std::string& physnet, const std::vector<FlowRule>& desired);
  void sync_all(const Model& model);
  // After the port restarted: flushes the NIC's rules and creates them again.
  void replay(const std::string& physnet);
  // Destroys every rule of every NIC (before they are closed).
  void clear();

  // {"enabled", "supported", "installed", "refused", "refusals", "last_error", "rules"}
  nlohmann::json json(const std::string& physnet) const;

 private:
  struct PortState {
    uint16_t port_id = 0;
    uint16_t n_rxq = 1;
    bool synced = false;            // `desired` was applied at least once
    bool supported = true;          // false: the PMD has no rte_flow (ENOSYS)
    std::vector<FlowRule> desired;
    std::map<FlowRule, rte_flow*> installed;
    std::set<FlowRule> refused;     // desired, left to software
    std::set<FlowRule> logged;      // refusals already logged (while desired)
    uint64_t refusals = 0;          // rules refused, since start
    std::string last_error;
  };
  void apply(const std::string& physnet, PortState& p);
  bool install(const std::string& physnet, PortState& p, const FlowRule& r);
  void remove(const std::string& physnet, PortState& p, const FlowRule& r);
  void refuse(const std::string& physnet, PortState& p, const FlowRule& r, int rc,
              const std::string& why);

  bool enabled_;
  std::unique_ptr<FlowDevice> dev_;
  std::map<std::string, PortState> ports_;  // by physnet
};

}  // namespace strait::ctl
