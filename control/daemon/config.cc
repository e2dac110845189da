#include "control/daemon/config.h"

#include <arpa/inet.h>
#include <sys/un.h>
#include <unistd.h>
#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <sstream>

#include "control/daemon/privileges.h"
#include "control/model/model.h"

namespace strait::ctl {
namespace {

bool is_bare_key(std::string_view k) {
  return !k.empty() && std::all_of(k.begin(), k.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           c == '-';
  });
}

// A key as TOML would write it after `prefix`: physnets."a.b".device.
std::string key_path(std::string_view prefix, std::string_view key) {
  std::string k;
  if (is_bare_key(key)) {
    k = key;
  } else {
    k = "\"";
    for (char c : key) {
      if (c == '"' || c == '\\') k += '\\';
      k += c;
    }
    k += '"';
  }
  return prefix.empty() ? k : std::string(prefix) + "." + k;
}

// What the user wrote, for "expected X, got Y".
std::string describe(const toml::node& n) {
  if (auto s = n.as_string()) return "\"" + s->get() + "\"";
  if (auto i = n.as_integer()) return "integer " + std::to_string(i->get());
  if (auto f = n.as_floating_point()) {
    std::ostringstream o;
    o << f->get();
    return "float " + o.str();
  }
  if (auto b = n.as_boolean()) return b->get() ? "true" : "false";
  if (n.is_table()) return "a table";
  if (n.is_array()) return "an array";
  return "a date/time";
}

// Walks the document; every error carries the origin and the key path.
class Reader {
 public:
  explicit Reader(const std::string& origin) : origin_(origin) {}

  Error error(const std::string& path, const std::string& problem) const {
    return invalid("config " + origin_ + ": " + path + ": " + problem);
  }

  Status known_keys(const toml::table& t, std::string_view prefix,
                    std::initializer_list<std::string_view> known) const {
    for (auto&& [k, v] : t) {
      if (std::find(known.begin(), known.end(), k.str()) != known.end()) continue;
      std::string list;
      for (std::string_view n : known) list += (list.empty() ? "" : ", ") + std::string(n);
      return error(
          key_path(prefix, k.str()),
          std::string(v.is_table() ? "unknown table" : "unknown key") + " (expected " + list + ")");
    }
    return ok();
  }

  Result<std::string> string(const toml::node& n, const std::string& path) const {
    auto s = n.as_string();
    if (!s) return error(path, "expected a string, got " + describe(n));
    if (s->get().empty()) return error(path, "is empty");
    return s->get();
  }

  Result<int64_t> integer(const toml::node& n, const std::string& path, int64_t lo,
                          int64_t hi) const {
    auto i = n.as_integer();
    if (!i) return error(path, "expected an integer, got " + describe(n));
    if (i->get() < lo || i->get() > hi) {
      return error(path, std::to_string(i->get()) + " is outside " + std::to_string(lo) + ".." +
                             std::to_string(hi));
    }
    return i->get();
  }

  Result<bool> boolean(const toml::node& n, const std::string& path) const {
    auto b = n.as_boolean();
    if (!b) return error(path, "expected true or false, got " + describe(n));
    return b->get();
  }

  // A user or group as a name, or as its number (kept as decimal text).
  Result<std::string> name_or_id(const toml::node& n, const std::string& path) const {
    if (!n.is_integer()) return string(n, path);
    auto v = integer(n, path, 0, 4294967294);
    if (!v) return v.error();
    return std::to_string(*v);
  }

  const toml::table* table(const toml::node& n, const std::string& path, Error* err) const {
    if (auto t = n.as_table()) return t;
    *err = error(path, "expected a table, got " + describe(n));
    return nullptr;
  }

