#pragma once
// Follows the instance lifecycle from libvirt on the control thread: domain
// events (LIFECYCLE, REBOOT, DEVICE_ADDED, DEVICE_REMOVED) and, after every
// (re)connection, a listing of all domains. libvirt runs on straitd's own
// event loop (libvirt_events.h); nothing here blocks for long: a failed or
// closed connection is retried with exponential backoff (0.1 s .. 30 s).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "control/daemon/event_loop.h"

namespace strait::ctl {

struct DomainEvent {
  enum class Kind {
    kStarted,        // LIFECYCLE STARTED (booted, migrated, restored...)
    kStopped,        // LIFECYCLE STOPPED (shutdown, destroyed, crashed...) or SHUTDOWN finished
    kSuspended,      // LIFECYCLE SUSPENDED
    kResumed,        // LIFECYCLE RESUMED
    kRebooted,       // REBOOT (guest-initiated or virsh reboot; may come several times)
    kDeviceAdded,    // DEVICE_ADDED
    kDeviceRemoved,  // DEVICE_REMOVED
    kUndefined,      // LIFECYCLE UNDEFINED
    kDefined,        // LIFECYCLE DEFINED
  };
  Kind kind;
  std::string uuid;    // the domain's UUID, lowercase
  std::string name;
  std::string xml;     // the domain's current XML when the event was handled; "" if unavailable
  std::string device;  // kDeviceAdded / kDeviceRemoved: the device alias ("net1")
};
const char* kind_name(DomainEvent::Kind k);

// One domain of a listing.
struct DomainState {
  std::string uuid;
  std::string name;
  bool active = false;  // running or paused: its QEMU exists
  bool running = false; // running (not paused)
  std::string xml;      // current XML (live when active)
};

class LibvirtWatcher {
 public:
  struct Callbacks {
    std::function<void(const DomainEvent&)> on_event;
    // After each successful (re)connection, before any event of it.
    std::function<void(const std::vector<DomainState>&)> on_listing;
  };
  // Installs the libvirt event implementation on `loop` (once per process).
  LibvirtWatcher(EventLoop& loop, std::string uri, Callbacks cb);
  ~LibvirtWatcher();
  LibvirtWatcher(const LibvirtWatcher&) = delete;
  LibvirtWatcher& operator=(const LibvirtWatcher&) = delete;

  // First connection attempt now; later ones on the loop's timers.
  void start();
  bool connected() const;
  // uri, connected, connects, events, last_error, next_retry_s
  nlohmann::json status() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strait::ctl
