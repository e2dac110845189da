#include "control/ops/metrics.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "dataplane/drop_reasons.h"

namespace strait::ctl {
namespace {

using nlohmann::json;
using Labels = std::vector<std::pair<const char*, std::string>>;

constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";
// A connection costs a descriptor and a 32 KiB buffer pool; idle ones are
// cheap to open, so the limits are what stands between a scrape and a
// client that opens sockets and says nothing. A scrape needs one connection
// for well under a second: one that is silent for kConnectionTimeoutS goes,
// so an idle client must keep kMaxConnections (or, from one address,
// kMaxConnectionsPerIp) sockets open at once to crowd a scrape out.
constexpr unsigned kMaxConnections = 512;
constexpr unsigned kMaxConnectionsPerIp = 128;
constexpr unsigned kConnectionTimeoutS = 3;

// One family at a time: Prometheus wants a family's samples together,
// right after its HELP and TYPE lines.
class Exposition {
 public:
  void family(const char* name, const char* type, const char* help) {
    name_ = name;
    out_ += "# HELP " + name_ + " " + help + "\n# TYPE " + name_ + " " + type + "\n";
  }
  void sample(const Labels& labels, const json& value) {
    out_ += name_;
    if (!labels.empty()) {
      out_ += '{';
      for (size_t i = 0; i < labels.size(); i++) {
        out_ += (i ? "," : "") + std::string(labels[i].first) + "=\"" +
                escape_label_value(labels[i].second) + "\"";
      }
      out_ += '}';
    }
    out_ += ' ' + number(value) + '\n';
  }
  std::string take() { return std::move(out_); }

