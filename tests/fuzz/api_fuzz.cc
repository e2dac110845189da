// The API intake: request lines as a client sends them (control/api/api_server.h
// decode_request), the parameters of each state-changing method parsed as
// straitd parses them, and applied to a Model (control/model/model.h). Checks,
// besides no crash:
//  - every refusal has a known code and a message a reply can carry;
//  - a refused request changes nothing (the model before and after are equal);
//  - a bulk bind that fails part way is undone by unbinding what it bound
//    (what Switch::bind_all relies on);
//  - what the model holds, written as the store writes it and read back in
//    straitd's restart order (Switch::restore), is the same model.
//
// Input: request lines, one per '\n' (at most 64). STRAIT_FUZZ_VERBOSE=1
// prints what became of each.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "control/api/api_reply.h"
#include "control/api/api_server.h"
#include "control/model/model.h"
#include "control/model/secgroup.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/model_fuzz.h"
#include "tests/model_dump.h"

namespace {

using namespace strait;
using namespace strait::ctl;
using nlohmann::json;
using strait::test::dump;
using strait::fuzz::change;
using strait::fuzz::fresh_model;
using strait::fuzz::restarted;

constexpr int kMaxDepth = ApiServer::kMaxDepth;
// straitd gives a rule created without an id a random UUID; here a counter
// from 0 for each input, so that an input always does the same.
unsigned rule_ids;

// One port.bind's ports, all or none (the model's part of Switch::bind_all).
Status bind_all(Model& m, const json& params) {
  std::vector<PortSpec> specs;
  if (params.contains("ports")) {
    const json& list = params["ports"];
    if (!list.is_array() || list.empty())
      return invalid("ports: expected a non-empty list of ports");
    for (const json& p : list) {
      auto spec = parse_port(p);
      if (!spec) return spec.error();
      specs.push_back(std::move(*spec));
    }
  } else {
    auto spec = parse_port(params);
    if (!spec) return spec.error();
    specs.push_back(std::move(*spec));
  }
  return change(m, [&]() -> Status {
    for (size_t i = 0; i < specs.size(); i++) {
      if (Status st = m.add_port(specs[i]); !st) {
        while (i > 0) STRAIT_FUZZ_CHECK(m.remove_port(specs[--i].id).ok());
        return st;
      }
    }
    return ok();
  });
}

// A state-changing method as straitd parses its parameters, applied to the
// model; read-only and device methods are answered with ok.
Status apply(Model& m, const ApiRequest& r) {
  const std::string& method = r.method;
  const json& params = r.params;
  auto with_id = [&](auto f) -> Status {
    auto id = id_param(params);
    if (!id) return id.error();
    return f(*id);
  };
  if (method == "network.create") {
    auto n = parse_network(params);
    return n ? change(m, [&] { return m.add_network(*n); }) : Status(n.error());
  }
  if (method == "network.delete")
    return with_id(
        [&](const std::string& id) { return change(m, [&] { return m.remove_network(id); }); });
  if (method == "port.bind") return bind_all(m, params);
  if (method == "port.unbind")
    return with_id([&](const std::string& id) -> Status {
      const PortSpec* p = m.port(id);  // as straitd: by its canonical id
      if (!p) return not_found("port " + id + " is not bound");
      const std::string canonical = p->id;
      return change(m, [&] { return m.remove_port(canonical); });
    });
  if (method == "port.update") {
    auto u = parse_port_update(params);
    if (!u) return u.error();
    auto p = m.updated_port(*u);
    return p ? change(m, [&] { return m.update_port(*p); }) : Status(p.error());
  }
  auto fill_id = [](SecurityGroupRule& rule) {
    if (rule.id.empty()) rule.id = "rule-" + std::to_string(++rule_ids);
  };
  if (method == "security_group.create") {
    auto g = parse_security_group(params);
    if (!g) return g.error();
    for (SecurityGroupRule& rule : g->rules) fill_id(rule);
    return change(m, [&] { return m.add_security_group(*g); });
  }
  if (method == "security_group.update") {
    auto g = parse_security_group(params);
    if (!g) return g.error();
    for (SecurityGroupRule& rule : g->rules) fill_id(rule);
    return change(m, [&] { return m.update_security_group(*g); });
  }
  if (method == "security_group.remote_member") {
    auto rm = parse_remote_member(params);
    return rm ? change(m, [&] { return m.set_remote_member(*rm); }) : Status(rm.error());
  }
  if (method == "security_group.delete")
    return with_id([&](const std::string& id) {
      return change(m, [&] { return m.remove_security_group(id); });
    });
  if (method == "security_group_rule.create") {
    auto r = parse_sg_rule_create(params);
    if (!r) return r.error();
    fill_id(r->second);
    return change(m, [&] { return m.add_sg_rule(r->first, r->second); });
  }
  if (method == "security_group_rule.delete")
    return with_id(
        [&](const std::string& id) { return change(m, [&] { return m.remove_sg_rule(id); }); });
  if (method == "tunnel.fdb.add") {
    auto f = parse_tunnel_fdb(params, true);
    return f ? change(m, [&] { return m.add_tunnel_fdb(f->network, f->entries); })
             : Status(f.error());
  }
  if (method == "tunnel.fdb.delete") {
    auto f = parse_tunnel_fdb(params, false);
    if (!f) return f.error();
    std::vector<Mac> macs;
    for (const TunnelFdbEntry& e : f->entries) macs.push_back(e.mac);
    return change(m, [&] { return m.remove_tunnel_fdb(f->network, macs); });
  }
  if (method == "tunnel.flood.set") {
    auto f = parse_tunnel_flood(params);
    return f ? change(m, [&] { return m.set_tunnel_flood(f->network, f->vteps); })
             : Status(f.error());
  }
  return ok();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // STRAIT_FUZZ_VERBOSE=1: each request's outcome on stderr (writing a seed).
  static const bool verbose = std::getenv("STRAIT_FUZZ_VERBOSE") != nullptr;
  Model model = fresh_model();
  rule_ids = 0;
  for (std::string_view line : strait::fuzz::input_lines(data, size)) {
    json id;
    auto req = decode_request(line, kMaxDepth, &id);
    if (!req) {
      strait::fuzz::check_error(req.error());
      continue;
    }
    Status st = apply(model, *req);
    if (!st) strait::fuzz::check_error(st.error());
    if (verbose)
      std::fprintf(stderr, "%s: %s\n", req->method.c_str(),
                   st ? "ok" : (st.error().code + ": " + st.error().message).c_str());
  }
  STRAIT_FUZZ_CHECK(dump(restarted(model)) == dump(model));
  return 0;
}
