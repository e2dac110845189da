// port.capture against a real Switch: a vhost-user port (its guest is
// DPDK's virtio-user frontend in this process) gets a stand-in net_null
// ethdev, and callbacks installed on it the way rte_pdump installs
// dpdk-dumpcap's (rte_eth_add_rx/tx_callback on every queue) see every frame
// the port receives and sends, exactly once. Refused requests change
// nothing; the stand-in goes with --off, unbind and shutdown.
#include <mutex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rte_bus_vdev.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "tests/frame_builder.h"
#include "tests/switch_harness.h"

namespace strait::test {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr char kMacA[] = "02:00:00:00:00:0a";
constexpr char kMacB[] = "02:00:00:00:00:0b";

std::string uuid(int n) {
  char buf[40];
  snprintf(buf, sizeof(buf), "%08d-0000-4000-8000-%012d", n, n);
  return buf;
}

Frame frame_of(const rte_mbuf* m) {
  Frame f(rte_pktmbuf_pkt_len(m));
  const auto* src = rte_pktmbuf_read(m, 0, f.size(), f.data());
  if (src != f.data()) memcpy(f.data(), src, f.size());
  return f;
}

// What the stand-in's callbacks saw, by direction. Written on worker lcores.
struct Seen {
  std::mutex mu;
  std::vector<Frame> rx, tx;
  std::vector<Frame> get(bool tx_side) {
    std::lock_guard<std::mutex> g(mu);
    return tx_side ? tx : rx;
  }
};

uint16_t on_rx(uint16_t, uint16_t, rte_mbuf** pkts, uint16_t n, uint16_t, void* user) {
  auto* s = static_cast<Seen*>(user);
  std::lock_guard<std::mutex> g(s->mu);
  for (uint16_t i = 0; i < n; i++) s->rx.push_back(frame_of(pkts[i]));
  return n;
}

uint16_t on_tx(uint16_t, uint16_t, rte_mbuf** pkts, uint16_t n, void* user) {
  auto* s = static_cast<Seen*>(user);
  std::lock_guard<std::mutex> g(s->mu);
  for (uint16_t i = 0; i < n; i++) s->tx.push_back(frame_of(pkts[i]));
  return n;
}

bool ethdev_exists(const std::string& name) {
  uint16_t port;
  return rte_eth_dev_get_port_by_name(name.c_str(), &port) == 0;
}

class CaptureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cfg = test_config();
    cfg.vhost_socket_dir = cfg.state_dir + "/vhost";
    h_ = std::make_unique<Harness>(cfg);
    h_->ok("network.create", {{"id", "n1"}, {"type", "local"}});
    ring_ = std::make_unique<RingPort>("net_ring_capb");
    json b = port_params(uuid(2), "n1", kMacB, ring_->name());
    b["port_security_enabled"] = false;
    h_->ok("port.bind", b);
    sock_ = cfg.vhost_socket_dir + "/vhu" + uuid(1).substr(0, 11);
    bind_a();
    std::vector<Frame> frames;
    for (uint16_t i = 0; i < 6; i++)
      frames.push_back(Eth("02:00:00:00:00:0a", "02:00:00:00:00:0b").ipv4().udp(1, i).fill('a', 40));
    for (uint16_t i = 0; i < 4; i++)
      frames.push_back(Eth("02:00:00:00:00:0b", "02:00:00:00:00:0a").ipv4().udp(2, i).fill('b', 40));
    ASSERT_EQ(frames.size(), 10u);
    a_to_b_.assign(frames.begin(), frames.begin() + 6);
    b_to_a_.assign(frames.begin() + 6, frames.end());
  }
  void TearDown() override {
    stop_guest();
    h_.reset();
    ring_.reset();
  }
  void bind_a() {
    h_->ok("port.bind", {{"id", uuid(1)}, {"network", "n1"}, {"mac", kMacA},
                         {"port_security_enabled", false},
                         {"attach", {{"type", "vhost"}, {"path", sock_}, {"mode", "server"}}}});
  }
  json capture(const json& params) { return h_->call("port.capture", params); }
  json capture(bool on) { return capture({{"id", uuid(1)}, {"enabled", on}}); }
  json shown() { return h_->ok("port.show", {{"id", uuid(1)}})["capture"]; }
  void connect_guest() {
    guest_ = std::make_unique<VirtioGuest>("net_virtio_user_cap", sock_, kMacA);
    for (int i = 0; i < 500 && h_->ok("port.show", {{"id", uuid(1)}})["state"] != "up"; i++)
      h_->pump(std::chrono::milliseconds(10));
    ASSERT_EQ(h_->ok("port.show", {{"id", uuid(1)}})["state"], "up");
  }
  // After a test shut the switch down (h_ gone) there is nothing to pump.
  void stop_guest() {
    if (h_)
      h_->release(guest_);
    else
      guest_.reset();
  }
  std::vector<Frame> guest_wait(size_t n) {
    std::vector<Frame> got;
    for (int i = 0; i < 300 && got.size() < n; i++) {
      for (Frame& f : guest_->take()) got.push_back(std::move(f));
      h_->pump(std::chrono::milliseconds(10));
    }
    return got;
  }
  // Callbacks on every queue of the stand-in, as rte_pdump does for
  // dpdk-dumpcap (RTE_PDUMP_ALL_QUEUES).
  void install_callbacks(uint16_t ethdev) {
    rte_eth_dev_info info;
    ASSERT_EQ(rte_eth_dev_info_get(ethdev, &info), 0);
    ASSERT_GE(info.nb_rx_queues, 1);
    ASSERT_GE(info.nb_tx_queues, 1);
    for (uint16_t q = 0; q < info.nb_rx_queues; q++)
      ASSERT_NE(rte_eth_add_rx_callback(ethdev, q, on_rx, &seen_), nullptr) << q;
    for (uint16_t q = 0; q < info.nb_tx_queues; q++)
      ASSERT_NE(rte_eth_add_tx_callback(ethdev, q, on_tx, &seen_), nullptr) << q;
  }

  std::string sock_;
  std::unique_ptr<Harness> h_;
  std::unique_ptr<RingPort> ring_;
  std::unique_ptr<VirtioGuest> guest_;
  std::vector<Frame> a_to_b_, b_to_a_;
  Seen seen_;
};

