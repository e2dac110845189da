#pragma once
// Desired state from etcd, applied to the switch through the same requests,
// the same validation and the same transactional path (Switch::apply) as
// the API's, on the control thread. What neutron's ML2 driver
// (networking-strait/) writes, under [etcd] prefix (docs/openstack.md):
//
//   PREFIX/nodes/HOST/ports/PORT_ID     a port bound to this host, with its
//                                       network segment and vhost socket (a
//                                       trunk's subport: its parent and VLAN)
//   PREFIX/global/secgroups/GROUP_ID    a security group and its rules
//   PREFIX/global/remote_group/GROUP_ID/PORT_ID
//                                       the addresses a port on any host
//                                       gives the group as a remote group
//
// and what it reads back, written by the agent (etcd_agent.h) from what this
// intake reports: PREFIX/states/HOST/ports/PORT_ID (a port's state) and
// PREFIX/states/HOST/secgroups/GROUP_ID (the group's document revision in
// force in every worker, or why it was refused).
//
// etcd is the one source of desired state on a host it drives: a resync makes
// the switch hold exactly the documents (ports, groups, and the networks the
// ports name; a network goes with its last port). Each document is applied on
// its own: one that is refused (malformed, a VLAN the physnet cannot carry, a
// MAC another port holds, a group that does not exist yet) is reported with
// its reason and changes nothing, and the others go on. A refused document is
// tried again when something it may depend on changes (a group, a port
// leaving). Changes are worked through per document, never by flushing:
// a port whose document did not change is not touched.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "dataplane/result.h"

namespace strait::ctl {

class Switch;

// A port document, translated into the switch's own requests.
struct PortDoc {
  nlohmann::json network;  // network.create params
  nlohmann::json port;     // port.bind params
};
// The document neutron's driver writes for port `id` (docs/openstack.md),
// or why it cannot be one. Field-level only: the switch judges the rest.
Result<PortDoc> parse_port_doc(const std::string& id, const std::string& text);
// A security group document: security_group.create params.
Result<nlohmann::json> parse_group_doc(const std::string& id, const std::string& text);
// A remote group member's document under key "GROUP_ID/PORT_ID" (text
// null: the document went): security_group.remote_member params.
Result<nlohmann::json> parse_member_doc(const std::string& key, const std::string* text);

class EtcdIntake {
 public:
  // A state for etcd under the host's states, `key` being "ports/ID" or
  // "secgroups/ID"; null when the key should go.
  using StateWriter = std::function<void(const std::string& key, const nlohmann::json* state)>;
  EtcdIntake(Switch& sw, StateWriter write);
  ~EtcdIntake();
  EtcdIntake(const EtcdIntake&) = delete;
  EtcdIntake& operator=(const EtcdIntake&) = delete;

  struct Doc {
    std::string text;
    int64_t revision = 0;  // the key's mod_revision
  };
  // Everything etcd holds for this host (after a (re)connect, or a
  // compacted watch): documents not in it go.
  void resync(std::map<std::string, Doc> ports, std::map<std::string, Doc> groups,
              std::map<std::string, Doc> members = {});
  void put_port(const std::string& id, Doc d);
  void delete_port(const std::string& id);
  void put_group(const std::string& id, Doc d);
  void delete_group(const std::string& id);
  // `key`: "GROUP_ID/PORT_ID".
  void put_member(const std::string& key, Doc d);
  void delete_member(const std::string& key);
  // The switch's events (port-up, port-down, port-unbound).
  void on_event(const nlohmann::json& ev);

  // Ports whose documents were refused, with why.
  const std::map<std::string, std::string>& refused() const { return refused_; }
  nlohmann::json status() const;

 private:
  void converge();
  void converge_group(const std::string& id);
  void converge_port(const std::string& id);
  void converge_member(const std::string& key);
  // After a port's request: its state with `state` ("bound", "up", "down")
  // or its refusal.
  void report(const std::string& port_id, const std::string& state);
  void refuse_port(const std::string& id, const Error& e);
  void refuse_group(const std::string& id, const Error& e);
  void refuse_member(const std::string& key, const Error& e);
  // Group `id`'s document revision, once every worker enforces it.
  void report_group(const std::string& id, int64_t revision);
  void write_port(const std::string& id, const nlohmann::json* state) { write_("ports/" + id, state); }
  void write_group(const std::string& id, const nlohmann::json* state) {
    write_("secgroups/" + id, state);
  }
  void retry_refused();
  // The ports `ids` in the order they are worked through: a trunk's subports
  // after every other port when they are bound (their parent first), before
  // them when they go (a parent with subports cannot be unbound).
  std::vector<std::string> trunk_order(const std::set<std::string>& ids) const;
  // A port request's answer, after the grace period.
  void answered(const std::string& id, int64_t revision, nlohmann::json reply);
  nlohmann::json call(const std::string& method, nlohmann::json params);

  Switch& sw_;
  StateWriter write_;
  std::map<std::string, Doc> ports_, groups_;  // desired, by id
  std::map<std::string, Doc> members_;         // desired, by "GROUP_ID/PORT_ID"
  std::set<std::string> dirty_ports_, dirty_groups_, dirty_members_;
  std::map<std::string, std::string> refused_members_;  // "GROUP_ID/PORT_ID" -> reason
  std::map<std::string, std::string> refused_;         // port id -> reason
  std::map<std::string, std::string> refused_groups_;  // group id -> reason
  std::map<std::string, int64_t> applied_;             // port id -> revision in force
  std::set<std::string> unbind_waiting_;  // gone from etcd, not unbindable yet (a trunk's parent)
  std::map<std::string, std::string> states_;          // port id -> last state written
  std::map<std::string, int64_t> group_states_;        // group id -> revision written (-1: error)
  bool converging_ = false, again_ = false;
  uint64_t resyncs_ = 0, applied_docs_ = 0;
  // Answers come after a grace period: they reach this intake only while it lives.
  std::shared_ptr<EtcdIntake*> self_;
};

}  // namespace strait::ctl
