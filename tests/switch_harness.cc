#include "tests/switch_harness.h"

#include <atomic>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_bus_vdev.h>
#include <rte_mbuf.h>

namespace strait::test {

namespace {
rte_mempool* test_pool() {
  static rte_mempool* pool =
      rte_pktmbuf_pool_create("test_frames", 8191, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
  return pool;
}
}  // namespace

RingPort::RingPort(const std::string& name) : name_(name) {
  // rte_eth_from_rings names the ethdev "net_ring_<base>".
  const std::string prefix = "net_ring_";
  if (name.rfind(prefix, 0) != 0) throw std::runtime_error("ring port names start with net_ring_");
  const std::string base = name.substr(prefix.size());
  in_ = rte_ring_create(("tin_" + base).c_str(), 4096, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
  out_ = rte_ring_create(("tout_" + base).c_str(), 4096, 0, 0);
  if (!in_ || !out_ || rte_eth_from_rings(base.c_str(), &in_, 1, &out_, 1, 0) < 0)
    throw std::runtime_error("cannot create ring port " + name);
}

RingPort::~RingPort() {
  uint16_t port;
  if (rte_eth_dev_get_port_by_name(name_.c_str(), &port) == 0) {
    rte_eth_dev_stop(port);
    rte_eth_dev_close(port);
    rte_vdev_uninit(name_.c_str());
  }
  take();
  void* m;
  while (rte_ring_dequeue(in_, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
  rte_ring_free(in_);
  rte_ring_free(out_);
}

void RingPort::send(const std::vector<Frame>& frames) {
  for (const Frame& f : frames) {
    rte_mbuf* m = rte_pktmbuf_alloc(test_pool());
    if (!m) throw std::runtime_error("test pool empty");
    char* p = rte_pktmbuf_append(m, static_cast<uint16_t>(f.size()));
    memcpy(p, f.data(), f.size());
    while (rte_ring_enqueue(in_, m) != 0) std::this_thread::yield();
  }
}

std::vector<Frame> RingPort::take() {
  void* objs[64];
  unsigned n;
  while ((n = rte_ring_dequeue_burst(out_, objs, 64, nullptr)) > 0) {
    for (unsigned i = 0; i < n; i++) {
      auto* m = static_cast<rte_mbuf*>(objs[i]);
      Frame f(rte_pktmbuf_pkt_len(m));
      // rte_pktmbuf_read returns a pointer into the mbuf when contiguous.
      const auto* src = rte_pktmbuf_read(m, 0, f.size(), f.data());
      if (src != f.data()) memcpy(f.data(), src, f.size());
      got_.push_back(std::move(f));
      rte_pktmbuf_free(m);
    }
  }
  std::vector<Frame> all = std::move(got_);
  got_.clear();
  return all;
}

VirtioGuest::VirtioGuest(const std::string& name, const std::string& sock, const std::string& mac)
    : name_(name) {
  static rte_mempool* pool = rte_pktmbuf_pool_create("guest_pool", 4096, 128, 0,
                                                      RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
  pool_ = pool;
  const std::string args = "path=" + sock + ",queues=1,queue_size=256,mac=" + mac;
  if (rte_vdev_init(name.c_str(), args.c_str()) != 0)
    throw std::runtime_error("virtio-user " + name + ": cannot connect to " + sock);
  if (rte_eth_dev_get_port_by_name(name.c_str(), &port_) != 0)
    throw std::runtime_error("virtio-user " + name + ": no ethdev");
  rte_eth_conf conf{};
  if (rte_eth_dev_configure(port_, 1, 1, &conf) != 0 ||
      rte_eth_rx_queue_setup(port_, 0, 256, SOCKET_ID_ANY, nullptr, pool_) != 0 ||
      rte_eth_tx_queue_setup(port_, 0, 256, SOCKET_ID_ANY, nullptr) != 0 ||
      rte_eth_dev_start(port_) != 0)
    throw std::runtime_error("virtio-user " + name + ": cannot start");
}

VirtioGuest::~VirtioGuest() {
  rte_eth_dev_stop(port_);
  rte_eth_dev_close(port_);
  rte_vdev_uninit(name_.c_str());
}

unsigned VirtioGuest::send(const std::vector<Frame>& frames) {
  unsigned sent = 0;
  for (const Frame& f : frames) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool_);
    memcpy(rte_pktmbuf_append(m, f.size()), f.data(), f.size());
    if (rte_eth_tx_burst(port_, 0, &m, 1) == 1)
      sent++;
    else
      rte_pktmbuf_free(m);
  }
  return sent;
}

std::vector<Frame> VirtioGuest::take() {
  std::vector<Frame> out;
  rte_mbuf* ms[32];
  uint16_t n;
  while ((n = rte_eth_rx_burst(port_, 0, ms, 32)) > 0)
    for (uint16_t i = 0; i < n; i++) {
      Frame f(rte_pktmbuf_pkt_len(ms[i]));
      const auto* src = rte_pktmbuf_read(ms[i], 0, f.size(), f.data());
      if (src != f.data()) memcpy(f.data(), src, f.size());
      out.push_back(std::move(f));
      rte_pktmbuf_free(ms[i]);
    }
  return out;
}

std::vector<Frame> RingPort::wait_for(size_t n, std::chrono::milliseconds timeout) {
  std::vector<Frame> all;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (all.size() < n && std::chrono::steady_clock::now() < deadline) {
    auto got = take();
    all.insert(all.end(), got.begin(), got.end());
    if (all.size() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return all;
}

std::string port_uuid(int n) {
  char buf[40];
  snprintf(buf, sizeof(buf), "00000000-0000-4000-8000-%012d", n);
  return buf;
}

ctl::Config test_config(std::vector<unsigned> workers) {
  ctl::Config c;
  c.worker_lcores = std::move(workers);
  c.idle_sleep_us = 50;
  c.flow_cache_entries = 4096;
  // A state directory of its own: every switch starts from an empty store.
  char dir[] = "/tmp/strait-harness-XXXXXX";
  c.state_dir = mkdtemp(dir);
  return c;
}

nlohmann::json port_params(const std::string& id, const std::string& net, const std::string& mac,
                           const std::string& devargs) {
  return {{"id", id}, {"network", net}, {"mac", mac},
          {"attach", {{"type", "ethdev"}, {"devargs", devargs}}}};
}

Harness::Harness(ctl::Config cfg, bool keep_state)
    : state_dir_(cfg.state_dir), keep_state_(keep_state) {
  auto sw = ctl::Switch::create(cfg);
  if (!sw) throw std::runtime_error("Switch::create: " + sw.error().message);
  sw_ = std::move(*sw);
  sw_->start_workers();
}

Harness::~Harness() {
  sw_->stop_workers();
  sw_.reset();
  if (!keep_state_) std::filesystem::remove_all(state_dir_);
}

nlohmann::json Harness::call(const std::string& method, const nlohmann::json& params) {
  nlohmann::json reply;
  bool done = false;
  sw_->call(method, params.is_null() ? nlohmann::json::object() : params,
            [&](nlohmann::json r) {
              reply = std::move(r);
              done = true;
            });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done && std::chrono::steady_clock::now() < deadline) {
    sw_->poll();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (!done) throw std::runtime_error(method + ": no reply within 10 s");
  return reply;
}

nlohmann::json Harness::ok(const std::string& method, const nlohmann::json& params) {
  nlohmann::json r = call(method, params);
  EXPECT_TRUE(r["ok"].get<bool>()) << method << ": " << r.dump();
  return r.value("result", nlohmann::json());
}

void Harness::pump(std::chrono::milliseconds d) {
  auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) {
    sw_->poll();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void Harness::release(std::unique_ptr<VirtioGuest>& guest) {
  if (!guest) return;
  std::atomic<bool> done{false};
  std::thread t([&] {
    guest.reset();
    done = true;
  });
  while (!done) pump(std::chrono::milliseconds(1));
  t.join();
}

uint64_t Harness::drops(const std::string& reason) {
  return sw_->stats()["drops"].value(reason, uint64_t(0));
}

uint64_t Harness::worker_sum(const std::string& counter) {
  const nlohmann::json stats = sw_->stats();
  uint64_t n = 0;
  for (const nlohmann::json& w : stats["workers"]) n += w.at(counter).get<uint64_t>();
  return n;
}

}  // namespace strait::test
