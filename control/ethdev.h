#pragma once
// DPDK ethdevs as Strait ports: physnet NICs and, until vhost-user has its
// own attachment, VM NICs given as vdevs. Control thread only.
#include <cstdint>
#include <string>

#include <rte_mempool.h>

#include "control/result.h"

namespace strait::ctl {

struct Ethdev {
  std::string devargs;
  std::string name;      // DPDK device name
  uint16_t port_id = 0;  // DPDK port id
  uint16_t n_rxq = 1;
  uint16_t n_txq = 1;
  bool probed = false;   // we hot-plugged it, so we remove it on close
};

// Finds the device (probing devargs if it is not there yet), configures
// min(workers, device limit) rx queues (one unless the device does RSS) and
// tx queues, starts it in promiscuous mode. On failure nothing is left open.
Result<Ethdev> open_ethdev(const std::string& devargs, rte_mempool* pool, uint16_t n_workers);
// Stops and closes; removes the device if open_ethdev probed it. Call only
// after a grace period with no snapshot referring to it.
void close_ethdev(const Ethdev& dev);

}  // namespace strait::ctl
