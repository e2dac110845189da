// straitd's etcd side against a real etcd (started here) and a real Switch:
// documents neutron's driver writes become bindings through the API's own
// path, refusals are reported per document with their reason, state goes
// back to etcd, a host that etcd drives refuses local changes, and a
// reconnect (etcd restarted) reconciles in place without touching ports
// whose documents did not change. docs/openstack.md has the key layout.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <sstream>
#include <thread>

#include "control/daemon/event_loop.h"
#include "control/etcd/etcd_agent.h"
#include "control/etcd/etcd_client.h"
#include "tests/switch_harness.h"

namespace strait::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// A TCP port nothing listens on now (the kernel's pick).
int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(fd);
    return 0;
  }
  close(fd);
  return ntohs(a.sin_port);
}

// etcd as a plain process on loopback, its data kept across restart().
class EtcdProcess {
 public:
  EtcdProcess() {
    char dir[] = "/tmp/strait-etcd-XXXXXX";
    dir_ = mkdtemp(dir);
    port_ = free_port();
    peer_port_ = free_port();
    start();
  }
  ~EtcdProcess() {
    stop();
    std::filesystem::remove_all(dir_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void start() {
    pid_ = fork();
    if (pid_ == 0) {
      // Goes with the test process, also when a failure aborts it before teardown.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      const std::string client = url(), peer = "http://127.0.0.1:" + std::to_string(peer_port_);
      const std::string log = dir_ + "/etcd.log";
      freopen(log.c_str(), "a", stdout);
      freopen(log.c_str(), "a", stderr);
      execl("/usr/bin/etcd", "etcd", "--data-dir", (dir_ + "/data").c_str(),
            "--listen-client-urls", client.c_str(), "--advertise-client-urls", client.c_str(),
            "--listen-peer-urls", peer.c_str(), "--initial-advertise-peer-urls", peer.c_str(),
            "--initial-cluster", ("default=" + peer).c_str(), nullptr);
      _exit(127);
    }
    ctl::EtcdClient c({url()}, 500);
    for (int i = 0; i < 100; i++) {
      if (c.range_prefix("/")) return;
      std::this_thread::sleep_for(100ms);
    }
    ADD_FAILURE() << "etcd did not start (is etcd-server installed? log: " << dir_ << "/etcd.log)";
  }
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  std::string dir_;
  int port_ = 0, peer_port_ = 0;
  pid_t pid_ = -1;
};

constexpr char kPrefix[] = "/strait-test";
constexpr char kHost[] = "compute-1";
constexpr char kNet[] = "5b1c8d0e-0000-4000-8000-000000000001";
constexpr char kGroup[] = "5b1c8d0e-0000-4000-8000-00000000a001";

// A port document as networking-strait writes it.
json port_doc(int n, const std::string& mac, uint32_t vlan = 100, json extra = json::object()) {
  json d = {{"id", port_uuid(n)},
            {"mac_address", mac},
            {"fixed_ips", {"10.0.0." + std::to_string(n)}},
            {"security_groups", {kGroup}},
            {"port_security_enabled", true},
            {"network", {{"id", kNet}, {"network_type", "vlan"}, {"physical_network", "physnet1"},
                         {"segmentation_id", vlan}, {"mtu", 1500}}},
            {"vhostuser_socket", "/tmp/strait-etcd-test-vhu" + std::to_string(n)},
            {"vhostuser_mode", "server"}};
  d.update(extra);
  return d;
}

json group_doc(std::vector<json> rules) {
  return {{"id", kGroup}, {"name", "web"}, {"rules", rules}};
}

json rule(const std::string& id, int port) {
  return {{"id", id}, {"direction", "ingress"}, {"ethertype", "IPv4"}, {"protocol", "tcp"},
          {"port_range_min", port}, {"port_range_max", port}, {"remote_ip_prefix", nullptr},
          {"remote_group_id", nullptr}, {"tenant_id", "ignored"}};
}

class EtcdTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { etcd_ = new EtcdProcess(); }
  static void TearDownTestSuite() {
    delete etcd_;
    etcd_ = nullptr;
  }
  void SetUp() override {
    client_ = std::make_unique<ctl::EtcdClient>(std::vector<std::string>{etcd_->url()});
    wipe();
    uplink_ = std::make_unique<RingPort>("net_ring_etcd_up");
    cfg_ = test_config();
    cfg_.physnets = {{"physnet1", uplink_->name()}};
    cfg_.vhost_socket_dir = "/tmp";
    ctl::EtcdSettings e;
    e.endpoints = {etcd_->url()};
    e.host = kHost;
    e.prefix = kPrefix;
    e.lease_ttl_s = 3;
    cfg_.etcd = e;
  }
  void TearDown() override {
    stop_agent();
    h_.reset();
    uplink_.reset();
  }
  void wipe() { ASSERT_TRUE(client_->del_prefix(kPrefix)); }
  void start(bool keep_state = false) {
    h_ = std::make_unique<Harness>(cfg_, keep_state);
    h_->sw().set_desired_state_source("etcd");
    agent_ = std::make_unique<ctl::EtcdAgent>(*cfg_.etcd, loop_, h_->sw(), ctl::alive_json(cfg_));
    h_->sw().events().subscribe([this](const json& ev) { events_.push_back(ev); });
    agent_->start();
  }
  void stop_agent() { agent_.reset(); }
  // Runs the control loop as straitd does until pred() holds.
  bool until(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 8s) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      loop_.run_once(2);
      h_->sw().poll();
      if (pred()) return true;
    }
    return false;
  }
  void put(const std::string& key, const json& doc) { put_raw(key, doc.dump()); }
  void put_raw(const std::string& key, const std::string& text) {
    ASSERT_TRUE(client_->put(std::string(kPrefix) + key, text));
  }
  void del(const std::string& key) { ASSERT_TRUE(client_->del(std::string(kPrefix) + key)); }
  static std::string port_key(int n) { return std::string("/nodes/") + kHost + "/ports/" + port_uuid(n); }
  static std::string group_key() { return std::string("/global/secgroups/") + kGroup; }
  // The state straitd wrote for port n (null when none).
  json state(int n) {
    auto r = client_->range_prefix(std::string(kPrefix) + "/states/" + kHost + "/ports/" + port_uuid(n));
    if (!r || r->kvs.empty()) return nullptr;
    return json::parse(r->kvs[0].value);
  }
  bool state_is(int n, const std::string& s) {
    json st = state(n);
    return st.is_object() && st.value("state", "") == s;
  }
  const ctl::Model& model() { return h_->sw().model(); }

  static EtcdProcess* etcd_;
  std::unique_ptr<ctl::EtcdClient> client_;
  std::unique_ptr<RingPort> uplink_;
  ctl::Config cfg_;
  ctl::EventLoop loop_;
  std::unique_ptr<Harness> h_;
  std::unique_ptr<ctl::EtcdAgent> agent_;
  std::vector<json> events_;
};

