// rte_flow offload of the physnet NICs (control/devices/flow_offload.h): the rule
// logic against a stand-in NIC, then a Switch whose physnet is a net_tap (TC
// flower rules the kernel shows with `tc filter show`) or a net_ring (no
// rte_flow: everything stays with software).
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <memory>
#include <set>

#include <gtest/gtest.h>
#include <rte_flow.h>

#include "control/devices/flow_offload.h"
#include "control/ops/metrics.h"
#include "tests/frame_builder.h"
#include "tests/switch_harness.h"

namespace strait::test {
namespace {

using ctl::FlowRule;
using nlohmann::json;

constexpr char kMacA[] = "02:00:00:00:00:0a";
constexpr char kMacB[] = "02:00:00:00:00:0b";
constexpr char kRemote[] = "02:00:00:00:99:01";

FlowRule allow(uint16_t vid) { return {FlowRule::Kind::kAllowVlan, vid}; }
const FlowRule kDrop{FlowRule::Kind::kDropOtherVlans, 0};

// ---- the rule logic, against a NIC the test controls ----------------------

struct FakeNic {
  std::set<FlowRule> refuse_validate, refuse_create;
  int validate_rc = -ENOTSUP;          // what a refused validate returns
  std::map<rte_flow*, FlowRule> live;  // rules in the NIC
  std::vector<std::string> calls;
  uintptr_t next = 1;
};

class FakeDevice final : public ctl::FlowDevice {
 public:
  explicit FakeDevice(std::shared_ptr<FakeNic> nic) : nic_(std::move(nic)) {}
  int validate(uint16_t, uint16_t, const FlowRule& r, std::string* err) override {
    nic_->calls.push_back("validate " + r.describe());
    if (!nic_->refuse_validate.count(r)) return 0;
    *err = "no";
    return nic_->validate_rc;
  }
  rte_flow* create(uint16_t, uint16_t, const FlowRule& r, std::string* err) override {
    nic_->calls.push_back("create " + r.describe());
    if (nic_->refuse_create.count(r)) {
      *err = "kernel said no";
      return nullptr;
    }
    auto* f = reinterpret_cast<rte_flow*>(nic_->next++);
    nic_->live[f] = r;
    return f;
  }
  int destroy(uint16_t, rte_flow* f, std::string*) override {
    nic_->calls.push_back("destroy " + nic_->live.at(f).describe());
    nic_->live.erase(f);
    return 0;
  }
  int flush(uint16_t, std::string*) override {
    nic_->calls.push_back("flush");
    nic_->live.clear();
    return 0;
  }

