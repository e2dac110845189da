// rte_intr_instance_alloc and its setters are still "experimental" in DPDK
// 22.11, and the only way to make an interrupt handle.
#define ALLOW_EXPERIMENTAL_API
#include "control/devices/eal_interrupts.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <rte_alarm.h>
#include <rte_errno.h>
#include <rte_interrupts.h>
#include <spdlog/spdlog.h>

namespace strait::ctl {
namespace {

void wait_for(const std::atomic<bool>& flag) {
  while (!flag.load(std::memory_order_acquire))
    std::this_thread::sleep_for(std::chrono::microseconds(50));
}

}  // namespace

void run_on_interrupt_thread(const std::function<void()>& fn) {
  struct Call {
    const std::function<void()>* fn;
    std::atomic<bool> done{false};
  } call{&fn};
  auto run = [](void* arg) {
    auto* c = static_cast<Call*>(arg);
    (*c->fn)();
    c->done.store(true, std::memory_order_release);
  };
  if (rte_eal_alarm_set(1, run, &call) != 0) {
    spdlog::warn("no EAL alarm ({}): running off the interrupt thread", rte_strerror(rte_errno));
    fn();
    return;
  }
  wait_for(call.done);
}

// Not an alarm: rte_eal_cleanup waits for a running alarm to return. An
// interrupt source of our own, in libc's memory (it must outlive DPDK's),
// readable at once: its callback never returns.
void park_interrupt_thread() {
  static std::atomic<bool> parked{false};
  auto park = [](void*) {
    parked.store(true, std::memory_order_release);
    for (;;) pause();  // every signal straitd handles is blocked in this thread
  };
  const int fd = eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK);
  rte_intr_handle* h = rte_intr_instance_alloc(RTE_INTR_INSTANCE_F_PRIVATE);
  if (fd < 0 || !h || rte_intr_fd_set(h, fd) != 0 ||
      rte_intr_type_set(h, RTE_INTR_HANDLE_EXT) != 0 ||
      rte_intr_callback_register(h, park, nullptr) != 0) {
    spdlog::warn("cannot park EAL's interrupt thread: it runs on through EAL's cleanup");
    return;
  }
  wait_for(parked);
}

}  // namespace strait::ctl
