// Model: security groups and their rules (model.h). The relational rules
// neutron enforces: remote groups exist, rule ids are unique, a group in use
// cannot go. Every method validates fully before it changes anything.
#include <algorithm>

#include "control/api/json_fields.h"
#include "control/model/model.h"

namespace strait::ctl {
namespace {

std::string dup_match(const SecurityGroupRule& r) {
  return "a rule with the same direction, ethertype, protocol, ports and remote" +
         (r.id.empty() ? std::string() : " (" + r.id + ")");
}

// A rule r to go into group `group_id` (which may be new: `group` is its
// rules so far). `field` prefixes the fields in messages ("rules[2]." or "").
Status check_new_rule(const Model& m, const std::string& group_id,
                      const std::vector<SecurityGroupRule>& group, const SecurityGroupRule& r,
                      const std::string& field) {
  if (r.id.empty()) return field_error(field + "id", "missing");
  if (std::string other = m.group_of_rule(r.id); !other.empty())
    return conflict(field + "id: rule " + r.id + " already exists (in security group " + other +
                    ")");
  for (const SecurityGroupRule& o : group) {
    if (o.id == r.id)
      return conflict(field + "id: rule " + r.id + " is already in security group " + group_id);
    if (o.same_match(r))
      return conflict(field.empty()
                          ? "security group " + group_id + " already has " + dup_match(o)
                          : field.substr(0, field.size() - 1) + ": duplicates " + dup_match(o));
  }
  if (!r.remote_group_id.empty() && r.remote_group_id != group_id &&
      !m.security_group(r.remote_group_id))
    return not_found(field + "remote_group_id: no security group " +
                     json_quoted(r.remote_group_id));
  return ok();
}

Status too_many_rules(size_t n) {
  return exhausted("rules: " + std::to_string(n) + " rules, more than the " +
                   std::to_string(kMaxRulesPerGroup) + " a security group may have");
}

// Rules, each checked against those before it, for group `group_id`.
Status check_new_rules(const Model& m, const std::string& group_id,
                       const std::vector<SecurityGroupRule>& rules) {
  std::vector<SecurityGroupRule> so_far;
  for (size_t i = 0; i < rules.size(); ++i) {
    const std::string field = "rules[" + std::to_string(i) + "].";
    if (auto s = check_new_rule(m, group_id, so_far, rules[i], field); !s) return s;
    so_far.push_back(rules[i]);
  }
  return ok();
}

}  // namespace

Status Model::add_security_group(const SecurityGroup& g) {
  if (!is_valid_id(g.id)) return field_error("id", json_quoted(g.id) + " is not a valid id");
  if (groups_.count(g.id)) return conflict("security group " + g.id + " already exists");
  if (g.rules.size() > kMaxRulesPerGroup) return too_many_rules(g.rules.size());
  if (auto s = check_new_rules(*this, g.id, g.rules); !s) return s;
  groups_.emplace(g.id, g);
  return ok();
}

Status Model::update_security_group(const SecurityGroup& g) {
  auto it = groups_.find(g.id);
  if (it == groups_.end()) return not_found("security group " + g.id + " not found");
  if (g.rules.size() > kMaxRulesPerGroup) return too_many_rules(g.rules.size());
  // Checked as if the group had no rules yet, so that its old ones may stay.
  std::vector<SecurityGroupRule> had = std::move(it->second.rules);
  it->second.rules.clear();
  if (auto s = check_new_rules(*this, g.id, g.rules); !s) {
    it->second.rules = std::move(had);
    return s;
  }
  it->second.rules = g.rules;
  it->second.name = g.name;
  return ok();
}

Status Model::remove_security_group(const std::string& id) {
  if (!groups_.count(id)) return not_found("security group " + id + " not found");
  for (const auto& [port_id, p] : ports_) {
    if (std::find(p.security_groups.begin(), p.security_groups.end(), id) !=
        p.security_groups.end())
      return conflict("security group " + id + " is in use by port " + port_id);
  }
  for (const auto& [gid, g] : groups_) {
    if (gid == id) continue;
    for (const SecurityGroupRule& r : g.rules) {
      if (r.remote_group_id == id)
        return conflict("security group " + id + " is the remote group of rule " + r.id +
                        " of security group " + gid);
    }
  }
  groups_.erase(id);
  return ok();
}

Status Model::add_sg_rule(const std::string& group_id, const SecurityGroupRule& r) {
  auto it = groups_.find(group_id);
  if (it == groups_.end())
    return not_found("security_group_id: no security group " + json_quoted(group_id));
  if (it->second.rules.size() >= kMaxRulesPerGroup)
    return exhausted("security group " + group_id + " already has " +
                     std::to_string(it->second.rules.size()) +
                     " rules, the most a group may have (" + std::to_string(kMaxRulesPerGroup) +
                     ")");
  if (auto s = check_new_rule(*this, group_id, it->second.rules, r, ""); !s) return s;
  it->second.rules.push_back(r);
  return ok();
}

Status Model::remove_sg_rule(const std::string& rule_id) {
  for (auto& [gid, g] : groups_) {
    auto it = std::find_if(g.rules.begin(), g.rules.end(),
                           [&](const SecurityGroupRule& r) { return r.id == rule_id; });
    if (it == g.rules.end()) continue;
    g.rules.erase(it);
    return ok();
  }
  return not_found("security group rule " + rule_id + " not found");
}

// Groups first without rules, then every rule: a rule may name any group of
// the set as its remote group, whatever the order. No kMaxRulesPerGroup: a
// group an older straitd saved with more rules is restored as it was (it
// takes no new rule).
Status Model::restore_security_groups(const std::vector<SecurityGroup>& groups) {
  const std::map<std::string, SecurityGroup> before = groups_;
  auto fail = [&](const std::string& id, const Error& e) -> Status {
    groups_ = before;
    return Error{e.code, "security group " + id + ": " + e.message};
  };
  for (const SecurityGroup& g : groups) {
    if (auto s = add_security_group(SecurityGroup{g.id, g.name, {}, g.remote_members}); !s)
      return fail(g.id, s.error());
  }
  for (const SecurityGroup& g : groups) {
    std::vector<SecurityGroupRule>& rules = groups_.at(g.id).rules;
    for (size_t i = 0; i < g.rules.size(); ++i) {
      if (auto s = check_new_rule(*this, g.id, rules, g.rules[i], ""); !s)
        return fail(
            g.id, Error{s.error().code, "rules[" + std::to_string(i) + "]: " + s.error().message});
      rules.push_back(g.rules[i]);
    }
  }
  return ok();
}

const SecurityGroup* Model::security_group(const std::string& id) const {
  auto it = groups_.find(id);
  return it == groups_.end() ? nullptr : &it->second;
}

std::string Model::group_of_rule(const std::string& rule_id) const {
  for (const auto& [gid, g] : groups_) {
    for (const SecurityGroupRule& r : g.rules)
      if (r.id == rule_id) return gid;
  }
  return "";
}

Status Model::set_remote_member(const RemoteMember& m) {
  auto g = groups_.find(m.group);
  if (g == groups_.end()) return not_found("security group " + m.group + " not found");
  auto& members = g->second.remote_members;
  if (m.addresses.empty()) {
    members.erase(m.port);
    return ok();
  }
  const size_t n = group_addresses(m.group, m.port) + m.addresses.size();
  if (n > kMaxGroupAddresses)
    return exhausted("security group " + m.group + " would have more than " +
                     std::to_string(kMaxGroupAddresses) + " member addresses (" + std::to_string(n) +
                     " with this member's, its ports' here and its other remote members')");
  members[m.port] = m.addresses;
  return ok();
}

GroupMembers Model::group_members() const {
  GroupMembers members;
  for (const auto& [gid, g] : groups_)
    for (const auto& [port, addrs] : g.remote_members)
      members[gid].insert(members[gid].end(), addrs.begin(), addrs.end());
  for (const auto& [id, p] : ports_) {
    for (const std::string& g : p.security_groups) {
      std::vector<IpPrefix>& v = members[g];
      for (const IpAddr& ip : p.fixed_ips) v.push_back(host_prefix(ip));
      for (const AddressPair& pair : p.allowed_address_pairs) v.push_back(pair.ip_address);
    }
  }
  for (auto& [g, v] : members) {  // one deterministic value for one membership
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  return members;
}

std::vector<std::string> Model::ports_in_group(const std::string& group_id) const {
  std::vector<std::string> out;
  for (const auto& [id, p] : ports_) {
    if (std::find(p.security_groups.begin(), p.security_groups.end(), group_id) !=
        p.security_groups.end())
      out.push_back(id);
  }
  return out;
}

}  // namespace strait::ctl
