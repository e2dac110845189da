// The desired-state model's share of a bulk bind: N vhost ports with a fixed
// IP each, added one by one to one network, as Switch::bind_all does (issue
// 8's "1000 ports with security groups live in < 100 ms"); and the copy of
// the model every change starts with (Switch::apply).
#include <cstdio>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "control/model/model.h"

namespace {

using nlohmann::json;
using strait::ctl::Model;
using strait::ctl::PortSpec;

std::vector<PortSpec> ports(unsigned n) {
  std::vector<PortSpec> out;
  for (unsigned i = 0; i < n; i++) {
    char id[37], mac[18], ip[16], path[64];
    std::snprintf(id, sizeof id, "1c0e0000-0000-4000-8000-%012x", i);
    std::snprintf(mac, sizeof mac, "fa:16:3e:00:%02x:%02x", (i >> 8) & 0xff, i & 0xff);
    std::snprintf(ip, sizeof ip, "10.0.%u.%u", (i >> 8) & 0xff, i & 0xff);
    std::snprintf(path, sizeof path, "/tmp/slc.0cjcc9cf/v/s%u.sock", i);
    auto p = strait::ctl::parse_port({{"id", id},
                                      {"network", "net1"},
                                      {"mac", mac},
                                      {"fixed_ips", {ip}},
                                      {"attach", {{"type", "vhost"}, {"path", path}}}});
    if (!p) std::abort();
    out.push_back(*p);
  }
  return out;
}

void BM_ModelAddPorts(benchmark::State& state) {
  const std::vector<PortSpec> specs = ports(unsigned(state.range(0)));
  auto net = strait::ctl::parse_network({{"id", "net1"}, {"type", "local"}});
  if (!net) std::abort();
  for (auto _ : state) {
    state.PauseTiming();
    Model m({});
    if (!m.add_network(*net)) std::abort();
    state.ResumeTiming();
    for (const PortSpec& p : specs)
      if (!m.add_port(p)) std::abort();
    benchmark::DoNotOptimize(m);
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * state.range(0));
}
BENCHMARK(BM_ModelAddPorts)->Arg(1000)->Arg(4000)->Unit(benchmark::kMillisecond);

// What Switch::apply pays per change before anything else: a copy of the
// model (N bound ports) to change aside. Against BM_ModelAddPorts/N, the
// cost of building the same model port by port.
void BM_ModelCopy(benchmark::State& state) {
  auto net = strait::ctl::parse_network({{"id", "net1"}, {"type", "local"}});
  Model m({});
  if (!net || !m.add_network(*net)) std::abort();
  for (const PortSpec& p : ports(unsigned(state.range(0))))
    if (!m.add_port(p)) std::abort();
  for (auto _ : state) {
    Model copy = m;
    benchmark::DoNotOptimize(copy);
  }
}
BENCHMARK(BM_ModelCopy)->Arg(1000)->Arg(4000)->Unit(benchmark::kMicrosecond);

}  // namespace
