#include "control/lifecycle/lifecycle.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <set>

#include "control/lifecycle/domain_xml.h"

namespace strait::ctl {
namespace {

const char* state_after(DomainEvent::Kind k, const char* before) {
  switch (k) {
    case DomainEvent::Kind::kStarted:
    case DomainEvent::Kind::kResumed:
      return "running";
    case DomainEvent::Kind::kSuspended:
      return "paused";
    case DomainEvent::Kind::kStopped:
      return "stopped";
    case DomainEvent::Kind::kUndefined:
      return "undefined";
    case DomainEvent::Kind::kDefined:
      return before ? before : "stopped";
    default:
      return before ? before : "running";  // reboot, device events: the domain runs
  }
}

// A socket file that nothing listens on: connect() is refused.
bool is_dead_socket(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path, path.c_str(), sizeof(sa.sun_path) - 1);
  const bool dead =
      connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) < 0 && errno == ECONNREFUSED;
  close(fd);
  return dead;
}

}  // namespace

Lifecycle::Lifecycle(std::string socket_dir, ChangePath& sw, PortTable& ports, PortActions act)
    : socket_dir_(std::move(socket_dir)), sw_(sw), ports_(ports), act_(std::move(act)) {}

// The bound ports a domain's vhost-user interfaces are. What cannot be
// mapped is logged and counted, never fatal (bad XML, an interface of no
// binding here, two ports with one MAC).
std::vector<Lifecycle::Mapped> Lifecycle::map_interfaces(const std::string& xml,
                                                         const char* context) {
  std::vector<Mapped> out;
  if (xml.empty()) return out;
  auto dom = parse_domain_xml(xml);
  if (!dom) {
    spdlog::warn("libvirt {}: domain XML refused: {}", context, dom.error().message);
    skipped_["bad_xml"]++;
    return out;
  }
  for (const std::string& why : dom->skipped) {
    spdlog::warn("libvirt {} domain {}: {}", context, dom->name, why);
    skipped_["bad_interface"]++;
  }
  for (const VhostInterface& itf : dom->interfaces) {
    auto port = match_port(sw_.model(), itf);
    if (!port) {
      // An interface of another switch's port, or not bound yet (nova binds
      // first; an unbound interface is a port another agent owns).
      if (port.error().code == "not_found") {
        spdlog::debug("libvirt {} domain {}: {}", context, dom->name, port.error().message);
        skipped_["unmapped_interface"]++;
      } else {
        spdlog::warn("libvirt {} domain {}: {}", context, dom->name, port.error().message);
        skipped_["ambiguous_interface"]++;
      }
      continue;
    }
    out.push_back({(*port)->id, itf.alias});
  }
  return out;
}

void Lifecycle::on_domain_event(const DomainEvent& ev) {
  const char* kind = kind_name(ev.kind);
  handled_[kind]++;
  spdlog::info("libvirt: domain {} ({}) {}{}{}", ev.name, ev.uuid, kind,
               ev.device.empty() ? "" : " ", ev.device);

  // The ports of this domain: those its current XML names, and those it
  // named before (an interface just removed is no longer in the XML).
  std::map<std::string, std::string> now;  // port id -> alias
  for (const Mapped& m : map_interfaces(ev.xml, kind)) now[m.id] = m.alias;
  for (auto& [id, p] : ports_.ports()) {
    const bool in_xml = now.count(id) > 0;
    if (!in_xml && (ev.uuid.empty() || p.domain_uuid != ev.uuid)) continue;
    if (in_xml) {
      p.domain_uuid = ev.uuid;
      p.domain_name = ev.name;
      p.domain_alias = now[id];
    }
    const bool removed = ev.kind == DomainEvent::Kind::kDeviceRemoved &&
                         (ev.device == p.domain_alias || (!ev.xml.empty() && !in_xml));
    p.domain_state = state_after(ev.kind, p.domain_state);
    switch (ev.kind) {
      case DomainEvent::Kind::kStarted:
      case DomainEvent::Kind::kResumed:
      case DomainEvent::Kind::kDeviceAdded:
        // The guest will connect (client mode: rte_vhost reconnects to the
        // socket QEMU listens on); its device makes the port live.
        if (in_xml || ev.xml.empty()) replug(id, p);
        break;
      case DomainEvent::Kind::kStopped:
        // QEMU is gone: whatever its vhost connection still says, nothing of
        // this guest is forwarded any more. Binding and rules stay.
        act_.take_down(id, p);
        break;
      case DomainEvent::Kind::kUndefined:
        act_.take_down(id, p);
        break;
      case DomainEvent::Kind::kDeviceRemoved:
        if (removed) {
          act_.unplug(id, p);
          p.domain_uuid.clear();
          p.domain_alias.clear();
          p.domain_state = nullptr;
        }
        break;
      default:  // suspend (the vhost device goes by itself), reboot, define
        break;
    }
  }
}

void Lifecycle::on_domain_listing(const std::vector<DomainState>& domains) {
  spdlog::info("libvirt: {} domain(s) listed, reconciling", domains.size());
  handled_["listing"]++;
  std::set<std::string> seen;
  for (const DomainState& d : domains) {
    for (const Mapped& m : map_interfaces(d.xml, "listing")) {
      PortRuntime* found = ports_.find(m.id);
      if (!found) continue;
      PortRuntime& p = *found;
      seen.insert(m.id);
      p.domain_uuid = d.uuid;
      p.domain_name = d.name;
      p.domain_alias = m.alias;
      p.domain_state = d.running ? "running" : d.active ? "paused" : "stopped";
      if (d.active) {
        replug(m.id, p);
      } else {
        act_.take_down(m.id, p);  // a device left over from a QEMU that is gone
      }
    }
  }
  // Ports whose instance is gone while we were not looking (F2, F3): down,
  // binding kept until the orchestrator unbinds them.
  for (auto& [id, p] : ports_.ports()) {
    if (seen.count(id) || p.domain_uuid.empty()) continue;
    spdlog::info("port {}: domain {} is gone", id, p.domain_uuid);
    p.domain_state = "undefined";
    act_.take_down(id, p);
  }
}

void Lifecycle::replug(const std::string& id, PortRuntime& p) {
  if (!act_.replug(id, p)) skipped_["attach_failed"]++;
}

void Lifecycle::clean_socket_dir() {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(socket_dir_, ec)) return;
  std::set<std::string> ours;
  for (const auto& [id, p] : sw_.model().ports())
    if (p.attach.kind == Attachment::Kind::kVhost) ours.insert(p.attach.path);
  for (const auto& e : fs::directory_iterator(socket_dir_, ec)) {
    const std::string path = e.path().string();
    // Bindings keep one spelling of a path: socket_dir may have "//" or "./".
    if (!e.is_socket(ec) || ours.count(normal_socket_path(path)) || !is_dead_socket(path)) continue;
    if (unlink(path.c_str()) == 0) {
      spdlog::info("removed leftover vhost socket {}", path);
      handled_["leftover_sockets_removed"]++;
    }
  }
}

nlohmann::json Lifecycle::status() const {
  nlohmann::json j = watcher_ ? watcher_->status() : nlohmann::json{{"enabled", false}};
  j["handled"] = handled_;  // by kind, as applied to ports
  j["skipped"] = skipped_;
  return j;
}

}  // namespace strait::ctl
