#include "control/devices/eal_memory.h"

#include <rte_eal.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_memory.h>

#include <cstdint>
#include <map>
#include <set>
#include <utility>

namespace strait::ctl {
namespace {

using nlohmann::json;

struct Segments {
  // (socket, page size) -> pages held, address space reserved (bytes)
  std::map<std::pair<int, uint64_t>, std::pair<uint64_t, uint64_t>> by_kind;
};

// A memseg list is a run of address space for pages of one size on one
// socket; its fbarray counts the pages actually backed by memory.
int add_list(const rte_memseg_list* msl, void* arg) {
  if (msl->external) return 0;  // memory an application added: none in straitd
  auto& [held, reserved] = static_cast<Segments*>(arg)->by_kind[{msl->socket_id, msl->page_sz}];
  held += static_cast<uint64_t>(msl->memseg_arr.count) * msl->page_sz;
  reserved += msl->len;
  return 0;
}

json segments_json(json& out) {
  Segments s;
  rte_memseg_list_walk(add_list, &s);
  json list = json::array();
  std::set<uint64_t> sizes;
  uint64_t held = 0, reserved = 0;
  for (const auto& [kind, bytes] : s.by_kind) {
    list.push_back({{"socket", kind.first}, {"page_size", kind.second},
                    {"reserved_bytes", bytes.first}, {"virtual_bytes", bytes.second}});
    if (bytes.first) sizes.insert(kind.second);
    held += bytes.first;
    reserved += bytes.second;
  }
  out["page_sizes"] = sizes;
  out["reserved_bytes"] = held;
  out["virtual_bytes"] = reserved;
  return list;
}

json heaps_json(json& out) {
  json list = json::array();
  uint64_t total = 0, allocated = 0, free_bytes = 0, allocations = 0;
  for (unsigned i = 0; i < rte_socket_count(); i++) {
    const int socket = rte_socket_id_by_idx(i);
    rte_malloc_socket_stats st{};
    if (socket < 0 || rte_malloc_get_socket_stats(socket, &st) != 0) continue;
    list.push_back({{"socket", socket}, {"total_bytes", st.heap_totalsz_bytes},
                    {"allocated_bytes", st.heap_allocsz_bytes},
                    {"free_bytes", st.heap_freesz_bytes}, {"allocations", st.alloc_count}});
    total += st.heap_totalsz_bytes;
    allocated += st.heap_allocsz_bytes;
    free_bytes += st.heap_freesz_bytes;
    allocations += st.alloc_count;
  }
  out["heap_total_bytes"] = total;
  out["heap_allocated_bytes"] = allocated;
  out["heap_free_bytes"] = free_bytes;
  out["heap_allocations"] = allocations;
  return list;
}

}  // namespace

json eal_memory_json() {
  json out = {{"hugepages", rte_eal_has_hugepages() != 0}};
  json segments = segments_json(out);
  json heaps = heaps_json(out);
  out["segments"] = std::move(segments);
  out["heaps"] = std::move(heaps);
  return out;
}

}  // namespace strait::ctl
