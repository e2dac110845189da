#include "control/straitctl/render.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace strait::straitctl {
namespace {

using json = nlohmann::json;

// "12", "-3", "99.5%" or "-" (no value); not "10.0.0.1".
bool is_numeric(const std::string& s) {
  if (s == "-") return true;
  size_t digits = 0, dots = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c >= '0' && c <= '9') {
      ++digits;
    } else if (c == '.') {
      ++dots;
    } else if (!((c == '-' && i == 0) || (c == '%' && i + 1 == s.size()))) {
      return false;
    }
  }
  return digits > 0 && dots <= 1;
}

const json& field(const json& obj, const std::string& key) {
  static const json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

const json& list_field(const json& obj, const std::string& key) {
  static const json kEmpty = json::array();
  const json& v = field(obj, key);
  return v.is_array() ? v : kEmpty;
}

// An unsigned counter, 0 when missing or not a number.
uint64_t counter(const json& obj, const std::string& key) {
  const json& v = field(obj, key);
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() > 0) return static_cast<uint64_t>(v.get<int64_t>());
  return 0;
}

uint64_t sum_drops(const json& obj) {
  uint64_t total = 0;
  const json& drops = field(obj, "drops");
  if (!drops.is_object()) return 0;
  for (const auto& [reason, n] : drops.items()) total += counter(drops, reason);
  return total;
}

std::string percent(uint64_t part, uint64_t whole) {
  if (whole == 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * static_cast<double>(part) / whole);
  return buf;
}

// Packets per second between two samples of the same counter.
std::string rate(uint64_t now, uint64_t before, double seconds) {
  if (seconds <= 0 || now < before) return "-";
  return std::to_string(static_cast<uint64_t>(static_cast<double>(now - before) / seconds + 0.5));
}

const json& by_id(const json& list, const json& id) {
  static const json kNull;
  for (const json& item : list) {
    if (item.is_object() && item.contains("id") && item["id"] == id) return item;
  }
  return kNull;
}

std::string attach_cell(const json& port) {
  const json& a = field(port, "attach");
  if (a.is_object()) {
    // ethdev: its devargs; vhost: "vhost:PATH", "(server)" when we listen.
    if (field(a, "devargs").is_string()) return a["devargs"].get<std::string>();
    // A trunk's subport: "subport:PARENT.VLAN".
    if (field(a, "parent").is_string())
      return "subport:" + a["parent"].get<std::string>() + "." + cell(a, "segmentation_id");
    if (field(a, "path").is_string()) {
      // A vhost port being captured: the name dpdk-dumpcap -i takes.
      const json& cap = field(port, "capture");
      return cell(a, "type") + ":" + a["path"].get<std::string>() +
             (field(a, "mode") == "server" ? "(server)" : "") +
             (cap.is_object() ? " capture:" + cell(cap, "ethdev") : "");
    }
    return cell(a, "type");
  }
  return cell(port, "attach");
}

std::string section(const std::string& title, const std::string& body) {
  return title + "\n" + body + "\n";
}

// The libvirt instance a port is an interface of: "NAME(STATE)", its UUID
// when the domain has no name.
std::string domain_cell(const json& port) {
  const json& d = field(port, "domain");
  if (!d.is_object()) return "-";
  const std::string name = cell(d, "name");
  return (name == "-" ? cell(d, "uuid") : name) + "(" + cell(d, "state") + ")";
}

}  // namespace

std::string Table::str() const {
  std::vector<size_t> width(headers_.size());
  // Right-aligned: columns with a number and nothing but numbers or "-".
  std::vector<bool> numeric(headers_.size(), true), has_number(headers_.size(), false);
  for (size_t c = 0; c < headers_.size(); ++c) width[c] = headers_[c].size();
  for (const auto& row : rows_) {
    for (size_t c = 0; c < headers_.size(); ++c) {
      const std::string& s = c < row.size() ? row[c] : std::string("-");
      width[c] = std::max(width[c], s.size());
      numeric[c] = numeric[c] && is_numeric(s);
      has_number[c] = has_number[c] || s != "-";
    }
  }
  std::ostringstream out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t c = 0; c < headers_.size(); ++c) {
      std::string s = c < cells.size() ? cells[c] : "-";
      std::string pad(width[c] - s.size(), ' ');
      bool last = c + 1 == headers_.size();
      text += numeric[c] && has_number[c] ? pad + s : (last ? s : s + pad);
      if (!last) text += "  ";
    }
    out << text << "\n";
  };
  line(headers_);
  for (const auto& row : rows_) line(row);
  return out.str();
}