 private:
  const std::string& origin_;
};

Status read_top(const Reader& r, const toml::table& doc, Config& c) {
  if (auto s = r.known_keys(doc, "",
                            {"state_dir", "api_socket", "datapath", "physnets", "libvirt", "vhost",
                             "metrics", "conntrack", "vtep", "offload", "privileges",
                             "etcd"});
      !s) {
    return s;
  }
  if (auto n = doc.get("state_dir")) {
    auto s = r.string(*n, "state_dir");
    if (!s) return s.error();
    c.state_dir = *s;
  }
  if (auto n = doc.get("api_socket")) {
    auto s = r.string(*n, "api_socket");
    if (!s) return s.error();
    // A Unix socket path must fit sockaddr_un.sun_path with its terminator.
    if (s->size() >= sizeof(sockaddr_un::sun_path)) {
      return r.error("api_socket", "path is longer than " +
                                       std::to_string(sizeof(sockaddr_un::sun_path) - 1) +
                                       " bytes, the limit of a Unix socket path");
    }
    c.api_socket = *s;
  }
  return ok();
}

Status read_workers(const Reader& r, const toml::node& n, Config& c) {
  auto arr = n.as_array();
  if (!arr)
    return r.error("datapath.workers", "expected an array of lcore ids, got " + describe(n));
  if (arr->empty()) return r.error("datapath.workers", "is empty (at least one worker lcore)");
  std::vector<unsigned> lcores;
  for (size_t i = 0; i < arr->size(); ++i) {
    std::string path = "datapath.workers[" + std::to_string(i) + "]";
    auto v = r.integer(*arr->get(i), path, 0, 127);
    if (!v) return v.error();
    if (std::find(lcores.begin(), lcores.end(), *v) != lcores.end()) {
      return r.error(path, "lcore " + std::to_string(*v) + " is listed twice");
    }
    lcores.push_back(static_cast<unsigned>(*v));
  }
  c.worker_lcores = std::move(lcores);
  return ok();
}

Status read_datapath(const Reader& r, const toml::node& node, Config& c) {
  Error err;
  const toml::table* t = r.table(node, "datapath", &err);
  if (!t) return err;
  if (auto s = r.known_keys(*t, "datapath",
                            {"workers", "flow_cache_entries", "idle_sleep_us", "mac_aging_s",
                             "rebalance_interval_s", "rebalance_improvement_pct"});
      !s) {
    return s;
  }
  if (auto n = t->get("workers")) {
    if (auto s = read_workers(r, *n, c); !s) return s;
  }
  if (auto n = t->get("flow_cache_entries")) {
    auto v = r.integer(*n, "datapath.flow_cache_entries", 1024, 16777216);
    if (!v) return v.error();
    c.flow_cache_entries = static_cast<uint32_t>(*v);
  }
  if (auto n = t->get("idle_sleep_us")) {
    auto v = r.integer(*n, "datapath.idle_sleep_us", 0, 100000);
    if (!v) return v.error();
    c.idle_sleep_us = static_cast<uint32_t>(*v);
  }
  if (auto n = t->get("mac_aging_s")) {
    auto v = r.integer(*n, "datapath.mac_aging_s", 1, 86400);
    if (!v) return v.error();
    c.mac_aging_s = static_cast<uint32_t>(*v);
  }
  if (auto n = t->get("rebalance_interval_s")) {
    auto v = r.integer(*n, "datapath.rebalance_interval_s", 0, 86400);
    if (!v) return v.error();
    c.rebalance_interval_s = static_cast<uint32_t>(*v);
  }
  if (auto n = t->get("rebalance_improvement_pct")) {
    auto v = r.integer(*n, "datapath.rebalance_improvement_pct", 1, 100);
    if (!v) return v.error();
    c.rebalance_improvement_pct = static_cast<uint32_t>(*v);
  }
  return ok();
}

bool is_physnet_name(std::string_view k) {
  return !k.empty() && k.size() <= 64 && std::all_of(k.begin(), k.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           c == '.' || c == '-';
  });
}

