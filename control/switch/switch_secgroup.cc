// Security groups, their rules and live port updates. Each change goes
// through apply() (control/switch/switch.cc): computed on a copy of the
// model, compiled, saved, and only then made live in one snapshot: a
// refused or failed request changes nothing, and
// every packet sees the old rule set or the new one (F7). The reply goes out
// once no worker runs an older snapshot: the new rules are then live.
#include <rte_cycles.h>
#include <spdlog/spdlog.h>

#include "control/api/api_reply.h"
#include "control/switch/switch.h"

namespace strait::ctl {
namespace {

using nlohmann::json;

}  // namespace

json Switch::security_group_json(const SecurityGroup& g) const {
  json j = to_json(g);
  j["ports"] = model_.ports_in_group(g.id);
  return j;
}

void Switch::security_group_create(const json& params, Done done) {
  auto g = parse_security_group(params);
  if (!g) return done(error_reply(g.error()));
  for (SecurityGroupRule& r : g->rules)
    if (r.id.empty()) r.id = new_uuid();
  Status st = apply({.model = [&](Model& m) { return m.add_security_group(*g); },
                     .save = [&](const Model&) { return store_->put_security_group(*g); }});
  if (!st) return done(error_reply(st.error()));
  const std::string id = g->id;
  publisher_.after_grace([this, id, done = std::move(done)] {
    const SecurityGroup* now = model_.security_group(id);
    done(now ? ok_reply(security_group_json(*now)) : ok_reply(json::object()));
  });
}

void Switch::security_group_delete(const json& params, Done done) {
  auto id = id_param(params);
  if (!id) return done(error_reply(id.error()));
  Status st = apply({.model = [&](Model& m) { return m.remove_security_group(*id); },
                     .save = [&](const Model&) { return store_->delete_security_group(*id); }});
  if (!st) return done(error_reply(st.error()));
  publisher_.after_grace([done = std::move(done)] { done(ok_reply(json::object())); });
}

// The group's whole rule list at once (etcd's group documents): one
// change, one publish, so a port never sees half of it.
void Switch::security_group_update(const json& params, Done done) {
  auto g = parse_security_group(params);
  if (!g) return done(error_reply(g.error()));
  for (SecurityGroupRule& r : g->rules)
    if (r.id.empty()) r.id = new_uuid();
  const std::string id = g->id;
  Status st = apply({.model = [&](Model& m) { return m.update_security_group(*g); },
                     .save = [&](const Model& m) {
                       return store_->put_security_group(*m.security_group(id));
                     }});
  if (!st) return done(error_reply(st.error()));
  publisher_.after_grace([this, id, done = std::move(done)] {
    const SecurityGroup* now = model_.security_group(id);
    done(now ? ok_reply(security_group_json(*now)) : ok_reply(json::object()));
  });
}

void Switch::sg_rule_create(const json& params, Done done) {
  auto parsed = parse_sg_rule_create(params);
  if (!parsed) return done(error_reply(parsed.error()));
  // Named references, not a structured binding: the lambdas below capture
  // them, which clang before 16 does not allow for bindings.
  const std::string& group_id = parsed->first;
  SecurityGroupRule& rule = parsed->second;
  if (rule.id.empty()) rule.id = new_uuid();
  Status st = apply({.model = [&](Model& m) { return m.add_sg_rule(group_id, rule); },
                     .save = [&](const Model& m) {
                       return store_->put_security_group(*m.security_group(group_id));
                     }});
  if (!st) return done(error_reply(st.error()));
  json out = to_json(rule);
  out["security_group_id"] = group_id;
  publisher_.after_grace([out = std::move(out), done = std::move(done)] { done(ok_reply(out)); });
}

void Switch::sg_rule_delete(const json& params, Done done) {
  auto id = id_param(params);
  if (!id) return done(error_reply(id.error()));
  const std::string group_id = model_.group_of_rule(*id);
  Status st = apply({.model = [&](Model& m) { return m.remove_sg_rule(*id); },
                     .save = [&](const Model& m) {
                       return store_->put_security_group(*m.security_group(group_id));
                     }});
  if (!st) return done(error_reply(st.error()));
  publisher_.after_grace([done = std::move(done)] { done(ok_reply(json::object())); });
}

void Switch::sg_remote_member(const json& params, Done done) {
  auto m = parse_remote_member(params);
  if (!m) return done(error_reply(m.error()));
  Status st = apply({.model = [&](Model& md) { return md.set_remote_member(*m); },
                     .save = [&](const Model& md) {
                       return store_->put_security_group(*md.security_group(m->group));
                     }});
  if (!st) return done(error_reply(st.error()));
  publisher_.after_grace([done = std::move(done)] { done(ok_reply(json::object())); });
}

void Switch::port_update(const json& params, Done done) {
  auto u = parse_port_update(params);
  if (!u) return done(error_reply(u.error()));
  auto spec = model_.updated_port(*u);
  if (!spec) return done(error_reply(spec.error()));
  const PortSpec before = *model_.port(spec->id);
  const uint16_t lvlan = model_.local_vlan(spec->network);
  Status st = apply({.model = [&](Model& m) { return m.update_port(*spec); },
                     .save = [&](const Model&) { return store_->put_port(*spec, lvlan); }});
  if (!st) return done(error_reply(st.error()));
  // Connections of addresses the port no longer has end with them.
  std::vector<IpAddr> gone;
  for (const IpAddr& a : before.fixed_ips)
    if (std::find(spec->fixed_ips.begin(), spec->fixed_ips.end(), a) == spec->fixed_ips.end())
      gone.push_back(a);
  if (!gone.empty()) ct_->flush_port_after_grace(before, lvlan, std::move(gone));
  const std::string id = spec->id;
  publisher_.after_grace([this, id, done = std::move(done)] {
    const PortSpec* p = model_.port(id);
    done(p ? ok_reply(port_json(*p)) : error_reply(not_found("port " + id + " was unbound")));
  });
}

json Switch::sg_json() const {
  json sets = json::array();
  for (const auto& [groups, c] : sg_.sets())
    sets.push_back({{"groups", groups}, {"rules", c.input.rules.size()},
                    {"remote_groups", c.input.remote_groups}});
  const SgCache::Counts n = sg_.counts();
  return {{"groups", model_.security_groups().size()}, {"compiled_sets", sets},
          {"builds", {{"built", n.built}, {"reindexed", n.reindexed}, {"reused", n.reused}}}};
}

}  // namespace strait::ctl