EtcdProcess* EtcdTest::etcd_ = nullptr;

TEST(EtcdClient, PrefixRangeEnd) {
  EXPECT_EQ(ctl::prefix_range_end("/a/"), "/a0");
  EXPECT_EQ(ctl::prefix_range_end("a\xff"), "b");
  EXPECT_EQ(ctl::prefix_range_end("\xff\xff"), std::string(1, '\0'));
}

TEST_F(EtcdTest, ValuesRoundTripByteForByte) {
  std::string bytes;
  for (int i = 0; i < 256; i++) bytes.push_back(char(i));
  for (size_t n : {0, 1, 2, 3, 4, 255, 256}) {
    ASSERT_TRUE(client_->put(std::string(kPrefix) + "/x/" + std::to_string(n), bytes.substr(0, n)));
    auto r = client_->range_prefix(std::string(kPrefix) + "/x/" + std::to_string(n));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->kvs.size(), 1u);
    EXPECT_EQ(r->kvs[0].value, bytes.substr(0, n)) << n;
  }
}

TEST_F(EtcdTest, DocumentsBecomeBindingsAndStatesGoBack) {
  put(group_key(), group_doc({rule("6f0e0000-0000-4000-8000-000000000001", 80)}));
  put(port_key(1), port_doc(1, "fa:16:3e:00:00:01"));
  start();
  ASSERT_TRUE(until([&] { return state_is(1, "bound"); })) << state(1);
  const ctl::PortSpec* p = model().port(port_uuid(1));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->network, kNet);
  EXPECT_EQ(p->attach.mode, ctl::Attachment::Mode::kClient);  // QEMU is the server
  EXPECT_EQ(model().network(kNet)->seg_id, 100u);
  ASSERT_TRUE(model().security_group(kGroup));
  EXPECT_EQ(model().security_group(kGroup)->rules.size(), 1u);
  EXPECT_GT(state(1)["revision"].get<int64_t>(), 0);

  // The host is alive, with what it offers.
  auto alive = client_->range_prefix(std::string(kPrefix) + "/states/" + kHost + "/alive");
  ASSERT_TRUE(alive);
  ASSERT_EQ(alive->kvs.size(), 1u);
  EXPECT_EQ(json::parse(alive->kvs[0].value)["physnets"], json::array({"physnet1"}));

  // A second port, a watched change.
  put(port_key(2), port_doc(2, "fa:16:3e:00:00:02"));
  ASSERT_TRUE(until([&] { return state_is(2, "bound"); })) << state(2);
  EXPECT_EQ(model().ports().size(), 2u);

  // A rule added and one removed through the group's document.
  put(group_key(), group_doc({rule("6f0e0000-0000-4000-8000-000000000002", 443)}));
  ASSERT_TRUE(until([&] {
    const ctl::SecurityGroup* g = model().security_group(kGroup);
    return g->rules.size() == 1 && g->rules[0].id == "6f0e0000-0000-4000-8000-000000000002";
  }));

  // A port update (its fixed IP) keeps the binding: no unbind, no blink.
  const size_t before = events_.size();
  put(port_key(2), port_doc(2, "fa:16:3e:00:00:02", 100, {{"fixed_ips", {"10.0.0.22"}}}));
  ASSERT_TRUE(until([&] { return model().port(port_uuid(2))->fixed_ips.size() == 1 &&
                                 ctl::ip_to_string(model().port(port_uuid(2))->fixed_ips[0]) == "10.0.0.22"; }));
  for (size_t i = before; i < events_.size(); i++) EXPECT_NE(events_[i]["event"], "port-unbound");

  // A deleted document: the port goes, its state key with it, and the
  // network with its last port.
  del(port_key(1));
  ASSERT_TRUE(until([&] { return !model().port(port_uuid(1)) && state(1).is_null(); }));
  del(port_key(2));
  ASSERT_TRUE(until([&] { return model().ports().empty() && state(2).is_null(); }));
  EXPECT_FALSE(model().network(kNet));

  // Stopping revokes the lease: the host is gone at once.
  stop_agent();
  auto gone = client_->range_prefix(std::string(kPrefix) + "/states/" + kHost + "/alive");
  ASSERT_TRUE(gone);
  EXPECT_TRUE(gone->kvs.empty());
}

