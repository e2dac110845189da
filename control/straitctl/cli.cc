#include "control/straitctl/cli.h"

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <ostream>
#include <vector>

#ifndef STRAIT_VERSION
#define STRAIT_VERSION "unknown"
#endif

namespace strait::straitctl {
namespace {

using json = nlohmann::json;

// Values the subcommands fill; turned into a request once parsing is done.
// Ranges are not checked here: the switch validates every request and its
// messages name the field, so `--segmentation-id 5000` is refused there.
struct Args {
  std::string id;
  std::string type;
  std::optional<std::string> physnet;
  std::optional<int64_t> seg_id;
  std::optional<int64_t> mtu;
  std::string network, mac;
  std::optional<std::string> ethdev, vhost, vhost_mode, subport_of;
  std::vector<std::string> ips;
  double watch = 0;
  std::string method, raw_params;
  // trace: the frame as hex, or header fields (sent only when given).
  std::optional<std::string> frame, dst, src, ethertype, ip_src, ip_dst, proto;
  std::optional<int64_t> vlan, pcp, sport, dport, length, worker;
  // Port security (port bind, port update). port_security: --port-security
  // or --no-port-security; unset: not sent.
  std::vector<std::string> groups, pairs;
  bool no_groups = false, no_pairs = false;
  // QoS (port bind, port update): any given replaces the port's rules.
  std::vector<std::string> bw_limits, pps_limits;
  std::optional<int64_t> dscp_mark;
  bool no_qos = false;
  bool psec_on = false, psec_off = false;
  // security-group and its rules.
  std::optional<std::string> name, rule_id, direction, sg_ethertype, protocol, remote_prefix,
      remote_group;
  std::optional<int64_t> port_min, port_max;
  // tunnel: a remote VTEP, or the flood list; the remote port's IP (ARP responder).
  std::string vtep;
  std::vector<std::string> vteps;
  std::optional<std::string> port_ip;
  bool no_arp_responder = false;  // net create (vxlan)
  bool dry_run = false;  // workers rebalance
  bool capture_on = false, capture_off = false;  // port capture
  std::optional<std::string> log_level;
};

struct Commands {
  CLI::App *net_create, *net_delete, *net_list;
  CLI::App *port_bind, *port_unbind, *port_list, *port_show;
  CLI::App *show, *stats, *call, *events;
  CLI::App* log_level = nullptr;
  CLI::App *trace = nullptr, *cache_dump = nullptr, *rebalance = nullptr;
  CLI::App* port_update = nullptr;
  CLI::App* port_capture = nullptr;
  CLI::App *sg_create = nullptr, *sg_delete = nullptr, *sg_list = nullptr, *sg_show = nullptr;
  CLI::App *rule_create = nullptr, *rule_delete = nullptr;
  CLI::App *fdb_add = nullptr, *fdb_delete = nullptr, *flood_set = nullptr, *tunnel_show = nullptr;
};

// --security-group, --allowed-address-pair, --port-security and their
// negations, shared by port bind and port update (`update`: the options that
// clear a list exist).
void add_port_security_options(CLI::App* cmd, Args& a, bool update) {
  CLI::Option* groups =
      cmd->add_option("--security-group", a.groups, "Security group id (repeatable)")
          ->allow_extra_args(false);
  CLI::Option* pairs = cmd->add_option("--allowed-address-pair", a.pairs,
                                       "IP[,MAC]: an address or CIDR the port may also send "
                                       "from, with MAC (default: the port's) (repeatable)")
                           ->allow_extra_args(false);
  CLI::Option* on = cmd->add_flag("--port-security", a.psec_on,
                                  "Anti-spoofing and security groups on (the default with "
                                  "groups or pairs)");
  CLI::Option* off = cmd->add_flag("--no-port-security", a.psec_off, "A plain switch port");
  on->excludes(off);
  if (update) {
    cmd->add_flag("--no-security-groups", a.no_groups, "Remove all the port's groups")
        ->excludes(groups);
    cmd->add_flag("--no-allowed-address-pairs", a.no_pairs, "Remove all the port's pairs")
        ->excludes(pairs);
  }
  // neutron's QoS rules; given, they replace all the port's rules.
  CLI::Option* bw = cmd->add_option("--bandwidth-limit", a.bw_limits,
                                    "QoS: DIRECTION:KBPS[:BURST_KBIT], direction egress (from "
                                    "the VM) or ingress (repeatable)")
                        ->allow_extra_args(false);
  CLI::Option* pps = cmd->add_option("--packet-rate-limit", a.pps_limits,
                                     "QoS: DIRECTION:KPPS[:BURST_KPKT] (repeatable)")
                         ->allow_extra_args(false);
  CLI::Option* dscp =
      cmd->add_option("--dscp-mark", a.dscp_mark, "QoS: DSCP set on what the VM sends");
  if (update)
    cmd->add_flag("--no-qos", a.no_qos, "Remove all the port's QoS rules")
        ->excludes(bw)
        ->excludes(pps)
        ->excludes(dscp);
}

// "DIRECTION:MAX[:BURST]" as a limit rule; numbers that are no numbers are
// sent as given (the switch says what is wrong).
json qos_limit(const std::string& s, const char* type, const char* max_key, const char* burst_key) {
  auto num = [](const std::string& v) -> json {
    try {
      size_t used = 0;
      const long long n = std::stoll(v, &used);
      if (used == v.size()) return n;
    } catch (const std::exception&) {
    }
    return v;
  };
  json r = {{"type", type}};
  const size_t a = s.find(':');
  r["direction"] = s.substr(0, a);
  if (a == std::string::npos) return r;
  const size_t b = s.find(':', a + 1);
  r[max_key] = num(s.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1));
  if (b != std::string::npos) r[burst_key] = num(s.substr(b + 1));
  return r;
}

// The QoS options given on the command line into params.
void put_qos(const Args& a, json& p) {
  if (a.bw_limits.empty() && a.pps_limits.empty() && !a.dscp_mark && !a.no_qos) return;
  json rules = json::array();
  for (const std::string& l : a.bw_limits)
    rules.push_back(qos_limit(l, "bandwidth_limit", "max_kbps", "max_burst_kbps"));
  for (const std::string& l : a.pps_limits)
    rules.push_back(qos_limit(l, "packet_rate_limit", "max_kpps", "max_burst_kpps"));
  if (a.dscp_mark) rules.push_back({{"type", "dscp_marking"}, {"dscp_mark", *a.dscp_mark}});
  p["qos"] = rules;
}

// "IP" or "IP,MAC" as an allowed_address_pairs entry.
json address_pair(const std::string& s) {
  const size_t comma = s.find(',');
  if (comma == std::string::npos) return {{"ip_address", s}};
  return {{"ip_address", s.substr(0, comma)}, {"mac_address", s.substr(comma + 1)}};
}

// The port-security fields given on the command line into params.
void put_port_security(const Args& a, json& p) {
  if (!a.groups.empty() || a.no_groups) p["security_groups"] = a.groups;
  if (!a.pairs.empty() || a.no_pairs) {
    p["allowed_address_pairs"] = json::array();
    for (const std::string& pair : a.pairs)
      p["allowed_address_pairs"].push_back(address_pair(pair));
  }
  if (a.psec_on || a.psec_off) p["port_security_enabled"] = a.psec_on;
}

void add_network_commands(CLI::App& app, Args& a, Commands& c) {
  CLI::App* net = app.add_subcommand("network", "Networks: create, delete, list");
  net->require_subcommand(1);
  c.net_create = net->add_subcommand("create", "Create a network");
  c.net_create->add_option("ID", a.id, "Network id (UUID or name)")->required();
  c.net_create->add_option("--type", a.type, "vlan, vxlan, flat or local")->required();
  c.net_create->add_option("--physnet", a.physnet, "Physical network (vlan, flat)");
  c.net_create->add_option("--segmentation-id", a.seg_id, "VLAN id on the physnet (vlan) or VNI (vxlan)");
  c.net_create->add_option("--mtu", a.mtu, "MTU (default 1500; vxlan: underlay MTU - 50)");
  c.net_create->add_flag("--no-arp-responder", a.no_arp_responder,
                         "vxlan: flood ARP requests for remote ports instead of answering them");
  c.net_delete = net->add_subcommand("delete", "Delete a network without ports");
  c.net_delete->add_option("ID", a.id, "Network id")->required();
  c.net_list = net->add_subcommand("list", "List networks");
}

void add_port_commands(CLI::App& app, Args& a, Commands& c) {
  CLI::App* port = app.add_subcommand("port", "Port bindings: bind, unbind, list, show, capture");
  port->require_subcommand(1);
  c.port_bind = port->add_subcommand("bind", "Bind a port to a network and a device");
  c.port_bind->add_option("UUID", a.id, "Port id")->required();
  c.port_bind->add_option("--network", a.network, "Network id")->required();
  c.port_bind->add_option("--mac", a.mac, "MAC address")->required();
  // One address per --ip, so `--ip A UUID` cannot swallow the UUID.
  c.port_bind->add_option("--ip", a.ips, "Fixed IP address (repeatable)")->allow_extra_args(false);
  CLI::Option* ethdev =
      c.port_bind->add_option("--ethdev", a.ethdev, "DPDK devargs of the port's device");
  CLI::Option* vhost =
      c.port_bind->add_option("--vhost", a.vhost, "vhost-user socket path (instead of --ethdev)");
  CLI::Option* subport = c.port_bind->add_option(
      "--subport-of", a.subport_of,
      "A trunk's subport: the parent port, whose device carries its frames tagged "
      "--segmentation-id (instead of --ethdev or --vhost)");
  CLI::Option* vid = c.port_bind->add_option("--segmentation-id", a.seg_id,
                                             "The subport's VLAN on its parent (1-4094)");
  subport->needs(vid);
  vid->needs(subport);
  ethdev->excludes(vhost);
  ethdev->excludes(subport);
  vhost->excludes(subport);
  c.port_bind->add_option("--vhost-mode", a.vhost_mode, "client (default) or server")
      ->needs(vhost)
      ->check(CLI::IsMember({"client", "server"}));
  // Exactly one device: CLI11 2.1 has no "one of these is required" for options.
  c.port_bind->callback([ethdev, vhost, subport] {
    if (ethdev->count() == 0 && vhost->count() == 0 && subport->count() == 0) {
      throw CLI::RequiredError("--ethdev, --vhost or --subport-of");
    }
  });
  add_port_security_options(c.port_bind, a, /*update=*/false);
  c.port_update =
      port->add_subcommand("update", "Change a bound port's fixed IPs, port security and QoS (live)");
  c.port_update->add_option("UUID", a.id, "Port id")->required();
  c.port_update->add_option("--ip", a.ips, "Fixed IP address: replaces them all (repeatable)")
      ->allow_extra_args(false);
  add_port_security_options(c.port_update, a, /*update=*/true);
  c.port_update->callback([&a] {
    if (a.ips.empty() && a.groups.empty() && a.pairs.empty() && !a.no_groups && !a.no_pairs &&
        !a.psec_on && !a.psec_off && a.bw_limits.empty() && a.pps_limits.empty() &&
        !a.dscp_mark && !a.no_qos)
      throw CLI::ValidationError(
          "port update",
          "nothing to update (give --ip, --security-group, --no-security-groups, "
          "--allowed-address-pair, --no-allowed-address-pairs, --port-security, "
          "--no-port-security, --bandwidth-limit, --packet-rate-limit, --dscp-mark or --no-qos)");
  });
  c.port_unbind = port->add_subcommand("unbind", "Unbind a port");
  c.port_unbind->add_option("UUID", a.id, "Port id")->required();
  c.port_list = port->add_subcommand("list", "List ports");
  c.port_show = port->add_subcommand("show", "Show one port");
  c.port_show->add_option("UUID", a.id, "Port id")->required();
  c.port_capture = port->add_subcommand(
      "capture", "A vhost port's stand-in ethdev for dpdk-dumpcap -i, on or off");
  c.port_capture->add_option("UUID", a.id, "Port id")->required();
  CLI::Option* on = c.port_capture->add_flag("--on", a.capture_on, "Make the stand-in");
  c.port_capture->add_flag("--off", a.capture_off, "Remove it")->excludes(on);
  c.port_capture->callback([&a] {
    if (!a.capture_on && !a.capture_off)
      throw CLI::RequiredError("port capture: --on or --off");
  });
}

void add_group_commands(CLI::App& app, Args& a, Commands& c) {
  CLI::App* sg = app.add_subcommand("security-group", "Security groups and their rules");
  sg->require_subcommand(1);
  c.sg_create = sg->add_subcommand("create", "Create a security group (no rules)");
  c.sg_create->add_option("ID", a.id, "Group id (UUID or name)")->required();
  c.sg_create->add_option("--name", a.name, "Display name");
  c.sg_delete = sg->add_subcommand("delete", "Delete a group no port or rule uses");
  c.sg_delete->add_option("ID", a.id, "Group id")->required();
  c.sg_list = sg->add_subcommand("list", "List security groups");
  c.sg_show = sg->add_subcommand("show", "Show a group and its rules");
  c.sg_show->add_option("ID", a.id, "Group id")->required();

  CLI::App* rule = sg->add_subcommand("rule", "Rules: create, delete");
  rule->require_subcommand(1);
  c.rule_create = rule->add_subcommand("create", "Add an allow rule to a group");
  c.rule_create->add_option("GROUP_ID", a.id, "Group id")->required();
  c.rule_create->add_option("--direction", a.direction, "ingress or egress (the VM's view)")
      ->required()
      ->check(CLI::IsMember({"ingress", "egress"}));
  c.rule_create->add_option("--ethertype", a.sg_ethertype, "IPv4 (default) or IPv6");
  c.rule_create->add_option("--protocol", a.protocol,
                            "tcp, udp, icmp, ipv6-icmp, ... or a number (default: any)");
  c.rule_create->add_option("--port-range-min", a.port_min, "First port, or ICMP type");
  c.rule_create->add_option("--port-range-max", a.port_max, "Last port, or ICMP code");
  CLI::Option* prefix =
      c.rule_create->add_option("--remote-ip-prefix", a.remote_prefix, "Remote CIDR");
  CLI::Option* group = c.rule_create->add_option("--remote-group-id", a.remote_group,
                                                 "Remote: the member ports of this group");
  prefix->excludes(group);
  c.rule_create->add_option("--id", a.rule_id, "Rule id (default: a new UUID)");
  c.rule_delete = rule->add_subcommand("delete", "Delete a rule");
  c.rule_delete->add_option("RULE_ID", a.id, "Rule id")->required();
}

void add_tunnel_commands(CLI::App& app, Args& a, Commands& c) {
  CLI::App* tun = app.add_subcommand("tunnel", "VXLAN: remote MACs, flood lists, VTEPs");
  tun->require_subcommand(1);
  CLI::App* fdb = tun->add_subcommand("fdb", "Remote MACs behind remote VTEPs: add, delete");
  fdb->require_subcommand(1);
  c.fdb_add = fdb->add_subcommand("add", "Put a remote MAC behind a remote VTEP");
  c.fdb_add->add_option("NETWORK", a.network, "vxlan network id")->required();
  c.fdb_add->add_option("MAC", a.mac, "Remote MAC address")->required();
  c.fdb_add->add_option("VTEP_IP", a.vtep, "The remote VTEP's IPv4 address")->required();
  c.fdb_add->add_option("--ip", a.port_ip,
                        "The remote port's IPv4 address: the ARP responder answers for it");
  c.fdb_delete = fdb->add_subcommand("delete", "Remove a remote MAC");
  c.fdb_delete->add_option("NETWORK", a.network, "vxlan network id")->required();
  c.fdb_delete->add_option("MAC", a.mac, "Remote MAC address")->required();
  CLI::App* flood = tun->add_subcommand("flood", "The VTEPs flooded frames go to");
  flood->require_subcommand(1);
  c.flood_set = flood->add_subcommand("set", "Replace the flood list (none given: clear it)");
  c.flood_set->add_option("NETWORK", a.network, "vxlan network id")->required();
  c.flood_set->add_option("VTEP_IP", a.vteps, "Remote VTEP IPv4 addresses");
  c.tunnel_show = tun->add_subcommand("show", "This host's VTEP, remote VTEPs, tunnel state");
  c.tunnel_show->add_option("NETWORK", a.network, "Only this vxlan network");
}

// The request of a tunnel command; false when none was given.
bool build_tunnel_request(const Args& a, const Commands& c, Invocation& inv) {
  json& p = inv.params;
  if (c.fdb_add->parsed()) {
    inv.method = "tunnel.fdb.add";
    json e = {{"mac", a.mac}, {"vtep", a.vtep}};
    if (a.port_ip) e["ip"] = *a.port_ip;
    p = {{"network", a.network}, {"entries", json::array({e})}};
  } else if (c.fdb_delete->parsed()) {
    inv.method = "tunnel.fdb.delete";
    p = {{"network", a.network}, {"entries", {{{"mac", a.mac}}}}};
  } else if (c.flood_set->parsed()) {
    inv.method = "tunnel.flood.set";
    p = {{"network", a.network}, {"vteps", a.vteps}};
  } else if (c.tunnel_show->parsed()) {
    inv.method = "tunnel.show";
    inv.view = View::kTunnel;
    if (!a.network.empty()) p = {{"network", a.network}};
  } else {
    return false;
  }
  return true;
}

// A protocol number stays a number: the switch takes "tcp" or 6.
json number_or_string(const std::string& s) {
  char* end = nullptr;
  const long n = std::strtol(s.c_str(), &end, 10);
  return (!s.empty() && *end == '\0') ? json(n) : json(s);
}

json rule_params(const Args& a) {
  json p = {{"security_group_id", a.id}, {"direction", a.direction.value_or("")}};
  auto put = [&p](const char* k, const auto& v) {
    if (v) p[k] = *v;
  };
  put("id", a.rule_id);
  put("ethertype", a.sg_ethertype);
  if (a.protocol) p["protocol"] = number_or_string(*a.protocol);
  put("port_range_min", a.port_min);
  put("port_range_max", a.port_max);
  put("remote_ip_prefix", a.remote_prefix);
  put("remote_group_id", a.remote_group);
  return p;
}

// The request of a security-group command; false when none was given.
bool build_group_request(const Args& a, const Commands& c, Invocation& inv) {
  json& p = inv.params;
  if (c.sg_create->parsed()) {
    inv.method = "security_group.create";
    inv.view = View::kGroupRow;
    p = {{"id", a.id}};
    if (a.name) p["name"] = *a.name;
  } else if (c.sg_delete->parsed()) {
    inv.method = "security_group.delete";
    p = {{"id", a.id}};
  } else if (c.sg_list->parsed()) {
    inv.method = "security_group.list";
    inv.view = View::kGroups;
  } else if (c.sg_show->parsed()) {
    inv.method = "security_group.show";
    inv.view = View::kGroupDetail;
    p = {{"id", a.id}};
  } else if (c.rule_create->parsed()) {
    inv.method = "security_group_rule.create";
    inv.view = View::kRuleRow;
    p = rule_params(a);
  } else if (c.rule_delete->parsed()) {
    inv.method = "security_group_rule.delete";
    p = {{"id", a.id}};
  } else {
    return false;
  }
  return true;
}

// CLI11's PositiveNumber names DBL_MAX in its message.
std::string positive_seconds(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || !(v > 0) || v > 86400) {
    return "SECONDS must be a number above 0, at most 86400: " + s;
  }
  return "";
}

