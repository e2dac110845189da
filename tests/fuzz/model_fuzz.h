#pragma once
// What the API and etcd targets share: the model they start from, and the
// two checks every change of it gets (a refusal changes nothing; what the
// model holds comes back the same through the store's rows).
#include <map>
#include <nlohmann/json.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "control/model/model.h"
#include "control/model/secgroup.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/model_dump.h"

namespace strait::fuzz {

// An input of the API and etcd targets: its lines, at most 64 (none when
// it is over 64 KiB).
inline std::vector<std::string_view> input_lines(const uint8_t* data, size_t size) {
  std::vector<std::string_view> out;
  if (size > 65536) return out;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  while (out.size() < 64 && !in.empty()) {
    const size_t nl = in.find('\n');
    out.push_back(in.substr(0, nl));
    in = nl == std::string_view::npos ? std::string_view() : in.substr(nl + 1);
  }
  return out;
}

inline ctl::Model fresh_model() {
  ctl::Model m(std::map<std::string, std::string>{{"physnet1", "net_ring0"}, {"physnet2", "net_ring1"}});
  ctl::IpAddr local;
  local.family = 4;
  local.bytes = {192, 0, 2, 1};
  m.set_vxlan({true, local, 1550});
  return m;
}

// The model as straitd restores it after a restart (Switch::restore), from
// rows as the store writes them (to_json) and reads them (parse_*).
inline ctl::Model restarted(const ctl::Model& m) {
  ctl::Model r = fresh_model();
  std::vector<ctl::SecurityGroup> groups;
  for (const auto& [id, g] : m.security_groups()) {
    auto row = ctl::parse_security_group(ctl::to_json(g));
    if (!row) check_error(row.error());
    STRAIT_FUZZ_CHECK(row.ok());
    groups.push_back(*row);
  }
  STRAIT_FUZZ_CHECK(r.restore_security_groups(groups).ok());
  for (const auto& [id, n] : m.networks()) {
    auto row = ctl::parse_network(ctl::to_json(n));
    STRAIT_FUZZ_CHECK(row.ok() && r.add_network(*row).ok());
  }
  for (const auto& [net, t] : m.tunnels()) {
    auto row = ctl::parse_tunnel(ctl::to_json(t));
    STRAIT_FUZZ_CHECK(row.ok() && r.restore_tunnel(net, *row).ok());
  }
  for (const auto& [id, p] : m.ports()) {
    auto row = ctl::parse_port(ctl::to_json(p));
    STRAIT_FUZZ_CHECK(row.ok() && r.restore_port(*row, m.local_vlan(p.network)).ok());
  }
  return r;
}

// A change of the model; refused, it must have changed nothing. (Requests
// refused while their parameters are parsed never reach the model.)
// (The model is copied before, and both are dumped only on a refusal.)
template <typename F>
Status change(const ctl::Model& m, F f) {
  const ctl::Model before = m;
  Status st = f();
  if (!st) {
    check_error(st.error());
    STRAIT_FUZZ_CHECK(test::dump(m) == test::dump(before));
  }
  return st;
}

}  // namespace strait::fuzz