TEST_F(CaptureTest, StandInCallbacksSeeEveryFrameOnceBothWays) {
  EXPECT_TRUE(shown().is_null());
  // On before the guest is there: the stand-in outlives device changes.
  json r = capture(true);
  ASSERT_TRUE(r["ok"].get<bool>()) << r.dump();
  const std::string name = "net_null_" + uuid(1).substr(0, 11);
  EXPECT_EQ(r["result"]["id"], uuid(1));
  EXPECT_EQ(r["result"]["capture"]["ethdev"], name);
  uint16_t ethdev;
  ASSERT_EQ(rte_eth_dev_get_port_by_name(name.c_str(), &ethdev), 0);
  EXPECT_EQ(r["result"]["capture"]["ethdev_id"], ethdev);
  EXPECT_EQ(shown(), r["result"]["capture"]);
  json in_show;
  const json show = h_->ok("show");
  for (const json& p : show["ports"])
    if (p["id"] == uuid(1)) in_show = p["capture"];
  EXPECT_EQ(in_show, r["result"]["capture"]);
  install_callbacks(ethdev);
  connect_guest();

  // Guest -> B: the port's rx direction.
  ring_->take();
  ASSERT_EQ(guest_->send(a_to_b_), a_to_b_.size());
  EXPECT_TRUE(ring_->wait_for(a_to_b_.size()) == a_to_b_);
  h_->pump(std::chrono::milliseconds(50));
  EXPECT_EQ(seen_.get(false).size(), a_to_b_.size());
  EXPECT_TRUE(seen_.get(false) == a_to_b_) << "rx callbacks saw other frames";
  EXPECT_TRUE(seen_.get(true).empty());

  // B -> guest: the port's tx direction.
  ring_->send(b_to_a_);
  EXPECT_TRUE(guest_wait(b_to_a_.size()) == b_to_a_);
  h_->pump(std::chrono::milliseconds(50));
  EXPECT_EQ(seen_.get(true).size(), b_to_a_.size());
  EXPECT_TRUE(seen_.get(true) == b_to_a_) << "tx callbacks saw other frames";
  EXPECT_EQ(seen_.get(false).size(), a_to_b_.size());

  // Off: the stand-in is gone when the answer comes, and forwarding goes on
  // without it.
  r = capture(false);
  ASSERT_TRUE(r["ok"].get<bool>()) << r.dump();
  EXPECT_TRUE(r["result"]["capture"].is_null());
  EXPECT_FALSE(ethdev_exists(name));
  EXPECT_TRUE(shown().is_null());
  ASSERT_EQ(guest_->send(a_to_b_), a_to_b_.size());
  EXPECT_TRUE(ring_->wait_for(a_to_b_.size()) == a_to_b_);
  EXPECT_EQ(seen_.get(false).size(), a_to_b_.size());
  // And on again: the name is free.
  ASSERT_TRUE(capture(true)["ok"].get<bool>());
  EXPECT_TRUE(ethdev_exists(name));
}

