// Datapath port indexes and rx-queue placement.
#include "control/switch/port_slots.h"

#include <gtest/gtest.h>

namespace strait::ctl {
namespace {

TEST(PortSlots, IndexesAreTheLowestFreeAndRunOut) {
  PortSlots s(3, 1);
  EXPECT_EQ(s.alloc_index(), 0);
  EXPECT_EQ(s.alloc_index(), 1);
  EXPECT_EQ(s.alloc_index(), 2);
  EXPECT_FALSE(s.alloc_index());
  s.free_index(1);
  EXPECT_EQ(s.alloc_index(), 1);
}

TEST(PortSlots, QueuesGoToTheLeastLoadedWorker) {
  PortSlots s(8, 3);
  EXPECT_EQ(s.assign_rx_queues(4), (std::vector<uint16_t>{0, 1, 2, 0}));
  EXPECT_EQ(s.rx_queues(), (std::vector<uint32_t>{2, 1, 1}));
  s.release_rx_queues({0, 0});
  EXPECT_EQ(s.assign_rx_queues(1), (std::vector<uint16_t>{0}));
  s.move_rx_queue(2, 1);
  EXPECT_EQ(s.rx_queues(), (std::vector<uint32_t>{1, 2, 0}));
  EXPECT_EQ(s.assign_rx_queues(1), (std::vector<uint16_t>{2}));
}

}  // namespace
}  // namespace strait::ctl
