#include "control/devices/capture_dev.h"

#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <spdlog/spdlog.h>

namespace strait::ctl {
namespace {

Error dev_error(const std::string& name, const std::string& what, int rc) {
  return {"device_error", "capture device " + name + ": " + what + ": " +
                              rte_strerror(rc < 0 ? -rc : rc)};
}

int configure(uint16_t port, uint16_t n_queues, rte_mempool* pool) {
  rte_eth_conf conf{};
  int rc = rte_eth_dev_configure(port, n_queues, n_queues, &conf);
  const int socket = rte_eth_dev_socket_id(port);
  for (uint16_t q = 0; rc == 0 && q < n_queues; q++)
    rc = rte_eth_rx_queue_setup(port, q, 0, socket, nullptr, pool);
  for (uint16_t q = 0; rc == 0 && q < n_queues; q++)
    rc = rte_eth_tx_queue_setup(port, q, 0, socket, nullptr);
  if (rc == 0) rc = rte_eth_dev_start(port);
  return rc;
}

void remove(const std::string& name, uint16_t port) {
  rte_eth_dev_info info{};
  rte_eth_dev_info_get(port, &info);
  rte_eth_dev_stop(port);
  rte_eth_dev_close(port);
  if (!info.device || rte_dev_remove(info.device) < 0)
    spdlog::warn("capture device {}: hot-unplug failed", name);
}

}  // namespace

std::string capture_dev_name(const std::string& port_id) {
  return "net_null_" + port_id.substr(0, 11);
}

Status check_capture_dev(const std::string& port_id) {
  const std::string name = capture_dev_name(port_id);
  uint16_t port;
  if (rte_eth_dev_get_port_by_name(name.c_str(), &port) == 0)
    return conflict("capture device " + name + ": an ethdev of that name exists (ethdev " +
                    std::to_string(port) + ")");
  if (rte_eth_dev_count_total() >= RTE_MAX_ETHPORTS)
    return exhausted("capture device " + name + ": all " + std::to_string(RTE_MAX_ETHPORTS) +
                     " DPDK ethdev ids are in use; turn capture off on another port");
  return ok();
}

Result<CaptureDev> open_capture_dev(const std::string& port_id, uint16_t n_queues,
                                    rte_mempool* pool) {
  if (Status st = check_capture_dev(port_id); !st) return st.error();
  CaptureDev d{capture_dev_name(port_id), 0};
  if (int rc = rte_dev_probe(d.name.c_str()); rc < 0) return dev_error(d.name, "probe failed", rc);
  if (rte_eth_dev_get_port_by_name(d.name.c_str(), &d.port_id) != 0) {
    rte_eal_hotplug_remove("vdev", d.name.c_str());
    return Error{"device_error", "capture device " + d.name + ": probed, but no such ethdev"};
  }
  if (int rc = configure(d.port_id, n_queues, pool); rc != 0) {
    remove(d.name, d.port_id);
    return dev_error(d.name, "configure/start failed", rc);
  }
  spdlog::info("capture device {} (ethdev {}) for port {}", d.name, d.port_id, port_id);
  return d;
}

void close_capture_dev(const CaptureDev& d) {
  remove(d.name, d.port_id);
  spdlog::info("capture device {} removed", d.name);
}

}  // namespace strait::ctl
