// Security groups through the whole switch: API -> model -> compiled
// classifier -> snapshot -> worker -> conntrack, over net_ring ports with
// frames made by tests/frame_builder.h. What a tenant sees: which frames arrive.
#include <gtest/gtest.h>

#include "tests/frame_builder.h"
#include "tests/switch_harness.h"

namespace strait::test {
namespace {

using nlohmann::json;

constexpr char kMacA[] = "02:00:00:00:01:0a";
constexpr char kMacB[] = "02:00:00:00:01:0b";
constexpr char kMacC[] = "02:00:00:00:01:0c";

// TCP's flag bits.
constexpr uint8_t kSyn = 0x02, kAck = 0x10, kPsh = 0x08;

// One TCP segment with 20 bytes of payload.
Frame tcp(const char* smac, const char* dmac, const char* sip, const char* dip, uint16_t sport,
          uint16_t dport, uint8_t flags) {
  return Eth(smac, dmac).ipv4(sip, dip).tcp(sport, dport, flags).fill('x', 20);
}

class SecGroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    h_ = std::make_unique<Harness>(test_config());
    h_->ok("network.create", {{"id", "n1"}, {"type", "local"}});
  }
  void TearDown() override {
    h_.reset();
    ports_.clear();
  }
  RingPort& bind(int n, const char* mac, const char* ip, json groups) {
    ports_.push_back(std::make_unique<RingPort>("net_ring_sg" + std::to_string(n)));
    json p = port_params(port_uuid(n), "n1", mac, ports_.back()->name());
    p["fixed_ips"] = {ip};
    p["security_groups"] = std::move(groups);
    h_->ok("port.bind", p);
    return *ports_.back();
  }
  json rule(const char* group, const char* direction, json extra = json::object()) {
    extra["security_group_id"] = group;
    extra["direction"] = direction;
    extra["ethertype"] = "IPv4";
    return h_->ok("security_group_rule.create", extra);
  }
  // Sends `frames` from `from` and returns what `to` received within a short wait.
  size_t pass(RingPort& from, RingPort& to, const std::vector<Frame>& frames, size_t expect) {
    from.send(frames);
    auto got = to.wait_for(expect, std::chrono::milliseconds(expect ? 2000 : 200));
    h_->pump(std::chrono::milliseconds(10));
    to.take();
    return got.size();
  }
  std::unique_ptr<Harness> h_;
  std::vector<std::unique_ptr<RingPort>> ports_;
};

// A opens TCP to B's port 22: A's egress and B's ingress allow it; the
// replies pass although B has no egress rule and A no ingress rule (F9: one
// connection for both directions). A new connection from B is refused.
TEST_F(SecGroupTest, StatefulTcpBetweenTwoVmsOnOneHostF9) {
  h_->ok("security_group.create", {{"id", "client"}});
  h_->ok("security_group.create", {{"id", "ssh"}});
  rule("client", "egress");
  rule("ssh", "ingress", {{"protocol", "tcp"}, {"port_range_min", 22}, {"port_range_max", 22}});
  RingPort& a = bind(1, kMacA, "10.0.0.1", {"client"});
  RingPort& b = bind(2, kMacB, "10.0.0.2", {"ssh"});

  EXPECT_EQ(pass(a, b, {tcp(kMacA, kMacB, "10.0.0.1", "10.0.0.2", 40000, 22, kSyn)}, 1), 1u);
  EXPECT_EQ(pass(b, a, {tcp(kMacB, kMacA, "10.0.0.2", "10.0.0.1", 22, 40000, kSyn | kAck)}, 1), 1u);
  EXPECT_EQ(pass(a, b, {tcp(kMacA, kMacB, "10.0.0.1", "10.0.0.2", 40000, 22, kAck)}, 1), 1u);
  EXPECT_EQ(pass(b, a, {tcp(kMacB, kMacA, "10.0.0.2", "10.0.0.1", 22, 40000, kPsh | kAck)}, 1), 1u);
  // Not allowed to B: port 80. Not allowed from B: any new connection.
  EXPECT_EQ(pass(a, b, {tcp(kMacA, kMacB, "10.0.0.1", "10.0.0.2", 40001, 80, kSyn)}, 0), 0u);
  EXPECT_EQ(h_->drops("sg_ingress_denied"), 1u);
  EXPECT_EQ(pass(b, a, {tcp(kMacB, kMacA, "10.0.0.2", "10.0.0.1", 22, 40002, kSyn)}, 0), 0u);
  EXPECT_EQ(h_->drops("sg_egress_denied"), 1u);
  // A SYN-ACK of no connection opens nothing.
  EXPECT_EQ(pass(b, a, {tcp(kMacB, kMacA, "10.0.0.2", "10.0.0.1", 22, 40003, kSyn | kAck)}, 0), 0u);
  EXPECT_EQ(h_->drops("ct_invalid"), 1u);
  EXPECT_GE(h_->ok("stats")["conntrack"]["entries"].get<uint64_t>(), 1u);
}