 private:
  static std::string number(const json& v) {
    if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
    if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
    if (v.is_boolean()) return v.get<bool>() ? "1" : "0";
    if (v.is_number_float()) return v.dump();
    return "NaN";  // absent: the family says so rather than lie with a zero
  }
  std::string name_;
  std::string out_;
};

// A port's counters (stats) with what show knows of it.
struct PortRow {
  std::string id;       // a port's UUID, or physnet:NAME for an uplink
  std::string network;  // empty for an uplink
  bool up;
  const json* counters;
};

// j[key] when it is an array, else an empty one: a reference that lives as
// long as j (rows point into it).
const json& array_of(const json& j, const char* key) {
  static const json kEmpty = json::array();
  return j.is_object() && j.contains(key) && j[key].is_array() ? j[key] : kEmpty;
}

std::vector<PortRow> port_rows(const json& stats, const json& show) {
  std::map<std::string, std::pair<std::string, bool>> known;  // id -> network, up
  for (const json& p : array_of(show, "ports"))
    known[p.value("id", "")] = {p.value("network", ""), p.value("state", "") == "up"};
  for (const json& u : array_of(show, "physnets"))
    known["physnet:" + u.value("name", "")] = {"", u.value("state", "") == "up"};
  std::vector<PortRow> rows;
  for (const json& p : array_of(stats, "ports")) {
    const std::string id = p.value("id", "");
    auto it = known.find(id);
    rows.push_back({id, it == known.end() ? "" : it->second.first,
                    it != known.end() && it->second.second, &p});
  }
  return rows;
}

// A drop map ({"reason": count}, non-zero entries only) read for every
// reason, so that each series exists from zero and rate() sees its first drop.
void drop_samples(Exposition& e, Labels labels, const json& drops) {
  labels.emplace_back("reason", "");
  for (unsigned r = 1; r < dp::kNumDropReasons; r++) {
    const std::string name(dp::drop_reason_name(static_cast<dp::DropReason>(r)));
    labels.back().second = name;
    e.sample(labels, drops.is_object() && drops.contains(name) ? drops[name] : json(0));
  }
}

void render_ports(Exposition& e, const json& stats, const json& show) {
  const std::vector<PortRow> rows = port_rows(stats, show);
  auto labels = [](const PortRow& r) { return Labels{{"port", r.id}, {"network", r.network}}; };
  static constexpr struct {
    const char* name;
    const char* key;
    const char* help;
  } kCounters[] = {
      {"strait_port_rx_packets_total", "rx_packets", "Frames received from the port."},
      {"strait_port_rx_bytes_total", "rx_bytes", "Bytes received from the port."},
      {"strait_port_tx_packets_total", "tx_packets", "Frames sent to the port."},
      {"strait_port_tx_bytes_total", "tx_bytes", "Bytes sent to the port."},
  };
  for (const auto& c : kCounters) {
    e.family(c.name, "counter", c.help);
    for (const PortRow& r : rows) e.sample(labels(r), r.counters->value(c.key, json()));
  }
  e.family("strait_port_drops_total", "counter", "Frames from the port dropped, by reason.");
  for (const PortRow& r : rows) drop_samples(e, labels(r), r.counters->value("drops", json()));
  e.family("strait_port_up", "gauge",
           "1 when every worker forwards for the port and its device is live.");
  for (const PortRow& r : rows) e.sample(labels(r), r.up);
}

void render_workers(Exposition& e, const json& stats) {
  static constexpr struct {
    const char* name;
    const char* key;
    const char* type;
    const char* help;
  } kWorker[] = {
      {"strait_worker_packets_total", "packets", "counter", "Frames the worker received."},
      {"strait_worker_iterations_total", "iterations", "counter", "Polling loop iterations."},
      {"strait_worker_busy_cycles_total", "busy_cycles", "counter",
       "TSC cycles of iterations that moved frames (see strait_tsc_hz)."},
      {"strait_worker_idle_cycles_total", "idle_cycles", "counter",
       "TSC cycles of iterations that found nothing."},
      {"strait_worker_max_iteration_cycles", "max_iteration_cycles", "gauge",
       "TSC cycles of the longest loop iteration since start (naps excluded)."},
      {"strait_worker_iterations_over_1ms_total", "iterations_over_1ms", "counter",
       "Loop iterations that took over a millisecond: the worker's queues went unpolled."},
      {"strait_worker_cache_hits_total", "cache_hits", "counter", "Flow-cache hits."},
      {"strait_worker_cache_misses_total", "cache_misses", "counter",
       "Flow-cache misses (full pipeline runs)."},
      {"strait_worker_cache_evictions_total", "cache_evictions", "counter",
       "Flow-cache entries evicted to make room."},
      {"strait_worker_cache_stale_total", "cache_stale", "counter",
       "Flow-cache misses on entries a learned MAC they were decided by made stale."},
      {"strait_worker_learn_events_lost_total", "learn_events_lost", "counter",
       "MAC learning events lost to a full ring."},
      {"strait_worker_arp_responder_replies_total", "arp_responder_replies", "counter",
       "ARP requests of local VMs answered by the ARP responder (not flooded)."},
      {"strait_worker_snapshot_generation", "generation", "gauge",
       "Generation of the snapshot the worker last picked up."},
  };
  const json& workers = array_of(stats, "workers");
  for (const auto& m : kWorker) {
    e.family(m.name, m.type, m.help);
    for (const json& w : workers) {
      e.sample({{"worker", std::to_string(w.value("id", 0u))},
                {"lcore", std::to_string(w.value("lcore", 0u))}},
               w.value(m.key, json()));
    }
  }
  e.family("strait_worker_stage_cycles_total", "counter",
           "TSC cycles of busy iterations by pipeline stage (rx, parse, lookup, pipeline, "
           "actions, tx).");
  for (const json& w : workers) {
    const json& stages = w.value("stage_cycles", json::object());
    for (const auto& [stage, v] : stages.items())
      e.sample({{"worker", std::to_string(w.value("id", 0u))},
                {"lcore", std::to_string(w.value("lcore", 0u))}, {"stage", stage}},
               v);
  }
  e.family("strait_drops_total", "counter", "Frames dropped by all workers, by reason.");
  drop_samples(e, {}, stats.value("drops", json()));
}

// rte_flow offload of the physnet NICs (show's physnets[].flow_offload):
// the rules the NIC refused are done in software (STYLE rule 12), counted
// here so that an alert can see a NIC that stopped taking them.
void render_offload(Exposition& e, const json& show) {
  std::vector<std::pair<std::string, const json*>> rows;  // physnet, its flow_offload
  for (const json& u : array_of(show, "physnets"))
    if (u.contains("flow_offload") && u["flow_offload"].is_object())
      rows.emplace_back(u.value("name", ""), &u["flow_offload"]);
  e.family("strait_physnet_flow_offload_refusals_total", "counter",
           "rte_flow rules the physnet's NIC refused (validate or create) and software does "
           "instead, since start.");
  for (const auto& [name, off] : rows) e.sample({{"physnet", name}}, off->value("refusals", json()));
  e.family("strait_physnet_flow_offload_rules", "gauge",
           "The physnet's rte_flow rules now: in the NIC (installed) or done in software.");
  for (const auto& [name, off] : rows) {
    e.sample({{"physnet", name}, {"state", "installed"}}, off->value("installed", json()));
    e.sample({{"physnet", name}, {"state", "software"}}, off->value("refused", json()));
  }
}

// DPDK's memory (show's memory and mempool): the pages EAL holds, its heap,
// and the packet buffer pools carved from it.
void render_memory(Exposition& e, const json& show) {
  if (show.contains("mempool") && show["mempool"].is_object()) {
    const json& mp = show["mempool"];
    e.family("strait_mempool_buffers", "gauge",
             "Packet buffers in all pools (shared and per ethdev port).");
    e.sample({}, mp.value("buffers", json()));
    e.family("strait_mempool_buffers_in_use", "gauge", "Packet buffers in use, all pools.");
    e.sample({}, mp.value("in_use", json()));
    e.family("strait_mempool_memory_bytes", "gauge", "Memory of all packet buffer pools.");
    e.sample({}, mp.value("memory_bytes", json()));
  }
  if (!show.contains("memory") || !show["memory"].is_object()) return;
  const json& mem = show["memory"];
  e.family("strait_memory_hugepages", "gauge",
           "1 when EAL runs on hugepages, 0 under --no-huge (plain pages).");
  e.sample({}, mem.value("hugepages", json()));
  e.family("strait_memory_reserved_bytes", "gauge",
           "Memory EAL holds in pages (hugepages, or 4 KiB pages under --no-huge).");
  for (const json& s : array_of(mem, "segments"))
    e.sample({{"socket", s.value("socket", json()).dump()},
              {"page_size", s.value("page_size", json()).dump()}},
             s.value("reserved_bytes", json()));
  e.family("strait_heap_size_bytes", "gauge", "Size of DPDK's malloc heap (rte_malloc, memzones).");
  for (const json& h : array_of(mem, "heaps"))
    e.sample({{"socket", h.value("socket", json()).dump()}}, h.value("total_bytes", json()));
  e.family("strait_heap_allocated_bytes", "gauge",
           "Bytes allocated from DPDK's malloc heap (packet pools included).");
  for (const json& h : array_of(mem, "heaps"))
    e.sample({{"socket", h.value("socket", json()).dump()}}, h.value("allocated_bytes", json()));
}

void render_switch(Exposition& e, const json& stats, const json& show) {
  auto gauge = [&e](const char* name, const char* help, const json& v) {
    e.family(name, "gauge", help);
    e.sample({}, v);
  };
  gauge("strait_snapshot_generation", "Generation of the snapshot published last.",
        stats.value("generation", json()));
  gauge("strait_tsc_hz", "TSC cycles per second (cycle counters to seconds).",
        stats.value("tsc_hz", json()));
  gauge("strait_ports_bound", "Ports bound to networks.", array_of(show, "ports").size());
  gauge("strait_networks", "Networks defined.", array_of(show, "networks").size());
  gauge("strait_physnets", "Physical networks (uplinks).", array_of(show, "physnets").size());
  gauge("strait_learned_macs", "MACs learned on physical networks.",
        show.value("learned_macs", json()));
  const json libvirt = show.value("libvirt", json::object());
  gauge("strait_libvirt_connected", "1 while the libvirt connection is up (0 when disabled).",
        libvirt.value("connected", false));
  if (stats.contains("conntrack") && stats["conntrack"].is_object()) {
    const json& ct = stats["conntrack"];
    gauge("strait_conntrack_capacity", "Connection-tracking table size (entries).",
          ct.value("capacity", json()));
    gauge("strait_conntrack_entries", "Connections tracked now.", ct.value("entries", json()));
    gauge("strait_conntrack_new_per_second",
          "New connections per second over the switch's last one-second sample.",
          ct.value("new_per_s", json()));
    auto counter = [&e](const char* name, const char* help, const json& v) {
      e.family(name, "counter", help);
      e.sample({}, v);
    };
    counter("strait_conntrack_created_total", "Connections opened.", ct.value("created", json()));
    counter("strait_conntrack_refused_total", "New connections refused: table full.",
            ct.value("refused_full", json()));
    counter("strait_conntrack_invalid_total", "Packets that could not open a connection.",
            ct.value("invalid", json()));
    counter("strait_conntrack_expired_total", "Connections timed out.", ct.value("expired", json()));
    counter("strait_conntrack_flushed_total", "Connections removed with their port or network.",
            ct.value("flushed", json()));
  }
  e.family("strait_build_info", "gauge", "The running straitd's version (always 1).");
  e.sample({{"version", show.value("version", "")}}, 1);
}

// --- HTTP ---------------------------------------------------------------------

MHD_Result reply(MHD_Connection* c, unsigned status, const std::string& body,
                 const char* content_type, const char* allow = nullptr) {
  MHD_Response* r = MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()),
                                                    MHD_RESPMEM_MUST_COPY);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
  if (allow) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
  const MHD_Result ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret;
}

