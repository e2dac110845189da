// The instance lifecycle against a real Switch: vhost-user ports whose VM
// side is DPDK's virtio-user frontend in this process (a guest's NIC),
// domain events from libvirt's in-process test:///default driver through
// LibvirtWatcher, and, for what that driver does not emit (REBOOT, device
// hot-plug) or to control the order, the same events handed to the switch
// directly. Port A, the guest's, has port security and a security group
// that lets out UDP to port 53 only; after every transition each case
// checks the port's state, real frames through the datapath (the allowed
// one reaches port B, the denied one is dropped and counted), and the exact
// events on the API stream.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>
#include <libvirt/libvirt.h>
#include <rte_bus_vdev.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "control/daemon/event_loop.h"
#include "control/lifecycle/libvirt_watcher.h"
#include "tests/frame_builder.h"
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

using Guest = VirtioGuest;

class LifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cfg = test_config();
    dir_ = cfg.state_dir;
    cfg.vhost_socket_dir = dir_ + "/vhost";
    h_ = std::make_unique<Harness>(cfg);
    sub_ = h_->sw().events().subscribe([this](const json& ev) { events_.push_back(ev); });
    h_->ok("network.create", {{"id", "n1"}, {"type", "local"}});
    h_->ok("security_group.create", {{"id", "dns-out"}});
    rule(53);
    // Port B: a net_ring NIC without port security, the far end of every
    // frame the guest sends.
    ring_ = std::make_unique<RingPort>("net_ring_lcb");
    json b = port_params(uuid(2), "n1", kMacB, ring_->name());
    b["port_security_enabled"] = false;
    h_->ok("port.bind", b);
    sock_ = dir_ + "/vhu" + uuid(1).substr(0, 11);
    h_->ok("port.bind", {{"id", uuid(1)}, {"network", "n1"}, {"mac", kMacA},
                         {"fixed_ips", {"192.0.2.1"}}, {"security_groups", {"dns-out"}},
                         {"attach", {{"type", "vhost"}, {"path", sock_}, {"mode", "server"}}}});
    // The frames every check sends: UDP to 53 (allowed), 54 and 123 (denied
    // until a rule lets them out).
    std::vector<Frame> frames;
    for (uint16_t dport : {53, 54, 123})
      frames.push_back(Eth(kMacA, kMacB).ipv4("192.0.2.1", "192.0.2.2").udp(4000, dport).fill('x', 40));
    ASSERT_EQ(frames.size(), 3u);
    for (int i = 0; i < 3; i++) udp_[i] = std::move(frames[i]);
    take_events();
  }
  void TearDown() override {
    stop_guest();
    h_->sw().events().unsubscribe(sub_);
    h_.reset();
    ring_.reset();
  }
  json rule(int dport) {
    return h_->ok("security_group_rule.create",
                  {{"security_group_id", "dns-out"}, {"direction", "egress"}, {"ethertype", "IPv4"},
                   {"protocol", "udp"}, {"port_range_min", dport}, {"port_range_max", dport}});
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
    h_->sw().lifecycle().on_domain_event(
        {k, kDomUuid, "instance-0001", domain_xml(with_interface), device});
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
  // The guest's driver stops: its device is destroyed.
  void stop_guest() { h_->release(guest_); }
  void connect_guest() {
    guest_ = std::make_unique<Guest>("net_virtio_user_lc" + std::to_string(++n_guests_), sock_, kMacA);
  }
  // Frames to UDP port `dport` from the guest that reach port B, out of `n` sent.
  size_t forwarded(int n = 8, int dport = 53) {
    ring_->take();
    const Frame& f = udp_[dport == 53 ? 0 : dport == 54 ? 1 : 2];
    guest_->send(std::vector<Frame>(n, f));
    h_->pump(std::chrono::milliseconds(100));
    return ring_->wait_for(n, std::chrono::milliseconds(n ? 400 : 0)).size();
  }
  // The port forwards with its rules: the allowed frames reach B, the denied
  // ones do not and are counted as sg_egress_denied, each of them.
  void expect_rules_in_force(const std::vector<int>& denied = {54, 123}) {
    EXPECT_EQ(port()["state"], "up");
    EXPECT_EQ(forwarded(4, 53), 4u) << "allowed frames lost";
    for (int dport : denied) {
      const uint64_t before = h_->drops("sg_egress_denied");
      EXPECT_EQ(forwarded(4, dport), 0u) << "denied frames to " << dport << " forwarded";
      h_->pump(std::chrono::milliseconds(20));
      EXPECT_EQ(h_->drops("sg_egress_denied"), before + 4) << "to " << dport;
    }
    EXPECT_EQ(h_->ok("security_group.show", {{"id", "dns-out"}})["ports"], json({uuid(1)}));
  }
  // The port is down: not even an allowed frame goes out.
  void expect_forwards_nothing() {
    EXPECT_EQ(port()["state"], "down");
    if (guest_) {
      EXPECT_EQ(forwarded(4, 53), 0u) << "a down port forwarded";
    }
  }
  // The events since the last call, "event port-uuid", in order (after the
  // grace periods that hold some of them).
  std::vector<std::string> take_events() {
    h_->pump(std::chrono::milliseconds(50));
    std::vector<std::string> out;
    for (const json& e : events_) {
      EXPECT_TRUE(e.contains("ts")) << e.dump();
      out.push_back(e["event"].get<std::string>() + " " + e["port"].get<std::string>());
    }
    events_.clear();
    return out;
  }
  std::vector<std::string> ev(std::initializer_list<const char*> names) {
    std::vector<std::string> out;
    for (const char* n : names) out.push_back(std::string(n) + " " + uuid(1));
    return out;
  }

  std::string dir_, sock_;
  std::unique_ptr<Harness> h_;
  std::unique_ptr<RingPort> ring_;
  std::unique_ptr<Guest> guest_;
  std::vector<json> events_;
  Frame udp_[3];
  uint64_t sub_ = 0;
  int n_guests_ = 0;
};

