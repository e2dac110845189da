// The instance lifecycle against a real Switch: vhost-user ports whose VM
// side is DPDK's virtio-user frontend in this process (a guest's NIC),
// domain events from libvirt's in-process test:///default driver through
// LibvirtWatcher, and, for what that driver does not emit (REBOOT, device
// hot-plug) or to control the order, the same events handed to the switch
// directly. Each case checks the port's state, its forwarding, and the
// events on the API stream.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>
#include <libvirt/libvirt.h>
#include <rte_bus_vdev.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "control/event_loop.h"
#include "control/libvirt_watcher.h"
#include "tests/switch_harness.h"

namespace strait::test {
namespace {

using nlohmann::json;
using Kind = ctl::DomainEvent::Kind;

constexpr char kMacA[] = "02:00:00:00:00:0a";
constexpr char kMacB[] = "02:00:00:00:00:0b";
constexpr char kDomUuid[] = "5f1c2a9e-0000-4000-8000-00000000000a";

std::string uuid(int n) {
  char buf[40];
  snprintf(buf, sizeof(buf), "%08d-0000-4000-8000-%012d", n, n);
  return buf;
}

// A guest NIC: a virtio-user ethdev connected to a vhost-user socket that
// straitd serves.
class Guest {
 public:
  Guest(const std::string& name, const std::string& sock, const std::string& mac) : name_(name) {
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
  ~Guest() {
    rte_eth_dev_stop(port_);
    rte_eth_dev_close(port_);
    rte_vdev_uninit(name_.c_str());
  }
  // Sends the frames once; returns how many the ring took.
  unsigned send(const std::vector<Frame>& frames) {
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
  std::vector<Frame> take() {
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

 private:
  std::string name_;
  uint16_t port_ = 0;
  rte_mempool* pool_;
};

class LifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cfg = test_config();
    dir_ = cfg.state_dir;
    cfg.vhost_socket_dir = dir_ + "/vhost";
    h_ = std::make_unique<Harness>(cfg);
    sub_ = h_->sw().subscribe([this](const json& ev) { events_.push_back(ev); });
    h_->ok("network.create", {{"id", "n1"}, {"type", "local"}});
    // Port B: a net_ring NIC, the far end of every frame the guest sends.
    ring_ = std::make_unique<RingPort>("net_ring_lcb");
    h_->ok("port.bind", port_params(uuid(2), "n1", kMacB, ring_->name()));
    sock_ = dir_ + "/vhu" + uuid(1).substr(0, 11);
    h_->ok("port.bind", {{"id", uuid(1)}, {"network", "n1"}, {"mac", kMacA},
                         {"attach", {{"type", "vhost"}, {"path", sock_}, {"mode", "server"}}}});
  }
  void TearDown() override {
    stop_guest();
    h_->sw().unsubscribe(sub_);
    h_.reset();
    ring_.reset();
  }
  // The domain's XML as libvirt shows a running nova instance with port A.
  std::string domain_xml(bool with_interface = true) const {
    std::string x = std::string("<domain type='kvm' id='3'><name>instance-0001</name><uuid>") +
                    kDomUuid + "</uuid><devices>";
    if (with_interface)
      x += "<interface type='vhostuser'><mac address='" + std::string(kMacA) +
           "'/><source type='unix' path='" + sock_ +
           "' mode='client'/><target dev='vhu" + uuid(1).substr(0, 11) +
           "'/><model type='virtio'/><alias name='net0'/></interface>";
    return x + "</devices></domain>";
  }
  void event(Kind k, bool with_interface = true, const std::string& device = "") {
    h_->sw().on_domain_event({k, kDomUuid, "instance-0001", domain_xml(with_interface), device});
  }
  json port() { return h_->ok("port.show", {{"id", uuid(1)}}); }
  std::string domain_state() {
    const json d = port()["domain"];
    return d.is_null() ? "" : d["state"].get<std::string>();
  }
  // Pumps the control loop until the port is in `state` (or 5 s).
  bool wait_state(const std::string& state) {
    for (int i = 0; i < 500; i++) {
      if (port()["state"] == state) return true;
      h_->pump(std::chrono::milliseconds(10));
    }
    return false;
  }
  // The guest's driver stops: its device is destroyed, and destroy_device
  // waits for this (the control) thread, so the control loop runs meanwhile.
  void stop_guest() {
    if (!guest_) return;
    std::atomic<bool> done{false};
    std::thread t([&] {
      guest_.reset();
      done = true;
    });
    while (!done) h_->pump(std::chrono::milliseconds(1));
    t.join();
  }
  void connect_guest() {
    guest_ = std::make_unique<Guest>("net_virtio_user_lc" + std::to_string(++n_guests_), sock_, kMacA);
  }
  // Frames from the guest that reach port B, out of `n` sent.
  size_t forwarded(int n = 8) {
    ring_->take();
    auto f = scapy(std::string("[Ether(src='") + kMacA + "', dst='" + kMacB +
                   "')/IP(src='192.0.2.1', dst='192.0.2.2')/UDP()/('x'*40)]*" + std::to_string(n));
    guest_->send(f);
    h_->pump(std::chrono::milliseconds(100));
    return ring_->wait_for(n, std::chrono::milliseconds(400)).size();
  }
  std::vector<std::string> events_of(const std::string& port_id) {
    std::vector<std::string> out;
    for (const json& e : events_)
      if (e["port"] == port_id) out.push_back(e["event"]);
    return out;
  }

  std::string dir_, sock_;
  std::unique_ptr<Harness> h_;
  std::unique_ptr<RingPort> ring_;
  std::unique_ptr<Guest> guest_;
  std::vector<json> events_;
  uint64_t sub_ = 0;
  int n_guests_ = 0;
};

TEST_F(LifecycleTest, StartedThenGuestReadyForwardsWithRules) {
  event(Kind::kDefined);
  event(Kind::kStarted);
  EXPECT_EQ(port()["domain"]["state"], "running");
  EXPECT_EQ(port()["domain"]["uuid"], kDomUuid);
  EXPECT_EQ(port()["state"], "down");  // no guest driver yet
  connect_guest();
  ASSERT_TRUE(wait_state("up"));
  EXPECT_EQ(forwarded(), 8u);
  EXPECT_EQ(events_of(uuid(1)), (std::vector<std::string>{"port-up", "vif-plugged"}));
}

// STOPPED before the vhost side noticed: nothing of the guest is forwarded
// from then on; binding, VLAN and rules stay; the next start needs no re-sync.
TEST_F(LifecycleTest, StoppedTakesPortDownAndKeepsBinding) {
  connect_guest();
  ASSERT_TRUE(wait_state("up"));
  const json before = port();
  event(Kind::kStopped);
  ASSERT_TRUE(wait_state("down"));
  EXPECT_EQ(port()["domain"]["state"], "stopped");
  EXPECT_EQ(forwarded(), 0u);
  EXPECT_EQ(port()["local_vlan"], before["local_vlan"]);
  // The guest goes (its QEMU is gone), then the instance starts again.
  stop_guest();
  event(Kind::kStarted);
  connect_guest();
  ASSERT_TRUE(wait_state("up"));
  EXPECT_EQ(forwarded(), 8u);
  EXPECT_EQ(events_of(uuid(1)),
            (std::vector<std::string>{"port-up", "vif-plugged", "port-down", "port-up",
                                      "vif-plugged"}));
}

// F1, F6, F15: a guest-initiated reboot is REBOOT events (several) and a
// vhost device reset; the port ends forwarding with its rules, no unbind.
TEST_F(LifecycleTest, GuestRebootEndsForwardingWithSameRules) {
  connect_guest();
  ASSERT_TRUE(wait_state("up"));
  for (int i = 0; i < 3; i++) event(Kind::kRebooted);
  stop_guest();  // the guest driver resets: destroy_device ...
  ASSERT_TRUE(wait_state("down"));
  connect_guest();  // ... then new_device
  ASSERT_TRUE(wait_state("up"));
  EXPECT_EQ(forwarded(), 8u);
  EXPECT_EQ(port()["domain"]["state"], "running");
  for (const auto& e : events_of(uuid(1))) EXPECT_NE(e, "port-unbound");
}

// F14: interface detach removes the socket, keeps the binding; re-attach
// brings the socket back and the port forwards again. Repeatedly.
TEST_F(LifecycleTest, DeviceRemovedAndAddedRepeatedly) {
  event(Kind::kStarted);
  for (int round = 0; round < 5; round++) {
    connect_guest();
    ASSERT_TRUE(wait_state("up")) << "round " << round;
    ASSERT_EQ(forwarded(), 8u) << "round " << round;
    event(Kind::kDeviceRemoved, /*with_interface=*/false, "net0");
    h_->pump(std::chrono::milliseconds(50));
    EXPECT_EQ(port()["state"], "down");
    EXPECT_EQ(port()["vhost"]["attached"], false);
    EXPECT_EQ(port()["domain"], nullptr);
    struct stat st;
    EXPECT_NE(lstat(sock_.c_str(), &st), 0) << "socket still there after detach";
    stop_guest();
    event(Kind::kDeviceAdded, true, "net0");
    EXPECT_EQ(port()["vhost"]["attached"], true);
    EXPECT_EQ(lstat(sock_.c_str(), &st), 0) << "socket not back after attach";
  }
  EXPECT_EQ(h_->ok("port.list")["ports"].size(), 2u);
}

// Startup reconciliation: a running domain's ports are attached; a port
// whose domain is gone is brought down, its binding kept (F2, F3).
TEST_F(LifecycleTest, ListingReconcilesRunningAndVanishedDomains) {
  connect_guest();
  ASSERT_TRUE(wait_state("up"));
  h_->sw().on_domain_listing({{kDomUuid, "instance-0001", true, true, domain_xml()}});
  EXPECT_EQ(port()["domain"]["state"], "running");
  EXPECT_EQ(port()["state"], "up");
  h_->sw().on_domain_listing({});  // libvirt came back without it
  ASSERT_TRUE(wait_state("down"));
  EXPECT_EQ(port()["domain"]["state"], "undefined");
  EXPECT_EQ(h_->ok("port.list")["ports"].size(), 2u);
}

// Bad input from libvirt: a clear log and a counted skip, no state change.
TEST_F(LifecycleTest, BadDomainXmlAndUnknownInterfacesAreCountedSkips) {
  connect_guest();
  ASSERT_TRUE(wait_state("up"));
  const json before = port();
  auto& sw = h_->sw();
  sw.on_domain_event({Kind::kStopped, kDomUuid, "x", "<domain><name>x</name><devices><inter", ""});
  sw.on_domain_event({Kind::kStopped, "6f1c2a9e-0000-4000-8000-00000000000b", "other",
                      "<domain><name>other</name><devices><interface type='vhostuser'>"
                      "<mac address='02:00:00:00:77:77'/><source type='unix' path='/nowhere/sock' "
                      "mode='server'/></interface></devices></domain>",
                      ""});
  sw.on_domain_event({Kind::kStarted, "", "", "\x01\x02 not xml at all", ""});
  h_->pump(std::chrono::milliseconds(50));
  const json after = port();
  EXPECT_EQ(after["state"], "up");
  EXPECT_EQ(after["domain"], before["domain"]);
  const json lc = h_->ok("show")["libvirt"];
  EXPECT_EQ(lc["skipped"]["bad_xml"], 2);
  EXPECT_EQ(lc["skipped"]["unmapped_interface"], 1);
  EXPECT_EQ(forwarded(), 8u);
}

// The same lifecycle from libvirt itself: its in-process test driver emits
// DEFINED, STARTED, SUSPENDED, RESUMED, STOPPED, UNDEFINED for what this test
// does to a domain whose vhost-user interface is port A.
TEST_F(LifecycleTest, TestDriverLifecycleThroughWatcher) {
  static ctl::EventLoop loop;  // libvirt keeps one event implementation per process
  auto& sw = h_->sw();
  ctl::LibvirtWatcher watcher(loop, "test:///default",
                              {[&](const ctl::DomainEvent& e) { sw.on_domain_event(e); },
                               [&](const std::vector<ctl::DomainState>& d) { sw.on_domain_listing(d); }});
  sw.set_watcher(&watcher);
  watcher.start();
  auto pump_until = [&](auto pred) {
    for (int i = 0; i < 300 && !pred(); i++) {
      loop.run_once(5);
      h_->pump(std::chrono::milliseconds(5));
    }
    return pred();
  };
  ASSERT_TRUE(pump_until([&] { return watcher.connected(); }));
  virConnectPtr conn = virConnectOpen("test:///default");
  ASSERT_NE(conn, nullptr);
  std::string xml = domain_xml();
  xml.replace(xml.find("type='kvm' id='3'"), 17, "type='test'");
  xml.replace(xml.find("<devices>"), 9,
              "<memory>65536</memory><os><type>hvm</type></os><devices>");
  virDomainPtr dom = virDomainDefineXML(conn, xml.c_str());
  ASSERT_NE(dom, nullptr);
  ASSERT_EQ(virDomainCreate(dom), 0);
  EXPECT_TRUE(pump_until([&] { return domain_state() == "running"; }));
  connect_guest();
  ASSERT_TRUE(wait_state("up"));
  ASSERT_EQ(virDomainSuspend(dom), 0);
  EXPECT_TRUE(pump_until([&] { return domain_state() == "paused"; }));
  ASSERT_EQ(virDomainResume(dom), 0);
  EXPECT_TRUE(pump_until([&] { return domain_state() == "running"; }));
  ASSERT_EQ(virDomainDestroy(dom), 0);
  EXPECT_TRUE(pump_until([&] { return domain_state() == "stopped"; }));
  EXPECT_TRUE(wait_state("down"));
  ASSERT_EQ(virDomainUndefine(dom), 0);
  EXPECT_TRUE(pump_until([&] { return domain_state() == "undefined"; }));
  EXPECT_EQ(h_->ok("port.list")["ports"].size(), 2u);  // bindings stay until unbound
  const json lc = h_->ok("show")["libvirt"];
  EXPECT_EQ(lc["connected"], true);
  EXPECT_GE(lc["handled"].value("started", 0), 1);
  virDomainFree(dom);
  virConnectClose(conn);
  sw.set_watcher(nullptr);
}

}  // namespace
}  // namespace strait::test