// ["MIN:MAX", ...], neutron's network_vlan_ranges spelling without the physnet.
Result<std::vector<VlanRange>> read_vlan_ranges(const Reader& r, const toml::node& n,
                                                const std::string& path) {
  const toml::array* arr = n.as_array();
  if (!arr) return r.error(path, "expected an array of \"MIN:MAX\" strings, got " + describe(n));
  std::vector<VlanRange> out;
  for (size_t i = 0; i < arr->size(); ++i) {
    const std::string at = path + "[" + std::to_string(i) + "]";
    auto s = r.string(*arr->get(i), at);
    if (!s) return s.error();
    unsigned lo = 0, hi = 0;
    const char* end = s->data() + s->size();
    auto a = std::from_chars(s->data(), end, lo);
    auto b = a.ec != std::errc::invalid_argument && a.ptr != end && *a.ptr == ':'
                 ? std::from_chars(a.ptr + 1, end, hi)
                 : std::from_chars_result{end, std::errc::invalid_argument};
    if (a.ec == std::errc::invalid_argument || b.ec == std::errc::invalid_argument || b.ptr != end)
      return r.error(at, "\"" + *s + "\" is not MIN:MAX (e.g. \"100:199\")");
    if (a.ec != std::errc() || b.ec != std::errc()) lo = hi = 0;  // out of range: refused below
    if (lo < 1 || hi > 4094 || lo > hi)
      return r.error(at, "\"" + *s + "\": VLAN ids are 1..4094 and MIN <= MAX");
    out.push_back({static_cast<uint16_t>(lo), static_cast<uint16_t>(hi)});
  }
  return out;
}

Status read_physnets(const Reader& r, const toml::node& node, Config& c) {
  Error err;
  const toml::table* t = r.table(node, "physnets", &err);
  if (!t) return err;
  std::map<std::string, std::string> by_ethdev;  // devargs_name -> key path of its physnet
  for (auto&& [k, v] : *t) {
    const std::string name(k.str());
    const std::string path = key_path("physnets", name);
    if (!is_physnet_name(name)) {
      return r.error(path, "is not a physnet name ([A-Za-z0-9_.-]{1,64})");
    }
    const toml::table* pt = r.table(v, path, &err);
    if (!pt) return err;
    if (auto s = r.known_keys(*pt, path, {"device", "vlan_ranges"}); !s) return s;
    if (auto vr = pt->get("vlan_ranges")) {
      auto ranges = read_vlan_ranges(r, *vr, path + ".vlan_ranges");
      if (!ranges) return ranges.error();
      c.vlan_ranges[name] = std::move(*ranges);
    }
    auto dev_node = pt->get("device");
    if (!dev_node) return r.error(path + ".device", "missing (devargs or PCI address of the NIC)");
    auto dev = r.string(*dev_node, path + ".device");
    if (!dev) return dev.error();
    if (std::any_of(dev->begin(), dev->end(),
                    [](char ch) { return static_cast<unsigned char>(ch) <= 0x20 || ch == 0x7f; })) {
      return r.error(path + ".device", "\"" + *dev + "\" contains whitespace");
    }
    const std::string ethdev = devargs_name(*dev);
    if (ethdev.empty()) return r.error(path + ".device", "\"" + *dev + "\" has no device name");
    auto [it, fresh] = by_ethdev.emplace(ethdev, path);
    if (!fresh) {
      return r.error(path + ".device",
                     "ethdev " + ethdev + " is already the device of " + it->second);
    }
    c.physnets.emplace(name, *dev);
  }
  return ok();
}

Status read_libvirt(const Reader& r, const toml::node& node, Config& c) {
  Error err;
  const toml::table* t = r.table(node, "libvirt", &err);
  if (!t) return err;
  if (auto s = r.known_keys(*t, "libvirt", {"enabled", "uri"}); !s) return s;
  if (auto n = t->get("enabled")) {
    auto v = r.boolean(*n, "libvirt.enabled");
    if (!v) return v.error();
    c.libvirt_enabled = *v;
  }
  if (auto n = t->get("uri")) {
    auto s = r.string(*n, "libvirt.uri");
    if (!s) return s.error();
    if (s->find("://") == std::string::npos)
      return r.error("libvirt.uri", "\"" + *s + "\" is not a libvirt URI (driver:///path)");
    c.libvirt_uri = *s;
  }
  return ok();
}

