#pragma once
// The control thread's loop: epoll over its file descriptors (API socket,
// clients, signals) plus a tick for work that polls (grace periods,
// learned MACs). Single-threaded; callbacks run on the control thread.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

namespace strait::ctl {

class EventLoop {
 public:
  using Handler = std::function<void(unsigned events)>;  // EPOLLIN/EPOLLOUT/EPOLLHUP...
  EventLoop();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Adding an fd that is already watched replaces its events and handler.
  void add(int fd, unsigned events, Handler h);
  void modify(int fd, unsigned events);
  // Safe from any handler, its own included: events already fetched for a
  // removed fd are dropped, even if the number is reused by an add() before
  // they would have been dispatched.
  void remove(int fd);
  // Runs `fn` on the loop's next turn, after that turn's events: work that
  // yields to the other file descriptors between slices. Never waits for
  // run_once's timeout.
  void defer(std::function<void()> fn);
  // Waits up to timeout_ms for events (not at all while work is deferred),
  // dispatches them, then runs the work deferred before this turn.
  void run_once(int timeout_ms);

 private:
  struct Entry {
    // epoll_event.data carries (generation, fd).
    uint32_t generation;
    // Shared: a running handler survives its own removal.
    std::shared_ptr<Handler> handler;
  };
  int epfd_;
  uint32_t next_generation_ = 1;
  std::map<int, Entry> handlers_;
  std::vector<std::function<void()>> deferred_;
};

}  // namespace strait::ctl