// F6, F15: STARTED alone forwards nothing; the port is up, with its rules,
// when the guest's driver is ready, not when some frame is seen.
TEST_F(LifecycleTest, StartedThenGuestReadyForwardsWithRulesF6F15) {
  event(Kind::kDefined);
  event(Kind::kStarted);
  EXPECT_EQ(port()["domain"]["state"], "running");
  EXPECT_EQ(port()["domain"]["uuid"], kDomUuid);
  expect_forwards_nothing();  // no guest driver yet
  EXPECT_EQ(take_events(), ev({}));
  connect_guest();
  ASSERT_TRUE(wait_state("up"));
  EXPECT_EQ(take_events(), ev({"port-up", "vif-plugged"}));
  expect_rules_in_force();
  EXPECT_EQ(take_events(), ev({}));
}

// F1, F15: a guest-initiated reboot is REBOOT events (several) and a vhost
// device reset; the port ends forwarding with its rules, no unbind.
TEST_F(LifecycleTest, GuestRebootKeepsRulesF1F15) {
  connect_guest();
  ASSERT_TRUE(wait_state("up"));
  EXPECT_EQ(take_events(), ev({"port-up", "vif-plugged"}));
  for (int i = 0; i < 3; i++) event(Kind::kRebooted);
  stop_guest();  // the guest driver resets: destroy_device ...
  ASSERT_TRUE(wait_state("down"));
  EXPECT_EQ(take_events(), ev({"port-down"}));
  connect_guest();  // ... then new_device
  ASSERT_TRUE(wait_state("up"));
  EXPECT_EQ(take_events(), ev({"port-up", "vif-plugged"}));
  EXPECT_EQ(port()["domain"]["state"], "running");
  expect_rules_in_force();
}

