#pragma once
// Security groups as neutron defines them, and their compilation into the
// dataplane classifier's input (dataplane/sg_classifier.h) for one set of
// groups. Control thread only.
//
// A group is a list of allow rules; a port's policy is the union of its
// groups' rules. Directions are the VM's point of view. A rule's remote side
// is a CIDR (remote_ip_prefix) or a group (remote_group_id: the addresses of
// that group's member ports, kept current by recompiling address sets only).
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "control/model/net_addr.h"
#include "dataplane/result.h"
#include "dataplane/sg_classifier.h"

namespace strait::ctl {

// A prefix as the dataplane classifier takes it.
dp::SgPrefix to_dp(const IpPrefix& p);

// IP protocols that have ports (neutron's SG_PORT_PROTO_NUMS): tcp, udp, dccp,
// sctp, udplite. ICMP and ICMPv6 carry type and code in the port fields.
bool proto_has_ports(uint8_t proto);
bool proto_is_icmp(uint8_t proto);  // 1 (icmp) or 58 (ipv6-icmp)

struct SecurityGroupRule {
  std::string id;
  dp::SgDirection direction = dp::SgDirection::kIngress;
  dp::SgFamily ethertype = dp::SgFamily::kIpv4;
  std::optional<uint8_t> protocol;         // nullopt: any
  std::optional<uint16_t> port_range_min;  // first port, or ICMP type
  std::optional<uint16_t> port_range_max;  // last port, or ICMP code
  std::optional<IpPrefix> remote_ip_prefix;
  std::string remote_group_id;  // "" = none; never both this and the prefix

  // Same match (neutron refuses such duplicates in one group); ids ignored.
  bool same_match(const SecurityGroupRule& o) const;
};

// Limits on one security group; a request past one is refused with
// resource_exhausted naming it (docs/api.md). Rules: neutron's default quota
// is 100 per group and clouds stay well under it; without a limit each added
// rule cost more (127 ms by 1800 rules) and an 8000-rule group took 3-10 s
// to compile, the control thread stalled all that while.
inline constexpr size_t kMaxRulesPerGroup = 1000;
// Member addresses (fixed IPs and allowed address pairs of its bound ports,
// counted per port): every port this switch can hold (dp::kMaxPorts, 2048)
// in one group with a dual-stack address and a few pairs each stays under
// it; it bounds one remote group's address set in every classifier naming it.
inline constexpr size_t kMaxGroupAddresses = 16384;

// Addresses one remote member (a port on another host) gives a group.
inline constexpr size_t kMaxMemberAddresses = 64;

struct SecurityGroup {
  std::string id;
  std::string name;  // display only: <= 255 bytes, no control characters; may be ""
  std::vector<SecurityGroupRule> rules;
  // Members bound on other hosts (neutron's remote_group documents in etcd):
  // port id -> the addresses it gives this group as a remote group (its
  // fixed IPs and allowed address pairs). Ports bound here are members
  // through their own bindings; a port in both counts once per address.
  std::map<std::string, std::vector<IpPrefix>> remote_members;
};

// security_group.remote_member: {"id" (the group), "port" (UUID),
// "addresses": [IP or CIDR, ...]}; no addresses: the port is no member.
struct RemoteMember {
  std::string group, port;
  std::vector<IpPrefix> addresses;  // sorted, unique
};
Result<RemoteMember> parse_remote_member(const nlohmann::json& params);

// Field-level parsing and validation, with neutron's rules. Errors name the
// field ("rules[2].port_range_min: ..."). `field_prefix` is prepended to
// field names (parse_security_group passes "rules[i].").
Result<SecurityGroupRule> parse_sg_rule(const nlohmann::json& params,
                                        const std::string& field_prefix = "");
// security_group_rule.create: the rule's fields plus "security_group_id";
// returns (group id, rule). "id" may be absent: the rule's id is then ""
// and the caller gives it one (new_uuid(), control/model/model.h).
Result<std::pair<std::string, SecurityGroupRule>> parse_sg_rule_create(
    const nlohmann::json& params);
// {"id", "name"?, "rules"?: [...], "remote_members"?: {PORT: [IP or CIDR]}}.
// A rule's "id" may be absent here too
// (the caller fills it in; the Model refuses a rule without one); a rule's
// "security_group_id", when present, must be the group's id.
Result<SecurityGroup> parse_security_group(const nlohmann::json& params);
// {"id", "direction", ..., "remote_group_id"}: every field, null when unset.
nlohmann::json to_json(const SecurityGroupRule& r);
// The same plus "security_group_id" (the API's rule objects).
nlohmann::json to_json(const SecurityGroupRule& r, const std::string& group_id);
// {"id", "name", "rules": [rule with security_group_id...], "remote_members"
// (only when there are any)}; callers may add keys.
nlohmann::json to_json(const SecurityGroup& g);
// "tcp", "ipv6-icmp", or the number for protocols without a name here.
std::string protocol_name(uint8_t proto);

// Remote-group members: group id -> the addresses of its member ports (fixed
// IPs as host prefixes, allowed address pairs as given). A group absent here
// has no members.
using GroupMembers = std::map<std::string, std::vector<IpPrefix>>;

// Everything dp::SgClassifier::build takes for one set of groups. Deterministic:
// the same set (in any order, with repeats), groups and members give the same
// value.
struct SgCompileInput {
  std::vector<std::string> groups;                // the set: sorted, unique
  std::vector<dp::SgRule> rules;                  // union, normalised, sorted, unique
  std::vector<std::vector<std::string>> origins;  // per rule: "group/rule" ids that gave it
  std::vector<std::string> remote_groups;         // address set i is remote_groups[i]'s members
  std::vector<dp::SgAddressSet> address_sets;

  bool operator==(const SgCompileInput&) const = default;
};

// The sorted, repeat-free form of a port's group list: the key under which
// ports share one compiled classifier.
std::vector<std::string> canonical_group_set(std::span<const std::string> group_ids);

// Compiles the rules of `group_ids` (each must be in `groups`: not_found
// otherwise). resource_exhausted when one family's rules name more remote
// groups than a classifier holds.
Result<SgCompileInput> compile_group_set(std::span<const std::string> group_ids,
                                         const std::map<std::string, SecurityGroup>& groups,
                                         const GroupMembers& members);

// The address sets of remote_groups from members (a membership change: feed
// to SgClassifier::with_address_sets; the rules stay compiled).
std::vector<dp::SgAddressSet> address_sets_of(std::span<const std::string> remote_groups,
                                              const GroupMembers& members);

// One rule as the dataplane matches it; remote_set is the index of its
// remote group's address set (dp::kSgNoSet when it has none).
dp::SgRule normalise(const SecurityGroupRule& r, uint16_t remote_set = dp::kSgNoSet);

}  // namespace strait::ctl