TEST_F(EtcdTest, RefusedDocumentsSayWhyAndTheRestWorks) {
  put(group_key(), group_doc({}));
  put(port_key(1), port_doc(1, "fa:16:3e:00:00:01"));
  put_raw(port_key(2), "{not json");
  put(port_key(3), port_doc(3, "fa:16:3e:00:00:03", 100,
                            {{"network", {{"id", "net-gre"}, {"network_type", "gre"},
                                          {"segmentation_id", 5}}}}));
  put(port_key(4), port_doc(4, "fa:16:3e:00:00:01"));  // port 1's MAC on the same network
  put(port_key(5), port_doc(5, "fa:16:3e:00:00:05", 4095,
                            {{"network", {{"id", "net-bad-vlan"}, {"network_type", "vlan"},
                                          {"physical_network", "physnet1"},
                                          {"segmentation_id", 4095}}}}));
  put(port_key(6), port_doc(6, "fa:16:3e:00:00:06", 100,
                            {{"security_groups", {"00000000-0000-4000-8000-00000000dead"}}}));
  // Keys that name no id, one not even UTF-8 (etcd keys are bytes): once,
  // the reason quoting it made writing the group's state throw.
  const std::string bad_group = "g\xb1", bad_port = std::string("/nodes/") + kHost + "/ports/p\xff";
  put("/global/secgroups/" + bad_group, json{{"rules", json::array()}});
  put(bad_port, port_doc(7, "fa:16:3e:00:00:07"));
  put(std::string("/global/remote_group/") + kGroup + "/\xfe", json{{"addresses", {"10.0.0.9"}}});
  start();
  ASSERT_TRUE(until([&] {
    return state_is(1, "bound") && state_is(2, "error") && state_is(3, "error") &&
           state_is(4, "error") && state_is(5, "error") && state_is(6, "error");
  })) << state(1) << state(2) << state(3) << state(4) << state(5) << state(6);
  EXPECT_NE(state(2)["reason"].get<std::string>().find("not JSON"), std::string::npos) << state(2);
  EXPECT_NE(state(3)["reason"].get<std::string>().find("gre"), std::string::npos) << state(3);
  EXPECT_NE(state(4)["reason"].get<std::string>().find("fa:16:3e:00:00:01"), std::string::npos)
      << state(4);
  EXPECT_NE(state(5)["reason"].get<std::string>().find("segmentation_id"), std::string::npos)
      << state(5);
  EXPECT_NE(state(6)["reason"].get<std::string>().find("dead"), std::string::npos) << state(6);
  auto bad_group_state = [&]() -> json {
    auto r = client_->range_prefix(std::string(kPrefix) + "/states/" + kHost + "/secgroups/" + bad_group);
    return r && !r->kvs.empty() ? json::parse(r->kvs[0].value) : json();
  };
  ASSERT_TRUE(until([&] { return !bad_group_state().is_null(); }));
  EXPECT_NE(bad_group_state()["reason"].get<std::string>().find("is not a valid id"), std::string::npos)
      << bad_group_state();
  const std::string intake =
      agent_->status()["intake"].dump(-1, ' ', false, json::error_handler_t::replace);
  EXPECT_NE(intake.find("is not a port UUID"), std::string::npos) << intake;
  EXPECT_NE(intake.find("is not GROUP_ID/PORT_UUID"), std::string::npos) << intake;
  EXPECT_EQ(model().ports().size(), 1u);
  EXPECT_FALSE(model().network("net-gre"));
  EXPECT_FALSE(model().network("net-bad-vlan"));

  // What a refusal waited for arrives: the document is tried again.
  put("/global/secgroups/00000000-0000-4000-8000-00000000dead",
      json{{"id", "00000000-0000-4000-8000-00000000dead"}, {"rules", json::array()}});
  ASSERT_TRUE(until([&] { return state_is(6, "bound"); })) << state(6);
  // So is a MAC the port that held it gives up.
  del(port_key(1));
  ASSERT_TRUE(until([&] { return state_is(4, "bound"); })) << state(4);
}

