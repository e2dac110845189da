#include "control/daemon/privileges.h"

#include <grp.h>
#include <pwd.h>
#include <rte_eal.h>
#include <spdlog/spdlog.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "vhost/vhost_port.h"

namespace strait::ctl {
namespace {

namespace fs = std::filesystem;

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 10 && s.find_first_not_of("0123456789") == std::string::npos;
}

// Password and group database entries, by name or by decimal number.
struct UserEntry {
  std::string name;
  uid_t uid;
  gid_t gid;  // login group
};
struct GroupEntry {
  std::string name;
  gid_t gid;
};

std::optional<UserEntry> find_user(const std::string& name_or_uid) {
  passwd pw, *found = nullptr;
  std::vector<char> buf(16384);
  const int rc = all_digits(name_or_uid)
                     ? getpwuid_r(static_cast<uid_t>(std::stoul(name_or_uid)), &pw, buf.data(),
                                  buf.size(), &found)
                     : getpwnam_r(name_or_uid.c_str(), &pw, buf.data(), buf.size(), &found);
  if (rc != 0 || !found) return std::nullopt;
  return UserEntry{pw.pw_name, pw.pw_uid, pw.pw_gid};
}

std::optional<GroupEntry> find_group(const std::string& name_or_gid) {
  group gr, *found = nullptr;
  std::vector<char> buf(65536);  // a group lists its members
  const int rc = all_digits(name_or_gid)
                     ? getgrgid_r(static_cast<gid_t>(std::stoul(name_or_gid)), &gr, buf.data(),
                                  buf.size(), &found)
                     : getgrnam_r(name_or_gid.c_str(), &gr, buf.data(), buf.size(), &found);
  if (rc != 0 || !found) return std::nullopt;
  return GroupEntry{gr.gr_name, gr.gr_gid};
}

// Whether `user` (login group `login_gid`) is in group `gid` once initgroups ran.
bool user_in_group(const std::string& user, gid_t login_gid, gid_t gid) {
  if (gid == login_gid) return true;
  int n = 64;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  if (getgrouplist(user.c_str(), login_gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<size_t>(n));
    if (getgrouplist(user.c_str(), login_gid, groups.data(), &n) < 0) return false;
  }
  groups.resize(static_cast<size_t>(n));
  return std::find(groups.begin(), groups.end(), gid) != groups.end();
}

// What each capability is still needed for after start-up: docs/api.md
// "Privileges" says it at length. Anything else (CAP_SETUID, CAP_CHOWN,
// CAP_DAC_OVERRIDE, ...) would give root back, and straitd has no use for it.
struct Keepable {
  const char* name;
  int cap;
};
constexpr Keepable kKeepable[] = {
    {"CAP_NET_RAW", CAP_NET_RAW},      // packet sockets: net_af_packet ports bound later
    {"CAP_NET_ADMIN", CAP_NET_ADMIN},  // interface flags, MTU, tap devices of such ports
    {"CAP_IPC_LOCK", CAP_IPC_LOCK},  // VFIO DMA maps of memory EAL maps later, past RLIMIT_MEMLOCK
    {"CAP_SYS_RAWIO", CAP_SYS_RAWIO},  // iopl() when probing a uio device with I/O ports later
    {"CAP_SYS_ADMIN", CAP_SYS_ADMIN},  // physical addresses (/proc/self/pagemap), IOVA as PA
};

std::optional<int> keepable_capability(const std::string& name) {
  for (const Keepable& k : kKeepable)
    if (name == k.name) return k.cap;
  return std::nullopt;
}

std::string keepable_names() {
  std::string out;
  for (const Keepable& k : kKeepable) out += (out.empty() ? "" : ", ") + std::string(k.name);
  return out;
}

std::optional<KeyProblem> resolve_capabilities(const PrivilegeKeys& keys, PrivilegeSettings* p) {
  for (const auto& [path, name] : keys.capabilities) {
    auto cap = keepable_capability(name);
    if (!cap)
      return KeyProblem{path,
                        "\"" + name + "\" is not one straitd keeps (" + keepable_names() + ")"};
    if (std::count(p->capabilities.begin(), p->capabilities.end(), *cap))
      return KeyProblem{path, name + " is listed twice"};
    p->capabilities.push_back(*cap);
  }
  return std::nullopt;
}

// Once it is the user, straitd cannot give a socket to anyone else
// (CAP_CHOWN is gone), only to a group the user is in.
std::optional<KeyProblem> check_vhost_ownership(const Config& cfg, const PrivilegeSettings& p) {
  if (!cfg.vhost_socket_owner.empty()) {
    auto owner = find_user(cfg.vhost_socket_owner);
    if (!owner || owner->uid != p.uid)
      return KeyProblem{"vhost.socket_owner", "straitd becomes " + p.user +
                                                  " ([privileges] user) and cannot give its "
                                                  "sockets to another user: use socket_group"};
  }
  if (cfg.vhost_socket_group.empty()) return std::nullopt;
  auto g = find_group(cfg.vhost_socket_group);
  if (!g)
    return KeyProblem{"vhost.socket_group",
                      "\"" + cfg.vhost_socket_group + "\" is not a group of this host"};
  if (!user_in_group(p.user, p.gid, g->gid))
    return KeyProblem{"vhost.socket_group", "user " + p.user +
                                                " ([privileges] user) is not in group " + g->name +
                                                ", so it cannot give its sockets to it"};
  return std::nullopt;
}

Error precondition(std::string msg) { return {"failed_precondition", std::move(msg)}; }

std::string errno_text() { return std::strerror(errno); }

// chown of a directory and the files directly in it (not below: straitd's
// own directories hold only its own files, none in subdirectories).
Status give_dir(const std::string& key, const std::string& dir, uid_t uid, gid_t gid) {
  if (chown(dir.c_str(), uid, gid) != 0)
    return precondition(key + " " + dir + ": chown: " + errno_text());
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (lchown(e.path().c_str(), uid, gid) != 0)
      return precondition(key + " " + e.path().string() + ": chown: " + errno_text());
  }
  if (ec) return precondition(key + " " + dir + ": " + ec.message());
  return ok();
}

