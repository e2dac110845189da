#include "control/daemon/dpdk_log.h"

#include <rte_log.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <string>
#include <string_view>

namespace strait::ctl {
namespace {

// rte_vhost's control-path log type (lib.vhost.config), found by
// route_dpdk_log; -1 until then.
int vhost_config_type = -1;

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

// rte_vhost logs what is normal for a host full of VMs as if it were news.
// Every vhost-user message of a guest's boot is an INFO line (about a
// hundred per boot): debug here, unless the operator asked DPDK for the
// vhost type's debug lines (--log-level=lib.vhost.config:debug) or straitd's
// for debug (log.level). A guest shutting down often resets its socket:
// rte_vhost says ERR "recvmsg failed on fd N (Connection reset by peer)" and
// then ERR "vhost read message failed" for the same socket: a peer leaving,
// info like its "vhost peer closed". Every other vhost ERR stays an error.
// Both lines of a pair come from rte_vhost's event thread: the state of the
// pair is per thread.
spdlog::level::level_enum vhost_config_level(std::string_view msg,
                                             spdlog::level::level_enum level) {
  static thread_local std::string reset_socket;  // "VHOST_CONFIG: (path) " of the last reset
  if (level == spdlog::level::info)
    return msg.find(") vhost peer closed") != msg.npos ? level : spdlog::level::debug;
  if (level != spdlog::level::err) return level;
  if (size_t at = msg.find("recvmsg failed on fd "); at != msg.npos) {
    if (!msg.ends_with("(Connection reset by peer)")) return level;
    reset_socket = msg.substr(0, at);
    return spdlog::level::info;
  }
  const size_t at = msg.find("vhost read message ");
  const bool after_reset = at != msg.npos && !reset_socket.empty() &&
                           msg.substr(0, at) == reset_socket && msg.ends_with("failed");
  reset_socket.clear();
  return after_reset ? spdlog::level::info : level;
}

// One call per rte_log message (rte_vlog flushes the stream after each).
ssize_t write_line(void*, const char* buf, size_t size) {
  std::string_view msg(buf, size);
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == '\r')) msg.remove_suffix(1);
  if (msg.empty()) return static_cast<ssize_t>(size);
  const int type = rte_log_cur_msg_logtype();
  const auto dpdk_level = level_of(rte_log_cur_msg_loglevel());
  auto level = dpdk_level;
  if (vhost_config_type >= 0 && type == vhost_config_type) level = vhost_config_level(msg, level);
  if (spdlog::should_log(level)) {
    spdlog::log(level, "{}", msg);
  } else if (level == dpdk_level || rte_log_get_level(type) >= static_cast<int>(RTE_LOG_DEBUG)) {
    // DPDK has filtered already: a line it wrote below spdlog's level was
    // asked for (its --log-level), so it is shown, marked. One demoted here
    // only when DPDK was asked for its type's debug lines.
    spdlog::info("(debug) {}", msg);
  }
  return static_cast<ssize_t>(size);
}

}  // namespace

bool route_dpdk_log() {
  // Registering a registered name returns its type; rte_vhost's
  // constructor registered it before main.
  vhost_config_type = rte_log_register("lib.vhost.config");
  static const cookie_io_functions_t fns{nullptr, &write_line, nullptr, nullptr};
  FILE* f = fopencookie(nullptr, "w", fns);
  if (f == nullptr) return false;
  // Line-buffered: a message that does not end in a newline still goes out
  // at rte_vlog's fflush.
  setvbuf(f, nullptr, _IOLBF, 0);
  return rte_openlog_stream(f) == 0;
}

}  // namespace strait::ctl
