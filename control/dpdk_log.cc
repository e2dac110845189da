#include "control/dpdk_log.h"

#include <rte_log.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <string_view>

namespace strait::ctl {
namespace {

spdlog::level::level_enum level_of(int rte_level) {
  switch (rte_level) {
    case RTE_LOG_EMERG:
    case RTE_LOG_ALERT:
    case RTE_LOG_CRIT:
      return spdlog::level::critical;
    case RTE_LOG_ERR:
      return spdlog::level::err;
    case RTE_LOG_WARNING:
      return spdlog::level::warn;
    case RTE_LOG_NOTICE:
    case RTE_LOG_INFO:
      return spdlog::level::info;
    default:
      return spdlog::level::debug;
  }
}

// One call per rte_log message (rte_vlog flushes the stream after each).
ssize_t write_line(void*, const char* buf, size_t size) {
  std::string_view msg(buf, size);
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == '\r')) msg.remove_suffix(1);
  if (msg.empty()) return static_cast<ssize_t>(size);
  auto level = level_of(rte_log_cur_msg_loglevel());
  // DPDK has filtered already: a debug line it wrote was asked for (its
  // --log-level), so it is shown even below spdlog's level, marked.
  if (!spdlog::should_log(level)) {
    spdlog::info("(debug) {}", msg);
  } else {
    spdlog::log(level, "{}", msg);
  }
  return static_cast<ssize_t>(size);
}

}  // namespace

bool route_dpdk_log() {
  static const cookie_io_functions_t fns{nullptr, &write_line, nullptr, nullptr};
  FILE* f = fopencookie(nullptr, "w", fns);
  if (f == nullptr) return false;
  // Line-buffered: a message that does not end in a newline still goes out
  // at rte_vlog's fflush.
  setvbuf(f, nullptr, _IOLBF, 0);
  return rte_openlog_stream(f) == 0;
}

}  // namespace strait::ctl