// The socket directory, made now where QEMU shares it through a group (in
// client mode QEMU makes its sockets there: the directory must be there
// before any port is bound), or where straitd is about to become a user
// that may not make it. It gets the group and vhost::socket_dir_mode, and
// `owner` (-1: unchanged). Otherwise it is made with the first server-mode
// socket (vhost_port.cc), and a group unknown now refuses that bind.
Status prepare_socket_dir(const Config& cfg, uid_t owner, gid_t login_gid) {
  const std::string& dir = cfg.vhost_socket_dir;
  const bool has_group = !cfg.vhost_socket_group.empty();
  auto group = has_group ? find_group(cfg.vhost_socket_group) : std::nullopt;
  const bool switching = owner != static_cast<uid_t>(-1);
  if (!switching && !group) return ok();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return precondition("vhost.socket_dir " + dir + ": cannot create: " + ec.message());
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || (st.st_uid != geteuid() && geteuid() != 0))
    return ok();  // someone else's: its mode and group are theirs to set
  const gid_t gid = group ? group->gid : switching ? login_gid : static_cast<gid_t>(-1);
  // chown first: it may clear the setgid bit that chmod then sets.
  if (chown(dir.c_str(), owner, gid) != 0 ||
      chmod(dir.c_str(), vhost::socket_dir_mode(group.has_value())) != 0)
    return precondition("vhost.socket_dir " + dir + ": " + errno_text());
  return ok();
}

// EAL makes /var/run/dpdk 0700: the user could not even pass through to its
// own runtime directory. Search permission (not listing) for all lets it;
// every DPDK process's directory below stays 0700 and its owner's.
Status open_path_to(const std::string& runtime) {
  const std::string parent = fs::path(runtime).parent_path().string();
  struct stat st;
  if (stat(parent.c_str(), &st) != 0 || (st.st_mode & S_IXOTH)) return ok();
  if (chmod(parent.c_str(), (st.st_mode & 07777) | S_IXOTH) != 0)
    return precondition("EAL runtime directory " + parent + ": chmod o+x: " + errno_text());
  return ok();
}

