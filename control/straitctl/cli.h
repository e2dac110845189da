#pragma once
// straitctl's command line: arguments in, one API request (and how to show
// its reply) out. No I/O besides CLI11's help and error text.
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>

namespace strait::straitctl {

// How the reply's result is shown in table mode.
enum class View {
  kNothing,     // delete, unbind: success is the exit status
  kNetworkRow,  // network create: the network as a one-row table
  kNetworks,    // network list
  kPortRow,     // port bind
  kPorts,       // port list
  kPortDetail,  // port show: one field per line
  kShow,
  kStats,
  kRaw,          // call: the result JSON, always
  kEvents,       // events: one line per event until interrupted
  kTrace,        // trace: the steps, then the actions
  kCacheDump,    // cache dump: one row per flow-cache entry
  kGroupRow,     // security-group create: the group as a one-row table
  kGroups,       // security-group list
  kGroupDetail,  // security-group show: its fields, then its rules
  kRuleRow,      // security-group rule create: the rule as a one-row table
  kTunnel,       // tunnel show: the VTEP, the remote VTEPs, each network's FDB and flood list
  kLogLevel,     // log-level: the level in force, alone on a line
};

struct Invocation {
  std::string socket;
  bool json_output = false;
  std::string method;
  nlohmann::json params = nlohmann::json::object();
  View view = View::kNothing;
  double watch_seconds = 0;     // stats --watch: repeat every N seconds; 0: once
  double timeout_seconds = 60;  // wait this long for a reply; 0: forever
};

inline constexpr const char* kDefaultSocket = "/run/strait/api.sock";
inline constexpr int kExitOk = 0, kExitRefused = 1, kExitUsage = 2;

// Parses argv into `inv`. Returns -1 when the request should be sent, or
// the exit status when the program is done (help and --version: 0, after
// printing to `out`; usage errors: kExitUsage, after printing to `err`).
int parse_args(int argc, const char* const* argv, Invocation& inv, std::ostream& out,
               std::ostream& err);

}  // namespace strait::straitctl