Status read_vhost(const Reader& r, const toml::node& node, Config& c) {
  Error err;
  const toml::table* t = r.table(node, "vhost", &err);
  if (!t) return err;
  if (auto s =
          r.known_keys(*t, "vhost", {"socket_dir", "socket_owner", "socket_group", "socket_mode"});
      !s) {
    return s;
  }
  if (auto n = t->get("socket_dir")) {
    auto s = r.string(*n, "vhost.socket_dir");
    if (!s) return s.error();
    if ((*s)[0] != '/')
      return r.error("vhost.socket_dir", "\"" + *s + "\" is not an absolute path");
    c.vhost_socket_dir = *s;
  }
  for (auto [key, dst] : {std::pair{"socket_owner", &c.vhost_socket_owner},
                          std::pair{"socket_group", &c.vhost_socket_group}}) {
    auto n = t->get(key);
    if (!n) continue;
    auto v = r.name_or_id(*n, std::string("vhost.") + key);
    if (!v) return v.error();
    *dst = *v;
  }
  if (auto n = t->get("socket_mode")) {
    // "0660" (octal text, as chmod takes it) or an integer such as 0o660.
    int64_t mode = -1;
    if (auto s = n->as_string()) {
      const std::string& v = s->get();
      if (!v.empty() && v.size() <= 4 && v.find_first_not_of("01234567") == std::string::npos)
        mode = std::stol(v, nullptr, 8);
    } else if (auto i = n->as_integer()) {
      mode = i->get();
    }
    if (mode < 0 || mode > 0777)
      return r.error("vhost.socket_mode", "expected permission bits such as \"0660\" (0..0777)");
    if ((mode & 0600) != 0600)
      return r.error("vhost.socket_mode", "must give the owner read and write (0600)");
    c.vhost_socket_mode = static_cast<uint32_t>(mode);
  }
  return ok();
}

// "ADDRESS:PORT" with a numeric address: "127.0.0.1:9464", "[::1]:9464".
// No host names: the endpoint must not depend on a resolver at start-up.
Status read_listen(const Reader& r, const std::string& v, Config& c) {
  const std::string path = "metrics.listen";
  const std::string form =
      "\"" + v + "\" is not ADDRESS:PORT (such as \"127.0.0.1:9464\" or \"[::1]:9464\")";
  std::string host, port;
  if (!v.empty() && v[0] == '[') {
    const size_t close = v.find(']');
    if (close == std::string::npos || close + 1 >= v.size() || v[close + 1] != ':')
      return r.error(path, form);
    host = v.substr(1, close - 1);
    port = v.substr(close + 2);
  } else {
    const size_t colon = v.rfind(':');
    if (colon == std::string::npos) return r.error(path, form);
    host = v.substr(0, colon);
    port = v.substr(colon + 1);
    if (host.find(':') != std::string::npos)
      return r.error(path, "\"" + v + "\": an IPv6 address goes in brackets (\"[::1]:9464\")");
  }
  in6_addr scratch;
  const int family = v[0] == '[' ? AF_INET6 : AF_INET;
  if (host.empty() || inet_pton(family, host.c_str(), &scratch) != 1) {
    return r.error(path, "\"" + host + "\" is not a numeric " +
                             (family == AF_INET ? "IPv4" : "IPv6") + " address");
  }
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) < 1 ||
      std::stoi(port) > 65535) {
    return r.error(path, "port \"" + port + "\" is not a number 1..65535");
  }
  c.metrics_address = host;
  c.metrics_port = static_cast<uint16_t>(std::stoi(port));
  return ok();
}

Status read_metrics(const Reader& r, const toml::node& node, Config& c) {
  Error err;
  const toml::table* t = r.table(node, "metrics", &err);
  if (!t) return err;
  if (auto s = r.known_keys(*t, "metrics", {"enabled", "listen"}); !s) return s;
  if (auto n = t->get("enabled")) {
    auto v = r.boolean(*n, "metrics.enabled");
    if (!v) return v.error();
    c.metrics_enabled = *v;
  }
  if (auto n = t->get("listen")) {
    auto s = r.string(*n, "metrics.listen");
    if (!s) return s.error();
    if (auto st = read_listen(r, *s, c); !st) return st;
  }
  return ok();
}

