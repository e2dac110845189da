#include "control/switch/publisher.h"

#include <rte_rcu_qsbr.h>

namespace strait::ctl {

Publisher::Publisher(dp::DataplaneShared* shared) : shared_(shared) {}

Publisher::~Publisher() {
  // Workers are stopped by now (Switch stops them first).
  shared_->snapshot.store(nullptr, std::memory_order_release);
}

uint32_t Publisher::publish(std::unique_ptr<dp::Snapshot> s) {
  if (++generation_ == 0) generation_ = 1;  // 0 marks empty flow-cache entries
  s->generation = generation_;
  // release: every write that built *s happens-before a worker's acquire load.
  shared_->snapshot.store(s.get(), std::memory_order_release);
  // Tokens order after the store: a worker that reports quiescence for this
  // token has finished any iteration that could still hold the old pointer.
  uint64_t token = rte_rcu_qsbr_start(shared_->qsbr);
  if (current_) retired_.push_back({token, std::move(current_)});
  current_ = std::move(s);
  return generation_;
}

void Publisher::after_grace(std::function<void()> fn) {
  waiting_.push_back({rte_rcu_qsbr_start(shared_->qsbr), std::move(fn)});
}

void Publisher::poll() {
  // Tokens grow monotonically, so both queues complete in order.
  while (!retired_.empty() && rte_rcu_qsbr_check(shared_->qsbr, retired_.front().token, false) == 1)
    retired_.pop_front();
  while (!waiting_.empty() && rte_rcu_qsbr_check(shared_->qsbr, waiting_.front().token, false) == 1) {
    auto fn = std::move(waiting_.front().fn);
    waiting_.pop_front();
    fn();  // may call after_grace() again
  }
}

}  // namespace strait::ctl
