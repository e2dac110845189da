// The Prometheus exposition rendered from `stats` and `show` replies: names,
// labels, escaping, and every family's HELP and TYPE before its samples.
#include "control/ops/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>

namespace strait::ctl {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

json stats_reply() {
  return json::parse(R"({
    "generation": 7, "tsc_hz": 2000000000,
    "ports": [
      {"id": "physnet:phys1", "dp_port": 0, "rx_packets": 3, "rx_bytes": 300, "tx_packets": 4,
       "tx_bytes": 400, "drops": {"unknown_vlan": 2}},
      {"id": "11111111-0000-4000-8000-000000000001", "dp_port": 1, "rx_packets": 10,
       "rx_bytes": 1000, "tx_packets": 0, "tx_bytes": 0,
       "drops": {"mtu_exceeded": 1, "tagged_on_access_port": 2}}],
    "workers": [
      {"id": 0, "lcore": 1, "packets": 13, "iterations": 99, "busy_cycles": 5000,
       "idle_cycles": 18446744073709551615, "cache_hits": 8, "cache_misses": 2,
       "cache_evictions": 0, "learn_events_lost": 0, "generation": 7,
       "stage_cycles": {"rx": 100, "parse": 200, "lookup": 300, "pipeline": 400,
                        "actions": 500, "tx": 600},
       "drops": {"mtu_exceeded": 1}}],
    "drops": {"mtu_exceeded": 1, "tagged_on_access_port": 2, "unknown_vlan": 2}})");
}

json show_reply() {
  return json::parse(R"({
    "version": "0.1.0 \"dev\"\\x\ny", "generation": 7, "learned_macs": 4,
    "workers": [{"id": 0, "lcore": 1, "rx_queues": []}],
    "physnets": [{"name": "phys1", "state": "up",
                  "flow_offload": {"enabled": true, "supported": true, "installed": 1,
                                   "refused": 2, "refusals": 5, "last_error": "no"}},
                 {"name": "phys2", "state": "up", "flow_offload": null}],
    "networks": [{"id": "net-a"}],
    "ports": [{"id": "11111111-0000-4000-8000-000000000001", "network": "net-a",
               "state": "down"}],
    "libvirt": {"enabled": false}})");
}

TEST(Metrics, EscapesLabelValues) {
  EXPECT_EQ(escape_label_value("plain"), "plain");
  EXPECT_EQ(escape_label_value("a\"b"), "a\\\"b");
  EXPECT_EQ(escape_label_value("a\\b"), "a\\\\b");
  EXPECT_EQ(escape_label_value("a\nb"), "a\\nb");
  EXPECT_EQ(escape_label_value(""), "");
}

TEST(Metrics, PortCountersCarryPortAndNetwork) {
  const std::string text = render_metrics(stats_reply(), show_reply());
  const std::string vm = "port=\"11111111-0000-4000-8000-000000000001\",network=\"net-a\"";
  EXPECT_THAT(text, HasSubstr("strait_port_rx_packets_total{" + vm + "} 10\n"));
  EXPECT_THAT(text, HasSubstr("strait_port_rx_bytes_total{" + vm + "} 1000\n"));
  EXPECT_THAT(text,
              HasSubstr("strait_port_tx_packets_total{port=\"physnet:phys1\",network=\"\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("strait_port_drops_total{" + vm + ",reason=\"mtu_exceeded\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("strait_port_drops_total{" + vm + ",reason=\"tx_full\"} 0\n"));
  EXPECT_THAT(text, Not(HasSubstr("reason=\"none\"")));
  EXPECT_THAT(text, HasSubstr("strait_port_up{" + vm + "} 0\n"));
  EXPECT_THAT(text, HasSubstr("strait_port_up{port=\"physnet:phys1\",network=\"\"} 1\n"));
}

TEST(Metrics, WorkerAndSwitchFamilies) {
  const std::string text = render_metrics(stats_reply(), show_reply());
  EXPECT_THAT(text, HasSubstr("# TYPE strait_worker_busy_cycles_total counter\n"
                              "strait_worker_busy_cycles_total{worker=\"0\",lcore=\"1\"} 5000\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE strait_worker_stage_cycles_total counter\n"));
  EXPECT_THAT(text, HasSubstr(
      "strait_worker_stage_cycles_total{worker=\"0\",lcore=\"1\",stage=\"pipeline\"} 400\n"));
  EXPECT_THAT(text, HasSubstr(
      "strait_worker_stage_cycles_total{worker=\"0\",lcore=\"1\",stage=\"tx\"} 600\n"));
  // Counters are uint64: printed whole, not as a rounded double.
  EXPECT_THAT(text, HasSubstr("strait_worker_idle_cycles_total{worker=\"0\",lcore=\"1\"} "
                              "18446744073709551615\n"));
  EXPECT_THAT(text, HasSubstr("strait_worker_cache_hits_total{worker=\"0\",lcore=\"1\"} 8\n"));
  EXPECT_THAT(text, HasSubstr("strait_drops_total{reason=\"unknown_vlan\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE strait_snapshot_generation gauge\n"
                              "strait_snapshot_generation 7\n"));
  EXPECT_THAT(text, HasSubstr("strait_ports_bound 1\n"));
  EXPECT_THAT(text, HasSubstr("strait_networks 1\n"));
  EXPECT_THAT(text, HasSubstr("strait_libvirt_connected 0\n"));
  EXPECT_THAT(text, HasSubstr("strait_build_info{version=\"0.1.0 \\\"dev\\\"\\\\x\\ny\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("strait_mempool")));  // show has none
}

// Each family once, HELP then TYPE, then only its own samples.
TEST(Metrics, EveryFamilyIsWholeAndAnnounced) {
  std::istringstream in(render_metrics(stats_reply(), show_reply()));
  std::string line, family;
  std::set<std::string> seen;
  int samples = 0;
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0) {
      family = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_TRUE(seen.insert(family).second) << family;
      ASSERT_TRUE(std::getline(in, line));
      EXPECT_EQ(line.rfind("# TYPE " + family + " ", 0), 0u) << line;
      continue;
    }
    const std::string name = line.substr(0, line.find_first_of("{ "));
    EXPECT_EQ(name, family) << line;
    samples++;
  }
  EXPECT_GT(samples, 50);
}

// The rte_flow fallback (issue 6): rules refused by a physnet's NIC, per physnet.
TEST(Metrics, FlowOffloadFallbackPerPhysnet) {
  const std::string text = render_metrics(stats_reply(), show_reply());
  EXPECT_THAT(text, HasSubstr("# TYPE strait_physnet_flow_offload_refusals_total counter\n"
                              "strait_physnet_flow_offload_refusals_total{physnet=\"phys1\"} 5\n"));
  EXPECT_THAT(text, HasSubstr(
      "strait_physnet_flow_offload_rules{physnet=\"phys1\",state=\"installed\"} 1\n"));
  EXPECT_THAT(text, HasSubstr(
      "strait_physnet_flow_offload_rules{physnet=\"phys1\",state=\"software\"} 2\n"));
  // A physnet without offload state (no NIC opened) has no series.
  EXPECT_THAT(text, Not(HasSubstr("physnet=\"phys2\"")));
}

TEST(Metrics, MissingPiecesAreNotInvented) {
  // An empty switch: families with no samples still parse; no NaN for totals.
  const std::string text = render_metrics(json::object(), json::object());
  EXPECT_THAT(text, HasSubstr("# TYPE strait_port_rx_packets_total counter\n"));
  EXPECT_THAT(text, HasSubstr("strait_ports_bound 0\n"));
}

}  // namespace
}  // namespace strait::ctl