TEST_F(EtcdTest, AHostEtcdDrivesRefusesLocalChanges) {
  start();
  json r = h_->call("network.create", {{"id", "n1"}, {"type", "local"}});
  EXPECT_FALSE(r["ok"].get<bool>());
  EXPECT_EQ(r["error"]["code"], "failed_precondition");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("etcd"), std::string::npos);
  EXPECT_FALSE(model().network("n1"));
  EXPECT_TRUE(h_->call("log.level", {{"level", "info"}})["ok"].get<bool>());  // live state only
  EXPECT_TRUE(h_->call("show")["ok"].get<bool>());
}

TEST_F(EtcdTest, EtcdRestartedReconcilesInPlace) {
  put(group_key(), group_doc({rule("6f0e0000-0000-4000-8000-000000000001", 80)}));
  put(port_key(1), port_doc(1, "fa:16:3e:00:00:01"));
  put(port_key(2), port_doc(2, "fa:16:3e:00:00:02"));
  start();
  ASSERT_TRUE(until([&] { return state_is(1, "bound") && state_is(2, "bound"); }));
  const uint64_t gen = h_->sw().publisher().generation();
  const size_t before = events_.size();

  // etcd goes away: the switch keeps what it has.
  etcd_->stop();
  ASSERT_FALSE(until([&] { return model().ports().size() != 2; }, 1500ms));
  EXPECT_TRUE(h_->call("port.show", {{"id", port_uuid(1)}})["ok"].get<bool>());

  // It comes back with one change made meanwhile (as neutron's journal
  // would replay it): port 2 gone. Port 1 is not touched.
  etcd_->start();
  del(port_key(2));
  ASSERT_TRUE(until([&] { return !model().port(port_uuid(2)) && state(2).is_null(); }, 15s));
  ASSERT_TRUE(model().port(port_uuid(1)));
  for (size_t i = before; i < events_.size(); i++)
    EXPECT_NE(events_[i]["port"], port_uuid(1)) << events_[i];
  EXPECT_GT(h_->sw().publisher().generation(), gen);
  EXPECT_TRUE(state_is(1, "bound"));
  // And the host is alive again.
  ASSERT_TRUE(until([&] {
    auto a = client_->range_prefix(std::string(kPrefix) + "/states/" + kHost + "/alive");
    return a && !a->kvs.empty();
  }, 10s));
}

