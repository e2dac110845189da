#pragma once
// `straitctl cache dump`: a copy of one worker's flow-cache entries. The
// cache is the worker's own and unsynchronised, so the worker makes the copy
// itself, between two bursts, when asked through this one-slot mailbox:
//
//   control: request()  -- buffer set up, then requested_ (release)
//   worker:  serve() once per loop iteration: one acquire load of requested_;
//            when it moved, copy kBucketsPerServe buckets per call (a walk
//            of the whole cache at once would stall the datapath for
//            milliseconds), then answered_ (release)
//   control: ready() (acquire) from its poll loop, then reads the copy
//
// Nothing per packet. The buffer belongs to the worker from request() until
// ready(); a control thread that gives up waiting must not touch it before.
#include <atomic>
#include <cstdint>
#include <memory>

#include "dataplane/flow_cache.h"

namespace strait::dp {

struct CacheDumpEntry {
  FlowKey key;          // the whole key of the frame that created the entry
  Action action;
  uint32_t key_bytes;   // how much of the key the cache compares
  uint32_t generation;
};

class CacheDumpSlot {
 public:
  // Bound on one copy (~450 KiB): a dump is for reading, not for a full
  // cache of 256 Ki entries; live() still counts them all.
  static constexpr uint32_t kMaxEntries = 4096;
  // Buckets walked per serve(): one probe line each, plus the copies; at
  // most ~15 us from a cold cache (the whole 64 Ki-bucket default: ~2 ms).
  static constexpr uint32_t kBucketsPerServe = 256;

  // Control thread. Asks for a copy; false while the previous one is unanswered.
  bool request() {
    const uint32_t seq = requested_.load(std::memory_order_relaxed);
    if (answered_.load(std::memory_order_acquire) != seq) return false;
    if (!buf_) buf_ = std::make_unique<CacheDumpEntry[]>(kMaxEntries);
    requested_.store(seq + 1, std::memory_order_release);  // publishes buf_
    return true;
  }
  // Control thread: the last request was answered (acquire: the copy is visible).
  bool ready() const {
    return answered_.load(std::memory_order_acquire) == requested_.load(std::memory_order_relaxed);
  }
  // Control thread, once ready(): the copy.
  const CacheDumpEntry* entries() const { return buf_.get(); }
  uint32_t size() const { return n_; }
  uint32_t live() const { return live_; }          // entries of the generation, copied or not
  uint32_t generation() const { return gen_; }    // the worker's generation at the copy

  // The worker (or the control thread while workers are stopped, calling
  // until ready()), between bursts: copies the entries of generation gen when
  // asked, a slice of the cache per call. The generation is the one of the
  // first slice: a publish during the walk leaves the entries it replaced
  // out of the copy.
  void serve(const FlowCache& cache, uint32_t gen) noexcept {
    const uint32_t seq = requested_.load(std::memory_order_acquire);
    if (seq == answered_.load(std::memory_order_relaxed)) return;
    if (seq != walking_) {  // a new request: start the walk
      walking_ = seq;
      next_ = n_ = live_ = 0;
      gen_ = gen;
    }
    const uint32_t last = next_ + kBucketsPerServe;
    if (gen_ != 0) {  // 0 marks empty entries: no snapshot seen yet, nothing cached
      cache.for_each(gen_, next_, last,
                     [this](const FlowKey& k, uint32_t key_bytes, const Action& a) {
                       if (n_ < kMaxEntries) buf_[n_++] = CacheDumpEntry{k, a, key_bytes, gen_};
                       live_++;
                     });
    }
    next_ = last;
    if (gen_ == 0 || next_ >= cache.buckets()) answered_.store(seq, std::memory_order_release);
  }

 private:
  // Written by the worker between a request and its answer, read by control after.
  std::unique_ptr<CacheDumpEntry[]> buf_;  // allocated by control, before the first request
  uint32_t n_ = 0, live_ = 0, gen_ = 0;
  uint32_t walking_ = 0;  // the request being walked
  uint32_t next_ = 0;     // its next bucket
  // Own cache lines: the worker reads requested_ every iteration, and
  // nothing else it reads that often should share a line with control's writes.
  alignas(64) std::atomic<uint32_t> requested_{0};  // control writes
  alignas(64) std::atomic<uint32_t> answered_{0};   // worker writes
};

}  // namespace strait::dp