// F10: removing the rule ends the established connection at its next
// packet; adding it again lets the connection go on.
TEST_F(SecGroupTest, RuleRemovalEndsConnectionAndReAddRestoresItF10) {
  h_->ok("security_group.create", {{"id", "client"}});
  h_->ok("security_group.create", {{"id", "ssh"}});
  rule("client", "egress");
  json r = rule("ssh", "ingress", {{"protocol", "tcp"}, {"port_range_min", 22}, {"port_range_max", 22}});
  RingPort& a = bind(1, kMacA, "10.0.0.1", {"client"});
  RingPort& b = bind(2, kMacB, "10.0.0.2", {"ssh"});
  ASSERT_EQ(pass(a, b, {tcp(kMacA, kMacB, "10.0.0.1", "10.0.0.2", 40000, 22, kSyn)}, 1), 1u);
  ASSERT_EQ(pass(b, a, {tcp(kMacB, kMacA, "10.0.0.2", "10.0.0.1", 22, 40000, kSyn | kAck)}, 1), 1u);
  ASSERT_EQ(pass(a, b, {tcp(kMacA, kMacB, "10.0.0.1", "10.0.0.2", 40000, 22, kAck)}, 1), 1u);

  h_->ok("security_group_rule.delete", {{"id", r["id"]}});
  // The reply direction meets the change first: the connection ends.
  EXPECT_EQ(pass(b, a, {tcp(kMacB, kMacA, "10.0.0.2", "10.0.0.1", 22, 40000, kPsh | kAck)}, 0), 0u);
  EXPECT_EQ(h_->drops("ct_revoked"), 1u);
  EXPECT_EQ(pass(a, b, {tcp(kMacA, kMacB, "10.0.0.1", "10.0.0.2", 40000, 22, kPsh | kAck)}, 0), 0u);
  EXPECT_EQ(h_->drops("sg_ingress_denied"), 1u);

  rule("ssh", "ingress", {{"protocol", "tcp"}, {"port_range_min", 22}, {"port_range_max", 22}});
  EXPECT_EQ(pass(a, b, {tcp(kMacA, kMacB, "10.0.0.1", "10.0.0.2", 40000, 22, kPsh | kAck)}, 1), 1u);
  EXPECT_EQ(pass(b, a, {tcp(kMacB, kMacA, "10.0.0.2", "10.0.0.1", 22, 40000, kPsh | kAck)}, 1), 1u);
}

// Issue 22: a change of rules re-checks only the connections of ports whose
// rules it changed, and evicts no flow. A rule of a group neither end of a
// connection uses leaves it alone; a rule removed from the receiver's group
// still ends it at its next packet (F10).
TEST_F(SecGroupTest, RuleChangeRechecksOnlyTheConnectionsOfItsPortsAndEvictsNothing) {
  h_->ok("security_group.create", {{"id", "client"}});
  h_->ok("security_group.create", {{"id", "ssh"}});
  h_->ok("security_group.create", {{"id", "other"}});
  rule("client", "egress");
  json r = rule("ssh", "ingress", {{"protocol", "tcp"}, {"port_range_min", 22}, {"port_range_max", 22}});
  RingPort& a = bind(1, kMacA, "10.0.0.1", {"client"});
  RingPort& b = bind(2, kMacB, "10.0.0.2", {"ssh"});
  bind(3, kMacC, "10.0.0.3", {"other"});
  ASSERT_EQ(pass(a, b, {tcp(kMacA, kMacB, "10.0.0.1", "10.0.0.2", 40000, 22, kSyn)}, 1), 1u);
  ASSERT_EQ(pass(b, a, {tcp(kMacB, kMacA, "10.0.0.2", "10.0.0.1", 22, 40000, kSyn | kAck)}, 1), 1u);
  const Frame data = tcp(kMacA, kMacB, "10.0.0.1", "10.0.0.2", 40000, 22, kPsh | kAck);
  const Frame reply = tcp(kMacB, kMacA, "10.0.0.2", "10.0.0.1", 22, 40000, kPsh | kAck);
  ASSERT_EQ(pass(a, b, {data}, 1), 1u);
  ASSERT_EQ(pass(b, a, {reply}, 1), 1u);
  const uint64_t before = h_->worker_sum("cache_misses");
  const uint64_t generation = h_->ok("stats")["generation"].get<uint64_t>();

  rule("other", "ingress", {{"protocol", "tcp"}, {"port_range_min", 80}, {"port_range_max", 80}});
  EXPECT_GT(h_->ok("stats")["generation"].get<uint64_t>(), generation);
  EXPECT_EQ(pass(a, b, {data}, 1), 1u);
  EXPECT_EQ(pass(b, a, {reply}, 1), 1u);
  EXPECT_EQ(h_->worker_sum("cache_misses"), before) << "a change of rules only evicts no flow";

  h_->ok("security_group_rule.delete", {{"id", r["id"]}});
  EXPECT_EQ(pass(b, a, {reply}, 0), 0u);
  EXPECT_EQ(h_->drops("ct_revoked"), 1u) << "B's rules changed: its connection is checked";
  EXPECT_EQ(h_->worker_sum("cache_misses"), before) << "and its flows were still cached";
}