std::string cell(const json& obj, const std::string& key) {
  const json& v = field(obj, key);
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>().empty() ? "-" : v.get<std::string>();
  if (v.is_array()) {
    if (v.empty()) return "-";
    std::string s;
    for (const json& e : v)
      s += (s.empty() ? "" : ",") + (e.is_string() ? e.get<std::string>() : e.dump());
    return s;
  }
  return v.dump();  // numbers, booleans, objects
}

std::string render_networks(const json& networks) {
  Table t({"ID", "TYPE", "PHYSNET", "SEG", "MTU", "LVLAN", "PORTS"});
  for (const json& n : networks.is_array() ? networks : json::array()) {
    t.add({cell(n, "id"), cell(n, "type"), cell(n, "physnet"), cell(n, "segmentation_id"),
           cell(n, "mtu"), cell(n, "local_vlan"), cell(n, "ports")});
  }
  return t.str();
}

// STATE: the switch forwards for the port; LINK: its device's own link (an
// ethdev's carrier, a vhost port's guest driver).
std::string render_ports(const json& ports) {
  Table t({"ID", "NETWORK", "MAC", "IPS", "STATE", "LINK", "LVLAN", "DOMAIN", "ATTACH"});
  for (const json& p : ports.is_array() ? ports : json::array()) {
    t.add({cell(p, "id"), cell(p, "network"), cell(p, "mac"), cell(p, "fixed_ips"),
           cell(p, "state"), cell(p, "link"), cell(p, "local_vlan"), domain_cell(p),
           attach_cell(p)});
  }
  return t.str();
}

namespace {

// "key:  value" lines, the values aligned.
std::string fields(const std::vector<std::pair<std::string, std::string>>& rows) {
  size_t w = 0;
  for (const auto& [k, v] : rows) w = std::max(w, k.size());
  std::string out;
  for (const auto& [k, v] : rows) out += k + ":" + std::string(w - k.size() + 2, ' ') + v + "\n";
  return out;
}

// "10.0.0.5 (02:00:00:00:00:01)", comma-separated; "-" for none.
std::string pairs_cell(const json& port) {
  std::string s;
  for (const json& p : list_field(port, "allowed_address_pairs")) {
    s += (s.empty() ? "" : ", ") + cell(p, "ip_address");
    if (field(p, "mac_address").is_string()) s += " (" + cell(p, "mac_address") + ")";
  }
  return s.empty() ? "-" : s;
}

// An ethdev's queues: "2 rx, 2 tx"; "-" for other ports.
std::string queues_cell(const json& port) {
  if (!field(port, "rx_queues").is_number()) return "-";
  return cell(port, "rx_queues") + " rx, " + cell(port, "tx_queues") + " tx";
}

std::string vhost_cell(const json& port) {
  const json& v = field(port, "vhost");
  if (!v.is_object()) return "-";
  if (field(v, "attached") == false) return "detached (its instance's interface is gone)";
  if (!field(v, "vid").is_number_integer() || v["vid"].get<int64_t>() < 0)
    return "no device (no guest driver)";
  return "device " + cell(v, "vid") + ", " + cell(v, "queues") + " queue pair(s)";
}

// QoS rules: "egress 10000 kbit/s (burst 1000), ingress 50 kpps (burst 0), dscp 26"; "-" for none.
std::string qos_cell(const json& port) {
  const json& rules = field(port, "qos");
  if (!rules.is_array() || rules.empty()) return "-";
  std::string out;
  for (const json& r : rules) {
    std::string one;
    if (field(r, "type") == "dscp_marking") {
      one = "dscp " + cell(r, "dscp_mark");
    } else if (field(r, "type") == "bandwidth_limit") {
      one = cell(r, "direction") + " " + cell(r, "max_kbps") + " kbit/s (burst " +
            cell(r, "max_burst_kbps") + ")";
    } else {
      one = cell(r, "direction") + " " + cell(r, "max_kpps") + " kpps (burst " +
            cell(r, "max_burst_kpps") + ")";
    }
    out += (out.empty() ? "" : ", ") + one;
  }
  return out;
}

// A trunk's parent: "VLAN:PORT, ..."; "-" for other ports.
std::string subports_cell(const json& port) {
  const json& subs = field(port, "subports");
  if (!subs.is_array() || subs.empty()) return "-";
  std::string out;
  for (const json& s : subs)
    out += (out.empty() ? "" : ", ") + cell(s, "segmentation_id") + ":" + cell(s, "port");
  return out;
}

std::string domain_detail(const json& port) {
  const json& d = field(port, "domain");
  if (!d.is_object()) return "-";
  return cell(d, "name") + " " + cell(d, "uuid") + " " + cell(d, "state");
}

}  // namespace