 private:
  std::shared_ptr<FakeNic> nic_;
};

std::set<FlowRule> rules_in(const FakeNic& nic) {
  std::set<FlowRule> s;
  for (const auto& [f, r] : nic.live) s.insert(r);
  return s;
}

struct OffloadFixture {
  std::shared_ptr<FakeNic> nic = std::make_shared<FakeNic>();
  ctl::FlowOffload off{true, std::make_unique<FakeDevice>(nic)};
  OffloadFixture() { off.add_port("p", 3, 1); }
};

TEST(FlowOffloadLogic, InstallsAllowsThenDropAndFollowsChanges) {
  OffloadFixture t;
  t.off.sync("p", {allow(100), allow(200), kDrop});
  EXPECT_EQ(rules_in(*t.nic), (std::set<FlowRule>{allow(100), allow(200), kDrop}));
  // Validated before created; the DROP last.
  ASSERT_EQ(t.nic->calls.size(), 6u);
  EXPECT_EQ(t.nic->calls[0], "validate allow vlan 100");
  EXPECT_EQ(t.nic->calls[1], "create allow vlan 100");
  EXPECT_EQ(t.nic->calls[5], "create drop other vlans");
  json j = t.off.json("p");
  EXPECT_EQ(j["installed"], 3);
  EXPECT_EQ(j["refused"], 0);
  EXPECT_EQ(j["supported"], true);

  t.nic->calls.clear();
  t.off.sync("p", {allow(100), allow(200), kDrop});  // unchanged: the NIC is not asked
  EXPECT_TRUE(t.nic->calls.empty());

  t.off.sync("p", {allow(100), kDrop});
  EXPECT_EQ(rules_in(*t.nic), (std::set<FlowRule>{allow(100), kDrop}));
  EXPECT_EQ(t.nic->calls, std::vector<std::string>{"destroy allow vlan 200"});
  EXPECT_EQ(t.off.json("p")["installed"], 2);

  t.off.clear();
  EXPECT_TRUE(t.nic->live.empty());
}

TEST(FlowOffloadLogic, RefusedAllowKeepsTheDropOut) {
  OffloadFixture t;
  t.off.sync("p", {allow(100), kDrop});
  ASSERT_EQ(rules_in(*t.nic), (std::set<FlowRule>{allow(100), kDrop}));
  // VLAN 300 cannot be let through by the NIC: the NIC must not drop it either.
  t.nic->refuse_validate.insert(allow(300));
  t.off.sync("p", {allow(100), allow(300), kDrop});
  EXPECT_EQ(rules_in(*t.nic), std::set<FlowRule>{allow(100)});
  json j = t.off.json("p");
  EXPECT_EQ(j["installed"], 1);
  EXPECT_EQ(j["refused"], 2);  // allow 300 and the drop: software does both
  EXPECT_EQ(j["refusals"], 2);
  EXPECT_NE(j["last_error"].get<std::string>().find("allow vlan 300"), std::string::npos);
  bool saw_300 = false;
  for (const json& r : j["rules"])
    if (r["rule"] == "allow vlan 300") saw_300 = r["state"] == "software";
  EXPECT_TRUE(saw_300);
  // VLAN 300 goes away: the DROP comes back.
  t.off.sync("p", {allow(100), kDrop});
  EXPECT_EQ(rules_in(*t.nic), (std::set<FlowRule>{allow(100), kDrop}));
  EXPECT_EQ(t.off.json("p")["refused"], 0);
}

TEST(FlowOffloadLogic, CreateFailureIsAFallbackToo) {
  OffloadFixture t;
  t.nic->refuse_create.insert(kDrop);
  t.off.sync("p", {allow(100), kDrop});
  EXPECT_EQ(rules_in(*t.nic), std::set<FlowRule>{allow(100)});
  json j = t.off.json("p");
  EXPECT_EQ(j["refused"], 1);
  EXPECT_NE(j["last_error"].get<std::string>().find("create: kernel said no"), std::string::npos);
}

TEST(FlowOffloadLogic, NoRteFlowAtAllIsUnsupported) {
  OffloadFixture t;
  t.nic->validate_rc = -ENOSYS;
  t.nic->refuse_validate = {allow(100), kDrop};
  t.off.sync("p", {allow(100), kDrop});
  EXPECT_TRUE(t.nic->live.empty());
  json j = t.off.json("p");
  EXPECT_EQ(j["supported"], false);
  EXPECT_EQ(j["installed"], 0);
  EXPECT_EQ(j["refused"], 2);
}

TEST(FlowOffloadLogic, ReplayFlushesAndRecreates) {
  OffloadFixture t;
  t.off.sync("p", {allow(100), kDrop});
  // The NIC lost its rules in a restart (the handles are stale).
  t.nic->live.clear();
  t.nic->calls.clear();
  t.off.replay("p");
  EXPECT_EQ(t.nic->calls.front(), "flush");
  EXPECT_EQ(rules_in(*t.nic), (std::set<FlowRule>{allow(100), kDrop}));
  EXPECT_EQ(t.off.json("p")["installed"], 2);
  // A rule refused before is tried again at a replay.
  t.nic->refuse_create.insert(allow(7));
  t.off.sync("p", {allow(100), allow(7), kDrop});
  t.nic->refuse_create.clear();
  EXPECT_EQ(rules_in(*t.nic), std::set<FlowRule>{allow(100)});
  EXPECT_EQ(t.off.json("p")["refused"], 2);
  t.off.replay("p");
  EXPECT_EQ(t.off.json("p")["installed"], 3);
  EXPECT_EQ(t.off.json("p")["refused"], 0);
}

TEST(FlowOffloadLogic, DisabledAsksNothing) {
  auto nic = std::make_shared<FakeNic>();
  ctl::FlowOffload off(false, std::make_unique<FakeDevice>(nic));
  off.add_port("p", 3, 1);
  off.sync("p", {allow(100), kDrop});
  off.replay("p");
  EXPECT_TRUE(nic->calls.empty());
  EXPECT_EQ(off.json("p")["enabled"], false);
  EXPECT_EQ(off.json("p")["installed"], 0);
}

TEST(FlowOffloadLogic, DesiredRulesAreTheMappedVlans) {
  ctl::Model m({{"physnet1", "x"}, {"physnet2", "y"}});
  ASSERT_TRUE(m.add_network({"n100", dp::NetType::kVlan, "physnet1", 100, 1500}).ok());
  ASSERT_TRUE(m.add_network({"n200", dp::NetType::kVlan, "physnet1", 200, 1500}).ok());
  ASSERT_TRUE(m.add_network({"n300", dp::NetType::kVlan, "physnet2", 300, 1500}).ok());
  ASSERT_TRUE(m.add_network({"flat", dp::NetType::kFlat, "physnet1", 0, 1500}).ok());
  // No port bound anywhere: every 802.1Q frame is dropped.
  EXPECT_EQ(ctl::desired_flow_rules(m, "physnet1"), std::vector<FlowRule>{kDrop});
  ctl::PortSpec p;
  p.id = "00000000-0000-4000-8000-000000000001";
  p.network = "n200";
  p.mac = {2, 0, 0, 0, 0, 1};
  p.attach.devargs = "net_ring_x";
  ASSERT_TRUE(m.add_port(p).ok());
  EXPECT_EQ(ctl::desired_flow_rules(m, "physnet1"), (std::vector<FlowRule>{allow(200), kDrop}));
  EXPECT_EQ(ctl::desired_flow_rules(m, "physnet2"), std::vector<FlowRule>{kDrop});
}

// ---- a Switch with a net_tap physnet --------------------------------------

std::string sh(const std::string& cmd) {
  std::string out;
  FILE* f = popen((cmd + " 2>&1").c_str(), "r");
  if (!f) return out;
  char buf[512];
  while (fgets(buf, sizeof buf, f)) out += buf;
  pclose(f);
  return out;
}

// The rules net_tap made: TC flower filters on the tap's multiq root qdisc
// (the kernel's egress is the PMD's rx).
std::string tc_filters(const std::string& iface) { return sh("tc filter show dev " + iface + " parent 1:"); }

// Whether the kernel can hold net_tap's rules at all: the multiq qdisc the
// PMD puts on the tap (sch_multiq), flower filters, gact/skbedit actions.
bool kernel_has_tc_flower(const std::string& iface) {
  return sh("tc qdisc show dev " + iface).find("multiq") != std::string::npos;
}

// What net_tap's rte_flow needs of the kernel for these rules: the multiq
// root and ingress qdiscs, flower, the gact (DROP) and skbedit (QUEUE)
// actions. As modules they are loaded here, before the PMD asks for them.
constexpr struct {
  const char* config;
  const char* module;
} kTapFlowKernel[] = {{"CONFIG_NET_SCH_MULTIQ", "sch_multiq"},
                     {"CONFIG_NET_SCH_INGRESS", "sch_ingress"},
                     {"CONFIG_NET_CLS_FLOWER", "cls_flower"},
                     {"CONFIG_NET_ACT_GACT", "act_gact"},
                     {"CONFIG_NET_ACT_SKBEDIT", "act_skbedit"}};

void load_tc_modules() {
  if (sh("command -v modprobe").empty()) return;
  for (const auto& k : kTapFlowKernel) sh(std::string("modprobe -q ") + k.module);
}

// Why the kernel took no rules, as precisely as /proc/config.gz tells:
// the options it lacks, and whether modules could have supplied them.
std::string tc_flower_missing() {
  const std::string release = sh("uname -r");
  std::string why = "kernel " + release.substr(0, release.find('\n'));
  const std::string config = sh("zcat /proc/config.gz");
  if (config.find("CONFIG_NET_SCHED") == std::string::npos)
    return why + " has no TC multiq/flower support for net_tap's rte_flow (no /proc/config.gz "
                 "to say which part is missing)";
  std::string missing;
  for (const auto& k : kTapFlowKernel)
    if (config.find(std::string(k.config) + "=y") == std::string::npos &&
        config.find(std::string(k.config) + "=m") == std::string::npos)
      missing += std::string(missing.empty() ? "" : ", ") + k.config;
  why += missing.empty() ? " has the TC options net_tap needs, yet no multiq qdisc appeared"
                         : " lacks " + missing;
  if (config.find("# CONFIG_MODULES is not set") != std::string::npos)
    why += " (built without module support: nothing can be loaded)";
  return why;
}

// A frame into the tap from the kernel side: what a wire would bring the NIC.
void kernel_send(const std::string& iface, const std::vector<Frame>& frames) {
  int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
  ASSERT_GE(fd, 0) << strerror(errno);
  sockaddr_ll sa{};
  sa.sll_family = AF_PACKET;
  sa.sll_ifindex = static_cast<int>(if_nametoindex(iface.c_str()));
  sa.sll_halen = 6;
  ASSERT_NE(sa.sll_ifindex, 0);
  for (const Frame& f : frames)
    ASSERT_EQ(sendto(fd, f.data(), f.size(), 0, reinterpret_cast<sockaddr*>(&sa), sizeof sa),
              static_cast<ssize_t>(f.size()))
        << strerror(errno);
  close(fd);
}

json physnet_offload(Harness& h, const std::string& name) {
  const json show = h.sw().show();
  for (const json& p : show["physnets"])
    if (p["name"] == name) return p["flow_offload"];
  return nullptr;
}

class TapOffloadTest : public ::testing::Test {
 protected:
  static constexpr char kIface[] = "sttap0";
  void SetUp() override {
    if (access("/dev/net/tun", R_OK | W_OK) != 0 || geteuid() != 0)
      GTEST_SKIP() << "net_tap needs root and /dev/net/tun";
    auto cfg = test_config();
    cfg.physnets = {{"physnet1", std::string("net_tap0,iface=") + kIface}};
    load_tc_modules();
    h_ = std::make_unique<Harness>(cfg);
    flower_ = kernel_has_tc_flower(kIface);
  }
  void TearDown() override {
    h_.reset();
    vms_.clear();
  }
  RingPort& bind(int n, const std::string& net, const std::string& mac) {
    vms_.push_back(std::make_unique<RingPort>("net_ring_fo" + std::to_string(n)));
    h_->ok("port.bind", port_params(port_uuid(n), net, mac, vms_.back()->name()));
    return *vms_.back();
  }
  void vlan_network(const std::string& id, int vid) {
    h_->ok("network.create", {{"id", id}, {"type", "vlan"}, {"physnet", "physnet1"},
                              {"segmentation_id", vid}});
  }
  std::unique_ptr<Harness> h_;
  std::vector<std::unique_ptr<RingPort>> vms_;
  bool flower_ = false;
};

TEST_F(TapOffloadTest, RulesCreatedRemovedAndReplayed) {
  vlan_network("n100", 100);
  vlan_network("n200", 200);
  bind(1, "n100", kMacA);
  bind(2, "n200", kMacB);
  json off = physnet_offload(*h_, "physnet1");
  if (!flower_) {
    // This kernel cannot hold the rules (tc_flower_missing): net_tap validates them
    // and the kernel refuses them. Everything stays with software, counted.
    EXPECT_EQ(off["installed"], 0) << off.dump();
    EXPECT_EQ(off["refused"], 3) << off.dump();
    EXPECT_GE(off["refusals"].get<uint64_t>(), 3u);
    EXPECT_NE(off["last_error"].get<std::string>().find("create"), std::string::npos) << off.dump();
    json r = h_->ok("physnet.restart", {{"name", "physnet1"}});
    EXPECT_EQ(r["flow_offload"]["refused"], 3);
    GTEST_SKIP() << tc_flower_missing()
                 << ": net_tap cannot hold rte_flow rules; the fallback was checked, the rules "
                    "cannot be";
  }
  EXPECT_EQ(off["installed"], 3) << off.dump();
  EXPECT_EQ(off["refused"], 0) << off.dump();
  std::string tc = tc_filters(kIface);
  EXPECT_NE(tc.find("vlan_id 100"), std::string::npos) << tc;
  EXPECT_NE(tc.find("vlan_id 200"), std::string::npos) << tc;
  EXPECT_NE(tc.find("drop"), std::string::npos) << tc;

  // The last port of VLAN 200 goes: its rule goes with it.
  h_->ok("port.unbind", {{"id", port_uuid(2)}});
  tc = tc_filters(kIface);
  EXPECT_EQ(tc.find("vlan_id 200"), std::string::npos) << tc;
  EXPECT_NE(tc.find("vlan_id 100"), std::string::npos) << tc;
  EXPECT_EQ(physnet_offload(*h_, "physnet1")["installed"], 2);

  // The rules removed behind our back (as a NIC reset would): a restart replays them.
  sh(std::string("tc filter del dev ") + kIface + " parent 1:");
  ASSERT_EQ(tc_filters(kIface).find("vlan_id 100"), std::string::npos);
  json r = h_->ok("physnet.restart", {{"name", "physnet1"}});
  EXPECT_EQ(r["flow_offload"]["installed"], 2) << r.dump();
  tc = tc_filters(kIface);
  EXPECT_NE(tc.find("vlan_id 100"), std::string::npos) << tc;
  EXPECT_NE(tc.find("drop"), std::string::npos) << tc;
}

// A frame of a mapped VLAN reaches the VM; one of an unmapped VLAN is dropped
// by the NIC when it holds the rules (unknown_vlan stays), by the pipeline
// otherwise (unknown_vlan counts it).
TEST_F(TapOffloadTest, UnmappedVlanDroppedBeforeTheWorkers) {
  vlan_network("n100", 100);
  RingPort& a = bind(1, "n100", kMacA);
  const uint64_t before = h_->drops("unknown_vlan");
  kernel_send(kIface, {Eth(kRemote, kMacA).vlan(101).ipv4().udp().fill('z', 20),
                       Eth(kRemote, kMacA).vlan(100).ipv4().udp().fill('z', 20)});
  auto got = a.wait_for(1);
  ASSERT_EQ(got.size(), 1u);  // VLAN 100's frame, untagged
  EXPECT_EQ(got[0][12], 0x08);
  h_->pump(std::chrono::milliseconds(50));
  EXPECT_EQ(h_->drops("unknown_vlan") - before, flower_ ? 0u : 1u);
}

TEST_F(TapOffloadTest, RestartKeepsForwarding) {
  vlan_network("n100", 100);
  RingPort& a = bind(1, "n100", kMacA);
  EXPECT_EQ(h_->call("physnet.restart", {{"name", "nope"}})["error"]["code"], "not_found");
  EXPECT_EQ(h_->call("physnet.restart", json::object())["error"]["code"], "invalid_argument");
  h_->ok("physnet.restart", {{"name", "physnet1"}});
  const json show = h_->sw().show();
  for (const json& p : show["physnets"]) EXPECT_EQ(p["state"], "up");
  kernel_send(kIface, {Eth(kRemote, kMacA).vlan(100).ipv4().udp().fill('z', 20)});
  EXPECT_EQ(a.wait_for(1).size(), 1u);
}

// ---- a physnet NIC without rte_flow ----------------------------------------

TEST(RingOffload, NoRteFlowLeavesItToSoftware) {
  RingPort phys("net_ring_fophys");
  auto cfg = test_config();
  cfg.physnets = {{"physnet1", "net_ring_fophys"}};
  Harness h(cfg);
  h.ok("network.create", {{"id", "n1"}, {"type", "vlan"}, {"physnet", "physnet1"},
                          {"segmentation_id", 100}});
  RingPort a("net_ring_fovm");
  h.ok("port.bind", port_params(port_uuid(1), "n1", kMacA, a.name()));
  json off = physnet_offload(h, "physnet1");
  EXPECT_EQ(off["enabled"], true);
  EXPECT_EQ(off["supported"], false) << off.dump();
  EXPECT_EQ(off["installed"], 0);
  EXPECT_EQ(off["refused"], 2);
  // The fallback as Prometheus scrapes it: both rules refused, by physnet.
  const std::string metrics = ctl::render_metrics(h.sw().stats(), h.sw().show());
  EXPECT_NE(metrics.find("strait_physnet_flow_offload_refusals_total{physnet=\"physnet1\"} " +
                         std::to_string(off["refusals"].get<uint64_t>()) + "\n"),
            std::string::npos)
      << metrics;
  EXPECT_GE(off["refusals"].get<uint64_t>(), 2u);
  EXPECT_NE(metrics.find("strait_physnet_flow_offload_rules{physnet=\"physnet1\",state=\"software\"} 2\n"),
            std::string::npos);
  // Software does what the NIC would have.
  phys.send({Eth(kRemote, kMacA).vlan(101).ipv4().udp(), Eth(kRemote, kMacA).vlan(100).ipv4().udp()});
  EXPECT_EQ(a.wait_for(1).size(), 1u);
  h.pump(std::chrono::milliseconds(20));
  EXPECT_EQ(h.drops("unknown_vlan"), 1u);
  // A restart of a NIC without rte_flow works the same.
  h.ok("physnet.restart", {{"name", "physnet1"}});
  phys.send({Eth(kRemote, kMacA).vlan(100).ipv4().udp()});
  EXPECT_EQ(a.wait_for(1).size(), 1u);
}

TEST(RingOffload, DisabledByConfig) {
  RingPort phys("net_ring_fodis");
  auto cfg = test_config();
  cfg.physnets = {{"physnet1", "net_ring_fodis"}};
  cfg.offload_rte_flow = false;
  Harness h(cfg);
  json off = physnet_offload(h, "physnet1");
  EXPECT_EQ(off["enabled"], false);
  EXPECT_EQ(off["refused"], 0);
  EXPECT_EQ(off["refusals"], 0);
}

}  // namespace
}  // namespace strait::test