// F1: a REBOOT event whose device reset has not come (yet) changes nothing:
// the port stays up with its rules and nothing is announced.
TEST_F(LifecycleTest, RebootEventAloneKeepsPortUpWithRulesF1) {
  event(Kind::kStarted);
  connect_guest();
  ASSERT_TRUE(wait_state("up"));
  EXPECT_EQ(take_events(), ev({"port-up", "vif-plugged"}));
  event(Kind::kRebooted);
  EXPECT_EQ(port()["domain"]["state"], "running");
  expect_rules_in_force();
  EXPECT_EQ(take_events(), ev({}));
}

// F1, F6: a hard reboot is STOPPED (the vhost side has not noticed yet),
// the guest gone, then STARTED and a new guest. Nothing of the guest is
// forwarded while stopped; binding, VLAN and rules stay, and a rule added
// meanwhile is in force for the new guest's first frame.
TEST_F(LifecycleTest, HardRebootStoppedThenStartedKeepsCurrentRulesF1F6) {
  event(Kind::kStarted);
  connect_guest();
  ASSERT_TRUE(wait_state("up"));
  EXPECT_EQ(take_events(), ev({"port-up", "vif-plugged"}));
  const json before = port();
  event(Kind::kStopped);
  ASSERT_TRUE(wait_state("down"));
  EXPECT_EQ(port()["domain"]["state"], "stopped");
  EXPECT_EQ(take_events(), ev({"port-down"}));
  expect_forwards_nothing();
  EXPECT_EQ(port()["local_vlan"], before["local_vlan"]);
  stop_guest();  // its QEMU is gone
  rule(123);     // the orchestrator changes the group meanwhile
  event(Kind::kStarted);
  EXPECT_EQ(take_events(), ev({}));
  connect_guest();
  ASSERT_TRUE(wait_state("up"));
  EXPECT_EQ(take_events(), ev({"port-up", "vif-plugged"}));
  EXPECT_EQ(forwarded(4, 123), 4u) << "the rule added while stopped is not in force";
  expect_rules_in_force({54});
}

// F1, F6: a soft reboot: the guest shuts down (its driver goes first), then
// STOPPED and STARTED, then the guest's driver again.
TEST_F(LifecycleTest, SoftRebootShutdownThenStartKeepsRulesF1F6) {
  event(Kind::kStarted);
  connect_guest();
  ASSERT_TRUE(wait_state("up"));
  EXPECT_EQ(take_events(), ev({"port-up", "vif-plugged"}));
  stop_guest();
  ASSERT_TRUE(wait_state("down"));
  event(Kind::kStopped);
  EXPECT_EQ(take_events(), ev({"port-down"}));  // once, not once per cause
  event(Kind::kStarted);
  expect_forwards_nothing();
  connect_guest();
  ASSERT_TRUE(wait_state("up"));
  EXPECT_EQ(take_events(), ev({"port-up", "vif-plugged"}));
  expect_rules_in_force();
}

// Suspend keeps the guest's vhost device (its rings are mapped, the guest
// just does not run): the port stays as it is; resume changes nothing.
TEST_F(LifecycleTest, SuspendAndResumeKeepRules) {
  event(Kind::kStarted);
  connect_guest();
  ASSERT_TRUE(wait_state("up"));
  EXPECT_EQ(take_events(), ev({"port-up", "vif-plugged"}));
  event(Kind::kSuspended);
  EXPECT_EQ(port()["domain"]["state"], "paused");
  expect_rules_in_force();
  event(Kind::kResumed);
  EXPECT_EQ(port()["domain"]["state"], "running");
  expect_rules_in_force();
  EXPECT_EQ(take_events(), ev({}));
}

