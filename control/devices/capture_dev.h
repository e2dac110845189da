#pragma once
// Packet capture of vhost-user ports with DPDK's own tools. rte_pdump (and
// so dpdk-dumpcap) hooks the rx/tx callbacks of an ethdev, and a vhost port
// is not one: on request it gets a stand-in, a net_null ethdev named after
// the port that nothing polls. Workers run the stand-in's callback lists
// over the port's bursts (dataplane/capture.h), so `dpdk-dumpcap -i NAME`
// sees what the port receives and sends. Control thread only.
#include <cstdint>
#include <string>

#include <rte_mempool.h>

#include "dataplane/result.h"

namespace strait::ctl {

struct CaptureDev {
  std::string name;      // DPDK device name: what dumpcap's -i takes
  uint16_t port_id = 0;  // its ethdev id
};

// "net_null_" and the port id's first 11 characters: the tap name nova
// gives the port (vhuXXXXXXXX-XX) without its prefix.
std::string capture_dev_name(const std::string& port_id);

// Why a stand-in for this port cannot be made now (an ethdev of that name
// exists, or all RTE_MAX_ETHPORTS ids are in use); changes nothing.
Status check_capture_dev(const std::string& port_id);

// Probes the stand-in with `n_queues` rx and tx queues (the most a vhost
// port uses: queue q of the port runs the callbacks of queue q) and starts
// it. `pool` is only named by its rx queues: nothing ever polls them. On
// failure nothing is left.
Result<CaptureDev> open_capture_dev(const std::string& port_id, uint16_t n_queues,
                                    rte_mempool* pool);

// Stops and hot-unplugs it (running dumpcaps are told, like any hot-unplug).
// Only once no snapshot names it.
void close_capture_dev(const CaptureDev& dev);

}  // namespace strait::ctl