// What root made at start and straitd must still write as the user: the
// database (SQLite makes and removes its -wal and -shm files there), the
// socket directory, EAL's runtime directory (a hot-plugged device is
// announced through it, and rte_dev_probe fails if it cannot be read),
// and the API socket, which stays owner-only.
Status hand_over(const Config& cfg, const PrivilegeSettings& p) {
  if (Status st = give_dir("state_dir", cfg.state_dir, p.uid, p.gid); !st) return st;
  if (Status st = prepare_socket_dir(cfg, p.uid, p.gid); !st) return st;
  const std::string runtime = rte_eal_get_runtime_dir();
  std::error_code ec;
  if (!runtime.empty() && fs::is_directory(runtime, ec)) {  // none with --no-shconf
    if (Status st = give_dir("EAL runtime directory", runtime, p.uid, p.gid); !st) return st;
    if (Status st = open_path_to(runtime); !st) return st;
  }
  if (chown(cfg.api_socket.c_str(), p.uid, p.gid) != 0)
    return precondition("api_socket " + cfg.api_socket + ": chown: " + errno_text());
  return ok();
}

// The kept capabilities that this thread holds now (all of them as root;
// under systemd's User= those AmbientCapabilities= gave).
std::vector<cap_value_t> held(const PrivilegeSettings& p) {
  std::vector<cap_value_t> out;
  cap_t now = cap_get_proc();
  for (int c : p.capabilities) {
    cap_flag_value_t v = CAP_CLEAR;
    if (cap_get_flag(now, c, CAP_PERMITTED, &v) == 0 && v == CAP_SET) out.push_back(c);
  }
  cap_free(now);
  return out;
}

// The bounding set is per thread too: the control thread's, which every
// thread it starts from now on inherits (vhost's, libvirt's), keeps only
// the kept capabilities. Needs CAP_SETPCAP, which root has; a straitd
// started without it has its bounding set from systemd already.
void narrow_bounding_set(const std::vector<cap_value_t>& keep) {
  for (cap_value_t c = 0; c < cap_max_bits(); c++) {
    if (std::find(keep.begin(), keep.end(), c) == keep.end()) cap_drop_bound(c);
  }
}

// setgroups, setresgid and setresuid go to every thread of the process
// (glibc's setxid broadcast). Capabilities do not: a thread keeps its
// permitted set across the uid change only with keepcaps, which is per
// thread and set here on this one only. So EAL's threads (workers,
// interrupts, multi-process, telemetry) end with none, and this thread with
// exactly `keep`, permitted and effective.
Status become(const PrivilegeSettings& p, bool switching, const std::vector<cap_value_t>& keep) {
  narrow_bounding_set(keep);
  if (switching) {
    if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0 || initgroups(p.user.c_str(), p.gid) != 0 ||
        setresgid(p.gid, p.gid, p.gid) != 0 || setresuid(p.uid, p.uid, p.uid) != 0)
      return precondition("privileges.user: cannot become " + p.user + ": " + errno_text());
    prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0);
  }
  cap_t caps = cap_init();  // all clear
  if (!keep.empty()) {
    cap_set_flag(caps, CAP_PERMITTED, static_cast<int>(keep.size()), keep.data(), CAP_SET);
    cap_set_flag(caps, CAP_EFFECTIVE, static_cast<int>(keep.size()), keep.data(), CAP_SET);
  }
  const int rc = cap_set_proc(caps);
  cap_free(caps);
  if (rc != 0 || (CAP_AMBIENT_SUPPORTED() && cap_reset_ambient() != 0))
    return precondition("privileges.capabilities: cannot set them: " + errno_text());
  uid_t ru, eu, su;
  gid_t rg, eg, sg;
  getresuid(&ru, &eu, &su);
  getresgid(&rg, &eg, &sg);
  if (ru != p.uid || eu != p.uid || su != p.uid || rg != p.gid || eg != p.gid || sg != p.gid)
    return precondition("privileges.user: still not " + p.user + " after the switch");
  // A uid change makes the process non-dumpable, and its /proc/self files
  // root's: give back core dumps and /proc/self, as under systemd's User=.
  if (switching) prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
  return ok();
}

