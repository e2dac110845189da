#pragma once
// DPDK's log lines go through straitd's own logger (spdlog), as OVS routes
// them into vlog: one format and one stream for everything straitd says.
//
// EAL's default stream writes each line to stderr and then to syslog(3).
// Without a syslog daemon every syslog() call tries to connect to /dev/log
// again; a vhost-user port logs three lines when it is registered, so that
// alone cost ~50 us per port (~70 ms of a 1000-port bind).

namespace strait::ctl {

// Installs the stream; call before rte_eal_init so EAL's own lines take it.
// Returns false (DPDK keeps its default) when the stream cannot be made.
bool route_dpdk_log();

}  // namespace strait::ctl
