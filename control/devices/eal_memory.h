#pragma once
// What DPDK's memory costs this host: the pages EAL holds (hugepages, or
// plain 4 KiB pages under --no-huge) and how much of its heap is in use.
// Read on the control thread for `show` and the metrics endpoint.
#include <nlohmann/json.hpp>

namespace strait::ctl {

// {"hugepages", "page_sizes", "reserved_bytes", "virtual_bytes",
//  "heap_total_bytes", "heap_allocated_bytes", "heap_free_bytes",
//  "heap_allocations", "segments": [{"socket", "page_size", "reserved_bytes",
//  "virtual_bytes"}], "heaps": [{"socket", "total_bytes", "allocated_bytes",
//  "free_bytes", "allocations"}]} (docs/api.md).
nlohmann::json eal_memory_json();

}  // namespace strait::ctl