Status read_conntrack(const Reader& r, const toml::node& node, Config& c) {
  Error err;
  const toml::table* t = r.table(node, "conntrack", &err);
  if (!t) return err;
  if (auto s = r.known_keys(*t, "conntrack", {"capacity", "tcp_loose"}); !s) return s;
  if (auto n = t->get("capacity")) {
    auto v = r.integer(*n, "conntrack.capacity", 1024, 16777216);
    if (!v) return v.error();
    c.ct_capacity = static_cast<uint32_t>(*v);
  }
  if (auto n = t->get("tcp_loose")) {
    auto v = r.boolean(*n, "conntrack.tcp_loose");
    if (!v) return v.error();
    c.ct_tcp_loose = *v;
  }
  return ok();
}

Status read_offload(const Reader& r, const toml::node& node, Config& c) {
  Error err;
  const toml::table* t = r.table(node, "offload", &err);
  if (!t) return err;
  if (auto s = r.known_keys(*t, "offload", {"rte_flow"}); !s) return s;
  if (auto n = t->get("rte_flow")) {
    auto v = r.boolean(*n, "offload.rte_flow");
    if (!v) return v.error();
    c.offload_rte_flow = *v;
  }
  return ok();
}

Status read_etcd(const Reader& r, const toml::node& node, Config& c) {
  Error err;
  const toml::table* t = r.table(node, "etcd", &err);
  if (!t) return err;
  if (auto s = r.known_keys(*t, "etcd", {"endpoints", "host", "prefix", "lease_ttl_s"}); !s)
    return s;
  EtcdSettings e;
  const toml::node* en = t->get("endpoints");
  if (!en) return r.error("etcd.endpoints", "required (etcd's client URLs)");
  const toml::array* arr = en->as_array();
  if (!arr || arr->empty())
    return r.error("etcd.endpoints", "expected a non-empty array of URLs, got " + describe(*en));
  for (size_t i = 0; i < arr->size(); ++i) {
    const std::string path = "etcd.endpoints[" + std::to_string(i) + "]";
    auto url = r.string(*arr->get(i), path);
    if (!url) return url.error();
    const bool http = url->rfind("http://", 0) == 0, https = url->rfind("https://", 0) == 0;
    const size_t host_at = http ? 7 : 8;
    if ((!http && !https) || url->size() <= host_at || url->find_first_of(" \t\r\n") != std::string::npos)
      return r.error(path, "\"" + *url + "\" is not an http:// or https:// URL");
    while (url->size() > host_at + 1 && url->back() == '/') url->pop_back();
    e.endpoints.push_back(*url);
  }
  if (auto n = t->get("host")) {
    auto h = r.string(*n, "etcd.host");
    if (!h) return h.error();
    if (h->size() > 255 || h->find_first_of("/ \t\r\n") != std::string::npos)
      return r.error("etcd.host", "\"" + *h + "\" is not a host name (no '/' or spaces, at most 255 bytes)");
    e.host = *h;
  } else {
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) != 0 || !name[0])
      return r.error("etcd.host", "not set, and the system's host name is unknown");
    e.host = name;
  }
  if (auto n = t->get("prefix")) {
    auto p = r.string(*n, "etcd.prefix");
    if (!p) return p.error();
    if (p->front() != '/' || p->size() < 2 || p->back() == '/')
      return r.error("etcd.prefix", "\"" + *p + "\" must start with '/' and not end with one");
    e.prefix = *p;
  }
  if (auto n = t->get("lease_ttl_s")) {
    auto v = r.integer(*n, "etcd.lease_ttl_s", 2, 3600);
    if (!v) return v.error();
    e.lease_ttl_s = static_cast<uint32_t>(*v);
  }
  c.etcd = std::move(e);
  return ok();
}

