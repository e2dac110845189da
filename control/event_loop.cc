#include "control/event_loop.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <vector>

namespace strait::ctl {

EventLoop::EventLoop() : epfd_(epoll_create1(EPOLL_CLOEXEC)) {
  if (epfd_ < 0) throw std::runtime_error("epoll_create1 failed");
}

EventLoop::~EventLoop() { close(epfd_); }

void EventLoop::add(int fd, unsigned events, Handler h) {
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev);
  handlers_[fd] = std::move(h);
}

void EventLoop::modify(int fd, unsigned events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  epoll_ctl(epfd_, EPOLL_CTL_MOD, fd, &ev);
}

void EventLoop::remove(int fd) {
  epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
  handlers_.erase(fd);
}

void EventLoop::run_once(int timeout_ms) {
  epoll_event evs[32];
  int n = epoll_wait(epfd_, evs, 32, timeout_ms);
  for (int i = 0; i < n; i++) {
    auto it = handlers_.find(evs[i].data.fd);
    if (it == handlers_.end()) continue;  // removed by an earlier handler
    Handler h = it->second;               // the handler may remove itself
    h(evs[i].events);
  }
}

}  // namespace strait::ctl
