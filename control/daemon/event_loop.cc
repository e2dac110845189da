#include "control/daemon/event_loop.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <vector>

namespace strait::ctl {

namespace {

uint64_t pack(uint32_t generation, int fd) {
  return (uint64_t{generation} << 32) | static_cast<uint32_t>(fd);
}

}  // namespace

EventLoop::EventLoop() : epfd_(epoll_create1(EPOLL_CLOEXEC)) {
  if (epfd_ < 0) throw std::runtime_error("epoll_create1 failed");
}

EventLoop::~EventLoop() { close(epfd_); }

void EventLoop::add(int fd, unsigned events, Handler h) {
  // A fresh generation even when replacing: events fetched for the old
  // registration must not reach the new handler.
  const uint32_t generation = next_generation_++;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = pack(generation, fd);
  if (epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) < 0 && errno == EEXIST) {
    epoll_ctl(epfd_, EPOLL_CTL_MOD, fd, &ev);
  }
  handlers_[fd] = Entry{generation, std::make_shared<Handler>(std::move(h))};
}

void EventLoop::modify(int fd, unsigned events) {
  auto it = handlers_.find(fd);
  if (it == handlers_.end()) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = pack(it->second.generation, fd);
  epoll_ctl(epfd_, EPOLL_CTL_MOD, fd, &ev);
}

void EventLoop::remove(int fd) {
  epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
  handlers_.erase(fd);
}

void EventLoop::defer(std::function<void()> fn) { deferred_.push_back(std::move(fn)); }

void EventLoop::run_once(int timeout_ms) {
  epoll_event evs[32];
  int n = epoll_wait(epfd_, evs, 32, deferred_.empty() ? timeout_ms : 0);
  for (int i = 0; i < n; i++) {
    const int fd = static_cast<int>(static_cast<uint32_t>(evs[i].data.u64));
    const auto generation = static_cast<uint32_t>(evs[i].data.u64 >> 32);
    auto it = handlers_.find(fd);
    // Removed (or removed and re-added) by an earlier handler of this batch.
    if (it == handlers_.end() || it->second.generation != generation) continue;
    std::shared_ptr<Handler> h = it->second.handler;  // the handler may remove itself
    (*h)(evs[i].events);
  }
  // Work deferred before now runs now; what it defers in turn waits for
  // the next turn, so the file descriptors get their say in between.
  std::vector<std::function<void()>> now;
  now.swap(deferred_);
  for (auto& fn : now) fn();
}

}  // namespace strait::ctl