// A rule naming a remote group allows exactly its members; a port joining
// the group (port.update on a live port) is allowed from then on, and the
// rules are not recompiled for it (F8: only the address sets change).
TEST_F(SecGroupTest, RemoteGroupMembershipChangeTakesEffectF8) {
  h_->ok("security_group.create", {{"id", "members"}});
  h_->ok("security_group.create", {{"id", "out"}});
  rule("out", "egress");
  rule("members", "egress");
  rule("members", "ingress", {{"remote_group_id", "members"}});
  RingPort& b = bind(2, kMacB, "10.0.0.2", {"members"});
  RingPort& c = bind(3, kMacC, "10.0.0.3", {"out"});
  auto udp = [](const char* smac, const char* sip, uint16_t sport) -> std::vector<Frame> {
    return {Eth(smac, kMacB).ipv4(sip, "10.0.0.2").udp(sport, 5000).fill('u', 20)};
  };
  EXPECT_EQ(pass(c, b, udp(kMacC, "10.0.0.3", 7000), 0), 0u);
  const json before = h_->ok("show")["security_groups"]["builds"];

  json upd = h_->ok("port.update", {{"id", port_uuid(3)}, {"security_groups", {"out", "members"}}});
  EXPECT_EQ(upd["security_groups"], json({"out", "members"}));
  EXPECT_EQ(pass(c, b, udp(kMacC, "10.0.0.3", 7001), 1), 1u);
  const json after = h_->ok("show")["security_groups"]["builds"];
  // {members} got new members: re-indexed, not rebuilt. {members, out} is new: built once.
  EXPECT_EQ(after["reindexed"].get<int>(), before["reindexed"].get<int>() + 1);
  EXPECT_EQ(after["built"].get<int>(), before["built"].get<int>() + 1);

  h_->ok("port.update", {{"id", port_uuid(3)}, {"security_groups", {"out"}}});
  EXPECT_EQ(pass(c, b, udp(kMacC, "10.0.0.3", 7002), 0), 0u);
}

// Port security: a source address that is not the port's is dropped; an
// allowed address pair may be used; with port security off anything goes.
TEST_F(SecGroupTest, AntiSpoofingAndAllowedAddressPairs) {
  h_->ok("security_group.create", {{"id", "open"}});
  rule("open", "egress");
  rule("open", "ingress");
  RingPort& a = bind(1, kMacA, "10.0.0.1", {"open"});
  RingPort& b = bind(2, kMacB, "10.0.0.2", {"open"});
  auto udp = [](const char* smac, const char* sip) -> std::vector<Frame> {
    return {Eth(smac, kMacB).ipv4(sip, "10.0.0.2").udp(1, 2)};
  };
  EXPECT_EQ(pass(a, b, udp(kMacA, "10.0.0.1"), 1), 1u);
  EXPECT_EQ(pass(a, b, udp(kMacA, "10.0.0.77"), 0), 0u);
  EXPECT_EQ(h_->drops("spoofed_ip"), 1u);
  EXPECT_EQ(pass(a, b, udp("02:00:00:00:01:99", "10.0.0.1"), 0), 0u);
  EXPECT_EQ(h_->drops("spoofed_mac"), 1u);

  h_->ok("port.update", {{"id", port_uuid(1)},
                         {"allowed_address_pairs", {{{"ip_address", "10.0.0.64/26"}}}}});
  EXPECT_EQ(pass(a, b, udp(kMacA, "10.0.0.77"), 1), 1u);
  // Groups must go before port security can (neutron's rule).
  json r = h_->call("port.update", {{"id", port_uuid(1)}, {"port_security_enabled", false}});
  EXPECT_FALSE(r["ok"].get<bool>());
  h_->ok("port.update", {{"id", port_uuid(1)}, {"security_groups", json::array()},
                         {"allowed_address_pairs", json::array()},
                         {"port_security_enabled", false}});
  EXPECT_EQ(pass(a, b, udp("02:00:00:00:01:99", "10.9.9.9"), 1), 1u);
}

