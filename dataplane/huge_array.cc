#include "dataplane/huge_array.h"

#include <sys/mman.h>

#include <cstdint>

namespace strait::dp {
namespace {

constexpr size_t kHugePage = size_t(2) << 20;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

// Maps a huge page more than asked and trims both ends, so the table starts
// on a 2 MB boundary: THP backs only whole aligned 2 MB ranges.
void* huge_alloc(size_t bytes) {
  const size_t len = round_up(bytes ? bytes : 1, kHugePage);
  void* raw = mmap(nullptr, len + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto base = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t start = round_up(base, kHugePage);
  if (start > base) munmap(raw, start - base);
  const uintptr_t end = base + len + kHugePage;
  if (end > start + len) munmap(reinterpret_cast<void*>(start + len), end - (start + len));
  void* p = reinterpret_cast<void*>(start);
  madvise(p, len, MADV_HUGEPAGE);
  return p;
}

void huge_free(void* p, size_t bytes) noexcept {
  if (p) munmap(p, round_up(bytes ? bytes : 1, kHugePage));
}

}  // namespace strait::dp