// Runs on the control thread, inside MHD_run.
MHD_Result answer(void* cls, MHD_Connection* c, const char* url, const char* method,
                  const char* /*version*/, const char* /*upload_data*/, size_t* upload_data_size,
                  void** request) {
  static int headers_seen;
  const auto* sw = static_cast<const Switch*>(cls);
  const bool get = std::strcmp(method, MHD_HTTP_METHOD_GET) == 0;
  const bool head = std::strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
  // A GET is answered once the whole request is in: a response queued
  // earlier makes libmicrohttpd close the connection (no keep-alive for the
  // scraper). Another method is refused at once, its body unread.
  if ((get || head) && *request == nullptr) {
    *request = &headers_seen;
    return MHD_YES;
  }
  if (*upload_data_size != 0) {  // a body on a GET: ignored
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (std::strcmp(url, "/metrics") != 0)
    return reply(c, MHD_HTTP_NOT_FOUND, "not found: the metrics are at /metrics\n", "text/plain");
  if (!get && !head) {
    return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, std::string(method) + " not allowed: use GET\n",
                 "text/plain", "GET, HEAD");
  }
  // An exception must not unwind through libmicrohttpd's C frames.
  try {
    return reply(c, MHD_HTTP_OK, render_metrics(sw->stats(), sw->show()), kContentType);
  } catch (const std::exception& e) {
    spdlog::error("metrics: rendering failed: {}", e.what());
    return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "rendering failed\n", "text/plain");
  }
}

