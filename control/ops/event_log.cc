#include "control/ops/event_log.h"

#include <unistd.h>

#include <chrono>

namespace strait::ctl {

EventLog::EventLog(size_t backlog) : capacity_(backlog) {
  // The start time (ns) and pid: differs between any two straitd on a host.
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  epoch_ = std::to_string(ns) + "-" + std::to_string(getpid());
}

void EventLog::publish(nlohmann::json event) {
  event["seq"] = next_seq_++;
  backlog_.push_back(event);
  if (backlog_.size() > capacity_) backlog_.pop_front();
  // A subscriber may unsubscribe (itself or another) while being called.
  for (auto& [token, fn] : std::map<uint64_t, Subscriber>(subscribers_)) {
    if (subscribers_.count(token)) fn(event);
  }
}

EventLog::Missed EventLog::since(uint64_t seq) const {
  Missed m;
  const uint64_t oldest = next_seq_ - backlog_.size();  // seq of backlog_.front()
  m.complete = seq + 1 >= oldest;
  for (uint64_t s = std::max(seq + 1, oldest); s < next_seq_; s++)
    m.events.push_back(backlog_[s - oldest]);
  return m;
}

uint64_t EventLog::subscribe(Subscriber s) {
  subscribers_[next_token_] = std::move(s);
  return next_token_++;
}

void EventLog::unsubscribe(uint64_t token) { subscribers_.erase(token); }

}  // namespace strait::ctl
