#include "control/ops/telemetry.h"

#include <rte_pdump.h>
#include <rte_telemetry.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <unordered_map>

#include "dataplane/drop_reasons.h"

namespace strait::ctl {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// What the control thread published last: immutable once published.
struct View {
  json stats;                                          // Switch::stats()
  std::unordered_map<std::string, size_t> port_index;  // port id -> stats["ports"][i]
  Clock::time_point taken;
};
using ViewPtr = std::shared_ptr<const View>;

// Written by the control thread (store), read by the telemetry thread
// (load); std::atomic<shared_ptr> orders them (release/acquire) and keeps a
// loaded View alive while a callback renders it. Leaked on purpose: the
// telemetry thread is never joined and may answer during static destruction.
std::atomic<ViewPtr>& published() {
  static auto* slot = new std::atomic<ViewPtr>();
  return *slot;
}

// Control thread only.
Clock::time_point g_last_publish{};

uint64_t u64(const json& j, const char* key) { return j.value(key, uint64_t{0}); }

uint64_t drops_total(const json& drops) {
  uint64_t n = 0;
  for (const auto& [reason, count] : drops.items()) n += count.get<uint64_t>();
  return n;
}

uint64_t age_ms(const View& v) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - v.taken).count();
}

// One array of a column-wise answer; the dict takes ownership (keep = 0).
class Column {
 public:
  explicit Column(rte_tel_value_type type) : d_(rte_tel_data_alloc()) {
    if (d_) rte_tel_data_start_array(d_, type);
  }
  ~Column() {
    if (d_) rte_tel_data_free(d_);
  }
  Column(const Column&) = delete;
  Column& operator=(const Column&) = delete;
  void add(uint64_t v) {
    if (d_) rte_tel_data_add_array_u64(d_, v);
  }
  void add(const std::string& s) {
    if (d_) rte_tel_data_add_array_string(d_, s.c_str());
  }
  // False when the container could not be allocated or added.
  bool move_to(rte_tel_data* dict, const char* name) {
    if (!d_ || rte_tel_data_add_dict_container(dict, name, d_, 0) != 0) return false;
    d_ = nullptr;
    return true;
  }

 private:
  rte_tel_data* d_;
};

// The View to answer from; null before the first publication or after shutdown.
ViewPtr view() { return published().load(std::memory_order_acquire); }

// /strait/ports[,<start>]: kTelemetryPortsPerPage ports from index <start>
// on, column by column (a dict's values cannot be dicts); "next" is the
// start of the following page, absent on the last one.
int cmd_ports(const char*, const char* params, rte_tel_data* d) {
  ViewPtr v = view();
  if (!v) return -1;
  size_t start = 0;
  if (params && *params) {
    char* end = nullptr;
    start = std::strtoull(params, &end, 10);
    if (*params < '0' || *params > '9' || *end) return -1;
  }
  const json& ports = v->stats["ports"];
  start = std::min(start, ports.size());
  const size_t stop = std::min(ports.size(), start + kTelemetryPortsPerPage);
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_u64(d, "count", ports.size());
  rte_tel_data_add_dict_u64(d, "start", start);
  if (stop < ports.size()) rte_tel_data_add_dict_u64(d, "next", stop);
  rte_tel_data_add_dict_u64(d, "age_ms", age_ms(*v));
  Column id(RTE_TEL_STRING_VAL), dp(RTE_TEL_U64_VAL), rxp(RTE_TEL_U64_VAL), rxb(RTE_TEL_U64_VAL),
      txp(RTE_TEL_U64_VAL), txb(RTE_TEL_U64_VAL), drops(RTE_TEL_U64_VAL);
  for (size_t i = start; i < stop; i++) {
    const json& p = ports[i];
    id.add(p["id"].get<std::string>());
    dp.add(u64(p, "dp_port"));
    rxp.add(u64(p, "rx_packets"));
    rxb.add(u64(p, "rx_bytes"));
    txp.add(u64(p, "tx_packets"));
    txb.add(u64(p, "tx_bytes"));
    drops.add(drops_total(p["drops"]));
  }
  id.move_to(d, "id");
  dp.move_to(d, "dp_port");
  rxp.move_to(d, "rx_packets");
  rxb.move_to(d, "rx_bytes");
  txp.move_to(d, "tx_packets");
  txb.move_to(d, "tx_bytes");
  drops.move_to(d, "drops");
  return 0;
}

