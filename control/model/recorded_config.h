#pragma once
// The config's physnet mappings and [vtep] settings against what the store
// says was in force at the last start. The config file stays the operator's
// source (as neutron's bridge_mappings); the record lets a restart notice a
// change that would put a saved network on the wrong wire, or on none.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "control/daemon/config.h"
#include "control/model/model.h"
#include "control/model/store.h"
#include "dataplane/result.h"

namespace strait::ctl {

// What `cfg` puts in force, as the store records it, stamped `now` (Unix seconds).
Store::RecordedConfig record_of(const Config& cfg, int64_t now);

// Checks the saved networks against `cfg`. A flat or vlan network whose
// physnet the config no longer maps, or a vxlan network with no [vtep], is
// a failed_precondition error (one line naming the networks, the physnet
// and its recorded device, and what to do): nothing may start. Otherwise
// returns the changes to warn about: a physnet's device, the VTEP's
// local_ip or udp_port, each with the old and the new value.
Result<std::vector<std::string>> check_config_against_record(
    const Config& cfg, const std::vector<NetworkSpec>& networks, const Store::RecordedConfig& rec,
    const std::string& db_path);

// For `show`: {"physnets": {name: device}, "vtep": {...} or null,
// "recorded_at": Unix seconds or null}.
nlohmann::json recorded_config_json(const Store::RecordedConfig& rec);

}  // namespace strait::ctl
