// neutron's QoS rules on ports (issue 25) through real DPDK devices:
// policed bursts with their drops counted by reason, one limit shared by
// two workers, DSCP marking byte for byte, and changes live at the reply.
// Rates over time are bench/'s to measure (strait-qos-bench); what is
// judged here does not depend on how fast this machine sends.
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/frame_builder.h"
#include "tests/switch_harness.h"

namespace strait::test {
namespace {

using nlohmann::json;

constexpr char kMacA[] = "02:00:00:00:00:0a";
constexpr char kMacB[] = "02:00:00:00:00:0b";
constexpr char kMacD[] = "02:00:00:00:00:0d";

json limit(const char* type, const char* dir, int max, int burst) {
  const bool bw = std::string(type) == "bandwidth_limit";
  return {{"type", type}, {"direction", dir}, {bw ? "max_kbps" : "max_kpps", max},
          {bw ? "max_burst_kbps" : "max_burst_kpps", burst}};
}

// n frames of `len` bytes from src to dst, each its own flow.
std::vector<Frame> frames(const char* src, const char* dst, int n, size_t len = 1000) {
  std::vector<Frame> out;
  for (int i = 0; i < n; i++) {
    Frame f = Eth(src, dst).ipv4("10.0.0.1", "10.0.0.2").udp(uint16_t(1000 + i), 80).frame();
    f.resize(len, 'q');
    out.push_back(std::move(f));
  }
  return out;
}

class QosTest : public ::testing::Test {
 protected:
  void start(std::vector<unsigned> workers = {1}) {
    h_ = std::make_unique<Harness>(test_config(std::move(workers)));
    h_->ok("network.create", {{"id", "n1"}, {"type", "local"}});
  }
  void TearDown() override {
    h_.reset();
    ports_.clear();
  }
  RingPort& bind(int n, const std::string& mac, json qos = json::array()) {
    ports_.push_back(std::make_unique<RingPort>("net_ring_q" + std::to_string(n)));
    json p = port_params(port_uuid(n), "n1", mac, ports_.back()->name());
    p["qos"] = std::move(qos);
    h_->ok("port.bind", p);
    return *ports_.back();
  }
  // What `to` got within a short while (the sends are all queued at once).
  size_t received(RingPort& to, size_t at_least) {
    auto got = to.wait_for(at_least, std::chrono::milliseconds(500));
    h_->pump(std::chrono::milliseconds(30));
    return got.size() + to.take().size();
  }
  uint64_t port_drops(int n, const std::string& reason) {
    const json stats = h_->ok("stats");
    for (const json& p : stats["ports"])
      if (p["id"] == port_uuid(n)) return p["drops"].value(reason, uint64_t(0));
    ADD_FAILURE() << "no port " << n;
    return 0;
  }
  std::unique_ptr<Harness> h_;
  std::vector<std::unique_ptr<RingPort>> ports_;
};

// 10 Mbit/s with a burst of 100 kbit (12500 bytes): of 100 frames of 1000
// bytes sent at once, an idle meter passes 12500 / 1000 + 1 = 13, and the
// few that refill while the worker takes them in (1.25 bytes a microsecond).
TEST_F(QosTest, AnEgressLimitPassesItsBurstAndCountsTheRest) {
  start();
  RingPort& a = bind(1, kMacA, {limit("bandwidth_limit", "egress", 10000, 100)});
  RingPort& b = bind(2, kMacB);
  a.send(frames(kMacA, kMacB, 100));
  const size_t got = received(b, 13);
  EXPECT_GE(got, 13u);
  EXPECT_LE(got, 16u);
  EXPECT_EQ(port_drops(1, "qos_bandwidth"), 100 - got);
  EXPECT_EQ(h_->drops("qos_bandwidth"), 100 - got);
  // The other way is not limited.
  b.send(frames(kMacB, kMacA, 100));
  EXPECT_EQ(received(a, 100), 100u);
}

TEST_F(QosTest, APacketRateLimitCountsItsOwnReason) {
  start();
  // 1 kpps with a burst of 0.. kilo-frames: neutron's smallest, 80 % of 1 kpps: 800.
  RingPort& a = bind(1, kMacA, {limit("packet_rate_limit", "egress", 1, 0)});
  RingPort& b = bind(2, kMacB);
  a.send(frames(kMacA, kMacB, 1200, 64));
  const size_t got = received(b, 801);
  EXPECT_GE(got, 801u);
  EXPECT_LE(got, 820u);
  EXPECT_EQ(port_drops(1, "qos_packet_rate"), 1200 - got);
  EXPECT_EQ(port_drops(1, "qos_bandwidth"), 0u);
}

// An ingress limit of D, fed by A and B on two workers at once: one meter,
// so together they get one burst, not one each.
TEST_F(QosTest, AnIngressLimitHoldsAcrossTwoWorkers) {
  start({1, 2});
  RingPort& d = bind(4, kMacD, {limit("bandwidth_limit", "ingress", 1000, 40)});  // 5000 bytes
  RingPort& a = bind(1, kMacA);
  RingPort& b = bind(2, kMacB);
  const json show = h_->ok("show");
  std::set<int> pollers;
  for (const json& w : show["workers"])
    for (const json& q : w["rx_queues"])
      for (const json& p : show["ports"])
        if (p["dp_port"] == q["port"] && (p["id"] == port_uuid(1) || p["id"] == port_uuid(2)))
          pollers.insert(w["id"].get<int>());
  ASSERT_EQ(pollers.size(), 2u) << "A and B are polled by one worker: " << show["workers"];
  std::thread ta([&] { a.send(frames(kMacA, kMacD, 200, 500)); });
  b.send(frames(kMacB, kMacD, 200, 500));
  ta.join();
  // 5000 / 500 + 1 = 11 at once, and what 125 bytes a millisecond refill
  // while 400 frames go through (a few ms).
  const size_t got = received(d, 11);
  EXPECT_GE(got, 11u);
  EXPECT_LE(got, 14u);
  EXPECT_EQ(port_drops(4, "qos_bandwidth"), 400 - got);
}

TEST_F(QosTest, DscpMarkingRewritesWhatTheVmSendsByteForByte) {
  start();
  RingPort& a = bind(1, kMacA, {{{"type", "dscp_marking"}, {"dscp_mark", 46}}});
  RingPort& b = bind(2, kMacB);
  const Frame v4 = Eth(kMacA, kMacB).ipv4("10.0.0.1", "10.0.0.2", 9, 64, 0x01).udp(5, 6).fill('x', 20);
  const Frame v4_marked =
      Eth(kMacA, kMacB).ipv4("10.0.0.1", "10.0.0.2", 9, 64, uint8_t(46 << 2 | 1)).udp(5, 6).fill('x', 20);
  Frame v6 = Eth(kMacA, kMacB).ipv6("fe80::1", "fe80::2").udp(5, 6).fill('y', 20);
  Frame v6_marked = v6;
  v6_marked[14] = uint8_t(0x60 | (46 << 2) >> 4);
  v6_marked[15] = uint8_t(((46 << 2) & 0x0f) << 4);
  const Frame arp = Eth(kMacA, "ff:ff:ff:ff:ff:ff").arp(1, "10.0.0.1", "10.0.0.2");
  a.send({v4, v6, arp});
  auto got = b.wait_for(3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], v4_marked);
  EXPECT_EQ(got[1], v6_marked);
  EXPECT_EQ(got[2], arp);
  // What the VM receives is not marked.
  b.send({Eth(kMacB, kMacA).ipv4("10.0.0.2", "10.0.0.1", 9, 64, 0x01).udp(6, 5).fill('z', 20)});
  got = a.wait_for(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0][15], 0x01);
}

