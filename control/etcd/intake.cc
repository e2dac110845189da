#include "control/etcd/intake.h"

#include <spdlog/spdlog.h>

#include "control/api/json_fields.h"
#include "control/switch/switch.h"

namespace strait::ctl {
namespace {

using nlohmann::json;

Error doc_error(const std::string& what, const std::string& problem) {
  return invalid(what + ": " + problem);
}

Result<json> parse_doc(const std::string& what, const std::string& text) {
  if (nested_deeper_than(text, 32)) return doc_error(what, "nested deeper than 32 levels");
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return doc_error(what, "not JSON");
  if (!j.is_object()) return doc_error(what, "not a JSON object");
  return j;
}

// Copies the fields of `from` that `keys` names (null ones too: the switch
// judges them) into `to`.
void copy_fields(const json& from, json& to, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (from.contains(k)) to[k] = from[k];
}

// The Error in a refusal reply.
Error reply_error(const json& reply) {
  const json& e = reply.value("error", json::object());
  return Error{e.value("code", std::string("internal")), e.value("message", std::string("refused"))};
}

const char* kRuleFields[] = {"id", "direction", "ethertype", "protocol", "port_range_min",
                             "port_range_max", "remote_ip_prefix", "remote_group_id"};

}  // namespace

Result<PortDoc> parse_port_doc(const std::string& id, const std::string& text) {
  if (canonical_uuid(id).empty())
    return invalid("port document key: " + json_quoted(id) + " is not a port UUID");
  const std::string what = "port document " + id;
  auto j = parse_doc(what, text);
  if (!j) return j.error();
  const json* net = find_field(*j, "network");
  if (!net || !net->is_object()) return doc_error(what, "network: required object");
  PortDoc d;
  // neutron's names for the segment, the switch's for the network.
  d.network = {{"id", net->value("id", json())}, {"type", net->value("network_type", json())}};
  if (const json* p = find_field(*net, "physical_network")) d.network["physnet"] = *p;
  if (const json* s = find_field(*net, "segmentation_id")) d.network["segmentation_id"] = *s;
  if (const json* m = find_field(*net, "mtu")) d.network["mtu"] = *m;
  d.port = {{"id", id}, {"network", d.network["id"]}, {"mac", j->value("mac_address", json())}};
  copy_fields(*j, d.port, {"fixed_ips", "security_groups", "allowed_address_pairs",
                           "port_security_enabled", "qos"});
  if (const json* did = find_field(*j, "id"); did && *did != id)
    return doc_error(what, "id: " + got(*did) + " is not the key's port id");
  // A trunk's subport: its frames travel on its parent's device.
  if (const json* trunk = find_field(*j, "trunk")) {
    if (!trunk->is_object())
      return doc_error(what, "trunk: expected {\"parent\", \"segmentation_id\"}, " + got(*trunk));
    json attach = {{"type", "subport"}};
    copy_fields(*trunk, attach, {"parent", "segmentation_type", "segmentation_id"});
    d.port["attach"] = std::move(attach);
    return d;
  }
  const json* sock = find_field(*j, "vhostuser_socket");
  if (!sock) return doc_error(what, "vhostuser_socket: required (the vhost-user socket path)");
  // vhostuser_mode is QEMU's, as in the vif_details nova got: "server" (the
  // default, and what this driver binds) makes the switch the client.
  std::string qemu_mode = "server";
  if (const json* m = find_field(*j, "vhostuser_mode")) {
    if (!m->is_string() || (*m != "server" && *m != "client"))
      return doc_error(what, "vhostuser_mode: expected \"server\" or \"client\", got " + got(*m));
    qemu_mode = m->get<std::string>();
  }
  d.port["attach"] = {{"type", "vhost"}, {"path", *sock},
                      {"mode", qemu_mode == "server" ? "client" : "server"}};
  return d;
}

Result<json> parse_group_doc(const std::string& id, const std::string& text) {
  if (!is_valid_id(id))
    return invalid("security group document key: " + json_quoted(id) + " is not a valid id");
  const std::string what = "security group document " + id;
  auto j = parse_doc(what, text);
  if (!j) return j.error();
  json g = {{"id", id}, {"rules", json::array()}};
  if (const json* n = find_field(*j, "name")) g["name"] = *n;
  if (const json* did = find_field(*j, "id"); did && *did != id)
    return doc_error(what, "id: " + got(*did) + " is not the key's group id");
  const json* rules = find_field(*j, "rules");
  if (rules && !rules->is_array()) return doc_error(what, "rules: expected a list");
  if (rules) {
    for (size_t i = 0; i < rules->size(); i++) {
      const json& r = (*rules)[i];
      if (!r.is_object()) return doc_error(what, "rules[" + std::to_string(i) + "]: not an object");
      if (!find_field(r, "id"))
        return doc_error(what, "rules[" + std::to_string(i) + "].id: required (neutron's rule id)");
      json rule = json::object();
      for (const char* k : kRuleFields)
        if (const json* v = find_field(r, k)) rule[k] = *v;
      g["rules"].push_back(std::move(rule));
    }
  }
  return g;
}

Result<json> parse_member_doc(const std::string& key, const std::string* text) {
  const size_t slash = key.find('/');
  const std::string gid = key.substr(0, slash),
                    port = slash == std::string::npos ? std::string() : key.substr(slash + 1);
  if (!is_valid_id(gid) || canonical_uuid(port).empty())
    return invalid("remote member document key: " + json_quoted(key) +
                   " is not GROUP_ID/PORT_UUID");
  json params = {{"id", gid}, {"port", port}, {"addresses", json::array()}};
  if (text) {
    auto doc = parse_doc("remote member document " + key, *text);
    if (!doc) return doc.error();
    if (const json* a = find_field(*doc, "addresses")) params["addresses"] = *a;
  }
  return params;
}

EtcdIntake::EtcdIntake(Switch& sw, StateWriter write)
    : sw_(sw), write_(std::move(write)), self_(std::make_shared<EtcdIntake*>(this)) {}

EtcdIntake::~EtcdIntake() { *self_ = nullptr; }

void EtcdIntake::answered(const std::string& id, int64_t revision, json reply) {
  auto want = ports_.find(id);
  if (want == ports_.end() || want->second.revision != revision) return;  // superseded
  if (!reply.value("ok", false)) return refuse_port(id, reply_error(reply));
  report(id, reply["result"].value("state", "") == "up" ? "up" : "bound");
}

// Runs one request as etcd's. A refusal comes back at once (nothing
// changed); success once the change is live, to `then`.
json EtcdIntake::call(const std::string& method, json params) {
  auto now = std::make_shared<json>();
  sw_.call(method, params, [now](json reply) { *now = std::move(reply); }, Switch::Origin::kEtcd);
  return *now;  // null: accepted, its answer to come after the grace period
}

void EtcdIntake::resync(std::map<std::string, Doc> ports, std::map<std::string, Doc> groups,
                        std::map<std::string, Doc> members) {
  resyncs_++;
  ports_ = std::move(ports);
  groups_ = std::move(groups);
  members_ = std::move(members);
  for (const auto& [key, d] : members_) dirty_members_.insert(key);
  for (const auto& [gid, g] : sw_.model().security_groups())
    for (const auto& [port, addrs] : g.remote_members) dirty_members_.insert(gid + "/" + port);
  for (const auto& [id, d] : ports_) dirty_ports_.insert(id);
  for (const auto& [id, p] : sw_.model().ports()) dirty_ports_.insert(id);
  for (const auto& [id, d] : groups_) dirty_groups_.insert(id);
  for (const auto& [id, g] : sw_.model().security_groups()) dirty_groups_.insert(id);
  // States of ports that are no longer ours.
  for (auto it = states_.begin(); it != states_.end();) {
    if (ports_.count(it->first) || sw_.model().port(it->first)) {
      ++it;
      continue;
    }
    write_port(it->first, nullptr);
    it = states_.erase(it);
  }
  for (auto it = group_states_.begin(); it != group_states_.end();) {
    if (groups_.count(it->first) || sw_.model().security_group(it->first)) {
      ++it;
      continue;
    }
    write_group(it->first, nullptr);
    it = group_states_.erase(it);
  }
  spdlog::info("etcd: {} port(s), {} security group(s) and {} remote member(s) desired; reconciling",
               ports_.size(), groups_.size(), members_.size());
  converge();
}

void EtcdIntake::put_port(const std::string& id, Doc d) {
  ports_[to_lower(id)] = std::move(d);
  dirty_ports_.insert(to_lower(id));
  converge();
}

void EtcdIntake::delete_port(const std::string& id) {
  ports_.erase(to_lower(id));
  dirty_ports_.insert(to_lower(id));
  converge();
}

void EtcdIntake::put_group(const std::string& id, Doc d) {
  groups_[id] = std::move(d);
  dirty_groups_.insert(id);
  converge();
}

void EtcdIntake::delete_group(const std::string& id) {
  groups_.erase(id);
  dirty_groups_.insert(id);
  converge();
}

void EtcdIntake::put_member(const std::string& key, Doc d) {
  members_[key] = std::move(d);
  dirty_members_.insert(key);
  converge();
}

void EtcdIntake::delete_member(const std::string& key) {
  members_.erase(key);
  dirty_members_.insert(key);
  converge();
}

void EtcdIntake::converge() {
  if (converging_) {
    again_ = true;
    return;
  }
  converging_ = true;
  do {
    again_ = false;
    std::set<std::string> groups, ports, members;
    groups.swap(dirty_groups_);
    ports.swap(dirty_ports_);
    // Groups a port may name first, then the ports and the groups' remote
    // members, then the groups that go (a group in use cannot).
    for (const std::string& id : groups)
      if (groups_.count(id)) converge_group(id);
    for (const std::string& id : trunk_order(ports)) converge_port(id);
    members.swap(dirty_members_);
    for (const std::string& key : members) converge_member(key);
    for (const std::string& id : groups)
      if (!groups_.count(id)) converge_group(id);
    // A network goes with its last port.
    std::vector<std::string> empty;
    for (const auto& [id, n] : sw_.model().networks())
      if (sw_.model().ports_on(id) == 0) empty.push_back(id);
    for (const std::string& id : empty) call("network.delete", {{"id", id}});
  } while (again_ || !dirty_groups_.empty() || !dirty_ports_.empty() || !dirty_members_.empty());
  converging_ = false;
}

std::vector<std::string> EtcdIntake::trunk_order(const std::set<std::string>& ids) const {
  // 0: a subport that goes; 2: a subport to bind; 1: any other port.
  auto rank = [&](const std::string& id) {
    auto want = ports_.find(id);
    if (want == ports_.end()) {
      const PortSpec* p = sw_.model().port(id);
      return p && p->attach.kind == Attachment::Kind::kSubport ? 0 : 1;
    }
    auto j = parse_doc("", want->second.text);
    return j && find_field(*j, "trunk") ? 2 : 1;
  };
  std::vector<std::pair<int, std::string>> ranked;
  for (const std::string& id : ids) ranked.emplace_back(rank(id), id);
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (auto& [r, id] : ranked) out.push_back(std::move(id));
  return out;
}

void EtcdIntake::retry_refused() {
  for (const auto& [id, why] : refused_) dirty_ports_.insert(id);
  for (const std::string& id : unbind_waiting_) dirty_ports_.insert(id);
  for (const auto& [id, why] : refused_groups_) dirty_groups_.insert(id);
  again_ = true;
}

void EtcdIntake::refuse_port(const std::string& id, const Error& e) {
  auto [it, fresh] = refused_.insert_or_assign(id, e.message);
  (void)it;
  if (fresh) spdlog::warn("etcd: port {} refused: {}", id, e.message);
  applied_.erase(id);
  states_[id] = "error";
  json st = {{"state", "error"}, {"reason", e.message}, {"code", e.code},
             {"revision", ports_.count(id) ? ports_[id].revision : 0}};
  write_port(id, &st);
}

void EtcdIntake::refuse_group(const std::string& id, const Error& e) {
  if (refused_groups_.insert_or_assign(id, e.message).second)
    spdlog::warn("etcd: security group {}: {}", id, e.message);
  group_states_[id] = -1;
  json st = {{"state", "error"}, {"reason", e.message}, {"code", e.code},
             {"revision", groups_.count(id) ? groups_[id].revision : 0}};
  write_group(id, &st);
}

void EtcdIntake::report(const std::string& id, const std::string& state) {
  auto rev = applied_.find(id);
  if (rev == applied_.end()) return;  // not applied (refused, or gone)
  states_[id] = state;
  json st = {{"state", state}, {"revision", rev->second},
             {"generation", sw_.publisher().generation()}};
  write_port(id, &st);
}

void EtcdIntake::report_group(const std::string& id, int64_t revision) {
  // After the grace period of what was published for it: then every worker
  // enforces this revision's rules.
  sw_.after_grace([self = self_, id, revision] {
    EtcdIntake* me = *self;
    if (!me) return;
    auto want = me->groups_.find(id);
    if (want == me->groups_.end() || want->second.revision != revision) return;  // superseded
    if (me->refused_groups_.count(id)) return;
    me->group_states_[id] = revision;
    json st = {{"state", "applied"}, {"revision", revision},
               {"generation", me->sw_.publisher().generation()}};
    me->write_group(id, &st);
  });
}

void EtcdIntake::converge_group(const std::string& id) {
  const SecurityGroup* have = sw_.model().security_group(id);
  auto want = groups_.find(id);
  if (want == groups_.end()) {
    if (have) {
      json r = call("security_group.delete", {{"id", id}});
      if (!r.is_null() && !r.value("ok", false)) return refuse_group(id, reply_error(r));
    }
    refused_groups_.erase(id);
    if (group_states_.erase(id)) write_group(id, nullptr);
    return;
  }
  auto g = parse_group_doc(id, want->second.text);
  if (!g) return refuse_group(id, g.error());
  bool changed = false;
  if (!have) {
    json r = call("security_group.create", *g);
    if (!r.is_null() && !r.value("ok", false)) return refuse_group(id, reply_error(r));
    changed = true;
  } else {
    // The document's name and whole rule list against ours: changed, they
    // go in one request (all or nothing, one publish).
    auto want_g = parse_security_group(*g);
    if (!want_g) return refuse_group(id, want_g.error());
    const json a = to_json(*have), b = to_json(*want_g);
    if (a["rules"] != b["rules"] || a["name"] != b["name"]) {
      json r = call("security_group.update", *g);
      if (!r.is_null() && !r.value("ok", false)) return refuse_group(id, reply_error(r));
      changed = true;
    }
  }
  refused_groups_.erase(id);
  if (changed) {
    applied_docs_++;
    retry_refused();
  }
  if (!have)  // a new group: its members, which waited for it
    for (auto m = members_.lower_bound(id + "/"); m != members_.end() && m->first.rfind(id + "/", 0) == 0; ++m)
      dirty_members_.insert(m->first);
  auto written = group_states_.find(id);
  if (changed || written == group_states_.end() || written->second != want->second.revision)
    report_group(id, want->second.revision);
}

void EtcdIntake::converge_port(const std::string& id) {
  const PortSpec* have = sw_.model().port(id);
  auto want = ports_.find(id);
  if (want == ports_.end()) {
    refused_.erase(id);
    applied_.erase(id);
    if (!have) {
      if (states_.erase(id)) write_port(id, nullptr);
      return;
    }
    json r = call("port.unbind", {{"id", id}});
    if (!r.is_null() && !r.value("ok", false)) {
      // A trunk's parent whose subports are still here (their documents go
      // in later transactions of neutron's): tried again as ports leave.
      if (unbind_waiting_.insert(id).second)
        spdlog::info("etcd: port {}: unbind waits: {}", id, reply_error(r).message);
      return;
    }
    unbind_waiting_.erase(id);
    retry_refused();  // a MAC, an IP or a group it held is free now
    return;           // its state key goes with port-unbound
  }
  unbind_waiting_.erase(id);
  auto doc = parse_port_doc(id, want->second.text);
  if (!doc) return refuse_port(id, doc.error());
  auto spec = parse_port(doc->port);
  if (!spec) return refuse_port(id, spec.error());
  auto netspec = parse_network(doc->network);
  if (!netspec)  // the switch's field names, under the document's "network"
    return refuse_port(id, Error{netspec.error().code, "network." + netspec.error().message});
  const int64_t revision = want->second.revision;

  // Its network: as the document says, or refused while other ports use a
  // different one under that id.
  const NetworkSpec* net = sw_.model().network(netspec->id);
  if (net) {
    json a = to_json(*net), b = to_json(*netspec);
    if (b["mtu"] == 0) b["mtu"] = a["mtu"];  // vxlan: the model's default
    if (a != b) {
      const size_t others = sw_.model().ports_on(net->id) - (have && have->network == net->id);
      if (others > 0)
        return refuse_port(id, conflict("network " + net->id + " is bound here as " + a.dump() +
                                        ", the document says " + b.dump() + " (" +
                                        std::to_string(others) + " other port(s) on it)"));
      if (have) {
        call("port.unbind", {{"id", id}});
        have = nullptr;
      }
      call("network.delete", {{"id", net->id}});
      net = nullptr;
    }
  }
  if (!net) {
    json r = call("network.create", doc->network);
    if (!r.is_null() && !r.value("ok", false)) return refuse_port(id, reply_error(r));
  }

  json port;
  if (have) {
    const json a = to_json(*have), b = to_json(*spec);
    const bool same_binding = a["network"] == b["network"] && a["mac"] == b["mac"] &&
                              a["attach"] == b["attach"];
    if (!same_binding) {
      // Another binding under the same id: what it was goes first.
      call("port.unbind", {{"id", id}});
      have = nullptr;
    } else if (a == b) {
      refused_.erase(id);
      applied_[id] = revision;
      report(id, sw_.port_up(id) ? "up" : "bound");
      return;
    } else {
      json u = {{"id", id}};
      copy_fields(b, u, {"fixed_ips", "security_groups", "allowed_address_pairs",
                         "port_security_enabled", "qos"});
      port = u;
    }
  }
  const char* method = have ? "port.update" : "port.bind";
  // Answered after the grace period: by then this intake may be gone (straitd stopping).
  auto done = [self = self_, id, revision](json reply) {
    EtcdIntake* me = *self;
    if (!me) return;
    me->answered(id, revision, std::move(reply));
  };
  auto now = std::make_shared<json>();
  sw_.call(method, have ? port : doc->port,
           [now, done](json reply) {
             *now = reply;
             done(std::move(reply));
           },
           Switch::Origin::kEtcd);
  if (!now->is_null() && !now->value("ok", false)) return;  // refused: done() reported it
  refused_.erase(id);
  applied_[id] = revision;
  applied_docs_++;
  if (!have) retry_refused();  // a new member of its groups, a network now bound
}

void EtcdIntake::converge_member(const std::string& key) {
  const SecurityGroup* g = sw_.model().security_group(key.substr(0, key.find('/')));
  auto want = members_.find(key);
  if (!g) {  // waits for its group (or went with it)
    refused_members_.erase(key);
    return;
  }
  auto params = parse_member_doc(key, want == members_.end() ? nullptr : &want->second.text);
  if (!params) return refuse_member(key, params.error());
  auto m = parse_remote_member(*params);
  if (!m) return refuse_member(key, m.error());
  auto have = g->remote_members.find(m->port);
  const std::vector<IpPrefix> none;
  if ((have == g->remote_members.end() ? none : have->second) == m->addresses) {
    refused_members_.erase(key);
    return;
  }
  json r = call("security_group.remote_member", *params);
  if (!r.is_null() && !r.value("ok", false)) return refuse_member(key, reply_error(r));
  refused_members_.erase(key);
  applied_docs_++;
}

void EtcdIntake::refuse_member(const std::string& key, const Error& e) {
  if (refused_members_.insert_or_assign(key, e.message).second)
    spdlog::warn("etcd: remote member {}: {}", key, e.message);
}

void EtcdIntake::on_event(const json& ev) {
  const std::string kind = ev.value("event", ""), id = ev.value("port", "");
  if (kind == "port-up") {
    report(id, "up");
  } else if (kind == "port-down") {
    report(id, "down");
  } else if (kind == "port-unbound") {
    if (!ports_.count(id) && states_.erase(id)) write_port(id, nullptr);
  }
}

json EtcdIntake::status() const {
  json refused = json::object();
  for (const auto& [id, why] : refused_) refused[id] = why;
  json refused_groups = json::object();
  for (const auto& [id, why] : refused_groups_) refused_groups[id] = why;
  json refused_members = json::object();
  for (const auto& [key, why] : refused_members_) refused_members[key] = why;
  return {{"ports_desired", ports_.size()}, {"groups_desired", groups_.size()},
          {"remote_members_desired", members_.size()}, {"refused_remote_members", refused_members},
          {"ports_applied", applied_.size()}, {"refused_ports", refused},
          {"refused_groups", refused_groups}, {"resyncs", resyncs_},
          {"documents_applied", applied_docs_}};
}

}  // namespace strait::ctl
