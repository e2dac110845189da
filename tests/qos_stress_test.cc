// A QoS meter shared by worker threads (dataplane/qos.h): however many
// threads charge it at once, it passes what one thread alone would.
#include "dataplane/qos.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace strait::dp {
namespace {

TEST(QosStress, ThreadsChargingOneMeterPassNoMoreThanItsBurst) {
  // 1000 units a second with a burst of 5000: at a standing clock, exactly
  // 5001 units pass, whoever asks.
  QosMeter m;
  m.cost = (uint64_t(1'000'000'000) << kQosShift) / 1000;
  m.tau = uint64_t(1'000'000'000) * 5000 / 1000;
  for (int round = 0; round < 20; round++) {
    std::atomic<uint64_t> tat{0};
    std::atomic<int> passed{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; t++)
      threads.emplace_back([&] {
        int mine = 0;
        for (int i = 0; i < 4000; i++) mine += qos_conform(tat, m, 1, 1'000'000'000);
        passed += mine;
      });
    for (auto& t : threads) t.join();
    EXPECT_EQ(passed.load(), 5001) << "round " << round;
  }
}

}  // namespace
}  // namespace strait::dp