void add_other_commands(CLI::App& app, Args& a, Commands& c) {
  c.show = app.add_subcommand("show", "The whole switch");
  c.events = app.add_subcommand(
      "events", "Follow the event stream (port-up, vif-plugged, port-down, port-unbound)");
  c.stats = app.add_subcommand("stats", "Port, worker and drop counters");
  c.stats->add_option("-w,--watch", a.watch, "Repeat every SECONDS until interrupted")
      ->check(positive_seconds);
  c.log_level = app.add_subcommand(
      "log-level", "Print straitd's log level (and DPDK's), or change it at run time");
  c.log_level->add_option("LEVEL", a.log_level, "debug, info, warning or error")
      ->check(CLI::IsMember({"debug", "info", "warning", "error"}));
  c.call = app.add_subcommand("call", "Send a raw request and print the reply's result");
  c.call->add_option("METHOD", a.method, "API method, e.g. network.list")->required();
  c.call->add_option("JSON-PARAMS", a.raw_params, "Request params, a JSON object");
}

void add_inspect_commands(CLI::App& app, Args& a, Commands& c) {
  c.trace = app.add_subcommand(
      "trace", "Explain what the switch would do with a frame from PORT (nothing is sent)");
  c.trace->add_option("PORT", a.id, "Port UUID, or physnet:NAME")->required();
  CLI::Option* frame = c.trace->add_option("--frame", a.frame, "The whole frame, in hex");
  std::vector<CLI::Option*> fields = {
      c.trace->add_option("--dst", a.dst, "Destination MAC (default ff:ff:ff:ff:ff:ff)"),
      c.trace->add_option("--src", a.src, "Source MAC (default: the VM port's own)"),
      c.trace->add_option("--vlan", a.vlan, "802.1Q VLAN id: the frame is tagged"),
      c.trace->add_option("--pcp", a.pcp, "802.1Q priority"),
      c.trace->add_option("--ethertype", a.ethertype, "e.g. 0x0806 (default 0x0800, IPv4)"),
      c.trace->add_option("--ip-src", a.ip_src, "IPv4 source (ARP: sender address)"),
      c.trace->add_option("--ip-dst", a.ip_dst, "IPv4 destination (ARP: target address)"),
      c.trace->add_option("--proto", a.proto, "tcp, udp (default), icmp or a number"),
      c.trace->add_option("--sport", a.sport, "TCP/UDP source port"),
      c.trace->add_option("--dport", a.dport, "TCP/UDP destination port"),
      c.trace->add_option("--length", a.length, "Frame length in bytes (default: 60)")};
  for (CLI::Option* f : fields) frame->excludes(f);
  CLI::App* cache = app.add_subcommand("cache", "Workers' flow caches");
  cache->require_subcommand(1);
  c.cache_dump = cache->add_subcommand("dump", "The live flow-cache entries of the workers");
  c.cache_dump->add_option("-w,--worker", a.worker, "Only this worker (default: all)");
  CLI::App* workers = app.add_subcommand("workers", "Poll-mode workers");
  workers->require_subcommand(1);
  c.rebalance = workers->add_subcommand(
      "rebalance", "Move rx queues between workers by the cycles measured on them");
  c.rebalance->add_flag("--dry-run", a.dry_run, "Only print the moves it would make");
}

