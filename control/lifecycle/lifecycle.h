#pragma once
// The instance lifecycle: what libvirt says a domain does, applied to the
// ports that are its interfaces. libvirt's events tell the control plane
// what the instance does; the vhost callbacks tell the datapath when a
// guest's rings are usable (docs/design.md, "Instances"). Rules never change
// here: a port keeps its binding and rules through stop, start and reboot,
// so a restarted guest finds them in place before its first frame (F1, F6,
// F15). Control thread only; never blocks.
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "control/lifecycle/libvirt_watcher.h"
#include "control/switch/change_path.h"
#include "control/switch/port_table.h"

namespace strait::ctl {

class Lifecycle {
 public:
  // What an event does to a port's device and forwarding: the switch's own
  // port operations (control/switch/switch.cc).
  struct PortActions {
    // Registers a vhost port's socket again if an interface detach removed
    // it; false: it could not (logged).
    std::function<bool(const std::string& id, PortRuntime& p)> replug;
    // The interface left its domain: the socket goes once no worker can
    // touch the device; the binding stays for a re-attach (F14).
    std::function<void(const std::string& id, PortRuntime& p)> unplug;
    // The instance stopped or went: the port stops forwarding (port-down)
    // and its connections end; binding and rules stay.
    std::function<void(const std::string& id, PortRuntime& p)> take_down;
  };
  // `socket_dir`: [vhost] socket_dir, where leftover sockets are looked for.
  Lifecycle(std::string socket_dir, ChangePath& sw, PortTable& ports, PortActions act);

  // One domain event, from LibvirtWatcher or any other source of them.
  void on_domain_event(const DomainEvent& ev);
  // A listing of every domain after (re)connecting to libvirt: reconciles
  // like nova-compute's init_host (F2, F3).
  void on_domain_listing(const std::vector<DomainState>& domains);
  // Server-mode sockets in the socket directory that no bound port owns and
  // nothing listens on (left by a crash or by ports unbound meanwhile).
  void clean_socket_dir();

  // Where status() reads the watcher's state from (may stay unset).
  void set_watcher(const LibvirtWatcher* w) { watcher_ = w; }
  // For `show`: the watcher's state, and the events handled and skipped.
  nlohmann::json status() const;

 private:
  struct Mapped {
    std::string id;
    std::string alias;
  };
  std::vector<Mapped> map_interfaces(const std::string& xml, const char* context);
  void replug(const std::string& id, PortRuntime& p);

  std::string socket_dir_;
  ChangePath& sw_;
  PortTable& ports_;
  PortActions act_;
  const LibvirtWatcher* watcher_ = nullptr;
  std::map<std::string, uint64_t> handled_;  // libvirt events applied, by kind
  std::map<std::string, uint64_t> skipped_;  // by reason
};

}  // namespace strait::ctl