Result<IpAddr> read_ipv4(const Reader& r, const toml::node& n, const std::string& path) {
  auto s = r.string(n, path);
  if (!s) return s.error();
  auto ip = parse_ip(*s);
  if (!ip || ip->family != 4) return r.error(path, "\"" + *s + "\" is not an IPv4 address");
  return *ip;
}

// A unicast host address: not 0.0.0.0/8, loopback, multicast, reserved or broadcast.
bool is_ipv4_unicast(const IpAddr& ip) {
  const uint8_t a = ip.bytes[0];
  return a != 0 && a != 127 && a < 224;
}

Status read_vtep_addresses(const Reader& r, const toml::table& t, VtepSettings& v) {
  auto local = t.get("local_ip");
  if (!local) return r.error("vtep.local_ip", "missing (the IPv4 address of this host's VTEP)");
  auto ip = read_ipv4(r, *local, "vtep.local_ip");
  if (!ip) return ip.error();
  if (!is_ipv4_unicast(*ip))
    return r.error("vtep.local_ip", ip_to_string(*ip) + " is not a unicast address");
  v.local_ip = *ip;
  if (auto n = t.get("next_hop")) {
    auto hop = read_ipv4(r, *n, "vtep.next_hop");
    if (!hop) return hop.error();
    if (!is_ipv4_unicast(*hop) || *hop == v.local_ip)
      return r.error("vtep.next_hop", ip_to_string(*hop) +
                                          " is not a unicast address other than local_ip");
    v.next_hop = *hop;
  }
  if (auto n = t.get("next_hop_mac")) {
    auto s = r.string(*n, "vtep.next_hop_mac");
    if (!s) return s.error();
    auto mac = parse_mac(*s);
    if (!mac || ((*mac)[0] & 1) || *mac == Mac{})
      return r.error("vtep.next_hop_mac", "\"" + *s + "\" is not a unicast MAC address");
    v.next_hop_mac = *mac;
  }
  return ok();
}

Status read_vtep(const Reader& r, const toml::node& node, Config& c) {
  Error err;
  const toml::table* t = r.table(node, "vtep", &err);
  if (!t) return err;
  if (auto s = r.known_keys(*t, "vtep",
                            {"local_ip", "physnet", "udp_port", "ttl", "next_hop", "next_hop_mac",
                             "learning", "underlay_mtu"});
      !s) {
    return s;
  }
  VtepSettings v;
  if (auto s = read_vtep_addresses(r, *t, v); !s) return s;
  auto pn = t->get("physnet");
  if (!pn) return r.error("vtep.physnet", "missing (the physnet whose NIC carries the underlay)");
  auto name = r.string(*pn, "vtep.physnet");
  if (!name) return name.error();
  if (!c.physnets.count(*name))
    return r.error("vtep.physnet", "\"" + *name + "\" is not in [physnets]");
  v.physnet = *name;
  if (auto n = t->get("udp_port")) {
    auto i = r.integer(*n, "vtep.udp_port", 1, 65535);
    if (!i) return i.error();
    v.udp_port = static_cast<uint16_t>(*i);
  }
  if (auto n = t->get("ttl")) {
    auto i = r.integer(*n, "vtep.ttl", 1, 255);
    if (!i) return i.error();
    v.ttl = static_cast<uint8_t>(*i);
  }
  if (auto n = t->get("learning")) {
    auto b = r.boolean(*n, "vtep.learning");
    if (!b) return b.error();
    v.learning = *b;
  }
  if (auto n = t->get("underlay_mtu")) {
    auto i = r.integer(*n, "vtep.underlay_mtu", 1280, 9216);
    if (!i) return i.error();
    v.underlay_mtu = static_cast<uint16_t>(*i);
  }
  c.vtep = v;
  return ok();
}