// Groups, rules and the ports' groups survive a restart, and the rules are
// in force for the first frame after it (F1, F11).
TEST(SecGroupRestart, RulesAreBackBeforeTheFirstFrameF1F11) {
  RingPort a("net_ring_sgr1"), b("net_ring_sgr2");  // the devices outlive both switches
  auto cfg = test_config();
  {
    Harness h(cfg, /*keep_state=*/true);
    h.ok("network.create", {{"id", "n1"}, {"type", "local"}});
    h.ok("security_group.create", {{"id", "web"}});
    h.ok("security_group_rule.create", {{"security_group_id", "web"}, {"direction", "ingress"},
                                        {"ethertype", "IPv4"}, {"protocol", "udp"},
                                        {"port_range_min", 53}, {"port_range_max", 53}});
    json pa = port_params(port_uuid(1), "n1", kMacA, a.name());
    pa["fixed_ips"] = {"10.0.0.1"};
    pa["port_security_enabled"] = false;
    json pb = port_params(port_uuid(2), "n1", kMacB, b.name());
    pb["fixed_ips"] = {"10.0.0.2"};
    pb["security_groups"] = {"web"};
    h.ok("port.bind", {{"ports", {pa, pb}}});
  }
  Harness h(cfg);
  json g = h.ok("security_group.show", {{"id", "web"}});
  ASSERT_EQ(g["rules"].size(), 1u);
  EXPECT_EQ(g["ports"], json({port_uuid(2)}));
  auto udp = [](uint16_t dport) -> Frame {
    return Eth(kMacA, kMacB).ipv4("10.0.0.1", "10.0.0.2").udp(999, dport);
  };
  a.send({udp(54), udp(53)});
  auto got = b.wait_for(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0][36] << 8 | got[0][37], 53);  // UDP destination port
  h.pump(std::chrono::milliseconds(10));
  EXPECT_EQ(h.drops("sg_ingress_denied"), 1u);
}

// An instance that stops loses its connections (issue 4: STOPPED flushes
// the port's conntrack entries), keeps its binding and rules, and a new
// connection after its next start needs the rules again.
TEST_F(SecGroupTest, StoppedInstanceLosesItsConnections) {
  h_->ok("security_group.create", {{"id", "client"}});
  h_->ok("security_group.create", {{"id", "dns"}});
  rule("client", "egress");
  rule("dns", "ingress", {{"protocol", "udp"}, {"port_range_min", 53}, {"port_range_max", 53}});
  RingPort& a = bind(1, kMacA, "10.0.0.1", {"client"});
  RingPort& b = bind(2, kMacB, "10.0.0.2", {"dns"});
  auto q = [](uint16_t sport) -> Frame {
    return Eth(kMacA, kMacB).ipv4("10.0.0.1", "10.0.0.2").udp(sport, 53);
  };
  ASSERT_EQ(pass(a, b, {q(3001), q(3002)}, 2), 2u);
  auto entries = [&] { return h_->ok("stats")["conntrack"]["entries"].get<uint64_t>(); };
  ASSERT_EQ(entries(), 2u);
  const std::vector<Frame> reply = {Eth(kMacB, kMacA).ipv4("10.0.0.2", "10.0.0.1").udp(53, 3001)};
  // B answers: a reply, it passes (and B's flow remembers the connection).
  ASSERT_EQ(pass(b, a, reply, 1), 1u);
  const uint64_t generation = h_->ok("stats")["generation"].get<uint64_t>();
  // libvirt says A's instance stopped (its interface found by MAC).
  h_->sw().lifecycle().on_domain_event(
      {ctl::DomainEvent::Kind::kStopped, "6f1c2a9e-0000-4000-8000-0000000000aa", "instance-a",
       std::string("<domain><name>instance-a</name><devices><interface "
                   "type='vhostuser'><mac address='") +
           kMacA +
           "'/><source type='unix' path='/nowhere/a.sock' mode='server'/>"
           "</interface></devices></domain>",
       ""});
  h_->pump(std::chrono::milliseconds(50));
  EXPECT_EQ(entries(), 0u);
  EXPECT_EQ(h_->ok("stats")["conntrack"]["flushed"].get<uint64_t>(), 2u);
  // The stop changed no rule: B's flow is still cached, as it was. Its
  // reply to the old connection is no reply any more: B may not open one.
  EXPECT_EQ(h_->ok("stats")["generation"].get<uint64_t>(), generation);
  EXPECT_EQ(pass(b, a, reply, 0), 0u);
  EXPECT_EQ(h_->drops("sg_egress_denied"), 1u);
  EXPECT_EQ(h_->ok("port.show", {{"id", port_uuid(1)}})["security_groups"], json({"client"}));
}