// straitctl trace names the limits a frame meets, in neutron's units.
TEST_F(QosTest, TraceShowsTheLimitsAndTheMarkAFrameMeets) {
  start();
  bind(1, kMacA, {limit("bandwidth_limit", "egress", 10000, 1000),
                  {{"type", "dscp_marking"}, {"dscp_mark", 46}}});
  bind(2, kMacB, {limit("packet_rate_limit", "ingress", 50, 5)});
  const json t = h_->ok("trace", {{"port", port_uuid(1)},
                                  {"frame", {{"dst", kMacB}, {"ip_src", "10.0.0.1"},
                                             {"ip_dst", "10.0.0.2"}}}});
  std::vector<std::string> qos;
  for (const json& s : t["steps"])
    if (s["step"] == "qos") qos.push_back(s["port"]["name"].get<std::string>() + ": " +
                                          s["detail"].get<std::string>());
  ASSERT_EQ(qos.size(), 2u) << t.dump(1);
  EXPECT_THAT(qos[0], ::testing::HasSubstr(port_uuid(1) + ": from the VM: at most 10000 kbit/s (burst 1000 kbit)"));
  EXPECT_THAT(qos[0], ::testing::HasSubstr("DSCP set to 46"));
  EXPECT_THAT(qos[1], ::testing::HasSubstr(port_uuid(2) + ": to the VM: at most 50 kpps (burst 5 kframes)"));
  EXPECT_EQ(t["verdict"], "output");
}

TEST_F(QosTest, RulesChangedOrRemovedAreLiveAtTheReply) {
  start();
  RingPort& a = bind(1, kMacA);
  RingPort& b = bind(2, kMacB);
  json shown = h_->ok("port.update", {{"id", port_uuid(1)},
                                      {"qos", {limit("bandwidth_limit", "egress", 10000, 16)}}});
  EXPECT_EQ(shown["qos"][0]["max_kbps"], 10000);
  a.send(frames(kMacA, kMacB, 50));
  EXPECT_LE(received(b, 3), 5u);  // 2000 bytes of burst: 3 frames (and a refill)
  h_->ok("port.update", {{"id", port_uuid(1)}, {"qos", json::array()}});
  a.send(frames(kMacA, kMacB, 50));
  EXPECT_EQ(received(b, 50), 50u);
  // A refused update changes nothing.
  const json bad = h_->call("port.update",
                            {{"id", port_uuid(1)},
                             {"qos", {limit("bandwidth_limit", "egress", -5, 0)}}});
  EXPECT_FALSE(bad["ok"].get<bool>());
  EXPECT_THAT(bad["error"]["message"].get<std::string>(), ::testing::HasSubstr("qos[0].max_kbps"));
  EXPECT_EQ(h_->ok("port.show", {{"id", port_uuid(1)}})["qos"], json::array());
}

}  // namespace
}  // namespace strait::test
