#include "control/lifecycle/libvirt_events.h"

#include <libvirt/libvirt.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace strait::ctl {

namespace {

// libvirt calls the six functions below from the thread that makes a libvirt
// API call, and dispatches from our loop; straitd makes every libvirt call on
// the control thread, which runs the loop, so nothing here is locked.
class LibvirtEvents {
 public:
  explicit LibvirtEvents(EventLoop& loop);
  EventLoop& loop() { return loop_; }

  int add_handle(int fd, int events, virEventHandleCallback cb, void* opaque, virFreeCallback ff);
  void update_handle(int watch, int events);
  int remove_handle(int watch);
  int add_timeout(int frequency_ms, virEventTimeoutCallback cb, void* opaque, virFreeCallback ff);
  void update_timeout(int timer, int frequency_ms);
  int remove_timeout(int timer);

 private:
  struct Watch {
    int fd;
    int events;  // VIR_EVENT_HANDLE_*; 0 = disabled
    virEventHandleCallback cb;
    void* opaque;
    virFreeCallback ff;
  };
  struct Timer {
    int tfd;
    int frequency_ms;  // -1 disabled, 0 every loop iteration, N every N ms
    virEventTimeoutCallback cb;
    void* opaque;
    virFreeCallback ff;
  };

  void sync_fd(int fd);
  void dispatch_fd(int fd, unsigned epoll_events);
  void fire(int timer);
  void defer_free(virFreeCallback ff, void* opaque);
  void run_frees();

  EventLoop& loop_;
  int next_id_ = 1;  // watches and timers share the space; libvirt wants >= 0
  std::map<int, Watch> watches_;
  // libvirt may watch one fd several times; the loop holds one registration
  // per fd, for the union of the watches' events, none while all are 0.
  std::map<int, std::vector<int>> fd_watches_;
  std::map<int, unsigned> registered_;  // fd -> epoll events given to the loop
  std::map<int, Timer> timers_;
  // Free callbacks must not run inside remove*(), where libvirt holds its
  // object locks: they queue here and run from the loop, woken by free_fd_.
  std::vector<std::pair<virFreeCallback, void*>> frees_;
  int free_fd_;
};

unsigned to_epoll(int vir) {
  unsigned ev = 0;
  if (vir & VIR_EVENT_HANDLE_READABLE) ev |= EPOLLIN;
  if (vir & VIR_EVENT_HANDLE_WRITABLE) ev |= EPOLLOUT;
  if (vir & VIR_EVENT_HANDLE_ERROR) ev |= EPOLLERR;   // always reported by epoll
  if (vir & VIR_EVENT_HANDLE_HANGUP) ev |= EPOLLHUP;  // likewise
  return ev;
}

int from_epoll(unsigned ev) {
  int vir = 0;
  if (ev & (EPOLLIN | EPOLLPRI)) vir |= VIR_EVENT_HANDLE_READABLE;
  if (ev & EPOLLOUT) vir |= VIR_EVENT_HANDLE_WRITABLE;
  if (ev & EPOLLERR) vir |= VIR_EVENT_HANDLE_ERROR;
  if (ev & EPOLLHUP) vir |= VIR_EVENT_HANDLE_HANGUP;
  return vir;
}

void arm(int tfd, int frequency_ms) {
  itimerspec its{};
  if (frequency_ms > 0) {
    its.it_value.tv_sec = frequency_ms / 1000;
    its.it_value.tv_nsec = (frequency_ms % 1000) * 1000000L;
    its.it_interval = its.it_value;
  } else if (frequency_ms == 0) {
    its.it_value.tv_nsec = 1;  // expired by the next epoll_wait; re-armed after each firing
  }
  // Negative: all zero, which disarms and clears any pending expiration.
  timerfd_settime(tfd, 0, &its, nullptr);
}

LibvirtEvents::LibvirtEvents(EventLoop& loop)
    : loop_(loop), free_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  loop_.add(free_fd_, EPOLLIN, [this](unsigned) { run_frees(); });
}

int LibvirtEvents::add_handle(int fd, int events, virEventHandleCallback cb, void* opaque,
                              virFreeCallback ff) {
  if (fd < 0 || !cb) return -1;
  const int id = next_id_++;
  watches_[id] = Watch{fd, events, cb, opaque, ff};
  fd_watches_[fd].push_back(id);
  sync_fd(fd);
  return id;
}

void LibvirtEvents::update_handle(int watch, int events) {
  auto it = watches_.find(watch);
  if (it == watches_.end()) return;
  it->second.events = events;
  sync_fd(it->second.fd);
}

int LibvirtEvents::remove_handle(int watch) {
  auto it = watches_.find(watch);
  if (it == watches_.end()) return -1;
  const Watch w = it->second;
  watches_.erase(it);
  auto& ids = fd_watches_[w.fd];
  std::erase(ids, watch);
  if (ids.empty()) fd_watches_.erase(w.fd);
  // Synchronously: libvirt may close the fd as soon as we return.
  sync_fd(w.fd);
  defer_free(w.ff, w.opaque);
  return 0;
}