// A trunk's subport documents (issue 25) name their parent; in whatever
// order etcd hands them over, parents are bound first and unbound last, so
// no document is ever refused for the order it came in.
TEST_F(EtcdTest, TrunkSubportsAreBoundAfterAndUnboundBeforeTheirParent) {
  auto subport_doc = [](int n, int parent, int vid) {
    // The parent's MAC, on a network of the subport's own.
    json d = port_doc(n, "fa:16:3e:00:00:09", 200 + n);
    d.erase("vhostuser_socket");
    d.erase("vhostuser_mode");
    d["network"]["id"] = "net-sub" + std::to_string(n);
    d["fixed_ips"] = {"10.0.1." + std::to_string(n)};
    d["trunk"] = {{"parent", port_uuid(parent)}, {"segmentation_type", "vlan"},
                  {"segmentation_id", vid}};
    return d;
  };
  put(group_key(), group_doc({rule("6f0e0000-0000-4000-8000-000000000001", 80)}));
  // The subports' ids sort before their parent's.
  put(port_key(1), subport_doc(1, 9, 101));
  put(port_key(2), subport_doc(2, 9, 102));
  put(port_key(9), port_doc(9, "fa:16:3e:00:00:09"));
  std::ostringstream log;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  spdlog::default_logger()->sinks().push_back(sink);
  start();
  ASSERT_TRUE(until([&] { return state_is(1, "bound") && state_is(2, "bound") && state_is(9, "bound"); }))
      << state(1) << state(2) << state(9);
  const ctl::PortSpec* sub = model().port(port_uuid(2));
  ASSERT_TRUE(sub);
  EXPECT_EQ(sub->attach.kind, ctl::Attachment::Kind::kSubport);
  EXPECT_EQ(sub->attach.parent, port_uuid(9));
  EXPECT_EQ(sub->attach.vid, 102);
  EXPECT_EQ(model().subports_of(port_uuid(9)).size(), 2u);
  // Gone while the agent was away: on its return the subports go first.
  stop_agent();
  del(port_key(9));
  del(port_key(1));
  del(port_key(2));
  agent_ = std::make_unique<ctl::EtcdAgent>(*cfg_.etcd, loop_, h_->sw(), ctl::alive_json(cfg_));
  agent_->start();
  ASSERT_TRUE(until([&] { return model().ports().empty(); })) << h_->sw().show()["etcd"];
  spdlog::default_logger()->sinks().pop_back();
  EXPECT_THAT(log.str(), ::testing::Not(::testing::HasSubstr("refused")));
  // neutron unbinds a parent (its VM deleted) before the subports follow, in
  // transactions of their own: the parent stays until they have gone.
  put(port_key(9), port_doc(9, "fa:16:3e:00:00:09"));
  put(port_key(1), subport_doc(1, 9, 101));
  ASSERT_TRUE(until([&] { return state_is(1, "bound") && state_is(9, "bound"); }));
  del(port_key(9));
  ASSERT_FALSE(until([&] { return !model().port(port_uuid(9)); }, 1s));
  del(port_key(1));
  ASSERT_TRUE(until([&] { return model().ports().empty() && state(9).is_null(); }))
      << h_->sw().show()["etcd"];
  // A malformed trunk is refused with its reason.
  json bad = subport_doc(3, 9, 101);
  bad["trunk"] = "port-9";
  put(port_key(3), bad);
  ASSERT_TRUE(until([&] { return state_is(3, "error"); }));
  EXPECT_THAT(state(3)["reason"].get<std::string>(), ::testing::HasSubstr("trunk"));
}