void expect_refused(const json& r, const char* code, const char* words) {
  ASSERT_FALSE(r["ok"].get<bool>()) << r.dump();
  EXPECT_EQ(r["error"]["code"], code) << r.dump();
  EXPECT_THAT(r["error"]["message"].get<std::string>(), HasSubstr(words));
}

TEST_F(CaptureTest, RefusalsAreClearAndChangeNothing) {
  const uint16_t ethdevs = rte_eth_dev_count_total();
  expect_refused(capture({{"id", uuid(1)}}), "invalid_argument", "enabled");
  expect_refused(capture({{"id", uuid(1)}, {"enabled", "yes"}}), "invalid_argument", "enabled");
  expect_refused(capture({{"id", uuid(1)}, {"enabled", true}, {"queue", 1}}), "invalid_argument",
                 "queue");
  expect_refused(capture({{"enabled", true}}), "invalid_argument", "id");
  expect_refused(capture({{"id", uuid(9)}, {"enabled", true}}), "not_found", uuid(9).c_str());
  expect_refused(capture({{"id", uuid(2)}, {"enabled", true}}), "invalid_argument",
                 "not a vhost-user port");
  expect_refused(capture(false), "conflict", "already off");
  EXPECT_EQ(rte_eth_dev_count_total(), ethdevs);
  EXPECT_TRUE(shown().is_null());

  ASSERT_TRUE(capture(true)["ok"].get<bool>());
  const json on = shown();
  expect_refused(capture(true), "conflict", "already on");
  EXPECT_EQ(shown(), on);
  EXPECT_EQ(rte_eth_dev_count_total(), ethdevs + 1);
  ASSERT_TRUE(capture(false)["ok"].get<bool>());

  // Every ethdev id taken: refused, nothing made.
  std::vector<std::string> fillers;
  while (rte_eth_dev_count_total() < RTE_MAX_ETHPORTS) {
    fillers.push_back("net_null_fill" + std::to_string(fillers.size()));
    ASSERT_EQ(rte_vdev_init(fillers.back().c_str(), ""), 0);
  }
  expect_refused(capture(true), "resource_exhausted", "ethdev ids are in use");
  EXPECT_TRUE(shown().is_null());
  EXPECT_EQ(rte_eth_dev_count_total(), RTE_MAX_ETHPORTS);
  for (const std::string& f : fillers) rte_vdev_uninit(f.c_str());
  EXPECT_TRUE(capture(true)["ok"].get<bool>());
}

TEST_F(CaptureTest, UnbindAndShutdownRemoveTheStandIn) {
  const std::string name = "net_null_" + uuid(1).substr(0, 11);
  ASSERT_TRUE(capture(true)["ok"].get<bool>());
  ASSERT_TRUE(ethdev_exists(name));
  h_->ok("port.unbind", {{"id", uuid(1)}});
  EXPECT_FALSE(ethdev_exists(name));
  // Bound again: capture is off until asked for.
  bind_a();
  EXPECT_TRUE(shown().is_null());
  ASSERT_TRUE(capture(true)["ok"].get<bool>());
  h_.reset();  // straitd's shutdown: the Switch closes every device
  EXPECT_FALSE(ethdev_exists(name));
}

}  // namespace
}  // namespace strait::test
