#include "control/model/vlan_allocator.h"

#include <gtest/gtest.h>

namespace strait::ctl {
namespace {

TEST(VlanAllocator, AllocatesLowestFreeFromOne) {
  VlanAllocator a;
  EXPECT_EQ(a.count(), 0u);
  EXPECT_EQ(a.allocate(), 1);
  EXPECT_EQ(a.allocate(), 2);
  EXPECT_EQ(a.allocate(), 3);
  EXPECT_EQ(a.count(), 3u);
  EXPECT_TRUE(a.in_use(2));
  EXPECT_FALSE(a.in_use(4));
}

TEST(VlanAllocator, ReleasedVlanIsReusedLowestFirst) {
  VlanAllocator a;
  for (int i = 0; i < 5; ++i) (void)a.allocate();
  a.release(4);
  a.release(2);
  EXPECT_FALSE(a.in_use(2));
  EXPECT_EQ(a.allocate(), 2);
  EXPECT_EQ(a.allocate(), 4);
  EXPECT_EQ(a.allocate(), 6);
}

TEST(VlanAllocator, ExhaustedAfter4094) {
  VlanAllocator a;
  for (unsigned v = 1; v <= 4094; ++v) ASSERT_EQ(a.allocate(), v);
  EXPECT_EQ(a.count(), 4094u);
  EXPECT_EQ(a.allocate(), std::nullopt);
  a.release(4094);
  EXPECT_EQ(a.allocate(), 4094);
  EXPECT_EQ(a.allocate(), std::nullopt);
}

TEST(VlanAllocator, ReserveTakesASpecificVlan) {
  VlanAllocator a;
  EXPECT_TRUE(a.reserve(1));
  EXPECT_TRUE(a.reserve(3));
  EXPECT_TRUE(a.reserve(4094));
  EXPECT_FALSE(a.reserve(3));  // taken
  EXPECT_EQ(a.allocate(), 2);
  EXPECT_EQ(a.allocate(), 4);
  EXPECT_EQ(a.count(), 5u);
}

TEST(VlanAllocator, ReserveRejectsOutOfRange) {
  VlanAllocator a;
  EXPECT_FALSE(a.reserve(0));
  EXPECT_FALSE(a.reserve(4095));
  EXPECT_FALSE(a.reserve(65535));
  EXPECT_EQ(a.count(), 0u);
  EXPECT_FALSE(a.in_use(0));
  EXPECT_FALSE(a.in_use(4095));
}

TEST(VlanAllocator, ReleaseOfFreeOrOutOfRangeIsHarmless) {
  VlanAllocator a;
  (void)a.allocate();
  a.release(0);
  a.release(4095);
  a.release(65535);
  a.release(7);
  EXPECT_EQ(a.count(), 1u);
  EXPECT_TRUE(a.in_use(1));
}

}  // namespace
}  // namespace strait::ctl
