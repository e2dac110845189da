#pragma once
// DPDK's own operator tools against straitd: the /strait/* commands of
// rte_telemetry (read by dpdk-telemetry.py -f <file-prefix>) and rte_pdump
// (dpdk-dumpcap --file-prefix=<file-prefix> -i <ethdev>). docs/api.md,
// "DPDK telemetry and packet capture".
//
// Threads: telemetry callbacks run on DPDK's telemetry thread, never on the
// control thread, so they must not read the Switch. The control thread
// publishes an immutable copy of Switch::stats() (telemetry_tick, at most
// once per kTelemetryPeriodMs) by swapping a std::atomic<std::shared_ptr>;
// a callback takes a reference to the copy it finds and renders from that
// alone. Answers are therefore up to one period old ("age_ms" says how old);
// in exchange no callback ever waits for, or races with, the control thread,
// and the workers are not touched beyond what `straitctl stats` reads.
#include <cstdint>

#include "control/switch/switch.h"
#include "dataplane/result.h"

namespace strait::ctl {

inline constexpr uint64_t kTelemetryPeriodMs = 1000;
// Ports per answer of /strait/ports: rte_telemetry answers at most 16 KB.
inline constexpr unsigned kTelemetryPortsPerPage = 64;

// Registers the /strait/* commands and initialises rte_pdump. After
// rte_eal_init, once per process. A capture server that cannot start (no
// multi-process support, e.g. --in-memory) is logged, not fatal.
Status telemetry_init();

// Control thread, every loop iteration: publishes a fresh copy of sw's
// counters when the last one is kTelemetryPeriodMs old. Cheap otherwise.
void telemetry_tick(const Switch& sw);

// Control thread, before the Switch goes: from now on the commands answer
// null, and rte_pdump stops serving capture requests.
void telemetry_shutdown();

}  // namespace strait::ctl
