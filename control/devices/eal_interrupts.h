#pragma once
// EAL's interrupt thread, from the control thread. Drivers' interrupt
// callbacks (a memif peer's messages, a NIC's link changes) and EAL alarms
// all run on it, one at a time. DPDK 22.11 does not keep a device's close
// from overlapping one of its callbacks, and its rte_eal_cleanup unmaps
// DPDK's memory with the thread still running.
#include <functional>

namespace strait::ctl {

// Runs `fn` on the interrupt thread, between two of its callbacks, and
// waits for it (an EAL alarm: testpmd detaches removed devices the same
// way). Without an alarm, runs it here. Never from the interrupt thread.
void run_on_interrupt_thread(const std::function<void()>& fn);

// Keeps the interrupt thread inside a callback of ours until the process
// exits, so that it touches nothing while rte_eal_cleanup unmaps DPDK's
// memory: a callback a driver left registered (net_memif's listening
// socket, after its device is closed) would read freed memory. Call once,
// after every device is closed, right before rte_eal_cleanup.
void park_interrupt_thread();

}  // namespace strait::ctl