void LibvirtEvents::sync_fd(int fd) {
  int wanted = 0;
  if (auto it = fd_watches_.find(fd); it != fd_watches_.end()) {
    for (int id : it->second) wanted |= watches_[id].events;
  }
  auto reg = registered_.find(fd);
  // A disabled watch leaves the loop altogether: epoll would still report
  // EPOLLHUP/EPOLLERR on it, and a hung-up socket libvirt is not reading
  // would spin the loop.
  if (wanted == 0) {
    if (reg != registered_.end()) {
      loop_.remove(fd);
      registered_.erase(reg);
    }
    return;
  }
  const unsigned ev = to_epoll(wanted);
  if (reg == registered_.end()) {
    loop_.add(fd, ev, [this, fd](unsigned e) { dispatch_fd(fd, e); });
    registered_[fd] = ev;
  } else if (reg->second != ev) {
    loop_.modify(fd, ev);
    reg->second = ev;
  }
}

void LibvirtEvents::dispatch_fd(int fd, unsigned epoll_events) {
  const int happened = from_epoll(epoll_events);
  auto it = fd_watches_.find(fd);
  if (it == fd_watches_.end()) return;
  const std::vector<int> ids = it->second;  // callbacks may add and remove watches
  for (int id : ids) {
    auto w = watches_.find(id);
    if (w == watches_.end() || w->second.events == 0) continue;  // removed or disabled meanwhile
    const int mask =
        happened & (w->second.events | VIR_EVENT_HANDLE_ERROR | VIR_EVENT_HANDLE_HANGUP);
    if (mask == 0) continue;
    const Watch copy = w->second;  // the callback may remove the watch
    copy.cb(id, fd, mask, copy.opaque);
  }
}

int LibvirtEvents::add_timeout(int frequency_ms, virEventTimeoutCallback cb, void* opaque,
                               virFreeCallback ff) {
  if (!cb) return -1;
  const int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (tfd < 0) {
    spdlog::error("libvirt event loop: timerfd_create: {}", strerror(errno));
    return -1;
  }
  const int id = next_id_++;
  timers_[id] = Timer{tfd, frequency_ms, cb, opaque, ff};
  loop_.add(tfd, EPOLLIN, [this, id](unsigned) { fire(id); });
  arm(tfd, frequency_ms);
  return id;
}

void LibvirtEvents::update_timeout(int timer, int frequency_ms) {
  auto it = timers_.find(timer);
  if (it == timers_.end()) return;
  it->second.frequency_ms = frequency_ms;
  arm(it->second.tfd, frequency_ms);
}

int LibvirtEvents::remove_timeout(int timer) {
  auto it = timers_.find(timer);
  if (it == timers_.end()) return -1;
  const Timer t = it->second;
  timers_.erase(it);
  loop_.remove(t.tfd);
  close(t.tfd);
  defer_free(t.ff, t.opaque);
  return 0;
}

void LibvirtEvents::fire(int timer) {
  auto it = timers_.find(timer);
  if (it == timers_.end()) return;
  uint64_t expirations = 0;
  // Nothing to read: disabled or re-armed since epoll_wait saw it expire.
  if (read(it->second.tfd, &expirations, sizeof(expirations)) != sizeof(expirations)) return;
  // Re-armed before the callback, which may update or remove the timer.
  if (it->second.frequency_ms == 0) arm(it->second.tfd, 0);
  const Timer copy = it->second;
  copy.cb(timer, copy.opaque);
}

void LibvirtEvents::defer_free(virFreeCallback ff, void* opaque) {
  if (!ff) return;
  frees_.emplace_back(ff, opaque);
  const uint64_t one = 1;
  if (write(free_fd_, &one, sizeof(one)) < 0) {
    // Only EAGAIN (counter saturated) is possible, and then it is readable anyway.
  }
}

void LibvirtEvents::run_frees() {
  uint64_t n;
  if (read(free_fd_, &n, sizeof(n)) < 0) {
    // EAGAIN: a previous round took everything.
  }
  // Free callbacks may remove more handles and timers: those queue anew.
  std::vector<std::pair<virFreeCallback, void*>> now;
  now.swap(frees_);
  for (auto& [ff, opaque] : now) ff(opaque);
}

// Never freed: libvirt keeps calling it until the process exits.
LibvirtEvents* g_events = nullptr;

int add_handle_cb(int fd, int events, virEventHandleCallback cb, void* opaque, virFreeCallback ff) {
  return g_events->add_handle(fd, events, cb, opaque, ff);
}
void update_handle_cb(int watch, int events) { g_events->update_handle(watch, events); }
int remove_handle_cb(int watch) { return g_events->remove_handle(watch); }
int add_timeout_cb(int frequency_ms, virEventTimeoutCallback cb, void* opaque, virFreeCallback ff) {
  return g_events->add_timeout(frequency_ms, cb, opaque, ff);
}
void update_timeout_cb(int timer, int frequency_ms) {
  g_events->update_timeout(timer, frequency_ms);
}
int remove_timeout_cb(int timer) { return g_events->remove_timeout(timer); }

}  // namespace

bool install_libvirt_event_impl(EventLoop& loop) {
  static std::mutex mu;
  std::lock_guard lock(mu);
  if (g_events) return &g_events->loop() == &loop;
  if (virInitialize() < 0) {
    spdlog::error("libvirt: virInitialize failed");
    return false;
  }
  g_events = new LibvirtEvents(loop);
  virEventRegisterImpl(add_handle_cb, update_handle_cb, remove_handle_cb, add_timeout_cb,
                       update_timeout_cb, remove_timeout_cb);
  return true;
}

}  // namespace strait::ctl
