// `trace` and `cache.dump` on a live switch: representative frames are
// traced, then the same bytes are sent through net_ring ports, and what the
// datapath did must be what the trace said (outputs, VLAN tags, drop reason).
#include <map>

#include <gtest/gtest.h>

#include "tests/frame_builder.h"
#include "tests/switch_harness.h"

namespace strait::test {
namespace {

using nlohmann::json;

constexpr char kMacA[] = "02:00:00:00:00:0a";
constexpr char kMacB[] = "02:00:00:00:00:0b";
constexpr char kMacC[] = "02:00:00:00:00:0c";
constexpr char kRemote[] = "02:00:00:00:99:01";  // a host behind the physnet
constexpr char kPhys[] = "physnet:physnet1";

Frame from_hex(const std::string& hex) {
  Frame f;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) f.push_back(std::stoi(hex.substr(i, 2), nullptr, 16));
  return f;
}

// VLAN id of a frame's 802.1Q tag, 0 when untagged.
uint16_t tag_of(const Frame& f) {
  return (f[12] << 8 | f[13]) == 0x8100 ? uint16_t((f[14] << 8 | f[15]) & 0xfff) : 0;
}

json step(const json& trace, const std::string& name) {
  for (const json& s : trace["steps"])
    if (s["step"] == name) return s;
  return nullptr;
}

class TraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rings_["phys"] = std::make_unique<RingPort>("net_ring_trphys");
    auto cfg = test_config();
    cfg.physnets = {{"physnet1", "net_ring_trphys"}};
    h_ = std::make_unique<Harness>(cfg);
    names_[kPhys] = rings_["phys"].get();
    h_->ok("network.create", {{"id", "n1"}, {"type", "vlan"}, {"physnet", "physnet1"},
                              {"segmentation_id", 100}});
    h_->ok("network.create", {{"id", "n2"}, {"type", "local"}});
    bind(1, "n1", kMacA);
    bind(2, "n1", kMacB);
    bind(3, "n2", kMacC);
  }
  void TearDown() override {
    h_.reset();
    rings_.clear();
  }
  void bind(int n, const std::string& net, const std::string& mac) {
    auto ring = std::make_unique<RingPort>("net_ring_trvm" + std::to_string(n));
    h_->ok("port.bind", port_params(port_uuid(n), net, mac, ring->name()));
    names_[port_uuid(n)] = ring.get();
    rings_[port_uuid(n)] = std::move(ring);
  }
  json trace(const std::string& port, const json& frame) {
    json r = h_->ok("trace", {{"port", port}, {"frame", frame}});
    EXPECT_TRUE(r.value("consistent", false)) << r.dump(2);
    return r;
  }
  // Sends the traced bytes into the traced port and checks that the
  // datapath did exactly what the trace said.
  void expect_datapath_agrees(const json& t) {
    const std::string in = t["in_port"]["name"];
    const std::string reason = t["drop_reason"].is_null() ? "" : t["drop_reason"].get<std::string>();
    const uint64_t drops_before = reason.empty() ? 0 : h_->drops(reason);
    for (auto& [n, r] : names_) r->take();
    names_.at(in)->send({from_hex(t["frame"]["hex"])});
    std::map<std::string, uint16_t> want;  // port name -> VLAN tag
    for (const json& a : t["actions"]) want[a["name"]] = a["vlan"].is_null() ? 0 : a["vlan"].get<uint16_t>();
    for (auto& [name, vid] : want) {
      auto got = names_.at(name)->wait_for(1);
      ASSERT_EQ(got.size(), 1u) << "trace says " << name << " gets the frame";
      EXPECT_EQ(tag_of(got[0]), vid) << name;
    }
    h_->pump(std::chrono::milliseconds(30));
    for (auto& [name, r] : names_)
      EXPECT_TRUE(r->take().empty()) << name << " got a frame the trace did not list";
    if (!reason.empty()) {
      EXPECT_EQ(h_->drops(reason), drops_before + 1) << reason;
    }
  }

  std::map<std::string, std::unique_ptr<RingPort>> rings_;
  std::map<std::string, RingPort*> names_;  // trace port name -> ring
  std::unique_ptr<Harness> h_;
};

