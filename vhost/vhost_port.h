#pragma once
// vhost-user sockets on rte_vhost, and the device lifecycle they report.
// rte_vhost calls back on its own thread ("vhost-events"); each callback is
// posted to the control thread through an SPSC queue. destroy_device does
// not return until the control thread has published a snapshot without the
// device and a grace period has passed (complete()): after it returns
// rte_vhost unmaps the guest's memory, and no worker may still touch it.
#include <sys/types.h>

#include <cstdint>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include <boost/lockfree/spsc_queue.hpp>

#include "dataplane/result.h"

namespace strait::vhost {

enum class EventKind : uint8_t { kNewDevice, kDestroyDevice, kVringState };

struct Event {
  EventKind kind;
  int vid;
  uint16_t vring = 0;
  bool enable = false;
  char path[108] = {};  // the socket path (rte_vhost_get_ifname)
};

enum class Mode : uint8_t {
  kClient,  // QEMU is the server (libvirt mode='server'); we connect and reconnect
  kServer,  // we create the socket; QEMU connects
};

// How server-mode sockets (the ones the switch creates) are made: straitd's
// [vhost] config section. Client-mode sockets are QEMU's: none of this applies.
struct SocketOptions {
  std::string dir = "/run/strait/vhost";  // created when a socket is first placed in it
  mode_t mode = 0660;                     // permission bits of each socket
  std::string owner;  // user name or uid the socket is chowned to; empty: straitd's own
  std::string group;  // group name or gid; empty: straitd's own
};

// The mode of the socket directory when straitd makes it. With a socket
// group, 02770 and that group: QEMU's user, a member, connects to straitd's
// sockets there and makes its own there (libvirt mode='server'), which the
// setgid bit gives the group, so that straitd can connect to them. Without
// one, 0755: each socket's own mode and owner decide who connects.
mode_t socket_dir_mode(bool has_group);

// One per process. Register/unregister from the control thread only.
class Backend {
 public:
  static Backend& instance();

  // Registers and starts a socket; a server-mode one is made as `opts` says.
  // A device_error (an unknown user or group in `opts` included) registers
  // nothing.
  Status add_socket(const std::string& path, Mode mode, const SocketOptions& opts);
  // Stops and forgets a socket. If its device is live, destroy_device runs
  // on this (the control) thread: the caller must already have published a
  // snapshot without it and waited for the grace period.
  void remove_socket(const std::string& path);

  bool pop(Event* ev) { return queue_.pop(*ev); }
  // Readable when an event was posted: the control loop waits on it rather
  // than finding events on its next tick (device ready -> vif-plugged).
  // Reading it (8 bytes) clears it.
  int notify_fd();
  // Marks a destroy as done: destroy_device returns, guest memory may go.
  void complete(int vid);

 private:
  Backend() = default;
  static int on_new_device(int vid);
  static void on_destroy_device(int vid);
  static int on_vring_state(int vid, uint16_t queue_id, int enable);
  void post(const Event& ev);

  boost::lockfree::spsc_queue<Event, boost::lockfree::capacity<4096>> queue_;
  int notify_fd_ = -1;
  // Destroys waiting for the control thread, and sockets being removed
  // (whose destroys need no wait: their port is already unpublished).
  // Control-plane only; the datapath never takes this lock.
  std::mutex mu_;
  struct Waiting {
    std::string path;
    std::promise<void>* done;
  };
  std::map<int, Waiting> waiting_;  // by vid
  std::set<std::string> retiring_;
};

// The control thread's identity, so a callback it triggers itself (through
// remove_socket) is not posted to, and waited for by, the same thread.
void set_control_thread();

}  // namespace strait::vhost
