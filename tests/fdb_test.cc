#include "dataplane/fdb.h"

#include <gtest/gtest.h>

#include <array>
#include <random>
#include <set>
#include <vector>

namespace strait::dp {
namespace {

using Mac = std::array<uint8_t, 6>;

Mac mac_of(uint64_t v) {
  Mac m;
  for (int i = 0; i < 6; i++) m[i] = uint8_t(v >> (8 * (5 - i)));
  return m;
}

FdbEntry entry(uint16_t lvlan, const Mac& mac, uint16_t port, uint16_t slot = kNoSlot) {
  FdbEntry e;
  e.key = Fdb::make_key(lvlan, mac.data());
  e.port = port;
  e.learn_slot = slot;
  return e;
}

TEST(FdbTest, MakeKeyLayout) {
  Mac m = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};
  EXPECT_EQ(Fdb::make_key(10, m.data()), (uint64_t(10) << 48) | 0x021122334455ull);
  EXPECT_NE(Fdb::make_key(1, mac_of(0).data()), 0u);
}

TEST(FdbTest, EmptyFindsNothing) {
  Mac m = mac_of(0x020000000001);
  Fdb empty;
  EXPECT_EQ(empty.find(1, m.data()), nullptr);
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_TRUE(empty.entries().empty());
  Fdb built(std::vector<FdbEntry>{});
  EXPECT_EQ(built.find(1, m.data()), nullptr);
  EXPECT_EQ(built.size(), 0u);
}

TEST(FdbTest, FindPresentAndAbsent) {
  Mac a = mac_of(0x02000000000a), b = mac_of(0x02000000000b), c = mac_of(0x02000000000c);
  Fdb fdb({entry(5, a, 1), entry(5, b, 2, 17)});
  ASSERT_NE(fdb.find(5, a.data()), nullptr);
  EXPECT_EQ(fdb.find(5, a.data())->port, 1);
  EXPECT_EQ(fdb.find(5, a.data())->learn_slot, kNoSlot);
  ASSERT_NE(fdb.find(5, b.data()), nullptr);
  EXPECT_EQ(fdb.find(5, b.data())->port, 2);
  EXPECT_EQ(fdb.find(5, b.data())->learn_slot, 17);
  EXPECT_EQ(fdb.find(5, c.data()), nullptr);
  EXPECT_EQ(fdb.find(6, a.data()), nullptr);
  EXPECT_EQ(fdb.size(), 2u);
}

TEST(FdbTest, SameMacInTwoVlansIsDistinct) {
  Mac m = mac_of(0x02aabbccddee);
  Fdb fdb({entry(1, m, 10), entry(4094, m, 20)});
  EXPECT_EQ(fdb.size(), 2u);
  ASSERT_NE(fdb.find(1, m.data()), nullptr);
  ASSERT_NE(fdb.find(4094, m.data()), nullptr);
  EXPECT_EQ(fdb.find(1, m.data())->port, 10);
  EXPECT_EQ(fdb.find(4094, m.data())->port, 20);
  EXPECT_EQ(fdb.find(2, m.data()), nullptr);
}

TEST(FdbTest, LaterDuplicateReplaces) {
  Mac m = mac_of(0x020000000001), n = mac_of(0x020000000002);
  Fdb fdb({entry(3, m, 1), entry(3, n, 2), entry(3, m, 7, 4)});
  EXPECT_EQ(fdb.size(), 2u);
  ASSERT_NE(fdb.find(3, m.data()), nullptr);
  EXPECT_EQ(fdb.find(3, m.data())->port, 7);
  EXPECT_EQ(fdb.find(3, m.data())->learn_slot, 4);
  EXPECT_EQ(fdb.entries().size(), 2u);
}

TEST(FdbTest, BroadcastAndZeroMacsAreOrdinaryKeys) {
  Mac bcast = mac_of(0xffffffffffff), zero = mac_of(0);
  Fdb fdb({entry(4094, bcast, 1), entry(1, zero, 2)});
  ASSERT_NE(fdb.find(4094, bcast.data()), nullptr);
  ASSERT_NE(fdb.find(1, zero.data()), nullptr);
  EXPECT_EQ(fdb.find(1, zero.data())->port, 2);
  EXPECT_EQ(fdb.find(1, bcast.data()), nullptr);
}

TEST(FdbTest, HundredThousandEntriesAllFound) {
  std::mt19937_64 rng(7);
  std::set<uint64_t> keys;
  std::vector<FdbEntry> in;
  while (in.size() < 100000) {
    uint16_t lvlan = uint16_t(1 + rng() % 50);
    Mac m = mac_of(rng() & 0xffffffffffffull);
    FdbEntry e = entry(lvlan, m, uint16_t(in.size()), uint16_t(in.size() * 3));
    if (keys.insert(e.key).second) in.push_back(e);
  }
  Fdb fdb(in);
  EXPECT_EQ(fdb.size(), in.size());
  for (const FdbEntry& e : in) {
    Mac m = mac_of(e.key & 0xffffffffffffull);
    const FdbEntry* got = fdb.find(uint16_t(e.key >> 48), m.data());
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(got->key, e.key);
    EXPECT_EQ(got->port, e.port);
    EXPECT_EQ(got->learn_slot, e.learn_slot);
  }
  // Absent keys: fresh random ones, and present MACs in a VLAN not used above.
  int absent = 0;
  while (absent < 100000) {
    uint16_t lvlan = uint16_t(1 + rng() % 50);
    Mac m = mac_of(rng() & 0xffffffffffffull);
    if (keys.count(Fdb::make_key(lvlan, m.data()))) continue;
    ASSERT_EQ(fdb.find(lvlan, m.data()), nullptr);
    absent++;
  }
  for (size_t i = 0; i < in.size(); i += 97) {
    Mac m = mac_of(in[i].key & 0xffffffffffffull);
    EXPECT_EQ(fdb.find(51, m.data()), nullptr);
  }
  // entries() lists every key exactly once.
  auto all = fdb.entries();
  EXPECT_EQ(all.size(), in.size());
  std::set<uint64_t> listed;
  for (const FdbEntry& e : all) listed.insert(e.key);
  EXPECT_EQ(listed, keys);
}

}  // namespace
}  // namespace strait::dp
