#pragma once

// Memory for the big tables workers probe at random (the flow cache, the
// connection table): anonymous, 2 MB aligned and advised for transparent
// huge pages, so that a probe costs a cache miss and not also a TLB miss and
// a page walk (THP is "madvise" on Debian's kernels: memory from new gets
// 4 KB pages). Allocated on the control thread before workers use it; not
// EAL memory, so unit tests and --no-huge runs get it the same way.

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace strait::dp {

// Zero-filled, or throws std::bad_alloc. A failed madvise only costs speed.
void* huge_alloc(size_t bytes);
void huge_free(void* p, size_t bytes) noexcept;

// n default-constructed Ts in huge_alloc memory; fixed size, move-only.
template <typename T>
class HugeArray {
 public:
  HugeArray() = default;
  explicit HugeArray(size_t n) : p_(static_cast<T*>(huge_alloc(n * sizeof(T)))), n_(n) {
    static_assert(alignof(T) <= 4096, "huge_alloc memory is page aligned");
    static_assert(std::is_nothrow_default_constructible_v<T>);
    for (size_t i = 0; i < n; i++) new (&p_[i]) T();
  }
  ~HugeArray() { reset(); }
  HugeArray(HugeArray&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  HugeArray& operator=(HugeArray&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  HugeArray(const HugeArray&) = delete;
  HugeArray& operator=(const HugeArray&) = delete;

  // Shallow const, as unique_ptr<T[]>: a const owner still hands out T&.
  T& operator[](size_t i) const { return p_[i]; }
  T* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  void reset() noexcept {
    if (!p_) return;
    for (size_t i = 0; i < n_; i++) p_[i].~T();
    huge_free(p_, n_ * sizeof(T));
    p_ = nullptr;
    n_ = 0;
  }
  T* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace strait::dp
