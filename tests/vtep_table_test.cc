// Remote VTEP indexes and next hops: an index is never handed to another
// address before its release, releases that lost a race do nothing, and
// only answers for wanted next hops change anything.
#include "control/tunnel/vtep_table.h"

#include <arpa/inet.h>

#include <gtest/gtest.h>

namespace strait::ctl {
namespace {

uint32_t ip(const char* s) {
  in_addr a{};
  inet_pton(AF_INET, s, &a);
  return a.s_addr;
}

const Mac kGw{0x02, 0, 0, 0, 0x99, 1};

TEST(VtepTable, IndexesStayTakenUntilReleased) {
  VtepTable t(std::nullopt, std::nullopt);
  EXPECT_TRUE(t.sync({ip("10.0.0.2"), ip("10.0.0.3")}).empty());
  EXPECT_EQ(t.ip_of(0), ip("10.0.0.2"));
  EXPECT_EQ(t.ip_of(1), ip("10.0.0.3"));
  // 10.0.0.2 is no longer wanted: out of the datapath, its index still taken.
  auto unwanted = t.sync({ip("10.0.0.3"), ip("10.0.0.4")});
  ASSERT_EQ(unwanted.size(), 1u);
  EXPECT_EQ(unwanted[0].first, ip("10.0.0.2"));
  EXPECT_EQ(t.ip_of(2), ip("10.0.0.4")) << "index 0 is not free yet";
  ASSERT_EQ(t.live().size(), 2u);
  VtepInput in;
  t.fill(in);
  EXPECT_FALSE(in.remotes[0].present);
  EXPECT_TRUE(in.remotes[1].present);
  EXPECT_EQ(in.index.count(ip("10.0.0.2")), 0u);
  t.release(unwanted[0].first, unwanted[0].second);
  t.sync({ip("10.0.0.3"), ip("10.0.0.4"), ip("10.0.0.5")});
  EXPECT_EQ(t.ip_of(0), ip("10.0.0.5")) << "released: reused";
}

TEST(VtepTable, AReleaseThatLostTheRaceDoesNothing) {
  VtepTable t(std::nullopt, std::nullopt);
  t.sync({ip("10.0.0.2")});
  auto first = t.sync({});
  ASSERT_EQ(first.size(), 1u);
  t.sync({ip("10.0.0.2")});  // wanted again before the release
  t.release(first[0].first, first[0].second);
  EXPECT_EQ(t.ip_of(0), ip("10.0.0.2"));
  auto second = t.sync({});
  t.release(first[0].first, first[0].second);  // a stale token
  EXPECT_EQ(t.ip_of(0), ip("10.0.0.2"));
  t.release(second[0].first, second[0].second);
  EXPECT_FALSE(t.ip_of(0));
}

TEST(VtepTable, CapacityCountsIndexesOnTheirWayBack) {
  VtepTable t(std::nullopt, std::nullopt);
  std::set<uint32_t> all;
  for (uint32_t i = 0; i < dp::kMaxVteps; i++) all.insert(htonl(0x0a000100 + i));
  EXPECT_TRUE(t.check_capacity(all).ok());
  t.sync(all);
  auto gone = t.sync({});
  std::set<uint32_t> other{ip("10.9.9.9")};
  const Status st = t.check_capacity(other);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, "resource_exhausted");
  for (auto [a, token] : gone) t.release(a, token);
  EXPECT_TRUE(t.check_capacity(other).ok());
}

TEST(VtepTable, ArpResolvesOnlyWantedNextHops) {
  VtepTable t(std::nullopt, std::nullopt);
  t.sync({ip("10.0.0.2")});
  EXPECT_FALSE(t.on_arp(ip("10.0.0.7"), kGw)) << "nobody's next hop";
  EXPECT_TRUE(t.on_arp(ip("10.0.0.2"), kGw));
  EXPECT_FALSE(t.on_arp(ip("10.0.0.2"), kGw)) << "the same answer again";
  Mac moved = kGw;
  moved[5] = 2;
  EXPECT_TRUE(t.on_arp(ip("10.0.0.2"), moved));
  VtepInput in;
  t.fill(in);
  ASSERT_TRUE(in.remotes[0].resolved);
  EXPECT_EQ(in.remotes[0].next_hop_mac[5], 2);
}

TEST(VtepTable, GatewayAndStaticNextHop) {
  VtepTable via(ip("192.0.2.1"), std::nullopt);
  via.sync({ip("10.0.0.2"), ip("10.0.0.3")});
  EXPECT_EQ(via.arp_ip(ip("10.0.0.2")), ip("192.0.2.1"));
  EXPECT_TRUE(via.on_arp(ip("192.0.2.1"), kGw));
  VtepInput in;
  via.fill(in);
  EXPECT_TRUE(in.remotes[0].resolved && in.remotes[1].resolved) << "one answer resolves both";
  VtepTable fixed(ip("192.0.2.1"), kGw);
  fixed.sync({ip("10.0.0.2")});
  EXPECT_FALSE(fixed.on_arp(ip("192.0.2.1"), kGw)) << "a static next hop needs no ARP";
  VtepInput f;
  fixed.fill(f);
  EXPECT_TRUE(f.remotes[0].resolved);
}

}  // namespace
}  // namespace strait::ctl