// F14: interface detach removes the socket, keeps the binding; re-attach
// brings the socket back and the port forwards again, with its rules (F1).
// Repeatedly.
TEST_F(LifecycleTest, DeviceRemovedAndAddedRepeatedlyKeepsRulesF1F14) {
  event(Kind::kStarted);
  for (int round = 0; round < 3; round++) {
    SCOPED_TRACE("round " + std::to_string(round));
    connect_guest();
    ASSERT_TRUE(wait_state("up"));
    EXPECT_EQ(take_events(), ev({"port-up", "vif-plugged"}));
    expect_rules_in_force();
    event(Kind::kDeviceRemoved, /*with_interface=*/false, "net0");
    EXPECT_EQ(take_events(), ev({"port-down"}));
    expect_forwards_nothing();
    EXPECT_EQ(port()["vhost"]["attached"], false);
    EXPECT_EQ(port()["domain"], nullptr);
    EXPECT_EQ(port()["security_groups"], json({"dns-out"}));
    struct stat st;
    EXPECT_NE(lstat(sock_.c_str(), &st), 0) << "socket still there after detach";
    stop_guest();
    event(Kind::kDeviceAdded, true, "net0");
    EXPECT_EQ(port()["vhost"]["attached"], true);
    EXPECT_EQ(lstat(sock_.c_str(), &st), 0) << "socket not back after attach";
    EXPECT_EQ(take_events(), ev({}));
  }
  EXPECT_EQ(h_->ok("port.list")["ports"].size(), 2u);
}

// Delete: destroy, undefine, then the orchestrator unbinds. Undefine keeps
// the binding and rules (nova unbinds, not libvirt); the unbind releases
// the port's group membership and, with the network's last port gone, its
// local VLAN.
TEST_F(LifecycleTest, UndefineThenUnbindReleasesEverything) {
  event(Kind::kStarted);
  connect_guest();
  ASSERT_TRUE(wait_state("up"));
  EXPECT_EQ(take_events(), ev({"port-up", "vif-plugged"}));
  event(Kind::kStopped);
  stop_guest();
  event(Kind::kUndefined);
  EXPECT_EQ(domain_state(), "undefined");
  EXPECT_EQ(take_events(), ev({"port-down"}));
  EXPECT_EQ(port()["state"], "down");
  EXPECT_EQ(h_->ok("security_group.show", {{"id", "dns-out"}})["ports"], json({uuid(1)}));
  auto local_vlan = [&] { return h_->ok("network.list")["networks"][0]["local_vlan"]; };
  EXPECT_NE(local_vlan(), 0);
  h_->ok("port.unbind", {{"id", uuid(1)}});
  EXPECT_EQ(take_events(), ev({"port-unbound"}));
  EXPECT_EQ(h_->ok("security_group.show", {{"id", "dns-out"}})["ports"], json::array());
  h_->ok("port.unbind", {{"id", uuid(2)}});
  EXPECT_EQ(local_vlan(), 0);
  struct stat st;
  EXPECT_NE(lstat(sock_.c_str(), &st), 0) << "socket left after unbind";
}

// Startup reconciliation: a running domain's ports are attached; a port
// whose domain is gone is brought down, its binding and rules kept (F2, F3).
TEST_F(LifecycleTest, ListingReconcilesRunningAndVanishedDomainsF2F3) {
  connect_guest();
  ASSERT_TRUE(wait_state("up"));
  EXPECT_EQ(take_events(), ev({"port-up", "vif-plugged"}));
  h_->sw().lifecycle().on_domain_listing({{kDomUuid, "instance-0001", true, true, domain_xml()}});
  EXPECT_EQ(port()["domain"]["state"], "running");
  expect_rules_in_force();
  EXPECT_EQ(take_events(), ev({}));
  h_->sw().lifecycle().on_domain_listing({});  // libvirt came back without it
  ASSERT_TRUE(wait_state("down"));
  EXPECT_EQ(port()["domain"]["state"], "undefined");
  EXPECT_EQ(take_events(), ev({"port-down"}));
  expect_forwards_nothing();
  EXPECT_EQ(h_->ok("port.list")["ports"].size(), 2u);
  EXPECT_EQ(h_->ok("security_group.show", {{"id", "dns-out"}})["ports"], json({uuid(1)}));
}

