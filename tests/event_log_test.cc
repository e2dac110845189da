// EventLog: numbered events, a bounded backlog, replay of what a subscriber missed.
#include "control/ops/event_log.h"

#include <gtest/gtest.h>

namespace strait::ctl {
namespace {

using nlohmann::json;

json ev(const std::string& port) { return {{"event", "port-up"}, {"port", port}}; }

TEST(EventLog, EventsAreNumberedFromOneAndGivenToEverySubscriber) {
  EventLog log;
  std::vector<uint64_t> a, b;
  log.subscribe([&](const json& e) { a.push_back(e["seq"].get<uint64_t>()); });
  const uint64_t tb = log.subscribe([&](const json& e) { b.push_back(e["seq"].get<uint64_t>()); });
  log.publish(ev("p1"));
  log.unsubscribe(tb);
  log.publish(ev("p2"));
  EXPECT_EQ(a, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(b, (std::vector<uint64_t>{1}));
  EXPECT_EQ(log.last_seq(), 2u);
}

TEST(EventLog, SinceReplaysWhatCameAfterInOrder) {
  EventLog log;
  for (int i = 0; i < 5; i++) log.publish(ev("p" + std::to_string(i)));
  EventLog::Missed m = log.since(2);
  ASSERT_EQ(m.events.size(), 3u);
  EXPECT_TRUE(m.complete);
  EXPECT_EQ(m.events[0]["seq"], 3);
  EXPECT_EQ(m.events[0]["port"], "p2");
  EXPECT_EQ(m.events[2]["seq"], 5);
  EXPECT_TRUE(log.since(5).events.empty());
  EXPECT_TRUE(log.since(5).complete);
  EXPECT_EQ(log.since(0).events.size(), 5u);
}

TEST(EventLog, BacklogIsBoundedAndSaysWhenEventsWereLost) {
  EventLog log(3);
  for (int i = 0; i < 10; i++) log.publish(ev("p"));
  EventLog::Missed all = log.since(0);
  ASSERT_EQ(all.events.size(), 3u);
  EXPECT_FALSE(all.complete);  // 1..7 are gone: the subscriber must re-read the state
  EXPECT_EQ(all.events.front()["seq"], 8);
  EXPECT_TRUE(log.since(7).complete);  // 8, 9, 10 are all there
  EXPECT_FALSE(log.since(6).complete);
}

TEST(EventLog, ASubscriberMayUnsubscribeAnotherWhileCalled) {
  EventLog log;
  uint64_t second = 0;
  int calls = 0;
  log.subscribe([&](const json&) { log.unsubscribe(second); });
  second = log.subscribe([&](const json&) { calls++; });
  log.publish(ev("p"));
  EXPECT_EQ(calls, 0);
}

TEST(EventLog, EpochsOfTwoLogsDiffer) {
  EventLog a, b;
  EXPECT_FALSE(a.epoch().empty());
  EXPECT_NE(a.epoch(), b.epoch());
}

}  // namespace
}  // namespace strait::ctl
