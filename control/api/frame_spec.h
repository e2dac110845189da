#pragma once
// The frame of a `trace` request: raw bytes in hex, or a few header fields
// from which a frame is built (Ethernet, an optional 802.1Q tag, IPv4 with
// TCP/UDP/ICMP, or ARP). The built frame then goes through the real parser,
// like any received frame. Also the JSON form of a flow key (trace, cache.dump).
#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "control/model/model.h"
#include "dataplane/flow_key.h"
#include "dataplane/result.h"

namespace strait::ctl {

inline constexpr size_t kMaxTraceFrame = 16384;

// `frame`: a hex string ("0200..."; ':' '-' and spaces ignored) or an object
// {dst, src, vlan, pcp, ethertype, ip_src, ip_dst, proto, sport, dport, length}.
// `default_src` stands in for a missing src (a VM port's own MAC).
Result<std::vector<uint8_t>> frame_from_params(const nlohmann::json& frame,
                                               const std::optional<Mac>& default_src);

// The key's fields; L3/L4 ones only when the key has them.
nlohmann::json flow_key_json(const dp::FlowKey& key);

std::string to_hex(const std::vector<uint8_t>& bytes);

}  // namespace strait::ctl