std::string render_port_detail(const json& port) {
  return fields({{"id", cell(port, "id")},
                 {"network", cell(port, "network")},
                 {"mac", cell(port, "mac")},
                 {"fixed_ips", cell(port, "fixed_ips")},
                 {"attach", attach_cell(port)},
                 {"port_security", cell(port, "port_security_enabled")},
                 {"security_groups", cell(port, "security_groups")},
                 {"address_pairs", pairs_cell(port)},
                 {"qos", qos_cell(port)},
                 {"state", cell(port, "state")},
                 {"link", cell(port, "link")},
                 {"local_vlan", cell(port, "local_vlan")},
                 {"dp_port", cell(port, "dp_port")},
                 {"ethdev", cell(port, "ethdev")},
                 {"queues", queues_cell(port)},
                 {"vhost", vhost_cell(port)},
                 {"domain", domain_detail(port)},
                 {"subports", subports_cell(port)},
                 {"capture", field(port, "capture").is_object()
                                 ? cell(port["capture"], "ethdev")
                                 : std::string("-")}});
}

// ---- security groups -----------------------------------------------------

namespace {

std::string count_cell(const json& obj, const std::string& key) {
  const json& v = field(obj, key);
  return v.is_array() ? std::to_string(v.size()) : "-";
}

// "22", "1000-2000", "type 8 code 0"; "-" for any.
std::string port_range_cell(const json& r) {
  const json &lo = field(r, "port_range_min"), &hi = field(r, "port_range_max");
  if (lo.is_null() && hi.is_null()) return "-";
  const std::string proto = cell(r, "protocol");
  if (proto == "icmp" || proto == "ipv6-icmp" || proto == "icmpv6" || proto == "1" ||
      proto == "58") {
    std::string s = "type " + cell(r, "port_range_min");
    if (!hi.is_null()) s += " code " + cell(r, "port_range_max");
    return s;
  }
  if (lo == hi) return cell(r, "port_range_min");
  return cell(r, "port_range_min") + "-" + cell(r, "port_range_max");
}

std::string remote_cell(const json& r) {
  if (!field(r, "remote_group_id").is_null()) return "group " + cell(r, "remote_group_id");
  return cell(r, "remote_ip_prefix");
}

}  // namespace

std::string render_groups(const json& groups) {
  Table t({"ID", "NAME", "RULES", "PORTS"});
  for (const json& g : groups.is_array() ? groups : json::array())
    t.add({cell(g, "id"), cell(g, "name"), count_cell(g, "rules"), count_cell(g, "ports")});
  return t.str();
}

std::string render_rules(const json& rules) {
  Table t({"ID", "DIRECTION", "ETHERTYPE", "PROTOCOL", "PORT RANGE", "REMOTE"});
  for (const json& r : rules.is_array() ? rules : json::array()) {
    t.add({cell(r, "id"), cell(r, "direction"), cell(r, "ethertype"),
           field(r, "protocol").is_null() ? "any" : cell(r, "protocol"), port_range_cell(r),
           remote_cell(r)});
  }
  return t.str();
}

std::string render_group_detail(const json& group) {
  return fields({{"id", cell(group, "id")},
                 {"name", cell(group, "name")},
                 {"ports", cell(group, "ports")}}) +
         "\nRules\n" + render_rules(list_field(group, "rules"));
}