TEST_F(TraceTest, VmToVmKnownUnicast) {
  json t = trace(port_uuid(1), {{"dst", kMacB}, {"ip_src", "10.0.0.1"}, {"ip_dst", "10.0.0.2"},
                           {"proto", "tcp"}, {"sport", 40000}, {"dport", 22}});
  EXPECT_EQ(t["verdict"], "output");
  EXPECT_EQ(t["in_port"]["name"], port_uuid(1));
  std::vector<std::string> order;
  for (const json& s : t["steps"]) order.push_back(s["step"]);
  EXPECT_EQ(order, (std::vector<std::string>{"parse", "in_port", "source_mac", "ingress_vlan",
                                             "network", "fdb", "mtu"}));
  const json key = step(t, "parse")["key"];
  EXPECT_EQ(key["dl_src"], kMacA);  // the port's own MAC when src is not given
  EXPECT_EQ(key["dl_dst"], kMacB);
  EXPECT_EQ(key["dl_type"], "0x0800");
  EXPECT_EQ(key["nw_src"], "10.0.0.1");
  EXPECT_EQ(key["nw_proto"], 6);
  EXPECT_EQ(key["tp_dst"], 22);
  const json fdb = step(t, "fdb");
  EXPECT_EQ(fdb["known"], true);
  EXPECT_EQ(fdb["learned"], false);  // a bound port's MAC
  EXPECT_EQ(fdb["port"]["name"], port_uuid(2));
  EXPECT_EQ(step(t, "network")["vlan"], 100);  // the segmentation id
  ASSERT_EQ(t["actions"].size(), 1u);
  EXPECT_EQ(t["actions"][0]["name"], port_uuid(2));
  EXPECT_TRUE(t["actions"][0]["vlan"].is_null());
  expect_datapath_agrees(t);
}

TEST_F(TraceTest, UnknownUnicastFloodsToNetworkAndPhysnetTagged) {
  json t = trace(port_uuid(1), {{"dst", "02:00:00:00:77:77"}});
  EXPECT_EQ(t["verdict"], "flood");
  EXPECT_EQ(step(t, "fdb")["known"], false);
  const json flood = step(t, "flood");
  ASSERT_TRUE(flood.is_object());
  EXPECT_EQ(flood["targets"].size(), 2u);
  std::map<std::string, json> out;
  for (const json& a : t["actions"]) out[a["name"]] = a["vlan"];
  EXPECT_EQ(out.size(), 2u);
  EXPECT_TRUE(out.at(port_uuid(2)).is_null());
  EXPECT_EQ(out.at(kPhys), 100);
  EXPECT_FALSE(out.count(port_uuid(3)));  // another network
  expect_datapath_agrees(t);
}

TEST_F(TraceTest, BroadcastArpFloods) {
  json t = trace(port_uuid(2), {{"ethertype", "0x0806"}, {"ip_src", "10.0.0.2"}, {"ip_dst", "10.0.0.1"}});
  EXPECT_EQ(t["verdict"], "flood");
  EXPECT_EQ(step(t, "parse")["key"]["arp_op"], 1);
  EXPECT_EQ(step(t, "parse")["key"]["arp_tpa"], "10.0.0.1");
  EXPECT_EQ(t["actions"].size(), 2u);
  expect_datapath_agrees(t);
}

