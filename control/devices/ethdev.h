#pragma once
// DPDK ethdevs as Strait ports: physnet NICs and, until vhost-user has its
// own attachment, VM NICs given as vdevs. Control thread only.
#include <cstdint>
#include <optional>
#include <string>

#include <rte_mempool.h>

#include "dataplane/result.h"

namespace strait::ctl {

struct Ethdev {
  std::string devargs;
  std::string name;      // DPDK device name
  uint16_t port_id = 0;  // DPDK port id
  uint16_t n_rxq = 1;
  uint16_t n_txq = 1;
  bool probed = false;   // we hot-plugged it, so we remove it on close
  // Its rx rings' packet buffers: a pool of its own, sized from its queues
  // and descriptors (rx_pool_size). Outlives the device: see close_ethdev.
  rte_mempool* pool = nullptr;
};

// Buffers a port's rx pool holds: its rx rings full, as many again in tx
// rings its frames wait in (other ports' are sized alike), every worker's
// bursts in flight, and what per-lcore caches may keep.
unsigned rx_pool_size(uint16_t n_rxq, uint16_t rx_desc, uint16_t n_txq, uint16_t tx_desc,
                      uint16_t n_workers);

// Finds the device (probing devargs if it is not there yet), configures
// min(workers, device limit) rx queues (one unless the device does RSS) and
// tx queues with a packet-buffer pool of their own, starts it in
// promiscuous mode. On failure nothing is left open.
Result<Ethdev> open_ethdev(const std::string& devargs, uint16_t n_workers);
// Stops and closes; removes the device if open_ethdev probed it (one that
// was there before, given to EAL with --vdev or made by its owner, is only
// stopped: it stays its owner's). Runs on EAL's interrupt thread
// (control/devices/eal_interrupts.h). Call only after a grace period with no
// snapshot referring to it. dev.pool is not freed: its buffers may still
// wait in other ports' tx rings (the caller frees it once rte_mempool_full
// says they are all back).
void close_ethdev(const Ethdev& dev);

// The device's link as its driver reports it now, without waiting: up
// (true) or down (false); nullopt when the driver cannot tell.
std::optional<bool> link_up(uint16_t port_id);

}  // namespace strait::ctl