std::string render_tunnel(const json& tunnel) {
  const json& v = field(tunnel, "vtep");
  if (!v.is_object()) return "no VTEP configured ([vtep] in straitd's config)\n";
  std::string out = fields({{"local_ip", cell(v, "local_ip")},
                            {"physnet", cell(v, "physnet")},
                            {"mac", cell(v, "mac")},
                            {"udp_port", cell(v, "udp_port")},
                            {"ttl", cell(v, "ttl")},
                            {"next_hop", cell(v, "next_hop")},
                            {"learning", cell(v, "learning")}}) +
                    "\n";
  Table remotes({"VTEP", "NEXT_HOP", "RESOLVED", "MAC"});
  for (const json& r : list_field(tunnel, "remote_vteps"))
    remotes.add({cell(r, "ip"), cell(r, "next_hop"), cell(r, "resolved"), cell(r, "mac")});
  out += section("Remote VTEPs", remotes.str());
  Table nets({"NETWORK", "VNI", "LVLAN", "ARP_RESPONDER", "FLOOD"});
  Table fdb({"NETWORK", "MAC", "VTEP", "IP", "LEARNED"});
  for (const json& n : list_field(tunnel, "networks")) {
    nets.add({cell(n, "id"), cell(n, "vni"), cell(n, "local_vlan"), cell(n, "arp_responder"),
              cell(n, "flood")});
    for (const json& e : list_field(n, "fdb"))
      fdb.add({cell(n, "id"), cell(e, "mac"), cell(e, "vtep"), cell(e, "ip"), cell(e, "learned")});
  }
  out += section("Networks", nets.str());
  out += section("Remote MACs", fdb.str());
  out.pop_back();  // no blank line after the last section
  return out;
}

namespace {

// "URI, connected", "URI, not connected (ERROR; next try in N s)" or "disabled".
std::string libvirt_cell(const json& libvirt) {
  if (!libvirt.is_object() || field(libvirt, "enabled") == false) return "disabled";
  std::string s = cell(libvirt, "uri");
  if (field(libvirt, "connected") == true)
    return s + ", connected" + (field(libvirt, "read_only") == true ? " (read-only)" : "");
  s += ", not connected (" + cell(libvirt, "last_error");
  if (const json& t = field(libvirt, "next_retry_s"); t.is_number()) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "; next try in %.1f s", t.get<double>());
    s += buf;
  }
  return s + ")";
}

// "PREFIX as HOST, watching (revision N), P port(s), R refused" or "... not
// reachable (ERROR)": where desired state comes from on an etcd-driven host.
std::string etcd_cell(const json& etcd) {
  std::string s = cell(etcd, "prefix") + " as " + cell(etcd, "host") + ", ";
  if (field(etcd, "watching") == true) {
    s += "watching (revision " + cell(etcd, "revision") + ")";
  } else {
    s += "not reachable (" + cell(etcd, "last_error") + ")";
  }
  const json& in = field(etcd, "intake");
  s += ", " + cell(in, "ports_applied") + " port(s)";
  if (const json& r = field(in, "refused_ports"); r.is_object() && !r.empty())
    s += ", " + std::to_string(r.size()) + " refused (-o json: etcd.intake.refused_ports)";
  return s;
}

}  // namespace

std::string render_show(const json& show) {
  std::string out = "version     " + cell(show, "version") + "\n" + "generation  " +
                    cell(show, "generation") + "\n" + "libvirt     " +
                    libvirt_cell(field(show, "libvirt")) + "\n";
  if (const json& etcd = field(show, "etcd"); etcd.is_object())
    out += "etcd        " + etcd_cell(etcd) + "\n";
  out += "\n";
  Table workers({"WORKER", "LCORE", "RX QUEUES"});
  for (const json& w : list_field(show, "workers")) {
    std::string queues;
    for (const json& q : list_field(w, "rx_queues")) {
      queues += (queues.empty() ? "" : " ") + cell(q, "port") + ":" + cell(q, "queue");
    }
    workers.add({cell(w, "id"), cell(w, "lcore"), queues.empty() ? "-" : queues});
  }
  out += section("Workers", workers.str());
  Table physnets({"NAME", "DEVICE", "DP_PORT", "ETHDEV", "RXQ", "TXQ", "STATE", "LINK"});
  for (const json& p : list_field(show, "physnets")) {
    physnets.add({cell(p, "name"), cell(p, "device"), cell(p, "dp_port"), cell(p, "ethdev"),
                  cell(p, "rx_queues"), cell(p, "tx_queues"), cell(p, "state"), cell(p, "link")});
  }
  out += section("Physnets", physnets.str());
  out += section("Networks", render_networks(list_field(show, "networks")));
  out += section("Ports", render_ports(list_field(show, "ports")));
  out.pop_back();  // no blank line after the last section
  return out;
}

namespace {

// The connection table of security groups: its use and new connections per
// second (straitd's own rate over its last second); nothing without one.
std::string conntrack_section(const json& ct) {
  if (!ct.is_object()) return "";
  Table t({"ENTRIES", "CAPACITY", "USED", "NEW/S", "CREATED", "REFUSED_FULL", "INVALID",
           "EXPIRED"});
  std::string per_s = "-";
  if (const json& r = field(ct, "new_per_s"); r.is_number()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", r.get<double>());
    per_s = buf;
  }
  t.add({cell(ct, "entries"), cell(ct, "capacity"),
         percent(counter(ct, "entries"), counter(ct, "capacity")), per_s, cell(ct, "created"),
         cell(ct, "refused_full"), cell(ct, "invalid"), cell(ct, "expired")});
  return section("Conntrack", t.str());
}

}  // namespace

