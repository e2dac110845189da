#pragma once
// The Prometheus endpoint: GET /metrics over HTTP, served by libmicrohttpd
// in external-loop mode on the control thread (no thread of its own). A
// scrape renders Switch::stats() and show(), so it reads workers only
// through their relaxed counters and never slows one down.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "control/daemon/event_loop.h"
#include "control/switch/switch.h"
#include "dataplane/result.h"

struct MHD_Daemon;

namespace strait::ctl {

// The text exposition format (0.0.4) of a switch's `stats` and `show`
// replies (docs/api.md): every family with its HELP and TYPE lines.
std::string render_metrics(const nlohmann::json& stats, const nlohmann::json& show);

// A label value as the exposition format quotes it: \ " and newline escaped.
std::string escape_label_value(std::string_view v);

class MetricsServer {
 public:
  // address: numeric IPv4 or IPv6 (no brackets). The endpoint's sockets
  // join `loop`; `sw` must outlive the server.
  static Result<std::unique_ptr<MetricsServer>> listen(const std::string& address, uint16_t port,
                                                       EventLoop* loop, const Switch* sw);
  ~MetricsServer();  // closes every connection and the listening socket
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

 private:
  MetricsServer(EventLoop* loop, const Switch* sw) : loop_(loop), sw_(sw) {}
  // Lets libmicrohttpd do what is ready, then arms the timer for its next
  // deadline (connection timeouts, work it left pending).
  void run();

  EventLoop* loop_;
  const Switch* sw_;
  MHD_Daemon* daemon_ = nullptr;
  int epoll_fd_ = -1;  // libmicrohttpd's own epoll set: readable when it has work
  int timer_fd_ = -1;
};

}  // namespace strait::ctl