// The shape of [privileges] here; the host's user and group databases are
// privileges.cc's business.
Status read_privileges(const Reader& r, const toml::node& node, Config& c) {
  Error err;
  const toml::table* t = r.table(node, "privileges", &err);
  if (!t) return err;
  if (auto s = r.known_keys(*t, "privileges", {"user", "group", "capabilities"}); !s) return s;
  PrivilegeKeys keys;
  auto un = t->get("user");
  if (!un) return r.error("privileges.user", "missing (the user straitd becomes once started)");
  auto user = r.name_or_id(*un, "privileges.user");
  if (!user) return user.error();
  keys.user = *user;
  if (auto gn = t->get("group")) {
    auto g = r.name_or_id(*gn, "privileges.group");
    if (!g) return g.error();
    keys.group = *g;
  }
  if (auto cn = t->get("capabilities")) {
    auto arr = cn->as_array();
    if (!arr)
      return r.error("privileges.capabilities", "expected an array of names, got " + describe(*cn));
    for (size_t i = 0; i < arr->size(); ++i) {
      const std::string path = "privileges.capabilities[" + std::to_string(i) + "]";
      auto name = r.string(*arr->get(i), path);
      if (!name) return name.error();
      keys.capabilities.emplace_back(path, *name);
    }
  }
  auto p = resolve_privileges(keys, c);
  if (auto* bad = std::get_if<KeyProblem>(&p)) return r.error(bad->key, bad->problem);
  c.privileges = std::get<PrivilegeSettings>(std::move(p));
  return ok();
}

}  // namespace

Result<Config> parse_config(std::string_view toml_text, const std::string& origin) {
  toml::table doc;
#if TOML_EXCEPTIONS
  try {
    doc = toml::parse(toml_text, origin);
  } catch (const toml::parse_error& e) {
    return invalid("config " + origin + ":" + std::to_string(e.source().begin.line) + ":" +
                   std::to_string(e.source().begin.column) + ": " + std::string(e.description()));
  }
#else
  toml::parse_result res = toml::parse(toml_text, origin);
  if (!res) {
    const toml::parse_error& e = res.error();
    return invalid("config " + origin + ":" + std::to_string(e.source().begin.line) + ":" +
                   std::to_string(e.source().begin.column) + ": " + std::string(e.description()));
  }
  doc = std::move(res).table();
#endif
  Reader r(origin);
  Config c;
  if (auto s = read_top(r, doc, c); !s) return s.error();
  if (auto n = doc.get("datapath")) {
    if (auto s = read_datapath(r, *n, c); !s) return s.error();
  }
  if (auto n = doc.get("physnets")) {
    if (auto s = read_physnets(r, *n, c); !s) return s.error();
  }
  if (auto n = doc.get("libvirt")) {
    if (auto s = read_libvirt(r, *n, c); !s) return s.error();
  }
  if (auto n = doc.get("vhost")) {
    if (auto s = read_vhost(r, *n, c); !s) return s.error();
  }
  if (auto n = doc.get("metrics")) {
    if (auto s = read_metrics(r, *n, c); !s) return s.error();
  }
  if (auto n = doc.get("conntrack")) {
    if (auto s = read_conntrack(r, *n, c); !s) return s.error();
  }
  if (auto n = doc.get("offload")) {
    if (auto s = read_offload(r, *n, c); !s) return s.error();
  }
  if (auto n = doc.get("vtep")) {  // after [physnets]: it names one
    if (auto s = read_vtep(r, *n, c); !s) return s.error();
  }
  if (auto n = doc.get("etcd")) {
    if (auto s = read_etcd(r, *n, c); !s) return s.error();
  }
  if (auto n = doc.get("privileges")) {  // after [vhost]: its sockets' owner and group
    if (auto s = read_privileges(r, *n, c); !s) return s.error();
  }
  return c;
}

Result<Config> load_config(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return invalid("config " + path + ": cannot open: " + std::strerror(errno));
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  int err = std::ferror(f) ? errno : 0;  // a directory fails here, with EISDIR
  std::fclose(f);
  if (err) return invalid("config " + path + ": cannot read: " + std::strerror(err));
  return parse_config(text, path);
}

}  // namespace strait::ctl
