#include "control/ops/rxq_balance.h"

#include <gtest/gtest.h>

namespace strait::ctl {
namespace {

using Owners = std::vector<uint16_t>;

TEST(RxqBalance, TwoBusyQueuesOnOneWorkerAreSplit) {
  // Round-robin by count put both busy queues on worker 0.
  const std::vector<RxqLoad> q = {
      {0, 0, 0, 900}, {1, 0, 1, 0}, {2, 0, 0, 800}, {3, 0, 1, 0}};
  const Owners owner = plan_rx_queues(q, 2);
  EXPECT_NE(owner[0], owner[2]);
  EXPECT_EQ(owner[0], 0) << "the heaviest stays where it is";
  EXPECT_EQ(owner[1], 1) << "idle queues are not moved";
  EXPECT_EQ(owner[3], 1);
  EXPECT_EQ(worker_loads(q, owner, 2), (std::vector<uint64_t>{900, 800}));
}

TEST(RxqBalance, ABalancedAssignmentMovesNothing) {
  // What heaviest-first would build itself: 500 + 200 and 400 + 300.
  const std::vector<RxqLoad> q = {{0, 0, 0, 500}, {0, 1, 1, 400}, {1, 0, 1, 300}, {1, 1, 0, 200}};
  EXPECT_EQ(plan_rx_queues(q, 2), (Owners{0, 1, 1, 0}));
}

TEST(RxqBalance, EqualLoadsKeepTheirWorkers) {
  const std::vector<RxqLoad> q = {{0, 0, 1, 100}, {1, 0, 0, 100}};
  EXPECT_EQ(plan_rx_queues(q, 2), (Owners{1, 0}));
}

TEST(RxqBalance, HeaviestFirstOverThreeWorkers) {
  // One worker owns everything: 6 queues end up 3 workers with equal loads.
  std::vector<RxqLoad> q;
  for (uint16_t i = 0; i < 6; i++) q.push_back({i, 0, 0, uint64_t(100 * (6 - i / 2 * 2))});
  // loads: 600 600 400 400 200 200
  const Owners owner = plan_rx_queues(q, 3);
  const auto loads = worker_loads(q, owner, 3);
  EXPECT_EQ(loads, (std::vector<uint64_t>{800, 800, 800})) << ::testing::PrintToString(owner);
}

TEST(RxqBalance, OneWorkerOrNoQueuesChangeNothing) {
  const std::vector<RxqLoad> q = {{0, 0, 0, 5}, {0, 1, 0, 7}};
  EXPECT_EQ(plan_rx_queues(q, 1), (Owners{0, 0}));
  EXPECT_TRUE(plan_rx_queues({}, 4).empty());
}

TEST(RxqBalance, AnOwnerBeyondTheWorkersIsReassigned) {
  // A queue whose worker is out of range (never the case in straitd, but the
  // plan must not index with it) lands on a real worker.
  const std::vector<RxqLoad> q = {{0, 0, 7, 10}};
  EXPECT_LT(plan_rx_queues(q, 2)[0], 2);
}

}  // namespace
}  // namespace strait::ctl
