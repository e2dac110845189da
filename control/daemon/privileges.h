#pragma once
// Least privilege (docs/api.md "Privileges"). straitd starts as root where
// EAL needs it (hugepages, VFIO, devices), opens what needs root, then
// becomes [privileges] user with only the capabilities listed there. Once
// the switch is made nothing gives root back: setresuid leaves no saved
// uid 0, and no_new_privs stops an execve from gaining any privilege.
#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "control/daemon/config.h"
#include "dataplane/result.h"

namespace strait::ctl {

// [privileges] as the config file writes it (user and group: a name or a
// decimal number), before the host's databases are asked.
struct PrivilegeKeys {
  std::string user;
  std::optional<std::string> group;                               // absent: the user's login group
  std::vector<std::pair<std::string, std::string>> capabilities;  // (key path, name)
};
// The key a config is refused for, and why.
struct KeyProblem {
  std::string key;
  std::string problem;
};
// Looks the user and group up, checks the capability names (CAP_NET_RAW,
// CAP_NET_ADMIN, CAP_IPC_LOCK, CAP_SYS_RAWIO, CAP_SYS_ADMIN: the ones that
// serve DPDK after start-up), and that [vhost] socket_owner / socket_group
// are still possible for the user (`cfg`'s [vhost] is read already).
std::variant<PrivilegeSettings, KeyProblem> resolve_privileges(const PrivilegeKeys& keys,
                                                               const Config& cfg);

// Sets no_new_privs. It is per thread and inherited, so straitd calls it
// before EAL starts any thread: then every thread has it.
void forbid_new_privileges();

// After start-up (EAL, devices, the restored ports, the API socket): gives
// straitd's directories and files to [privileges] user, switches every
// thread to the user and its groups, and keeps the listed capabilities on
// this (the control) thread only; every other thread has none. Makes
// [vhost] socket_dir first where it must exist before any bind (a socket
// group, or a user that could not make it). Logs one line saying what
// straitd runs as, [privileges] or not. Errors name the key, with
// "failed_precondition" where the host contradicts the config.
Status drop_privileges(const Config& cfg);

}  // namespace strait::ctl