// The user must be able to work in the directories straitd keeps using:
// found now, not at the first write of a request.
Status check_reachable(const Config& cfg, const PrivilegeSettings& p) {
  auto closed = [](const std::string& dir) { return access(dir.c_str(), W_OK | X_OK) != 0; };
  const std::string why = ": not writable by user " + p.user + " (is a directory above it closed?)";
  if (closed(cfg.state_dir)) return precondition("state_dir " + cfg.state_dir + why);
  if (closed(cfg.vhost_socket_dir))
    return precondition("vhost.socket_dir " + cfg.vhost_socket_dir + why);
  const std::string api_dir = fs::path(cfg.api_socket).parent_path().string();
  if (closed(api_dir.empty() ? "." : api_dir))
    spdlog::warn(
        "api_socket {}: its directory is not writable by user {}: the socket stays "
        "when straitd stops (the next start takes it over)",
        cfg.api_socket, p.user);
  return ok();
}

// One line: who straitd is now, and what it may still do.
void log_identity(const char* note) {
  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  passwd* pw = getpwuid(uid);
  group* gr = getgrgid(gid);
  std::vector<gid_t> groups(static_cast<size_t>(std::max(getgroups(0, nullptr), 0)));
  groups.resize(
      static_cast<size_t>(std::max(getgroups(static_cast<int>(groups.size()), groups.data()), 0)));
  std::string list;
  for (gid_t g : groups) list += (list.empty() ? "" : ",") + std::to_string(g);
  cap_t caps = cap_get_proc();
  char* text = cap_to_text(caps, nullptr);
  const std::string cap_text = text && std::string(text) != "=" ? text : "none";
  cap_free(text);
  cap_free(caps);
  spdlog::info(
      "privileges: running as user {} (uid {}), group {} (gid {}), groups [{}], "
      "capabilities {}, no_new_privs {}{}",
      pw ? pw->pw_name : "?", uid, gr ? gr->gr_name : "?", gid, list, cap_text,
      prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), note);
}

}  // namespace

std::variant<PrivilegeSettings, KeyProblem> resolve_privileges(const PrivilegeKeys& keys,
                                                               const Config& cfg) {
  auto user = find_user(keys.user);
  if (!user)
    return KeyProblem{"privileges.user", "\"" + keys.user + "\" is not a user of this host"};
  if (user->uid == 0)
    return KeyProblem{"privileges.user",
                      "\"" + keys.user + "\" is root: name an unprivileged user"};
  PrivilegeSettings p{user->name, user->uid, std::to_string(user->gid), user->gid, {}};
  if (keys.group) {
    auto g = find_group(*keys.group);
    if (!g)
      return KeyProblem{"privileges.group", "\"" + *keys.group + "\" is not a group of this host"};
    p.group = g->name;
    p.gid = g->gid;
  } else if (auto login = find_group(p.group)) {
    p.group = login->name;
  }
  if (auto bad = resolve_capabilities(keys, &p)) return *bad;
  if (auto bad = check_vhost_ownership(cfg, p)) return *bad;
  return p;
}

void forbid_new_privileges() {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) spdlog::warn("no_new_privs: {}", errno_text());
}

Status drop_privileges(const Config& cfg) {
  if (!cfg.privileges) {
    if (Status st = prepare_socket_dir(cfg, static_cast<uid_t>(-1), 0); !st) return st;
    log_identity(" ([privileges] user not set)");
    return ok();
  }
  const PrivilegeSettings& p = *cfg.privileges;
  const bool switching = geteuid() != p.uid;
  if (switching && geteuid() != 0)
    return precondition("privileges.user: straitd runs as uid " + std::to_string(geteuid()) +
                        ", not root: it cannot become " + p.user + " (start it as root, or as " +
                        p.user + ")");
  if (switching) {
    if (Status st = hand_over(cfg, p); !st) return st;
  } else if (Status st = prepare_socket_dir(cfg, static_cast<uid_t>(-1), 0); !st) {
    return st;
  }
  if (Status st = become(p, switching, held(p)); !st) return st;
  if (Status st = check_reachable(cfg, p); !st) return st;
  log_identity("");
  return ok();
}

}  // namespace strait::ctl