// Which revision of a group every worker enforces, for neutron and for
// whoever measures a rule's way to the datapath.
TEST_F(EtcdTest, GroupStatesSayWhichRevisionIsEnforced) {
  put(group_key(), group_doc({rule("6f0e0000-0000-4000-8000-000000000001", 80)}));
  put(port_key(1), port_doc(1, "fa:16:3e:00:00:01"));
  start();
  auto revision = [&] {
    auto r = client_->range_prefix(std::string(kPrefix) + group_key());
    return r && !r->kvs.empty() ? r->kvs[0].mod_revision : int64_t{-1};
  };
  auto group_state = [&]() -> json {  // {} when there is none
    auto r = client_->range_prefix(std::string(kPrefix) + "/states/" + kHost + "/secgroups/" + kGroup);
    if (!r || r->kvs.empty()) return json::object();
    return json::parse(r->kvs[0].value);
  };
  ASSERT_TRUE(until([&] { return group_state().value("revision", int64_t{0}) == revision(); }))
      << group_state();
  EXPECT_EQ(group_state()["state"], "applied");

  // A new rule: its revision once the rule is in every worker's snapshot.
  put(group_key(), group_doc({rule("6f0e0000-0000-4000-8000-000000000001", 80),
                              rule("6f0e0000-0000-4000-8000-000000000002", 443)}));
  ASSERT_TRUE(until([&] { return group_state().value("revision", int64_t{0}) == revision(); }))
      << group_state();
  EXPECT_EQ(model().security_group(kGroup)->rules.size(), 2u);
  EXPECT_GE(h_->sw().stats()["workers"][0]["generation"].get<uint32_t>(),
            group_state()["generation"].get<uint32_t>());

  // A document the switch refuses (a field it cannot take; a remote group it
  // does not have) changes nothing, though it drops rule 443 that the one in
  // force has: the group's state says why, and both rules stay.
  const json in_force = to_json(*model().security_group(kGroup));
  json bad = rule("6f0e0000-0000-4000-8000-000000000003", 22);
  bad["protocol"] = "carrier-pigeon";
  json unknown_remote = rule("6f0e0000-0000-4000-8000-000000000004", 22);
  unknown_remote["remote_group_id"] = "00000000-0000-4000-8000-00000000dead";
  for (const auto& [refused, why] :
       {std::pair{bad, "carrier-pigeon"}, std::pair{unknown_remote, "no security group"}}) {
    put(group_key(), group_doc({rule("6f0e0000-0000-4000-8000-000000000001", 80), refused}));
    ASSERT_TRUE(until([&] {
      return group_state().value("state", "") == "error" && group_state()["revision"] == revision();
    })) << group_state();
    EXPECT_NE(group_state()["reason"].get<std::string>().find(why), std::string::npos)
        << group_state();
    EXPECT_EQ(to_json(*model().security_group(kGroup)), in_force);
  }

  // A group that goes takes its state with it.
  del(port_key(1));
  del(group_key());
  ASSERT_TRUE(until([&] { return !model().security_group(kGroup) && group_state().empty(); }))
      << group_state();
}

// A physnet that carries only some VLANs ([physnets.NAME] vlan_ranges):
// a document for another VLAN is refused, and the host says which it carries.
TEST_F(EtcdTest, AVlanOutsideThePhysnetsRangesIsRefused) {
  cfg_.vlan_ranges = {{"physnet1", {{100, 199}}}};
  put(group_key(), group_doc({}));
  put(port_key(1), port_doc(1, "fa:16:3e:00:00:01", 100));
  put(port_key(2), port_doc(2, "fa:16:3e:00:00:02", 200,
                            {{"network", {{"id", "net-200"}, {"network_type", "vlan"},
                                          {"physical_network", "physnet1"},
                                          {"segmentation_id", 200}}}}));
  start();
  ASSERT_TRUE(until([&] { return state_is(1, "bound") && state_is(2, "error"); }))
      << state(1) << state(2);
  EXPECT_NE(state(2)["reason"].get<std::string>().find("outside physnet physnet1's vlan_ranges (100:199)"),
            std::string::npos)
      << state(2);
  EXPECT_FALSE(model().network("net-200"));
  auto alive = client_->range_prefix(std::string(kPrefix) + "/states/" + kHost + "/alive");
  ASSERT_TRUE(alive && alive->kvs.size() == 1);
  EXPECT_EQ(json::parse(alive->kvs[0].value)["vlan_ranges"], json::parse(R"({"physnet1": [[100, 199]]})"));
}

