#include "control/devices/ethdev.h"

#include <algorithm>

#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <spdlog/spdlog.h>

#include "control/devices/eal_interrupts.h"
#include "control/model/model.h"
#include "dataplane/snapshot.h"

namespace strait::ctl {
namespace {

constexpr uint16_t kRxDesc = 1024;
constexpr uint16_t kTxDesc = 1024;
constexpr unsigned kPoolCache = 128;  // per lcore

Error dev_error(const std::string& devargs, const std::string& what, int rc) {
  return {"device_error", devargs + ": " + what + ": " + rte_strerror(rc < 0 ? -rc : rc)};
}

Result<uint16_t> find_or_probe(const std::string& devargs, bool* probed) {
  const std::string name = devargs_name(devargs);
  uint16_t port;
  *probed = false;
  if (rte_eth_dev_get_port_by_name(name.c_str(), &port) == 0) return port;
  int rc = rte_dev_probe(devargs.c_str());
  if (rc < 0) return dev_error(devargs, "probe failed", rc);
  *probed = true;
  if (rte_eth_dev_get_port_by_name(name.c_str(), &port) == 0) return port;
  return Error{"device_error", devargs + ": probed, but no ethdev named '" + name + "'"};
}

int configure(Ethdev& d, uint16_t n_workers) {
  rte_eth_dev_info info;
  int rc = rte_eth_dev_info_get(d.port_id, &info);
  if (rc) return rc;
  rte_eth_conf conf{};
  d.n_rxq = 1;
  if (info.flow_type_rss_offloads && n_workers > 1) {
    d.n_rxq = std::min<uint16_t>({n_workers, info.max_rx_queues, dp::kMaxRxQueues});
    conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
    conf.rx_adv_conf.rss_conf.rss_hf = RTE_ETH_RSS_IP & info.flow_type_rss_offloads;
  }
  d.n_txq = std::max<uint16_t>(1, std::min<uint16_t>(n_workers, info.max_tx_queues));
  if ((rc = rte_eth_dev_configure(d.port_id, d.n_rxq, d.n_txq, &conf))) return rc;
  uint16_t nrx = kRxDesc, ntx = kTxDesc;
  rte_eth_dev_adjust_nb_rx_tx_desc(d.port_id, &nrx, &ntx);
  const int socket = rte_eth_dev_socket_id(d.port_id);
  // Names are unique while the pool lives, which may be past the port id's.
  static unsigned seq = 0;
  const std::string pool_name = "strait_rx" + std::to_string(seq++);
  d.pool = rte_pktmbuf_pool_create(pool_name.c_str(),
                                   rx_pool_size(d.n_rxq, nrx, d.n_txq, ntx, n_workers), kPoolCache,
                                   0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                   socket == SOCKET_ID_ANY ? rte_socket_id() : socket);
  if (!d.pool) return -rte_errno;
  rte_mempool* pool = d.pool;
  for (uint16_t q = 0; q < d.n_rxq; q++)
    if ((rc = rte_eth_rx_queue_setup(d.port_id, q, nrx, socket, nullptr, pool))) return rc;
  for (uint16_t q = 0; q < d.n_txq; q++)
    if ((rc = rte_eth_tx_queue_setup(d.port_id, q, ntx, socket, nullptr))) return rc;
  if ((rc = rte_eth_dev_start(d.port_id))) return rc;
  // Not every vdev has a promiscuous mode (net_ring): not an error.
  rte_eth_promiscuous_enable(d.port_id);
  return 0;
}

}  // namespace

unsigned rx_pool_size(uint16_t n_rxq, uint16_t rx_desc, uint16_t n_txq, uint16_t tx_desc,
                      uint16_t n_workers) {
  return unsigned(n_rxq) * rx_desc + unsigned(n_txq) * tx_desc + 2u * 32 * n_workers +
         (n_workers + 1u) * kPoolCache * 3 / 2;
}

Result<Ethdev> open_ethdev(const std::string& devargs, uint16_t n_workers) {
  Ethdev d;
  d.devargs = devargs;
  d.name = devargs_name(devargs);
  auto port = find_or_probe(devargs, &d.probed);
  if (!port) return port.error();
  d.port_id = *port;
  if (int rc = configure(d, n_workers); rc != 0) {
    close_ethdev(d);
    // Closed, its rings gave their buffers back; a device we did not probe
    // is only stopped and may still hold some: then the pool stays.
    if (d.pool && rte_mempool_full(d.pool)) rte_mempool_free(d.pool);
    return dev_error(devargs, "configure/start failed", rc);
  }
  spdlog::info("ethdev {} (port {}): {} rx / {} tx queues", d.name, d.port_id, d.n_rxq, d.n_txq);
  return d;
}

void close_ethdev(const Ethdev& d) {
  // Between two interrupt callbacks: one of this device's may run at any
  // time (net_memif: a peer leaving), and its close does not wait for it
  // (both freed the device's shared memory regions: SIGSEGV in 8 of 87 stops).
  run_on_interrupt_thread([&d] {
    rte_eth_dev_info info{};
    rte_eth_dev_info_get(d.port_id, &info);
    rte_eth_dev_stop(d.port_id);
    if (d.probed) {
      rte_eth_dev_close(d.port_id);
      if (!info.device || rte_dev_remove(info.device) < 0)
        spdlog::warn("ethdev {}: hot-unplug failed", d.name);
    }
  });
}

std::optional<bool> link_up(uint16_t port_id) {
  rte_eth_link link{};
  if (rte_eth_link_get_nowait(port_id, &link) != 0) return std::nullopt;
  return link.link_status == RTE_ETH_LINK_UP;
}

}  // namespace strait::ctl
