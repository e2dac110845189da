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

// The addresses conntrack knows a port by: fixed IPs, host-address pairs,
// its IPv6 link-local address.
std::vector<std::array<uint8_t, 16>> ct_addresses(const PortSpec& p, const std::vector<IpAddr>* only) {
  std::vector<std::array<uint8_t, 16>> out;
  auto want = [&](const IpAddr& a) {
    return !only || std::find(only->begin(), only->end(), a) != only->end();
  };
  for (const IpAddr& a : p.fixed_ips)
    if (want(a)) out.push_back(a.bytes);
  for (const AddressPair& ap : p.allowed_address_pairs)
    if (ap.ip_address.len == (ap.ip_address.addr.family == 4 ? 32 : 128) && want(ap.ip_address.addr))
      out.push_back(ap.ip_address.addr.bytes);
  if (!only) out.push_back(ipv6_link_local(p.mac).bytes);
  return out;
}

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
  if (!gone.empty()) flush_conntrack_after_grace(before, lvlan, std::move(gone));
  const std::string id = spec->id;
  publisher_.after_grace([this, id, done = std::move(done)] {
    const PortSpec* p = model_.port(id);
    done(p ? ok_reply(port_json(*p)) : error_reply(not_found("port " + id + " was unbound")));
  });
}

void Switch::poll_conntrack() {
  // Addresses whose flush passed its grace period this tick (a libvirt
  // listing can stop hundreds of ports at once): one table walk per network.
  for (auto& [zone, addrs] : ct_flush_ready_) {
    const uint32_t n = ct_->flush_addresses(zone, addrs);
    if (n) spdlog::info("{} connection(s) of {} address(es) flushed in local VLAN {}", n, addrs.size(), zone);
  }
  ct_flush_ready_.clear();
  const uint64_t now = dp::ct_now_ms();  // the workers' clock
  if (now - ct_rate_ms_ >= 1000) {
    const dp::CtStats s = ct_->stats();
    const uint64_t opened = s.created + s.reopened;
    if (ct_rate_ms_)
      ct_new_per_s_ = double(opened - ct_rate_opened_) * 1000.0 / double(now - ct_rate_ms_);
    ct_rate_ms_ = now;
    ct_rate_opened_ = opened;
  }
  if (now - ct_last_expire_ms_ < 100) return;
  ct_last_expire_ms_ = now;
  // A slice of the table every 100 ms: all of it every ~5 s, never a long
  // pause of the control loop.
  ct_->expire(now, std::max<uint32_t>(1024, ct_->capacity() / 7 / 50));
  if (!ct_retiring_ && ct_->retire_begin()) {
    ct_retiring_ = true;
    publisher_.after_grace([this] {
      ct_->retire_end();
      ct_retiring_ = false;
    });
  }
}

void Switch::flush_conntrack_after_grace(const PortSpec& p, uint16_t lvlan, std::vector<IpAddr> only) {
  if (lvlan == 0) return;
  auto addrs = ct_addresses(p, only.empty() ? nullptr : &only);
  // After the snapshot that stopped the port is live: no worker can open a
  // connection for it again behind the flush (done by poll_conntrack).
  publisher_.after_grace([this, lvlan, addrs = std::move(addrs)] {
    auto& ready = ct_flush_ready_[lvlan];
    ready.insert(ready.end(), addrs.begin(), addrs.end());
  });
}

json Switch::conntrack_json() const {
  const dp::CtStats s = ct_->stats();
  return {{"capacity", ct_->capacity()}, {"entries", s.entries},  {"created", s.created},
          {"reopened", s.reopened},      {"refused_full", s.refused_full},
          {"invalid", s.invalid},        {"expired", s.expired},  {"flushed", s.flushed},
          {"new_per_s", ct_new_per_s_}};
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