// Bad input from libvirt: a clear log and a counted skip, no state change.
TEST_F(LifecycleTest, BadDomainXmlAndUnknownInterfacesAreCountedSkips) {
  connect_guest();
  ASSERT_TRUE(wait_state("up"));
  const json before = port();
  ctl::Lifecycle& life = h_->sw().lifecycle();
  life.on_domain_event({Kind::kStopped, kDomUuid, "x", "<domain><name>x</name><devices><inter", ""});
  life.on_domain_event({Kind::kStopped, "6f1c2a9e-0000-4000-8000-00000000000b", "other",
                        "<domain><name>other</name><devices><interface type='vhostuser'>"
                        "<mac address='02:00:00:00:77:77'/><source type='unix' path='/nowhere/sock' "
                        "mode='server'/></interface></devices></domain>",
                        ""});
  life.on_domain_event({Kind::kStarted, "", "", "\x01\x02 not xml at all", ""});
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
// does to a domain whose vhost-user interface is port A; after each step the
// port's rules are in force (or it forwards nothing) and the events are exact.
TEST_F(LifecycleTest, TestDriverLifecycleThroughWatcherKeepsRulesF1F6) {
  static ctl::EventLoop loop;  // libvirt keeps one event implementation per process
  ctl::Lifecycle& life = h_->sw().lifecycle();
  ctl::LibvirtWatcher watcher(loop, "test:///default",
                              {[&](const ctl::DomainEvent& e) { life.on_domain_event(e); },
                               [&](const std::vector<ctl::DomainState>& d) { life.on_domain_listing(d); }});
  life.set_watcher(&watcher);
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
  expect_forwards_nothing();
  connect_guest();
  ASSERT_TRUE(wait_state("up"));
  EXPECT_EQ(take_events(), ev({"port-up", "vif-plugged"}));
  expect_rules_in_force();
  ASSERT_EQ(virDomainSuspend(dom), 0);
  EXPECT_TRUE(pump_until([&] { return domain_state() == "paused"; }));
  expect_rules_in_force();
  ASSERT_EQ(virDomainResume(dom), 0);
  EXPECT_TRUE(pump_until([&] { return domain_state() == "running"; }));
  expect_rules_in_force();
  EXPECT_EQ(take_events(), ev({}));
  ASSERT_EQ(virDomainDestroy(dom), 0);
  EXPECT_TRUE(pump_until([&] { return domain_state() == "stopped"; }));
  EXPECT_TRUE(wait_state("down"));
  EXPECT_EQ(take_events(), ev({"port-down"}));
  expect_forwards_nothing();
  stop_guest();
  ASSERT_EQ(virDomainCreate(dom), 0);  // started again: a new guest
  EXPECT_TRUE(pump_until([&] { return domain_state() == "running"; }));
  connect_guest();
  ASSERT_TRUE(wait_state("up"));
  EXPECT_EQ(take_events(), ev({"port-up", "vif-plugged"}));
  expect_rules_in_force();
  ASSERT_EQ(virDomainDestroy(dom), 0);
  ASSERT_EQ(virDomainUndefine(dom), 0);
  EXPECT_TRUE(pump_until([&] { return domain_state() == "undefined"; }));
  EXPECT_TRUE(wait_state("down"));
  EXPECT_EQ(take_events(), ev({"port-down"}));
  EXPECT_EQ(h_->ok("port.list")["ports"].size(), 2u);  // bindings stay until unbound
  EXPECT_EQ(h_->ok("security_group.show", {{"id", "dns-out"}})["ports"], json({uuid(1)}));
  const json lc = h_->ok("show")["libvirt"];
  EXPECT_EQ(lc["connected"], true);
  EXPECT_GE(lc["handled"].value("started", 0), 1);
  virDomainFree(dom);
  virConnectClose(conn);
  life.set_watcher(nullptr);
}

}  // namespace
}  // namespace strait::test
