#pragma once
// Capture of vhost-user ports by DPDK's tools (control/devices/capture_dev.h): a
// worker runs the callback lists of the port's stand-in ethdev over the
// port's bursts exactly where rte_eth_rx_burst / rte_eth_tx_burst run an
// ethdev's, so rte_pdump's callbacks (dpdk-dumpcap) see them. The caller
// checks PortEntry::capture != kNoCapture (dataplane/snapshot.h) once per
// burst; nothing here runs when capture is off.
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <cstdint>

namespace strait::dp {

// After a vhost dequeue of n frames into pkts (room for `room`) on rx queue
// q. Returns the frames left (a callback may take some, as on an ethdev).
// The stand-in is started, so rte_eth_fp_ops holds its callback lists; the
// relaxed load is what rte_eth_rx_burst does (insertion is a release store).
inline uint16_t capture_rx(uint16_t ethdev, uint16_t q, rte_mbuf** pkts, uint16_t n,
                           uint16_t room) noexcept {
  void* cb = __atomic_load_n(&rte_eth_fp_ops[ethdev].rxq.clbk[q], __ATOMIC_RELAXED);
  if (cb == nullptr || n == 0) return n;
  return rte_eth_call_rx_callbacks(ethdev, q, pkts, n, room, cb);
}

// Before a vhost enqueue of n frames on tx queue q (under the queue's lock
// when it is shared, so one worker at a time runs a queue's callbacks).
// Returns the frames to send.
inline uint16_t capture_tx(uint16_t ethdev, uint16_t q, rte_mbuf** pkts, uint16_t n) noexcept {
  void* cb = __atomic_load_n(&rte_eth_fp_ops[ethdev].txq.clbk[q], __ATOMIC_RELAXED);
  if (cb == nullptr || n == 0) return n;
  return rte_eth_call_tx_callbacks(ethdev, q, pkts, n, cb);
}

}  // namespace strait::dp
