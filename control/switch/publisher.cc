#include "control/switch/publisher.h"

#include <rte_rcu_qsbr.h>

namespace strait::ctl {

Publisher::Publisher(dp::DataplaneShared* shared) : shared_(shared) {}

Publisher::~Publisher() {
  // Workers are stopped by now (Switch stops them first).
  shared_->snapshot.store(nullptr, std::memory_order_release);
  shared_->learned.fdb.store(nullptr, std::memory_order_release);
}

namespace {

// The generations `s` (generation `gen`) inherits from `prev` (snapshot.h).
void inherit_generations(const dp::Snapshot* prev, dp::Snapshot& s, uint32_t gen) {
  const bool same = prev && dp::same_forwarding(*prev, s);
  s.cache_generation = same ? prev->cache_generation : gen;
  s.verify_generation = same ? prev->verify_generation : gen;
  for (size_t i = 0; i < s.ports.size(); i++) {
    dp::PortEntry& p = s.ports[i];
    if (!p.security) continue;
    const dp::PortEntry* old = prev ? prev->port(uint16_t(i)) : nullptr;
    // Classifiers are immutable and the previous snapshot holds its own:
    // the same pointer is the same rules.
    const bool kept = old && old->security && old->security->sg == p.security->sg;
    p.rules_gen = kept ? old->rules_gen : gen;
  }
}

}  // namespace

uint32_t Publisher::publish(std::unique_ptr<dp::Snapshot> s) {
  if (++generation_ == 0) generation_ = 1;  // 0 marks empty flow-cache entries
  s->generation = generation_;
  inherit_generations(current_.get(), *s, generation_);
  // release: every write that built *s happens-before a worker's acquire load.
  shared_->snapshot.store(s.get(), std::memory_order_release);
  // Tokens order after the store: a worker that reports quiescence for this
  // token has finished any iteration that could still hold the old pointer.
  uint64_t token = rte_rcu_qsbr_start(shared_->qsbr);
  if (current_) retired_.push_back({token, std::move(current_), nullptr});
  current_ = std::move(s);
  return generation_;
}

void Publisher::publish_learned(std::unique_ptr<dp::Fdb> fdb, const std::vector<Mac>& changed) {
  shared_->learned.fdb.store(fdb.get(), std::memory_order_release);
  // After the store: a worker that sees a bump decides with this table.
  for (const Mac& m : changed) shared_->learned.bump(m.data());
  const uint64_t token = rte_rcu_qsbr_start(shared_->qsbr);
  if (learned_) retired_.push_back({token, nullptr, std::move(learned_)});
  learned_ = std::move(fdb);
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
