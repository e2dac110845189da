// straitctl: the command-line client of straitd's control API (docs/api.md).
// Exit status: 0 ok, 1 the switch refused the request, 2 usage error or the
// switch cannot be reached.
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>

#include "control/straitctl/cli.h"
#include "control/straitctl/client.h"
#include "control/straitctl/render.h"

namespace strait::straitctl {
namespace {

using json = nlohmann::json;

volatile sig_atomic_t g_interrupted = 0;  // set by SIGINT/SIGTERM in --watch

void on_interrupt(int) { g_interrupted = 1; }

void print_result(const Invocation& inv, const json& result) {
  if (inv.json_output || inv.view == View::kRaw) {
    std::cout << result.dump(2) << "\n";
    return;
  }
  switch (inv.view) {
    case View::kNothing:
      break;
    case View::kNetworkRow:
      std::cout << render_networks(json::array({result}));
      break;
    case View::kNetworks:
      std::cout << render_networks(result.value("networks", json::array()));
      break;
    case View::kPortRow:
      std::cout << render_ports(json::array({result}));
      break;
    case View::kPorts:
      std::cout << render_ports(result.value("ports", json::array()));
      break;
    case View::kPortDetail:
      std::cout << render_port_detail(result);
      break;
    case View::kShow:
      std::cout << render_show(result);
      break;
    case View::kStats:
      std::cout << render_stats(result);
      break;
    case View::kTrace:
      std::cout << render_trace(result);
      break;
    case View::kCacheDump:
      std::cout << render_cache_dump(result);
      break;
    case View::kGroupRow:
      std::cout << render_groups(json::array({result}));
      break;
    case View::kGroups:
      // A list, or an object holding it (like network.list's).
      std::cout << render_groups(result.is_object() ? result.value("security_groups", json::array())
                                                    : result);
      break;
    case View::kGroupDetail:
      std::cout << render_group_detail(result);
      break;
    case View::kRuleRow:
      std::cout << render_rules(json::array({result}));
      break;
    case View::kTunnel:
      std::cout << render_tunnel(result);
      break;
    case View::kLogLevel:
      std::cout << result.value("level", "-") << "\n";
      break;
    case View::kRaw:
    case View::kEvents:
      break;
  }
}

// One request; prints the result or the error. Returns the exit status.
int request(Client& client, const Invocation& inv, json* result) {
  json reply;
  std::string err;
  if (!client.call(inv.method, inv.params, &reply, &err)) {
    std::cerr << "straitctl: " << err << "\n";
    return kExitUsage;
  }
  if (!reply["ok"].get<bool>()) {
    const json& e = reply.value("error", json::object());
    std::cerr << "error: " << e.value("code", "unknown") << ": " << e.value("message", "-") << "\n";
    return kExitRefused;
  }
  *result = reply.value("result", json::object());
  return kExitOk;
}

// Sleeps `seconds`; false when interrupted.
bool sleep_for(double seconds) {
  timespec ts{
      static_cast<time_t>(seconds),
      static_cast<long>((seconds - static_cast<double>(static_cast<time_t>(seconds))) * 1e9)};
  while (nanosleep(&ts, &ts) != 0) {
    if (errno != EINTR || g_interrupted) return false;
  }
  return !g_interrupted;
}

// stats --watch: the table every N seconds, with packet rates from the second
// sample on; on a terminal the screen is redrawn in place.
int watch_stats(Client& client, const Invocation& inv) {
  struct sigaction sa = {};
  sa.sa_handler = on_interrupt;  // no SA_RESTART: the sleep returns at once
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  const bool tty = isatty(STDOUT_FILENO);
  json previous;
  auto previous_at = std::chrono::steady_clock::now();
  for (bool first = true; !g_interrupted; first = false) {
    json result;
    if (int rc = request(client, inv, &result); rc != kExitOk) return g_interrupted ? kExitOk : rc;
    auto now = std::chrono::steady_clock::now();
    if (inv.json_output) {
      std::cout << result.dump(2) << "\n";
    } else {
      std::time_t wall = std::time(nullptr);
      char stamp[32];
      std::strftime(stamp, sizeof stamp, "%F %T", std::localtime(&wall));
      if (tty)
        std::cout << "\033[H\033[2J";
      else if (!first)
        std::cout << "\n";
      std::cout << "--- " << stamp << " (every " << inv.watch_seconds << " s, ^C to stop)\n"
                << render_stats(result, previous,
                                std::chrono::duration<double>(now - previous_at).count());
    }
    std::cout.flush();
    previous = std::move(result);
    previous_at = now;
    if (!sleep_for(inv.watch_seconds)) break;
  }
  return kExitOk;
}

// events: subscribe, then print each event as it comes (one JSON object per
// line with -o json), until the switch goes away or we are interrupted.
int follow_events(Client& client, const Invocation& inv) {
  json result;
  if (int rc = request(client, inv, &result); rc != kExitOk) return rc;
  std::cout << std::unitbuf;
  for (;;) {
    json ev;
    std::string err;
    if (!client.read_event(&ev, &err)) {
      std::cerr << "straitctl: " << err << "\n";
      return kExitUsage;
    }
    if (!ev.contains("event")) continue;  // a reply, not an event
    if (inv.json_output) {
      std::cout << ev.dump() << "\n";
      continue;
    }
    const double ts = ev.value("ts", 0.0);
    std::time_t secs = static_cast<std::time_t>(ts);
    char stamp[64];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", std::localtime(&secs));
    char frac[16];
    std::snprintf(frac, sizeof frac, ".%03d", static_cast<int>((ts - double(secs)) * 1000));
    std::cout << stamp << frac << "  " << ev.value("event", "?") << "  " << ev.value("port", "-")
              << "\n";
  }
}

int run(int argc, char** argv) {
  Invocation inv;
  if (int rc = parse_args(argc, argv, inv, std::cout, std::cerr); rc >= 0) return rc;
  Client client;
  std::string err;
  if (!client.connect(inv.socket, inv.timeout_seconds, &err)) {
    std::cerr << "straitctl: " << err << "\n";
    return kExitUsage;
  }
  if (inv.view == View::kStats && inv.watch_seconds > 0) return watch_stats(client, inv);
  if (inv.view == View::kEvents) return follow_events(client, inv);
  json result;
  int rc = request(client, inv, &result);
  if (rc == kExitOk) print_result(inv, result);
  return rc;
}

}  // namespace
}  // namespace strait::straitctl

int main(int argc, char** argv) { return strait::straitctl::run(argc, argv); }
