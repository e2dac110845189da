#include "vhost/vhost_port.h"

#include <grp.h>
#include <pthread.h>
#include <pwd.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include <rte_vhost.h>

namespace strait::vhost {
namespace {

pthread_t g_control_thread;
bool g_control_set = false;

bool on_control_thread() {
  return g_control_set && pthread_equal(pthread_self(), g_control_thread);
}


// Offloads the datapath does not implement: a guest must not hand us
// unsegmented or checksum-less frames (OVS's userspace-tso-enable=false).
// Feature bits of the virtio spec (5.1.3): CSUM 0, GUEST_CSUM 1, GUEST_TSO4 7,
// GUEST_TSO6 8, GUEST_ECN 9, GUEST_UFO 10, HOST_TSO4 11, HOST_TSO6 12,
// HOST_ECN 13, HOST_UFO 14.
constexpr uint64_t kDisabledFeatures = (1ULL << 0) | (1ULL << 1) | (1ULL << 7) | (1ULL << 8) |
                                       (1ULL << 9) | (1ULL << 10) | (1ULL << 11) | (1ULL << 12) |
                                       (1ULL << 13) | (1ULL << 14);

}  // namespace

void set_control_thread() {
  g_control_thread = pthread_self();
  g_control_set = true;
}

Backend& Backend::instance() {
  static Backend b;
  return b;
}

// Server mode creates the socket file: refuse to replace anything but a
// socket nobody listens on (one a crashed switch left behind).
static Status check_server_path(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return ok();  // nothing there
  if (!S_ISSOCK(st.st_mode)) {
    return device_error("vhost socket " + path + ": exists and is not a socket");
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const bool alive = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  if (alive) {
    return device_error("vhost socket " + path + ": something is listening there already");
  }
  unlink(path.c_str());  // stale: take it over
  return ok();
}

// A user or group as the config names it: a name, or a number.
static bool all_digits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

static bool resolve_user(const std::string& s, uid_t* uid) {
  if (all_digits(s)) {
    *uid = static_cast<uid_t>(std::strtoul(s.c_str(), nullptr, 10));
    return true;
  }
  passwd pw, *found = nullptr;
  std::vector<char> buf(16384);
  if (getpwnam_r(s.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || !found) return false;
  *uid = pw.pw_uid;
  return true;
}

static bool resolve_group(const std::string& s, gid_t* gid) {
  if (all_digits(s)) {
    *gid = static_cast<gid_t>(std::strtoul(s.c_str(), nullptr, 10));
    return true;
  }
  group gr, *found = nullptr;
  std::vector<char> buf(16384);
  if (getgrnam_r(s.c_str(), &gr, buf.data(), buf.size(), &found) != 0 || !found) return false;
  *gid = gr.gr_gid;
  return true;
}

// Who a server-mode socket will belong to (-1: leave as created). Resolved
// before anything is made, so an unknown name refuses the bind untouched.
struct Ownership {
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
};

static Status resolve_ownership(const std::string& path, const SocketOptions& opts,
                                Ownership* own) {
  if (!opts.owner.empty() && !resolve_user(opts.owner, &own->uid)) {
    return device_error("vhost socket " + path + ": socket_owner \"" + opts.owner +
                        "\" is not a user of this host (config [vhost] socket_owner)");
  }
  if (!opts.group.empty() && !resolve_group(opts.group, &own->gid)) {
    return device_error("vhost socket " + path + ": socket_group \"" + opts.group +
                        "\" is not a group of this host (config [vhost] socket_group)");
  }
  return ok();
}

mode_t socket_dir_mode(bool has_group) { return has_group ? 02770 : 0755; }

// The socket directory is straitd's to create; any other directory must be
// there already (a typo in a path must not grow a tree). Made here, it gets
// socket_dir_mode and the socket group (`gid`, -1: none).
static Status make_socket_dir(const std::string& path, const SocketOptions& opts, gid_t gid) {
  namespace fs = std::filesystem;
  std::string d = opts.dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  const fs::path dir = fs::path(d).lexically_normal();
  if (d.empty() || fs::path(path).parent_path().lexically_normal() != dir) return ok();
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return ok();
  fs::create_directories(dir, ec);
  if (ec) {
    return device_error("vhost socket " + path + ": cannot create socket_dir " + opts.dir + ": " +
                        ec.message());
  }
  // Not the umask's bits (0700 under the unit's UMask=0077): QEMU must get in.
  const bool has_group = gid != static_cast<gid_t>(-1);
  if ((has_group && chown(dir.c_str(), static_cast<uid_t>(-1), gid) != 0) ||
      chmod(dir.c_str(), socket_dir_mode(has_group)) != 0) {
    const int e = errno;
    fs::remove(dir, ec);  // a refused bind leaves nothing behind
    return device_error("vhost socket " + path + ": socket_dir " + opts.dir + ": " +
                        std::strerror(e));
  }
  return ok();
}

Status Backend::add_socket(const std::string& path, Mode mode, const SocketOptions& opts) {
  Ownership own;
  if (mode == Mode::kServer) {
    if (Status st = resolve_ownership(path, opts, &own); !st) return st;
    if (Status st = make_socket_dir(path, opts, own.gid); !st) return st;
    if (Status st = check_server_path(path); !st) return st;
  }
  uint64_t flags = 0;
  // Client mode reconnects by itself (no RTE_VHOST_USER_NO_RECONNECT).
  if (mode == Mode::kClient) flags |= RTE_VHOST_USER_CLIENT;
  if (rte_vhost_driver_register(path.c_str(), flags) != 0) {
    return device_error("vhost socket " + path + ": cannot register (already registered, or bad path)");
  }
  static rte_vhost_device_ops ops = [] {
    rte_vhost_device_ops o{};
    o.new_device = &Backend::on_new_device;
    o.destroy_device = &Backend::on_destroy_device;
    o.vring_state_changed = &Backend::on_vring_state;
    return o;
  }();
  rte_vhost_driver_disable_features(path.c_str(), kDisabledFeatures);
  if (rte_vhost_driver_callback_register(path.c_str(), &ops) != 0 ||
      rte_vhost_driver_start(path.c_str()) != 0) {
    rte_vhost_driver_unregister(path.c_str());
    return device_error("vhost socket " + path + ": cannot start" +
                        (mode == Mode::kServer ? " (is the directory there and writable?)" : ""));
  }
  if (mode == Mode::kClient) return ok();
  // Server mode: QEMU (libvirt-qemu) must reach the socket rte_vhost has just
  // created. Until now it had the umask's bits: no other user could connect.
  const bool change_owner = own.uid != static_cast<uid_t>(-1) || own.gid != static_cast<gid_t>(-1);
  const char* failed = nullptr;
  if (chmod(path.c_str(), opts.mode) != 0) {
    failed = "chmod";
  } else if (change_owner && chown(path.c_str(), own.uid, own.gid) != 0) {
    failed = "chown";
  }
  if (failed) {
    const int e = errno;
    rte_vhost_driver_unregister(path.c_str());  // removes the socket file it created
    return device_error("vhost socket " + path + ": " + failed + ": " + std::strerror(e) +
                        " (config [vhost] socket_mode / socket_owner / socket_group)");
  }
  return ok();
}

void Backend::remove_socket(const std::string& path) {
  // rte_vhost_driver_unregister spins while a callback of this socket runs,
  // so a destroy_device waiting on us must be let go first (its port is out
  // of the datapath already: the caller unpublished it and waited).
  {
    std::lock_guard<std::mutex> l(mu_);
    retiring_.insert(path);
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (it->second.path == path) {
        it->second.done->set_value();
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
  }
  rte_vhost_driver_unregister(path.c_str());
  std::lock_guard<std::mutex> l(mu_);
  retiring_.erase(path);
}

void Backend::post(const Event& ev) {
  // Only the vhost-events thread posts (control-thread callbacks return
  // early), so the single-producer queue holds. A full queue means the
  // control thread is gone; waiting is all a callback can do.
  while (!queue_.push(ev)) std::this_thread::yield();
  const uint64_t one = 1;
  if (notify_fd_ >= 0) (void)!write(notify_fd_, &one, sizeof(one));
}

int Backend::notify_fd() {
  // Created before any socket is registered (Switch::create), so the
  // vhost-events thread never sees it change.
  if (notify_fd_ < 0) notify_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  return notify_fd_;
}

void Backend::complete(int vid) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = waiting_.find(vid);
  if (it == waiting_.end()) return;  // released by remove_socket
  it->second.done->set_value();
  waiting_.erase(it);
}

int Backend::on_new_device(int vid) {
  Event ev{EventKind::kNewDevice, vid};
  rte_vhost_get_ifname(vid, ev.path, sizeof(ev.path));
  instance().post(ev);
  return 0;
}

void Backend::on_destroy_device(int vid) {
  Event ev{EventKind::kDestroyDevice, vid};
  rte_vhost_get_ifname(vid, ev.path, sizeof(ev.path));
  if (on_control_thread()) return;  // remove_socket: the caller already unpublished it
  Backend& b = instance();
  std::promise<void> done;
  auto fut = done.get_future();
  {
    std::lock_guard<std::mutex> l(b.mu_);
    if (b.retiring_.count(ev.path)) return;
    b.waiting_[vid] = {ev.path, &done};
  }
  b.post(ev);
  fut.wait();  // guest memory stays mapped until no worker can reach it
}

int Backend::on_vring_state(int vid, uint16_t queue_id, int enable) {
  Event ev{EventKind::kVringState, vid, queue_id, enable != 0};
  rte_vhost_get_ifname(vid, ev.path, sizeof(ev.path));
  if (!on_control_thread()) instance().post(ev);
  return 0;
}

}  // namespace strait::vhost