// /strait/port,<id>: one port (a port uuid or physnet:<name>), every drop
// reason as drop_<reason>.
int cmd_port(const char*, const char* params, rte_tel_data* d) {
  ViewPtr v = view();
  if (!v || !params) return -1;
  auto it = v->port_index.find(params);
  if (it == v->port_index.end()) return -1;
  const json& p = v->stats["ports"][it->second];
  const json& drops = p["drops"];
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_string(d, "id", p["id"].get<std::string>().c_str());
  rte_tel_data_add_dict_u64(d, "dp_port", u64(p, "dp_port"));
  for (const char* k : {"rx_packets", "rx_bytes", "tx_packets", "tx_bytes"})
    rte_tel_data_add_dict_u64(d, k, u64(p, k));
  rte_tel_data_add_dict_u64(d, "drops", drops_total(drops));
  for (unsigned r = 1; r < dp::kNumDropReasons; r++) {
    const std::string name(dp::drop_reason_name(static_cast<dp::DropReason>(r)));
    rte_tel_data_add_dict_u64(d, ("drop_" + name).c_str(), drops.value(name, uint64_t{0}));
  }
  rte_tel_data_add_dict_u64(d, "age_ms", age_ms(*v));
  return 0;
}

// /strait/workers: one column per counter, one row per worker.
int cmd_workers(const char*, const char*, rte_tel_data* d) {
  ViewPtr v = view();
  if (!v) return -1;
  static constexpr const char* kCounters[] = {
      "id",          "lcore",      "packets",      "iterations",      "busy_cycles",
      "idle_cycles", "cache_hits", "cache_misses", "cache_evictions", "cache_stale",
      "learn_events_lost", "generation"};
  const json& workers = v->stats["workers"];
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_u64(d, "count", workers.size());
  rte_tel_data_add_dict_u64(d, "tsc_hz", u64(v->stats, "tsc_hz"));
  rte_tel_data_add_dict_u64(d, "age_ms", age_ms(*v));
  for (const char* k : kCounters) {
    Column c(RTE_TEL_U64_VAL);
    for (const json& w : workers) c.add(u64(w, k));
    c.move_to(d, k);
  }
  Column drops(RTE_TEL_U64_VAL);
  for (const json& w : workers) drops.add(drops_total(w["drops"]));
  drops.move_to(d, "drops");
  for (unsigned i = 0; i < dp::kNumStages; i++) {
    Column c(RTE_TEL_U64_VAL);
    for (const json& w : workers) c.add(u64(w["stage_cycles"], dp::kStageNames[i]));
    c.move_to(d, (std::string("cycles_") + dp::kStageNames[i]).c_str());
  }
  return 0;
}

// /strait/drops: switch-wide drops by reason, every reason listed.
int cmd_drops(const char*, const char*, rte_tel_data* d) {
  ViewPtr v = view();
  if (!v) return -1;
  const json& drops = v->stats["drops"];
  rte_tel_data_start_dict(d);
  for (unsigned r = 1; r < dp::kNumDropReasons; r++) {
    const std::string name(dp::drop_reason_name(static_cast<dp::DropReason>(r)));
    rte_tel_data_add_dict_u64(d, name.c_str(), drops.value(name, uint64_t{0}));
  }
  rte_tel_data_add_dict_u64(d, "total", drops_total(drops));
  rte_tel_data_add_dict_u64(d, "age_ms", age_ms(*v));
  return 0;
}

bool g_pdump = false;  // control thread only

}  // namespace

Status telemetry_init() {
  struct Cmd {
    const char* name;
    telemetry_cb fn;
    const char* help;
  };
  static constexpr Cmd kCmds[] = {
      {"/strait/ports", cmd_ports,
       "Strait ports and their counters, 64 a page. Parameters: int start (default 0)"},
      {"/strait/port", cmd_port,
       "One Strait port's counters and drops by reason. Parameters: port id or physnet:<name>"},
      {"/strait/workers", cmd_workers, "Strait worker counters, one array entry per worker"},
      {"/strait/drops", cmd_drops, "Strait drops by reason, all workers and ports"},
  };
  for (const Cmd& c : kCmds) {
    if (int rc = rte_telemetry_register_cmd(c.name, c.fn, c.help); rc != 0)
      return Error{"internal",
                   std::string("telemetry: registering ") + c.name + ": " + std::to_string(rc)};
  }
  // Capture works on ethdev ports through their rx/tx callbacks; vhost
  // ports are not ethdevs (docs/api.md).
  if (rte_pdump_init() == 0) {
    g_pdump = true;
  } else {
    spdlog::warn("rte_pdump_init failed: dpdk-dumpcap cannot capture from this straitd");
  }
  return ok();
}

void telemetry_tick(const Switch& sw) {
  const Clock::time_point now = Clock::now();
  if (now - g_last_publish < std::chrono::milliseconds(kTelemetryPeriodMs)) return;
  g_last_publish = now;
  auto v = std::make_shared<View>();
  v->stats = sw.stats();
  const json& ports = v->stats["ports"];
  for (size_t i = 0; i < ports.size(); i++)
    v->port_index.emplace(ports[i]["id"].get<std::string>(), i);
  v->taken = now;
  published().store(std::move(v), std::memory_order_release);
}

void telemetry_shutdown() {
  published().store(nullptr, std::memory_order_release);
  if (g_pdump) rte_pdump_uninit();
  g_pdump = false;
}

}  // namespace strait::ctl
