#include "control/model/recorded_config.h"

#include <map>

namespace strait::ctl {
namespace {

using nlohmann::json;

json vtep_json(const VtepSettings& v) {
  json j = {{"local_ip", ip_to_string(v.local_ip)},
            {"physnet", v.physnet},
            {"udp_port", v.udp_port},
            {"ttl", v.ttl},
            {"learning", v.learning},
            {"underlay_mtu", v.underlay_mtu}};
  if (v.next_hop) j["next_hop"] = ip_to_string(*v.next_hop);
  if (v.next_hop_mac) j["next_hop_mac"] = mac_to_string(*v.next_hop_mac);
  return j;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// The saved networks on physnets the config no longer maps, by physnet,
// and the vxlan networks when it has no [vtep].
std::string unmapped_networks(const Config& cfg, const std::vector<NetworkSpec>& networks,
                              const Store::RecordedConfig& rec) {
  std::map<std::string, std::vector<std::string>> by_physnet;
  std::vector<std::string> vxlan;
  for (const NetworkSpec& n : networks) {
    if (n.type == dp::NetType::kVxlan && !cfg.vtep) vxlan.push_back(n.id);
    if ((n.type == dp::NetType::kFlat || n.type == dp::NetType::kVlan) &&
        !cfg.physnets.count(n.physnet))
      by_physnet[n.physnet].push_back(n.id);
  }
  std::string msg;
  for (const auto& [physnet, ids] : by_physnet) {
    auto dev = rec.physnets.find(physnet);
    msg += (msg.empty() ? "" : "; ") + std::string("network(s) ") + join(ids) + " use physnet " +
           physnet + " (device " + (dev == rec.physnets.end() ? "not recorded" : dev->second) +
           " at the last start), which the config no longer maps";
  }
  if (!vxlan.empty()) {
    const json v = json::parse(rec.vtep.empty() ? "null" : rec.vtep, nullptr, false);
    const std::string was = v.is_object() ? "local_ip " + v.value("local_ip", "?") +
                                                " on physnet " + v.value("physnet", "?")
                                          : "not recorded";
    msg += (msg.empty() ? "" : "; ") + std::string("vxlan network(s) ") + join(vxlan) +
           " need [vtep] (" + was + " at the last start), which the config no longer has";
  }
  return msg;
}

void vtep_changes(const Config& cfg, const Store::RecordedConfig& rec,
                  std::vector<std::string>& warnings) {
  if (!cfg.vtep || rec.vtep.empty()) return;
  const json old = json::parse(rec.vtep, nullptr, false);
  if (!old.is_object()) return;
  const json now = vtep_json(*cfg.vtep);
  for (const char* key : {"local_ip", "udp_port"})
    if (old.value(key, json()) != now[key])
      warnings.push_back(std::string("vtep.") + key + " changed from " +
                         old.value(key, json()).dump() + " to " + now[key].dump() +
                         " since the last start: remote VTEPs must be told the new value");
}

}  // namespace

Store::RecordedConfig record_of(const Config& cfg, int64_t now) {
  Store::RecordedConfig r;
  r.physnets = cfg.physnets;
  if (cfg.vtep) r.vtep = vtep_json(*cfg.vtep).dump();
  r.recorded_at = now;
  return r;
}

Result<std::vector<std::string>> check_config_against_record(
    const Config& cfg, const std::vector<NetworkSpec>& networks, const Store::RecordedConfig& rec,
    const std::string& db_path) {
  if (std::string msg = unmapped_networks(cfg, networks, rec); !msg.empty())
    return Error{"failed_precondition",
                 db_path + ": " + msg +
                     ". Map it again in the config, or start with the old config and delete "
                     "the network(s); nothing was changed"};
  std::vector<std::string> warnings;
  for (const auto& [name, device] : cfg.physnets) {
    auto old = rec.physnets.find(name);
    if (old != rec.physnets.end() && old->second != device)
      warnings.push_back("physnet " + name + ": device changed from \"" + old->second + "\" to \"" +
                         device + "\" since the last start");
  }
  vtep_changes(cfg, rec, warnings);
  return warnings;
}

json recorded_config_json(const Store::RecordedConfig& rec) {
  json vtep = rec.vtep.empty() ? json() : json::parse(rec.vtep, nullptr, false);
  if (vtep.is_discarded()) vtep = nullptr;
  return {{"physnets", rec.physnets},
          {"vtep", vtep},
          {"recorded_at", rec.recorded_at ? json(rec.recorded_at) : json()}};
}

}  // namespace strait::ctl
