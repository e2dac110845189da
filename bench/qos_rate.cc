// strait-qos-bench: how close a port's QoS bandwidth limit holds (issue 25).
//
// An in-process switch (the tests' harness: real workers, net_ring ports)
// with VM port D under an ingress bandwidth_limit of L, fed by VM ports
// polled by 1 or 2 workers (with 2: ports A and B on different workers, so
// one meter is charged by both). Senders offer 1500-byte frames at twice
// the limit in all, in bursts of about a millisecond of their share, for
// a warm-up and then a measured window; what D
// receives in the window, over the window, is the passed rate. Printed per
// point: the limit, what was offered and what passed, and passed / limit
// (the anchor is the limit itself: exact by construction). The burst is
// max_burst_kbps = L / 50 (20 ms at the rate): enough to ride out a
// sender or worker descheduled on a busy machine, small against the
// window (at most 20 ms / window of error).
//
//   strait-qos-bench [--limits 10,100,1000] [--workers 1,2] [--window S] [--json FILE]
#include <getopt.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <rte_eal.h>
#include <spdlog/spdlog.h>

#include "tests/frame_builder.h"
#include "tests/switch_harness.h"

namespace {

using nlohmann::json;
using namespace strait::test;
using Clock = std::chrono::steady_clock;

constexpr size_t kFrame = 1500;

std::vector<int> int_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');) out.push_back(std::stoi(x));
  return out;
}

struct Point {
  int limit_mbps;
  int workers;
  double offered_mbps = 0, passed_mbps = 0;
  uint64_t drops = 0;
};