// stats.conntrack.new_per_s: new connections per second over the last
// second, from the control loop's samples; back at 0 once they stop.
TEST_F(SecGroupTest, NewConnectionsPerSecond) {
  h_->ok("security_group.create", {{"id", "client"}});
  h_->ok("security_group.create", {{"id", "dns"}});
  rule("client", "egress");
  rule("dns", "ingress", {{"protocol", "udp"}, {"port_range_min", 53}, {"port_range_max", 53}});
  RingPort& a = bind(1, kMacA, "10.0.0.1", {"client"});
  RingPort& b = bind(2, kMacB, "10.0.0.2", {"dns"});
  auto rate = [&] { return h_->ok("stats")["conntrack"]["new_per_s"].get<double>(); };
  h_->pump(std::chrono::milliseconds(1100));
  EXPECT_EQ(rate(), 0.0);
  std::vector<Frame> queries;
  for (uint16_t sport = 3000; sport < 3020; sport++)
    queries.push_back(Eth(kMacA, kMacB).ipv4("10.0.0.1", "10.0.0.2").udp(sport, 53));
  ASSERT_EQ(pass(a, b, queries, 20), 20u);
  // 20 connections in one burst: 20/s over the sample that saw them (half
  // of that if two samples shared them); never more.
  double most = 0;
  for (int i = 0; i < 25; i++) {
    h_->pump(std::chrono::milliseconds(100));
    most = std::max(most, rate());
  }
  EXPECT_GE(most, 10.0);
  EXPECT_LE(most, 20.0);
  h_->pump(std::chrono::milliseconds(1100));
  EXPECT_EQ(rate(), 0.0);
  EXPECT_EQ(h_->ok("stats")["conntrack"]["created"].get<uint64_t>(), 20u);
}

// A refused request changes nothing.
TEST_F(SecGroupTest, RefusedRequestsChangeNothing) {
  h_->ok("security_group.create", {{"id", "g1"}});
  ports_.push_back(std::make_unique<RingPort>("net_ring_sg9"));
  json p = port_params(port_uuid(9), "n1", kMacA, ports_.back()->name());
  p["security_groups"] = {"g1", "nope"};
  json r = h_->call("port.bind", p);
  ASSERT_FALSE(r["ok"].get<bool>());
  EXPECT_EQ(r["error"]["code"], "not_found");
  EXPECT_TRUE(h_->ok("port.list")["ports"].empty());

  p["security_groups"] = {"g1"};
  h_->ok("port.bind", p);
  r = h_->call("security_group.delete", {{"id", "g1"}});
  EXPECT_EQ(r["error"]["code"], "conflict");
  json rl = {{"security_group_id", "g1"}, {"direction", "ingress"}, {"ethertype", "IPv4"},
             {"protocol", "tcp"}, {"port_range_min", 80}, {"port_range_max", 80}};
  h_->ok("security_group_rule.create", rl);
  r = h_->call("security_group_rule.create", rl);
  EXPECT_EQ(r["error"]["code"], "conflict");
  rl["remote_group_id"] = "nope";
  rl["port_range_min"] = 81;
  rl["port_range_max"] = 81;
  r = h_->call("security_group_rule.create", rl);
  EXPECT_EQ(r["error"]["code"], "not_found");
  EXPECT_EQ(h_->ok("security_group.show", {{"id", "g1"}})["rules"].size(), 1u);
}

}  // namespace
}  // namespace strait::test
