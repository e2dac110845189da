#pragma once
// The event stream (port-up, vif-plugged, port-down, port-unbound). Every
// event is numbered and kept in a bounded backlog, so a subscriber that
// (re)connects asks for what it missed instead of losing it: events go out
// ~40 ms after a restarted straitd listens, before a client that was
// waiting for the restart is back. Control thread only.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace strait::ctl {

class EventLog {
 public:
  // About a bulk bind of 1000 ports (port-up + vif-plugged each) and more.
  static constexpr size_t kDefaultBacklog = 4096;
  using Subscriber = std::function<void(const nlohmann::json& event)>;

  explicit EventLog(size_t backlog = kDefaultBacklog);

  // Adds "seq" to the event, keeps it, and gives it to every subscriber.
  void publish(nlohmann::json event);

  // What a subscriber missed: the events after `seq` that the backlog still
  // holds, oldest first. `complete` is false when some of them already left
  // the backlog: the subscriber must re-read the state it follows.
  struct Missed {
    std::vector<nlohmann::json> events;
    bool complete = true;
  };
  Missed since(uint64_t seq) const;

  uint64_t subscribe(Subscriber s);
  void unsubscribe(uint64_t token);

  uint64_t last_seq() const { return next_seq_ - 1; }
  // Names this process's numbering: a "since" from another epoch (an earlier
  // straitd) means nothing here, so its subscriber gets the whole backlog.
  const std::string& epoch() const { return epoch_; }

 private:
  size_t capacity_;
  std::string epoch_;
  uint64_t next_seq_ = 1;
  std::deque<nlohmann::json> backlog_;  // seqs last_seq()-size()+1 .. last_seq()
  std::map<uint64_t, Subscriber> subscribers_;
  uint64_t next_token_ = 1;
};

}  // namespace strait::ctl
