#pragma once
// The control thread's loop: epoll over its file descriptors (API socket,
// clients, signals) plus a tick for work that polls (grace periods,
// learned MACs). Single-threaded; callbacks run on the control thread.
#include <functional>
#include <map>

namespace strait::ctl {

class EventLoop {
 public:
  using Handler = std::function<void(unsigned events)>;  // EPOLLIN/EPOLLOUT/EPOLLHUP...
  EventLoop();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  void add(int fd, unsigned events, Handler h);
  void modify(int fd, unsigned events);
  void remove(int fd);
  // Waits up to timeout_ms for events and dispatches them.
  void run_once(int timeout_ms);

 private:
  int epfd_;
  std::map<int, Handler> handlers_;
};

}  // namespace strait::ctl
