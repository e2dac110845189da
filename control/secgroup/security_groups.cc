#include "control/secgroup/security_groups.h"

#include "control/api/api_reply.h"

namespace strait::ctl {
namespace {

using nlohmann::json;

}  // namespace

json SecurityGroups::group_json(const SecurityGroup& g) const {
  json j = to_json(g);
  j["ports"] = sw_.model().ports_in_group(g.id);
  return j;
}

Status SecurityGroups::change_group(const std::string& id,
                                    const std::function<Status(Model&)>& change) {
  return sw_.apply({.model = change, .save = [&](const Model& m) {
                      return sw_.store().put_security_group(*m.security_group(id));
                    }});
}

void SecurityGroups::reply_when_live(const std::string& id, Done done) {
  sw_.after_grace([this, id, done = std::move(done)] {
    const SecurityGroup* now = sw_.model().security_group(id);
    done(now ? ok_reply(group_json(*now)) : ok_reply(json::object()));
  });
}

void SecurityGroups::create(const json& params, Done done) {
  auto g = parse_security_group(params);
  if (!g) return done(error_reply(g.error()));
  for (SecurityGroupRule& r : g->rules)
    if (r.id.empty()) r.id = new_uuid();
  Status st = sw_.apply({.model = [&](Model& m) { return m.add_security_group(*g); },
                         .save = [&](const Model&) { return sw_.store().put_security_group(*g); }});
  if (!st) return done(error_reply(st.error()));
  reply_when_live(g->id, std::move(done));
}

void SecurityGroups::remove(const json& params, Done done) {
  auto id = id_param(params);
  if (!id) return done(error_reply(id.error()));
  Status st =
      sw_.apply({.model = [&](Model& m) { return m.remove_security_group(*id); },
                 .save = [&](const Model&) { return sw_.store().delete_security_group(*id); }});
  if (!st) return done(error_reply(st.error()));
  sw_.after_grace([done = std::move(done)] { done(ok_reply(json::object())); });
}

// The group's whole rule list at once (etcd's group documents): one
// change, one publish, so a port never sees half of it.
void SecurityGroups::update(const json& params, Done done) {
  auto g = parse_security_group(params);
  if (!g) return done(error_reply(g.error()));
  for (SecurityGroupRule& r : g->rules)
    if (r.id.empty()) r.id = new_uuid();
  const std::string id = g->id;
  Status st = change_group(id, [&](Model& m) { return m.update_security_group(*g); });
  if (!st) return done(error_reply(st.error()));
  reply_when_live(id, std::move(done));
}

void SecurityGroups::list(const json&, Done done) {
  json groups = json::array();
  for (const auto& [id, g] : sw_.model().security_groups()) groups.push_back(group_json(g));
  done(ok_reply({{"security_groups", groups}}));
}

void SecurityGroups::show(const json& params, Done done) {
  auto id = id_param(params);
  if (!id) return done(error_reply(id.error()));
  const SecurityGroup* g = sw_.model().security_group(*id);
  if (!g) return done(error_reply(not_found("security group " + *id + " does not exist")));
  done(ok_reply(group_json(*g)));
}

void SecurityGroups::rule_create(const json& params, Done done) {
  auto parsed = parse_sg_rule_create(params);
  if (!parsed) return done(error_reply(parsed.error()));
  // Named references, not a structured binding: the lambdas below capture
  // them, which clang before 16 does not allow for bindings.
  const std::string& group_id = parsed->first;
  SecurityGroupRule& rule = parsed->second;
  if (rule.id.empty()) rule.id = new_uuid();
  Status st = change_group(group_id, [&](Model& m) { return m.add_sg_rule(group_id, rule); });
  if (!st) return done(error_reply(st.error()));
  json out = to_json(rule);
  out["security_group_id"] = group_id;
  sw_.after_grace([out = std::move(out), done = std::move(done)] { done(ok_reply(out)); });
}

void SecurityGroups::rule_delete(const json& params, Done done) {
  auto id = id_param(params);
  if (!id) return done(error_reply(id.error()));
  const std::string group_id = sw_.model().group_of_rule(*id);
  Status st = change_group(group_id, [&](Model& m) { return m.remove_sg_rule(*id); });
  if (!st) return done(error_reply(st.error()));
  sw_.after_grace([done = std::move(done)] { done(ok_reply(json::object())); });
}

void SecurityGroups::remote_member(const json& params, Done done) {
  auto m = parse_remote_member(params);
  if (!m) return done(error_reply(m.error()));
  Status st = change_group(m->group, [&](Model& md) { return md.set_remote_member(*m); });
  if (!st) return done(error_reply(st.error()));
  sw_.after_grace([done = std::move(done)] { done(ok_reply(json::object())); });
}

json SecurityGroups::status() const {
  json sets = json::array();
  for (const auto& [groups, c] : cache_.sets())
    sets.push_back({{"groups", groups},
                    {"rules", c.input.rules.size()},
                    {"remote_groups", c.input.remote_groups}});
  const SgCache::Counts n = cache_.counts();
  return {{"groups", sw_.model().security_groups().size()},
          {"compiled_sets", sets},
          {"builds", {{"built", n.built}, {"reindexed", n.reindexed}, {"reused", n.reused}}}};
}

}  // namespace strait::ctl