std::string render_stats(const json& stats, const json& previous, double seconds) {
  const bool rates = previous.is_object() && seconds > 0;
  std::string out = "generation " + cell(stats, "generation") + "\n\n";

  std::vector<std::string> port_cols = {"PORT",       "RX_PACKETS", "RX_BYTES",
                                        "TX_PACKETS", "TX_BYTES",   "DROPS"};
  if (rates) port_cols.insert(port_cols.end(), {"RX_PPS", "TX_PPS"});
  Table ports(port_cols);
  for (const json& p : list_field(stats, "ports")) {
    std::vector<std::string> row = {cell(p, "id"),       cell(p, "rx_packets"),
                                    cell(p, "rx_bytes"), cell(p, "tx_packets"),
                                    cell(p, "tx_bytes"), std::to_string(sum_drops(p))};
    if (rates) {
      const json& before = by_id(list_field(previous, "ports"), field(p, "id"));
      row.push_back(before.is_null()
                        ? "-"
                        : rate(counter(p, "rx_packets"), counter(before, "rx_packets"), seconds));
      row.push_back(before.is_null()
                        ? "-"
                        : rate(counter(p, "tx_packets"), counter(before, "tx_packets"), seconds));
    }
    ports.add(std::move(row));
  }
  out += section("Ports", ports.str());

  std::vector<std::string> worker_cols = {"WORKER",    "LCORE", "PACKETS",
                                          "CACHE_HIT", "BUSY",  "DROPS"};
  if (rates) worker_cols.push_back("PPS");
  Table workers(worker_cols);
  for (const json& w : list_field(stats, "workers")) {
    uint64_t hits = counter(w, "cache_hits"), misses = counter(w, "cache_misses");
    uint64_t busy = counter(w, "busy_cycles"), idle = counter(w, "idle_cycles");
    std::vector<std::string> row = {cell(w, "id"),
                                    cell(w, "lcore"),
                                    cell(w, "packets"),
                                    percent(hits, hits + misses),
                                    percent(busy, busy + idle),
                                    std::to_string(sum_drops(w))};
    if (rates) {
      const json& before = by_id(list_field(previous, "workers"), field(w, "id"));
      row.push_back(before.is_null()
                        ? "-"
                        : rate(counter(w, "packets"), counter(before, "packets"), seconds));
    }
    workers.add(std::move(row));
  }
  out += section("Workers", workers.str());
  out += conntrack_section(field(stats, "conntrack"));

  // Most frequent reason first.
  std::vector<std::pair<uint64_t, std::string>> reasons;
  const json& drops = field(stats, "drops");
  if (drops.is_object()) {
    for (const auto& [reason, n] : drops.items())
      reasons.emplace_back(counter(drops, reason), reason);
  }
  std::sort(reasons.begin(), reasons.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  Table drop_table({"DROP REASON", "PACKETS"});
  for (const auto& [n, reason] : reasons) drop_table.add({reason, std::to_string(n)});
  out += section("Drops", drop_table.str());
  out.pop_back();
  return out;
}

// ---- trace, cache dump ---------------------------------------------------

namespace {

// A datapath port reference {"dp_port", "name"}: its name, else "dp N".
std::string port_ref(const json& ref) {
  if (field(ref, "name").is_string()) return ref["name"].get<std::string>();
  return "dp " + cell(ref, "dp_port");
}

// The flow key in a fixed order, as key=value pairs.
std::string key_line(const json& key) {
  static const char* kOrder[] = {"in_port",   "dl_src",   "dl_dst", "dl_type", "arp_op",
                                 "arp_spa",   "arp_tpa",  "nw_src", "nw_dst",  "nw_proto",
                                 "nw_ttl",    "nw_frag",  "tp_src", "tp_dst",  "icmp_type",
                                 "icmp_code", "tcp_flags"};
  std::string s;
  for (const char* k : kOrder) {
    if (!field(key, k).is_null()) s += (s.empty() ? "" : " ") + std::string(k) + "=" + cell(key, k);
    if (std::string(k) == "dl_type" && field(key, "vlan").is_object()) {
      const json& v = key["vlan"];
      s += " vlan=" + cell(v, "vid") + " pcp=" + cell(v, "pcp") + " tpid=" + cell(v, "tpid");
      if (counter(key, "n_tags") > 1) s += " n_tags=" + cell(key, "n_tags");
    }
  }
  return s;
}

std::string vlan_cell(const json& obj) {
  return field(obj, "vlan").is_null() ? "untagged" : cell(obj, "vlan");
}

}  // namespace

std::string render_trace(const json& trace) {
  std::string out = "trace: " + cell(field(trace, "frame"), "length") + "-byte frame from " +
                    port_ref(field(trace, "in_port")) + ", snapshot generation " +
                    cell(trace, "generation") + " (nothing sent)\n\n";
  size_t w = 0;
  for (const json& s : list_field(trace, "steps")) w = std::max(w, cell(s, "step").size());
  int n = 1;
  for (const json& s : list_field(trace, "steps")) {
    const std::string name = cell(s, "step");
    const std::string indent(4 + w + 2, ' ');
    out += (n < 10 ? " " : "") + std::to_string(n) + ". " + name +
           std::string(w - name.size() + 2, ' ') + cell(s, "detail");
    if (field(s, "port").is_object() && name != "in_port" && name != "learn")
      out += " -> " + port_ref(s["port"]);
    else if (field(s, "port").is_object() && name == "learn")
      out += " (behind " + port_ref(s["port"]) + ")";
    out += "\n";
    if (field(s, "key").is_object()) out += indent + key_line(s["key"]) + "\n";
    for (const json& t : list_field(s, "targets"))
      out += indent + "-> " + port_ref(t) + " (" + vlan_cell(t) + ")\n";
    if (!field(s, "drop_reason").is_null())
      out += indent + "DROP: " + cell(s, "drop_reason") + "\n";
    n++;
  }
  out += "\nverdict: " + cell(trace, "verdict");
  if (!field(trace, "drop_reason").is_null())
    out += " (" + cell(trace, "drop_reason") + ": " + cell(trace, "drop_help") + ")";
  if (field(trace, "learn") == true) out += "; source MAC reported for learning";
  out += "\n";
  if (field(trace, "consistent") == false)
    out +=
        "warning: the steps above disagree with the datapath's decision (a bug: please report)\n";
  const json& actions = list_field(trace, "actions");
  if (!actions.empty()) {
    Table t({"OUTPUT", "DP_PORT", "VLAN", "STATE"});
    for (const json& a : actions)
      t.add({port_ref(a), cell(a, "dp_port"), vlan_cell(a),
             field(a, "up") == false ? "down (dropped at tx)" : "up"});
    out += "\n" + t.str();
  }
  return out;
}

std::string render_cache_dump(const json& dump) {
  std::string out;
  for (const json& w : list_field(dump, "workers")) {
    if (!out.empty()) out += "\n";
    out += "worker " + cell(w, "worker") + ": " + cell(w, "live") + " live entries of " +
           cell(w, "capacity") + ", generation " + cell(w, "generation") +
           (field(w, "truncated") == true ? " (list truncated)" : "") + "\n";
    Table t({"IN_PORT", "DL_SRC", "DL_DST", "VLAN", "DL_TYPE", "L3/L4", "SCOPE", "ACTION"});
    for (const json& e : list_field(w, "entries")) {
      const json& k = field(e, "key");
      const json& a = field(e, "action");
      std::string l34 = "-";
      if (field(e, "scope") == "full" && !field(k, "nw_src").is_null()) {
        l34 = cell(k, "nw_src") + ">" + cell(k, "nw_dst") + " proto " + cell(k, "nw_proto");
        if (!field(k, "tp_src").is_null()) l34 += " " + cell(k, "tp_src") + ">" + cell(k, "tp_dst");
      }
      std::string act = cell(a, "kind");
      if (act == "output") act += ":" + port_ref(field(a, "port")) + " " + vlan_cell(a);
      if (act == "flood") act += " lvlan " + cell(a, "local_vlan");
      if (act == "drop") act += ":" + cell(a, "drop_reason");
      if (field(a, "learn") == true) act += ", learn";
      t.add({port_ref(field(e, "in_port")), cell(k, "dl_src"), cell(k, "dl_dst"),
             field(k, "vlan").is_object() ? cell(k["vlan"], "vid") : "-", cell(k, "dl_type"), l34,
             cell(e, "scope"), act});
    }
    out += t.str();
  }
  return out;
}

}  // namespace strait::straitctl