// trace's params: the frame as hex, or the header fields given.
json trace_params(const Args& a) {
  json p = {{"port", a.id}};
  if (a.frame) {
    p["frame"] = *a.frame;
    return p;
  }
  json f = json::object();
  auto put = [&f](const char* k, const auto& v) {
    if (v) f[k] = *v;
  };
  put("dst", a.dst);
  put("src", a.src);
  put("vlan", a.vlan);
  put("pcp", a.pcp);
  put("ethertype", a.ethertype);
  put("ip_src", a.ip_src);
  put("ip_dst", a.ip_dst);
  if (a.proto) f["proto"] = number_or_string(*a.proto);
  put("sport", a.sport);
  put("dport", a.dport);
  put("length", a.length);
  p["frame"] = f;
  return p;
}

// The request for whichever command was given. Throws CLI::ValidationError
// for a bad JSON-PARAMS, reported like any other usage error.
void build_request(const Args& a, const Commands& c, Invocation& inv) {
  json& p = inv.params;
  if (c.net_create->parsed()) {
    inv.method = "network.create";
    inv.view = View::kNetworkRow;
    p = {{"id", a.id}, {"type", a.type}};
    if (a.physnet) p["physnet"] = *a.physnet;
    if (a.seg_id) p["segmentation_id"] = *a.seg_id;
    if (a.mtu) p["mtu"] = *a.mtu;
    if (a.no_arp_responder) p["arp_responder"] = false;
  } else if (c.net_delete->parsed()) {
    inv.method = "network.delete";
    p = {{"id", a.id}};
  } else if (c.net_list->parsed()) {
    inv.method = "network.list";
    inv.view = View::kNetworks;
  } else if (c.port_bind->parsed()) {
    inv.method = "port.bind";
    inv.view = View::kPortRow;
    p = {{"id", a.id}, {"network", a.network}, {"mac", a.mac}};
    if (!a.ips.empty()) p["fixed_ips"] = a.ips;
    if (a.subport_of) {
      p["attach"] = {{"type", "subport"}, {"parent", *a.subport_of}};
      if (a.seg_id) p["attach"]["segmentation_id"] = *a.seg_id;
    } else if (a.vhost) {
      p["attach"] = {{"type", "vhost"}, {"path", *a.vhost}};
      if (a.vhost_mode) p["attach"]["mode"] = *a.vhost_mode;
    } else {
      p["attach"] = {{"type", "ethdev"}, {"devargs", a.ethdev.value_or("")}};
    }
    put_port_security(a, p);
    put_qos(a, p);
  } else if (c.port_update->parsed()) {
    inv.method = "port.update";
    inv.view = View::kPortDetail;
    p = {{"id", a.id}};
    if (!a.ips.empty()) p["fixed_ips"] = a.ips;
    put_port_security(a, p);
    put_qos(a, p);
  } else if (build_group_request(a, c, inv) || build_tunnel_request(a, c, inv)) {
    return;
  } else if (c.port_unbind->parsed()) {
    inv.method = "port.unbind";
    p = {{"id", a.id}};
  } else if (c.port_list->parsed()) {
    inv.method = "port.list";
    inv.view = View::kPorts;
  } else if (c.port_capture->parsed()) {
    inv.method = "port.capture";
    inv.view = View::kRaw;
    p = {{"id", a.id}, {"enabled", a.capture_on}};
  } else if (c.port_show->parsed()) {
    inv.method = "port.show";
    inv.view = View::kPortDetail;
    p = {{"id", a.id}};
  } else if (c.show->parsed()) {
    inv.method = "show";
    inv.view = View::kShow;
  } else if (c.stats->parsed()) {
    inv.method = "stats";
    inv.view = View::kStats;
    inv.watch_seconds = a.watch;
  } else if (c.events->parsed()) {
    inv.method = "events.subscribe";
    inv.view = View::kEvents;
    inv.timeout_seconds = 0;  // events come when they come
  } else if (c.log_level && c.log_level->parsed()) {
    inv.method = "log.level";
    inv.view = View::kLogLevel;
    if (a.log_level) p = {{"level", *a.log_level}};
  } else if (c.trace && c.trace->parsed()) {
    inv.method = "trace";
    inv.view = View::kTrace;
    p = trace_params(a);
  } else if (c.rebalance && c.rebalance->parsed()) {
    inv.method = "workers.rebalance";
    inv.view = View::kRaw;
    p = {{"dry_run", a.dry_run}};
  } else if (c.cache_dump && c.cache_dump->parsed()) {
    inv.method = "cache.dump";
    inv.view = View::kCacheDump;
    if (a.worker) p = {{"worker", *a.worker}};
  } else if (c.call->parsed()) {
    inv.method = a.method;
    inv.view = View::kRaw;
    if (!a.raw_params.empty()) {
      json parsed = json::parse(a.raw_params, nullptr, /*allow_exceptions=*/false);
      if (parsed.is_discarded()) {
        throw CLI::ValidationError("JSON-PARAMS", "not valid JSON: " + a.raw_params);
      }
      if (!parsed.is_object()) {
        throw CLI::ValidationError("JSON-PARAMS", "not a JSON object: " + a.raw_params);
      }
      p = std::move(parsed);
    }
  }
}

}  // namespace