TEST_F(TraceTest, ToLearnedPhysnetMacIsTagged) {
  // The remote host speaks first: learned behind the physnet.
  rings_["phys"]->send({Eth(kRemote, "ff:ff:ff:ff:ff:ff").vlan(100).arp()});
  ASSERT_EQ(rings_[port_uuid(1)]->wait_for(1).size(), 1u);
  h_->pump(std::chrono::milliseconds(50));
  ASSERT_EQ(h_->sw().show()["learned_macs"], 1);
  json t = trace(port_uuid(1), {{"dst", kRemote}, {"ip_dst", "10.0.0.9"}});
  EXPECT_EQ(t["verdict"], "output");
  const json fdb = step(t, "fdb");
  EXPECT_EQ(fdb["known"], true);
  EXPECT_EQ(fdb["learned"], true);
  EXPECT_EQ(fdb["port"]["name"], kPhys);
  ASSERT_EQ(t["actions"].size(), 1u);
  EXPECT_EQ(t["actions"][0]["name"], kPhys);
  EXPECT_EQ(t["actions"][0]["vlan"], 100);
  expect_datapath_agrees(t);
}

TEST_F(TraceTest, FromPhysnetMapsVlanAndReportsLearning) {
  json t = trace(kPhys, {{"src", kRemote}, {"dst", kMacA}, {"vlan", 100}});
  EXPECT_EQ(t["verdict"], "output");
  const json in = step(t, "ingress_vlan");
  EXPECT_EQ(in["vlan"], 100);
  EXPECT_EQ(in["local_vlan"], step(t, "network")["local_vlan"]);
  EXPECT_EQ(step(t, "learn")["known"], false);
  EXPECT_EQ(t["learn"], true);
  EXPECT_EQ(t["actions"][0]["name"], port_uuid(1));
  EXPECT_TRUE(t["actions"][0]["vlan"].is_null());  // untagged to the VM
  expect_datapath_agrees(t);
}

TEST_F(TraceTest, FromPhysnetUnknownVlanDropsWithReason) {
  json t = trace(kPhys, {{"src", kRemote}, {"dst", kMacA}, {"vlan", 101}});
  EXPECT_EQ(t["verdict"], "drop");
  EXPECT_EQ(t["drop_reason"], "unknown_vlan");
  EXPECT_TRUE(t["actions"].empty());
  const json last = t["steps"].back();
  EXPECT_EQ(last["step"], "ingress_vlan");
  EXPECT_EQ(last["drop_reason"], "unknown_vlan");
  EXPECT_EQ(last["vlan"], 101);
  expect_datapath_agrees(t);
}

TEST_F(TraceTest, RuntFrameDropsInParser) {
  json t = trace(port_uuid(1), "02:00:00:00:00:0b 02:00:00:00:00:0a 08");
  EXPECT_EQ(t["verdict"], "drop");
  EXPECT_EQ(t["drop_reason"], "runt_frame");
  ASSERT_EQ(t["steps"].size(), 1u);
  EXPECT_EQ(t["steps"][0]["step"], "parse");
  EXPECT_FALSE(t["steps"][0].contains("key"));
  expect_datapath_agrees(t);
}

TEST_F(TraceTest, TaggedFrameFromVmAndMtu) {
  json tagged = trace(port_uuid(1), {{"dst", kMacB}, {"vlan", 5}});
  EXPECT_EQ(tagged["drop_reason"], "tagged_on_access_port");
  expect_datapath_agrees(tagged);
  json big = trace(port_uuid(1), {{"dst", kMacB}, {"length", 1515}});  // L3 1501 > MTU 1500
  EXPECT_EQ(big["drop_reason"], "mtu_exceeded");
  EXPECT_EQ(big["steps"].back()["step"], "mtu");
  expect_datapath_agrees(big);
}

TEST_F(TraceTest, SendsNothingAndLeavesCachesAlone) {
  h_->pump(std::chrono::milliseconds(20));
  const json before = h_->ok("cache.dump");
  for (int i = 0; i < 5; i++) trace(port_uuid(1), {{"dst", kMacB}, {"sport", 1000 + i}});
  h_->pump(std::chrono::milliseconds(30));
  for (auto& [name, r] : names_) EXPECT_TRUE(r->take().empty()) << name;
  EXPECT_EQ(h_->ok("cache.dump"), before);
  EXPECT_EQ(h_->sw().stats()["workers"][0]["packets"], 0);
}