void run_point(Point& pt, double warmup_s, double window_s) {
  // The devices outlive the switch that has them open.
  RingPort d("net_ring_qbd");
  std::vector<std::unique_ptr<RingPort>> src;
  for (int i = 0; i < pt.workers; i++)
    src.push_back(std::make_unique<RingPort>("net_ring_qb" + std::to_string(i)));
  auto cfg = test_config(pt.workers == 1 ? std::vector<unsigned>{1} : std::vector<unsigned>{1, 2});
  Harness h(cfg);
  h.ok("network.create", {{"id", "n1"}, {"type", "local"}});
  json pd = port_params(port_uuid(4), "n1", "02:00:00:00:00:0d", d.name());
  const int kbps = pt.limit_mbps * 1000;
  pd["qos"] = {{{"type", "bandwidth_limit"}, {"direction", "ingress"}, {"max_kbps", kbps},
                {"max_burst_kbps", kbps / 50}}};
  h.ok("port.bind", pd);
  const char* macs[] = {"02:00:00:00:00:0a", "02:00:00:00:00:0b"};
  for (int i = 0; i < pt.workers; i++)
    h.ok("port.bind", port_params(port_uuid(i + 1), "n1", macs[i], src[i]->name()));
  if (pt.workers == 2) {  // A and B on different workers: one meter, two chargers
    const json show = h.ok("show");
    std::map<int, int> worker_of;  // datapath port -> its worker
    for (const json& w : show["workers"])
      for (const json& q : w["rx_queues"]) worker_of[q["port"].get<int>()] = w["id"].get<int>();
    std::set<int> pollers;
    for (const json& p : show["ports"])
      if (p["id"] != port_uuid(4)) pollers.insert(worker_of[p["dp_port"].get<int>()]);
    if (pollers.size() != 2) std::fprintf(stderr, "warning: the sources share a worker\n");
  }
  std::atomic<bool> stop{false}, measuring{false};
  std::atomic<uint64_t> offered{0};
  std::vector<std::thread> senders;
  for (int i = 0; i < pt.workers; i++)
    senders.emplace_back([&, i] {
      // Bursts of about a millisecond of the sender's share (1 to 32
      // frames): a policer passes what a burst brings beyond its tolerance
      // only as the meter refills, so bursts far apart lose rate to it.
      const double fps = 2.0 * pt.limit_mbps * 1e6 / pt.workers / (kFrame * 8);
      const size_t n = std::clamp<size_t>(size_t(fps / 1000), 1, 32);
      std::vector<Frame> burst;
      for (uint16_t f = 0; f < n; f++) {
        Frame fr = Eth(macs[i], "02:00:00:00:00:0d").ipv4("10.0.0.1", "10.0.0.4").udp(f, 80).frame();
        fr.resize(kFrame, 'q');
        burst.push_back(std::move(fr));
      }
      // Paced at twice the limit in all (a sender each: its share): above
      // the limit at all times, without keeping the rings full (the test
      // pool has 8191 buffers).
      const auto every = std::chrono::duration<double>(double(burst.size() * kFrame * 8) /
                                                       (2.0 * pt.limit_mbps * 1e6 / pt.workers));
      auto next = Clock::now();
      while (!stop.load(std::memory_order_relaxed)) {
        src[i]->send(burst);
        if (measuring.load(std::memory_order_relaxed)) offered += burst.size() * kFrame;
        next += std::chrono::duration_cast<Clock::duration>(every);
        std::this_thread::sleep_until(next);
      }
    });
  uint64_t passed = 0;
  const auto t0 = Clock::now();
  const auto t_measure = t0 + std::chrono::duration<double>(warmup_s);
  const auto t_end = t_measure + std::chrono::duration<double>(window_s);
  const uint64_t drops_before = [&] {
    while (Clock::now() < t_measure) {
      d.take();
      h.pump(std::chrono::milliseconds(1));
    }
    measuring = true;
    return h.drops("qos_bandwidth");
  }();
  while (Clock::now() < t_end) {
    for (const Frame& f : d.take()) passed += f.size();
    h.pump(std::chrono::milliseconds(1));
  }
  measuring = false;
  stop = true;
  for (auto& t : senders) t.join();
  pt.drops = h.drops("qos_bandwidth") - drops_before;
  pt.offered_mbps = double(offered) * 8 / window_s / 1e6;
  pt.passed_mbps = double(passed) * 8 / window_s / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  std::string limits = "10,100,1000", workers = "1,2", json_out;
  double window = 3, warmup = 1;
  static option opts[] = {{"limits", required_argument, nullptr, 'l'},
                          {"workers", required_argument, nullptr, 'w'},
                          {"window", required_argument, nullptr, 's'},
                          {"json", required_argument, nullptr, 'j'},
                          {nullptr, 0, nullptr, 0}};
  for (int c; (c = getopt_long(argc, argv, "", opts, nullptr)) != -1;) {
    switch (c) {
      case 'l': limits = optarg; break;
      case 'w': workers = optarg; break;
      case 's': window = std::stod(optarg); break;
      case 'j': json_out = optarg; break;
      default:
        std::fprintf(stderr, "usage: strait-qos-bench [--limits MBPS,..] [--workers 1,2] "
                             "[--window S] [--json FILE]\n");
        return 2;
    }
  }
  signal(SIGPIPE, SIG_IGN);
  spdlog::set_level(spdlog::level::warn);
  const std::string prefix = "--file-prefix=strait-qos-bench-" + std::to_string(getpid());
  std::vector<std::string> args = {"strait-qos-bench", "--no-huge", "-m", "512", "--no-pci",
                                   "--lcores=0@(0-1),1@(0-1),2@(0-1)", "--log-level=lib.eal:error",
                                   "--single-file-segments", prefix};
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  if (rte_eal_init(int(cargs.size()), cargs.data()) < 0) {
    std::fprintf(stderr, "rte_eal_init failed\n");
    return 1;
  }
  std::printf("QoS ingress bandwidth limit, 1500-byte frames, %.0f s measured after %.0f s, burst = limit x 20 ms\n",
              window, warmup);
  std::printf("%8s %7s %12s %12s %10s %12s\n", "limit", "workers", "offered", "passed",
              "passed/L", "drops");
  json rows = json::array();
  for (int w : int_list(workers)) {
    for (int l : int_list(limits)) {
      Point pt{l, w};
      run_point(pt, warmup, window);
      const double ratio = pt.passed_mbps / l;
      std::printf("%6d M %7d %10.1f M %10.1f M %10.3f %12llu\n", l, w, pt.offered_mbps,
                  pt.passed_mbps, ratio, static_cast<unsigned long long>(pt.drops));
      std::fflush(stdout);
      rows.push_back({{"limit_mbps", l}, {"workers", w}, {"offered_mbps", pt.offered_mbps},
                      {"passed_mbps", pt.passed_mbps}, {"passed_ratio", ratio},
                      {"qos_drops", pt.drops}});
    }
  }
  if (!json_out.empty()) std::ofstream(json_out) << json({{"qos_rate", rows}}).dump(2) << "\n";
  rte_eal_cleanup();
  return 0;
}
