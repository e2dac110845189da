#pragma once
// A Model's whole observable state as JSON, so a test can say "a refused
// request changed nothing" with one comparison: networks with their local
// VLAN and port count, ports with their local VLAN, groups with their member
// ports, tunnel state, remote-group member addresses and physnets.
#include <nlohmann/json.hpp>

#include "control/model/model.h"
#include "control/model/net_addr.h"
#include "control/model/secgroup.h"

namespace strait::test {

inline nlohmann::json dump(const ctl::Model& m) {
  using nlohmann::json;
  json d = {{"networks", json::array()}, {"ports", json::array()},    {"groups", json::array()},
            {"tunnels", json::object()}, {"members", json::object()}, {"physnets", m.physnets()}};
  for (const auto& [id, n] : m.networks()) {
    json j = to_json(n);
    j["local_vlan"] = m.local_vlan(id);
    j["ports"] = m.ports_on(id);
    d["networks"].push_back(j);
  }
  for (const auto& [id, p] : m.ports()) {
    json j = to_json(p);
    j["local_vlan"] = m.local_vlan(p.network);
    for (const auto& [vid, sub] : m.subports_of(id)) j["subports"][std::to_string(vid)] = sub;
    d["ports"].push_back(j);
  }
  for (const auto& [id, g] : m.security_groups()) {
    json j = to_json(g);
    j["ports"] = m.ports_in_group(id);
    d["groups"].push_back(j);
  }
  for (const auto& [net, t] : m.tunnels()) d["tunnels"][net] = to_json(t);
  for (const auto& [g, prefixes] : m.group_members())
    for (const ctl::IpPrefix& p : prefixes) d["members"][g].push_back(ctl::prefix_to_string(p));
  return d;
}

}  // namespace strait::test