int parse_args(int argc, const char* const* argv, Invocation& inv, std::ostream& out,
               std::ostream& err) {
  CLI::App app{"straitctl: the command-line client of straitd", "straitctl"};
  app.set_version_flag("--version", "straitctl " STRAIT_VERSION);
  app.require_subcommand(1);
  app.fallthrough();  // -s and -o also after the command: `straitctl port list -o json`
  std::string output = "table";
  inv.socket = kDefaultSocket;
  app.add_option("-s,--socket", inv.socket, "straitd's API socket")
      ->envname("STRAIT_SOCKET")
      ->capture_default_str();
  app.add_option("-o,--output", output, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  app.add_option("--timeout", inv.timeout_seconds, "Seconds to wait for a reply (0: forever)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  Args args;
  Commands cmds{};
  add_network_commands(app, args, cmds);
  add_port_commands(app, args, cmds);
  add_group_commands(app, args, cmds);
  add_tunnel_commands(app, args, cmds);
  add_other_commands(app, args, cmds);
  add_inspect_commands(app, args, cmds);
  try {
    app.parse(argc, argv);
    build_request(args, cmds, inv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e, out, err);
    return rc == 0 ? kExitOk : kExitUsage;  // CLI11's own codes are not ours
  }
  inv.json_output = output == "json";
  return -1;
}

}  // namespace strait::straitctl