TEST_F(TraceTest, RefusesBadRequests) {
  EXPECT_EQ(h_->call("trace", {{"port", port_uuid(9)}, {"frame", "00"}})["error"]["code"], "not_found");
  EXPECT_EQ(h_->call("trace", {{"port", "physnet:nope"}, {"frame", "00"}})["error"]["code"],
            "not_found");
  EXPECT_EQ(h_->call("trace", {{"port", port_uuid(1)}, {"frame", "0g"}})["error"]["code"],
            "invalid_argument");
  json r = h_->call("trace", {{"port", kPhys}, {"frame", {{"dst", kMacA}}}});
  EXPECT_EQ(r["error"]["code"], "invalid_argument");  // no default src on a physnet
  EXPECT_NE(r["error"]["message"].get<std::string>().find("frame.src"), std::string::npos);
  EXPECT_EQ(h_->call("trace", {{"port", port_uuid(1)}, {"frame", {{"vlan", 5000}}}})["error"]["code"],
            "invalid_argument");
  EXPECT_EQ(h_->call("cache.dump", {{"worker", 7}})["error"]["code"], "invalid_argument");
}

TEST_F(TraceTest, CacheDumpShowsTheFlowsOfKnownTraffic) {
  auto& a = *rings_[port_uuid(1)];
  a.send({Eth(kMacA, kMacB).ipv4().udp(), Eth(kMacA, "ff:ff:ff:ff:ff:ff").arp()});
  ASSERT_EQ(rings_[port_uuid(2)]->wait_for(2).size(), 2u);
  const json dump = h_->ok("cache.dump", {{"worker", 0}});
  ASSERT_EQ(dump["workers"].size(), 1u);
  const json& w = dump["workers"][0];
  EXPECT_EQ(w["worker"], 0);
  EXPECT_EQ(w["generation"], h_->sw().show()["generation"]);
  EXPECT_EQ(w["live"], 2);
  EXPECT_EQ(w["truncated"], false);
  ASSERT_EQ(w["entries"].size(), 2u);
  std::map<std::string, json> by_dst;
  for (const json& e : w["entries"]) by_dst[e["key"]["dl_dst"]] = e;
  const json& uni = by_dst.at(kMacB);
  EXPECT_EQ(uni["in_port"]["name"], port_uuid(1));
  EXPECT_EQ(uni["scope"], "l2");
  EXPECT_EQ(uni["action"]["kind"], "output");
  EXPECT_EQ(uni["action"]["port"]["name"], port_uuid(2));
  EXPECT_EQ(by_dst.at("ff:ff:ff:ff:ff:ff")["action"]["kind"], "flood");
  // A new snapshot makes every entry stale: none is live any more.
  bind(4, "n2", "02:00:00:00:00:0d");
  EXPECT_EQ(h_->ok("cache.dump")["workers"][0]["live"], 0);
}

// Workers stopped (as during shutdown): the control thread reads the caches itself.
TEST(TraceStopped, CacheDumpWithWorkersStopped) {
  RingPort a("net_ring_tsa"), b("net_ring_tsb");
  Harness h(test_config());
  h.ok("network.create", {{"id", "n"}, {"type", "local"}});
  h.ok("port.bind", port_params(port_uuid(11), "n", kMacA, a.name()));
  h.ok("port.bind", port_params(port_uuid(12), "n", kMacB, b.name()));
  a.send({Eth(kMacA, kMacB).ipv4().udp()});
  ASSERT_EQ(b.wait_for(1).size(), 1u);
  h.sw().stop_workers();
  json r = h.call("cache.dump", {{"worker", 0}});
  ASSERT_TRUE(r["ok"].get<bool>()) << r.dump();
  EXPECT_EQ(r["result"]["workers"][0]["entries"].size(), 1u);
  h.sw().start_workers();
}

}  // namespace
}  // namespace strait::test
