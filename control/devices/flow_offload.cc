#include "control/devices/flow_offload.h"

#include <cerrno>
#include <cstring>

#include <rte_byteorder.h>
#include <rte_ethdev.h>
#include <rte_flow.h>
#include <spdlog/spdlog.h>

namespace strait::ctl {
namespace {

constexpr uint32_t kAllowPriority = 0;  // ends the NIC's lookup for mapped VLANs
constexpr uint32_t kDropPriority = 1;   // every other 802.1Q frame

// One rule in rte_flow's terms; the pointers inside point into itself, so it
// is built in place and never copied.
struct RteRule {
  rte_flow_attr attr{};
  rte_flow_item_vlan vlan_spec{};
  rte_flow_item_vlan vlan_mask{};
  rte_flow_item items[3]{};
  rte_flow_action_queue queue{};
  rte_flow_action_rss rss{};
  std::vector<uint16_t> queues;
  rte_flow_action actions[2]{};

  RteRule(const FlowRule& r, uint16_t n_rxq) {
    attr.ingress = 1;
    items[0].type = RTE_FLOW_ITEM_TYPE_ETH;  // any Ethernet header
    items[1].type = RTE_FLOW_ITEM_TYPE_VLAN;
    items[2].type = RTE_FLOW_ITEM_TYPE_END;
    actions[1].type = RTE_FLOW_ACTION_TYPE_END;
    if (r.kind == FlowRule::Kind::kDropOtherVlans) {
      attr.priority = kDropPriority;  // VLAN item without spec: any 802.1Q tag
      actions[0].type = RTE_FLOW_ACTION_TYPE_DROP;
      return;
    }
    attr.priority = kAllowPriority;
    vlan_spec.tci = rte_cpu_to_be_16(r.vid);
    vlan_mask.tci = rte_cpu_to_be_16(0x0fff);  // the VLAN id only
    items[1].spec = &vlan_spec;
    items[1].mask = &vlan_mask;
    if (n_rxq <= 1) {
      actions[0].type = RTE_FLOW_ACTION_TYPE_QUEUE;
      actions[0].conf = &queue;
      return;
    }
    // Several rx queues: keep the spread the port was configured with.
    for (uint16_t q = 0; q < n_rxq; q++) queues.push_back(q);
    rss.func = RTE_ETH_HASH_FUNCTION_DEFAULT;
    rss.types = RTE_ETH_RSS_IP;
    rss.queue_num = n_rxq;
    rss.queue = queues.data();
    actions[0].type = RTE_FLOW_ACTION_TYPE_RSS;
    actions[0].conf = &rss;
  }
  RteRule(const RteRule&) = delete;
  RteRule& operator=(const RteRule&) = delete;
};

std::string flow_error(int rc, const rte_flow_error& e) {
  std::string s = std::strerror(rc < 0 ? -rc : rc);
  if (e.message) s += std::string(" (") + e.message + ")";
  return s;
}

class RteFlowDevice final : public FlowDevice {
 public:
  int validate(uint16_t port, uint16_t n_rxq, const FlowRule& r, std::string* err) override {
    RteRule rr(r, n_rxq);
    rte_flow_error e{};
    const int rc = rte_flow_validate(port, &rr.attr, rr.items, rr.actions, &e);
    if (rc) *err = flow_error(rc, e);
    return rc;
  }
  rte_flow* create(uint16_t port, uint16_t n_rxq, const FlowRule& r, std::string* err) override {
    RteRule rr(r, n_rxq);
    rte_flow_error e{};
    rte_flow* f = rte_flow_create(port, &rr.attr, rr.items, rr.actions, &e);
    if (!f) *err = flow_error(-rte_errno, e);
    return f;
  }
  int destroy(uint16_t port, rte_flow* flow, std::string* err) override {
    rte_flow_error e{};
    const int rc = rte_flow_destroy(port, flow, &e);
    if (rc) *err = flow_error(rc, e);
    return rc;
  }
  int flush(uint16_t port, std::string* err) override {
    rte_flow_error e{};
    const int rc = rte_flow_flush(port, &e);
    if (rc) *err = flow_error(rc, e);
    return rc;
  }
};

}  // namespace

std::string FlowRule::describe() const {
  if (kind == Kind::kAllowVlan) return "allow vlan " + std::to_string(vid);
  return "drop other vlans";
}

std::vector<FlowRule> desired_flow_rules(const Model& model, const std::string& physnet) {
  std::vector<FlowRule> out;
  std::set<uint16_t> vids;  // as the snapshot maps them: vlan networks with a port here
  for (const auto& [id, n] : model.networks())
    if (n.type == dp::NetType::kVlan && n.physnet == physnet && model.local_vlan(id) != 0)
      vids.insert(static_cast<uint16_t>(n.seg_id));
  for (uint16_t v : vids) out.push_back({FlowRule::Kind::kAllowVlan, v});
  out.push_back({FlowRule::Kind::kDropOtherVlans, 0});
  return out;
}

std::unique_ptr<FlowDevice> make_rte_flow_device() { return std::make_unique<RteFlowDevice>(); }

FlowOffload::FlowOffload(bool enabled, std::unique_ptr<FlowDevice> dev)
    : enabled_(enabled), dev_(std::move(dev)) {}

FlowOffload::~FlowOffload() = default;

void FlowOffload::add_port(const std::string& physnet, uint16_t port_id, uint16_t n_rxq) {
  PortState p;
  p.port_id = port_id;
  p.n_rxq = n_rxq;
  ports_[physnet] = std::move(p);
}

void FlowOffload::sync(const std::string& physnet, const std::vector<FlowRule>& desired) {
  auto it = ports_.find(physnet);
  if (!enabled_ || it == ports_.end()) return;
  PortState& p = it->second;
  if (p.synced && p.desired == desired) return;
  p.desired = desired;
  p.synced = true;
  apply(physnet, p);
}

void FlowOffload::sync_all(const Model& model) {
  for (const auto& [physnet, p] : ports_) sync(physnet, desired_flow_rules(model, physnet));
}

// Removes what is no longer wanted, adds the allow rules, then the DROP only
// if every allow rule is in. A refused rule is tried again at the next change
// of the desired set or at a replay, not at every republish.
void FlowOffload::apply(const std::string& physnet, PortState& p) {
  const std::set<FlowRule> want(p.desired.begin(), p.desired.end());
  std::vector<FlowRule> stale;
  for (const auto& [r, f] : p.installed)
    if (!want.count(r)) stale.push_back(r);
  for (const FlowRule& r : stale) remove(physnet, p, r);
  p.refused.clear();
  std::erase_if(p.logged, [&](const FlowRule& r) { return !want.count(r); });
  bool all_allowed = true;
  for (const FlowRule& r : p.desired)
    if (r.kind == FlowRule::Kind::kAllowVlan && !install(physnet, p, r)) all_allowed = false;
  const FlowRule drop{FlowRule::Kind::kDropOtherVlans, 0};
  if (!want.count(drop)) return;
  if (all_allowed) {
    install(physnet, p, drop);
    return;
  }
  // A mapped VLAN the NIC would not let through: the NIC must not drop it.
  // Left to software like the refused rule (whose error last_error keeps).
  remove(physnet, p, drop);
  p.refused.insert(drop);
  p.refusals++;
  if (p.logged.insert(drop).second && p.supported)
    spdlog::warn("physnet {}: rte_flow rule \"{}\" not installed while an allow rule is "
                 "refused: left to software", physnet, drop.describe());
}

bool FlowOffload::install(const std::string& physnet, PortState& p, const FlowRule& r) {
  if (p.installed.count(r)) return true;
  std::string err;
  if (int rc = dev_->validate(p.port_id, p.n_rxq, r, &err); rc != 0) {
    refuse(physnet, p, r, rc, "validate: " + err);
    return false;
  }
  rte_flow* f = dev_->create(p.port_id, p.n_rxq, r, &err);
  if (!f) {
    refuse(physnet, p, r, -EIO, "create: " + err);
    return false;
  }
  p.installed.emplace(r, f);
  p.supported = true;
  spdlog::info("physnet {}: rte_flow rule \"{}\" installed", physnet, r.describe());
  return true;
}

void FlowOffload::remove(const std::string& physnet, PortState& p, const FlowRule& r) {
  auto it = p.installed.find(r);
  if (it == p.installed.end()) return;
  std::string err;
  if (dev_->destroy(p.port_id, it->second, &err) != 0) {
    // The handle is no use after a failed destroy; a replay flushes the NIC.
    p.last_error = "destroy \"" + r.describe() + "\": " + err;
    spdlog::warn("physnet {}: rte_flow {}", physnet, p.last_error);
  } else {
    spdlog::info("physnet {}: rte_flow rule \"{}\" removed", physnet, r.describe());
  }
  p.installed.erase(it);
}

// The rule stays with software (the pipeline drops unknown_vlan itself).
// Logged once per rule while it stays refused; a PMD without rte_flow once.
void FlowOffload::refuse(const std::string& physnet, PortState& p, const FlowRule& r, int rc,
                         const std::string& why) {
  const bool unsupported = rc == -ENOSYS;
  p.refused.insert(r);
  const bool first = p.logged.insert(r).second;
  p.refusals++;
  p.last_error = "\"" + r.describe() + "\": " + why;
  if (unsupported) {
    if (p.supported)
      spdlog::info("physnet {}: the NIC has no rte_flow: its rules are left to software", physnet);
    p.supported = false;
    return;
  }
  if (first)
    spdlog::warn("physnet {}: rte_flow rule {}: left to software", physnet, p.last_error);
}

void FlowOffload::replay(const std::string& physnet) {
  auto it = ports_.find(physnet);
  if (!enabled_ || it == ports_.end()) return;
  PortState& p = it->second;
  std::string err;
  if (!p.installed.empty() && dev_->flush(p.port_id, &err) != 0) {
    p.last_error = "flush: " + err;
    spdlog::warn("physnet {}: rte_flow {}", physnet, p.last_error);
  }
  p.installed.clear();  // handles are gone with the flush
  spdlog::info("physnet {}: replaying {} rte_flow rule(s)", physnet, p.desired.size());
  apply(physnet, p);
}

void FlowOffload::clear() {
  for (auto& [physnet, p] : ports_) {
    std::string err;
    if (!p.installed.empty() && dev_->flush(p.port_id, &err) != 0)
      spdlog::warn("physnet {}: rte_flow flush: {}", physnet, err);
    p.installed.clear();
    p.refused.clear();
    p.synced = false;
  }
}

nlohmann::json FlowOffload::json(const std::string& physnet) const {
  auto it = ports_.find(physnet);
  if (it == ports_.end()) return nullptr;
  const PortState& p = it->second;
  nlohmann::json rules = nlohmann::json::array();
  for (const FlowRule& r : p.desired)
    rules.push_back({{"rule", r.describe()},
                     {"state", p.installed.count(r) ? "installed"
                               : p.refused.count(r) ? "software"
                                                    : "pending"}});
  return {{"enabled", enabled_},
          {"supported", enabled_ && p.supported},
          {"installed", p.installed.size()},
          {"refused", p.refused.size()},
          {"refusals", p.refusals},
          {"last_error", p.last_error},
          {"rules", enabled_ ? rules : nlohmann::json::array()}};
}

}  // namespace strait::ctl