void log_mhd(void* /*cls*/, const char* fmt, va_list ap) {
  char buf[512];
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  size_t n = std::strlen(buf);
  while (n && buf[n - 1] == '\n') buf[--n] = '\0';
  spdlog::warn("metrics: {}", buf);
}

}  // namespace

std::string escape_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char ch : v) {
    if (ch == '\\') {
      out += "\\\\";
    } else if (ch == '"') {
      out += "\\\"";
    } else if (ch == '\n') {
      out += "\\n";
    } else {
      out += ch;
    }
  }
  return out;
}

std::string render_metrics(const json& stats, const json& show) {
  Exposition e;
  render_ports(e, stats, show);
  render_workers(e, stats);
  render_offload(e, show);
  render_memory(e, show);
  render_switch(e, stats, show);
  return e.take();
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::listen(const std::string& address,
                                                             uint16_t port, EventLoop* loop,
                                                             const Switch* sw) {
  sockaddr_storage ss{};
  unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
  } else if (inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    flags |= MHD_USE_IPv6;
  } else {
    return invalid("metrics.listen: \"" + address + "\" is not a numeric IP address");
  }
  const std::string where =
      (flags & MHD_USE_IPv6 ? "[" + address + "]" : address) + ":" + std::to_string(port);
  std::unique_ptr<MetricsServer> s(new MetricsServer(loop, sw));
  // libmicrohttpd reports why a start failed through its logger, not errno.
  s->daemon_ = MHD_start_daemon(flags, port, nullptr, nullptr, &answer, const_cast<Switch*>(sw),
                                MHD_OPTION_SOCK_ADDR, reinterpret_cast<sockaddr*>(&ss),
                                MHD_OPTION_CONNECTION_LIMIT, kMaxConnections,
                                MHD_OPTION_PER_IP_CONNECTION_LIMIT, kMaxConnectionsPerIp,
                                MHD_OPTION_CONNECTION_TIMEOUT, kConnectionTimeoutS,
                                MHD_OPTION_EXTERNAL_LOGGER, &log_mhd, nullptr, MHD_OPTION_END);
  if (!s->daemon_) return Error{"device_error", "metrics.listen " + where + ": cannot listen"};
  const MHD_DaemonInfo* info = MHD_get_daemon_info(s->daemon_, MHD_DAEMON_INFO_EPOLL_FD);
  s->epoll_fd_ = info ? info->epoll_fd : -1;
  s->timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (s->epoll_fd_ < 0 || s->timer_fd_ < 0)
    return Error{"internal", "metrics.listen " + where + ": no epoll or timer descriptor"};
  MetricsServer* self = s.get();
  loop->add(s->epoll_fd_, EPOLLIN, [self](unsigned) { self->run(); });
  loop->add(s->timer_fd_, EPOLLIN, [self](unsigned) {
    uint64_t expirations;
    (void)!read(self->timer_fd_, &expirations, sizeof expirations);
    self->run();
  });
  spdlog::info("metrics on http://{}/metrics", where);
  return s;
}

MetricsServer::~MetricsServer() {
  if (epoll_fd_ >= 0) loop_->remove(epoll_fd_);
  if (timer_fd_ >= 0) {
    loop_->remove(timer_fd_);
    close(timer_fd_);
  }
  if (daemon_) MHD_stop_daemon(daemon_);  // closes epoll_fd_ too
}

void MetricsServer::run() {
  MHD_run(daemon_);
  // it_value zero disarms: no connection open, nothing pending.
  itimerspec next{};
  MHD_UNSIGNED_LONG_LONG ms = 0;
  if (MHD_get_timeout(daemon_, &ms) == MHD_YES) {
    next.it_value.tv_sec = static_cast<time_t>(ms / 1000);
    next.it_value.tv_nsec = static_cast<long>(ms % 1000) * 1000000 + 1;  // 0 ms: at once
  }
  timerfd_settime(timer_fd_, 0, &next, nullptr);
}

}  // namespace strait::ctl
