// Learned MACs: what the control thread learns from the workers' reports,
// how a network's share is bounded, and how MACs age out and leave with
// their local VLAN.
#include "control/switch/mac_table.h"

#include <gtest/gtest.h>

namespace strait::ctl {
namespace {

Mac mac(uint8_t last) { return Mac{0x02, 0, 0, 0, 0, last}; }

TEST(MacTable, LearnsOnceAndHandsOutSlotsFromZero) {
  MacTable t(4, 4);
  EXPECT_TRUE(t.learn(5, mac(1), 3, 100));
  EXPECT_FALSE(t.learn(5, mac(1), 7, 101)) << "known already: the first port stays";
  EXPECT_TRUE(t.learn(6, mac(1), 7, 101)) << "the same MAC in another network is another entry";
  ASSERT_EQ(t.size(), 2u);
  const auto e = t.entries();
  EXPECT_EQ(e[0].lvlan, 5);
  EXPECT_EQ(e[0].port, 3);
  EXPECT_EQ(e[0].slot, 0);
  EXPECT_EQ(e[1].lvlan, 6);
  EXPECT_EQ(e[1].slot, 1);
  EXPECT_TRUE(t.contains(6, mac(1)));
  EXPECT_FALSE(t.contains(7, mac(1)));
}

TEST(MacTable, OneNetworkCannotTakeEverySlot) {
  MacTable t(10, 3);
  for (uint8_t i = 0; i < 3; i++) EXPECT_TRUE(t.learn(5, mac(i), 1, 0));
  EXPECT_FALSE(t.learn(5, mac(9), 1, 0)) << "VLAN 5 holds its share";
  EXPECT_TRUE(t.learn(6, mac(9), 1, 0));
  MacTable full(2, 10);
  EXPECT_TRUE(full.learn(5, mac(1), 1, 0));
  EXPECT_TRUE(full.learn(6, mac(1), 1, 0));
  EXPECT_FALSE(full.learn(7, mac(1), 1, 0)) << "no slot left";
}

TEST(MacTable, AgesByTheLatestSightingAndReusesTheSlot) {
  MacTable t(2, 2);
  ASSERT_TRUE(t.learn(5, mac(1), 1, 100));  // slot 0
  ASSERT_TRUE(t.learn(5, mac(2), 1, 100));  // slot 1
  // Slot 0 seen at 390, slot 1 never since it was learned.
  auto seen = [](uint16_t slot) { return slot == 0 ? 390u : 0u; };
  EXPECT_FALSE(t.age(400, 300, seen)) << "300 s is not more than 300 s";
  EXPECT_TRUE(t.age(401, 300, seen));
  ASSERT_EQ(t.size(), 1u);
  EXPECT_TRUE(t.contains(5, mac(1)));
  EXPECT_TRUE(t.learn(5, mac(3), 1, 401));
  EXPECT_EQ(t.entries()[1].slot, 1) << "the aged MAC's slot is free again";
}

TEST(MacTable, MacsLeaveWithTheirLocalVlan) {
  MacTable t(8, 2);
  ASSERT_TRUE(t.learn(5, mac(1), 1, 0));
  ASSERT_TRUE(t.learn(5, mac(2), 1, 0));
  ASSERT_TRUE(t.learn(6, mac(1), 1, 0));
  t.keep_vlans({6});
  EXPECT_EQ(t.size(), 1u);
  EXPECT_FALSE(t.contains(5, mac(1)));
  // VLAN 5 now goes to another network: it starts with its whole share.
  EXPECT_TRUE(t.learn(5, mac(7), 1, 0));
  EXPECT_TRUE(t.learn(5, mac(8), 1, 0));
  EXPECT_FALSE(t.learn(5, mac(9), 1, 0));
}

// What the next learned FDB changes: each MAC learned or forgotten once
// (the workers' flows that name it are decided again, no other).
TEST(MacTable, ChangesNameEachLearnedOrForgottenMacOnce) {
  MacTable t(4, 4);
  EXPECT_FALSE(t.changed());
  ASSERT_TRUE(t.learn(5, mac(1), 1, 100));
  ASSERT_TRUE(t.learn(6, mac(1), 1, 100));  // the same MAC in another network
  ASSERT_TRUE(t.learn(5, mac(2), 1, 100));
  EXPECT_FALSE(t.learn(5, mac(2), 1, 100)) << "known: no change";
  EXPECT_TRUE(t.changed());
  EXPECT_EQ(t.take_changes(), (std::vector<Mac>{mac(1), mac(2)}));
  EXPECT_FALSE(t.changed());
  auto seen = [](uint16_t slot) { return slot == 2 ? 390u : 0u; };  // mac(2) talks
  ASSERT_TRUE(t.age(401, 300, seen));
  EXPECT_EQ(t.take_changes(), (std::vector<Mac>{mac(1)}));
  t.keep_vlans({});
  EXPECT_EQ(t.take_changes(), (std::vector<Mac>{mac(2)}));
  EXPECT_EQ(t.size(), 0u);
}

}  // namespace
}  // namespace strait::ctl