// Members of a remote group bound on other hosts (neutron's remote_group
// documents) are admitted by a rule naming the group, as the ports bound
// here are; they wait for their group, and follow their documents.
TEST_F(EtcdTest, RemoteGroupMembersOnOtherHostsAreAdmitted) {
  const std::string far = "00000000-0000-4000-8000-0000000000f1";
  const std::string member_key = std::string("/global/remote_group/") + kGroup + "/" + far;
  json from_group = rule("6f0e0000-0000-4000-8000-000000000009", 5432);
  from_group["remote_group_id"] = kGroup;
  // The member first: it waits for its group.
  put(member_key, json{{"port", far}, {"addresses", {"10.0.9.9"}}});
  put(port_key(1), port_doc(1, "fa:16:3e:00:00:01"));
  start();
  auto members = [&]() -> json {
    const ctl::SecurityGroup* g = model().security_group(kGroup);
    return g ? to_json(*g).value("remote_members", json::object()) : json(nullptr);
  };
  ASSERT_TRUE(until([&] { return state_is(1, "error"); })) << state(1);  // no group yet
  EXPECT_TRUE(members().is_null());
  put(group_key(), group_doc({from_group}));
  ASSERT_TRUE(until([&] { return state_is(1, "bound") && members() == json{{far, {"10.0.9.9/32"}}}; }))
      << state(1) << members();
  // What the datapath does with a SYN from the physnet to port 1 (trace runs
  // the real pipeline): a member's address is admitted, another is not.
  auto verdict = [&](const std::string& src) {
    json t = h_->ok("trace", {{"port", "physnet:physnet1"},
                              {"frame", {{"src", "fa:16:3e:99:99:99"}, {"dst", "fa:16:3e:00:00:01"},
                                         {"vlan", 100}, {"ip_src", src}, {"ip_dst", "10.0.0.1"},
                                         {"proto", "tcp"}, {"sport", 40000}, {"dport", 5432}}}});
    return t["verdict"].get<std::string>();
  };
  EXPECT_EQ(verdict("10.0.9.9"), "output");
  EXPECT_EQ(verdict("10.0.9.8"), "drop");
  // A new address; then the member goes.
  put(member_key, json{{"port", far}, {"addresses", {"10.0.9.8", "10.7.0.0/16"}}});
  ASSERT_TRUE(until([&] { return members() == json{{far, {"10.0.9.8/32", "10.7.0.0/16"}}}; })) << members();
  EXPECT_EQ(verdict("10.0.9.8"), "output");
  EXPECT_EQ(verdict("10.7.1.1"), "output");
  EXPECT_EQ(verdict("10.0.9.9"), "drop");
  // A document the switch refuses changes nothing, and says why in show.
  put(member_key, json{{"port", far}, {"addresses", {"10.0.9.300"}}});
  ASSERT_TRUE(until([&] { return !agent_->status()["intake"]["refused_remote_members"].empty(); }))
      << agent_->status();
  EXPECT_EQ(members(), (json{{far, {"10.0.9.8/32", "10.7.0.0/16"}}}));
  del(member_key);
  ASSERT_TRUE(until([&] { return members().empty(); })) << members();
  EXPECT_EQ(verdict("10.0.9.8"), "drop");
}

TEST_F(EtcdTest, AGuestMakesThePortUp) {
  // QEMU as the vhost-user client: the switch serves the socket.
  const std::string sock = "/tmp/strait-etcd-test-guest.sock";
  std::filesystem::remove(sock);
  put(group_key(), group_doc({}));
  put(port_key(7), port_doc(7, "fa:16:3e:00:00:07", 100,
                            {{"vhostuser_socket", sock}, {"vhostuser_mode", "client"}}));
  start();
  ASSERT_TRUE(until([&] { return state_is(7, "bound"); })) << state(7);
  auto guest = std::make_unique<VirtioGuest>("net_virtio_user_etcd", sock, "fa:16:3e:00:00:07");
  ASSERT_TRUE(until([&] { return state_is(7, "up"); })) << state(7);
  h_->release(guest);
  ASSERT_TRUE(until([&] { return state_is(7, "down"); })) << state(7);
}

}  // namespace
}  // namespace strait::test
