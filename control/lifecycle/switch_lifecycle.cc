// The instance lifecycle: what libvirt says a domain does, applied to the
// ports that are its interfaces. libvirt's events tell the control plane
// what the instance does; the vhost callbacks tell the datapath when a
// guest's rings are usable (VM-TESTING.md). Rules never change here: a port
// keeps its binding and rules through stop, start and reboot, so a
// restarted guest finds them in place before its first frame (F1, F6, F15).
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <set>

#include <spdlog/spdlog.h>

#include "control/lifecycle/domain_xml.h"
#include "control/switch/switch.h"
#include "vhost/vhost_port.h"

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
  const bool dead = connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) < 0 &&
                    errno == ECONNREFUSED;
  close(fd);
  return dead;
}

}  // namespace

// The bound ports a domain's vhost-user interfaces are. What cannot be
// mapped is logged and counted, never fatal (bad XML, an interface of no
// binding here, two ports with one MAC).
std::vector<Switch::Mapped> Switch::map_interfaces(const std::string& xml, const char* context) {
  std::vector<Mapped> out;
  if (xml.empty()) return out;
  auto dom = parse_domain_xml(xml);
  if (!dom) {
    spdlog::warn("libvirt {}: domain XML refused: {}", context, dom.error().message);
    count_skip("bad_xml");
    return out;
  }
  for (const std::string& why : dom->skipped) {
    spdlog::warn("libvirt {} domain {}: {}", context, dom->name, why);
    count_skip("bad_interface");
  }
  for (const VhostInterface& itf : dom->interfaces) {
    auto port = match_port(model_, itf);
    if (!port) {
      // An interface of another switch's port, or not bound yet (nova binds
      // first; an unbound interface is a port another agent owns).
      if (port.error().code == "not_found") {
        spdlog::debug("libvirt {} domain {}: {}", context, dom->name, port.error().message);
        count_skip("unmapped_interface");
      } else {
        spdlog::warn("libvirt {} domain {}: {}", context, dom->name, port.error().message);
        count_skip("ambiguous_interface");
      }
      continue;
    }
    out.push_back({(*port)->id, itf.alias});
  }
  return out;
}

void Switch::on_domain_event(const DomainEvent& ev) {
  const char* kind = kind_name(ev.kind);
  lifecycle_counts_.handled[kind]++;
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
        take_down(id, p);
        break;
      case DomainEvent::Kind::kUndefined:
        take_down(id, p);
        break;
      case DomainEvent::Kind::kDeviceRemoved:
        if (removed) {
          unplug(id, p);
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

void Switch::on_domain_listing(const std::vector<DomainState>& domains) {
  spdlog::info("libvirt: {} domain(s) listed, reconciling", domains.size());
  lifecycle_counts_.handled["listing"]++;
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
        take_down(m.id, p);  // a device left over from a QEMU that is gone
      }
    }
  }
  // Ports whose instance is gone while we were not looking (F2, F3): down,
  // binding kept until the orchestrator unbinds them.
  for (auto& [id, p] : ports_.ports()) {
    if (seen.count(id) || p.domain_uuid.empty()) continue;
    spdlog::info("port {}: domain {} is gone", id, p.domain_uuid);
    p.domain_state = "undefined";
    take_down(id, p);
  }
}

// Registers the port's vhost socket again if an interface detach removed it.
void Switch::replug(const std::string& id, PortRuntime& p) {
  if (p.has_device || p.dp.kind != dp::PortKind::kVhost) return;
  const PortSpec* spec = model_.port(id);
  if (!spec) return;
  auto rt = attach(*spec, p.dp.dp);
  if (!rt) {
    spdlog::error("port {}: re-attaching its socket: {}", id, rt.error().message);
    count_skip("attach_failed");
    return;
  }
  p.vhost_path = rt->vhost_path;
  p.has_device = true;
  spdlog::info("port {}: socket {} attached again", id, p.vhost_path);
}

// The interface left the domain: its socket goes (once no worker can touch
// the device), the binding stays for a re-attach (F14).
void Switch::unplug(const std::string& id, PortRuntime& p) {
  if (!p.has_device || p.dp.kind != dp::PortKind::kVhost) return;
  take_down(id, p);
  p.has_device = false;
  const std::string path = p.vhost_path;
  publisher_.after_grace([this, id, path] {
    vhost::Backend::instance().remove_socket(path);
    // A device the removal destroyed is gone for good: forget it.
    PortRuntime* p = ports_.find(id);
    if (!p || p->has_device) return;
    ports_.vhost_gone(*p);
    spdlog::info("port {}: socket {} detached", id, path);
  });
}

void Switch::take_down(const std::string& id, PortRuntime& p) {
  // The instance is gone or stopped: so are its connections (the binding
  // and rules stay for its next start).
  if (const PortSpec* spec = model_.port(id))
    ct_->flush_port_after_grace(*spec, model_.local_vlan(spec->network));
  if (!p.dp.live || p.dp.kind != dp::PortKind::kVhost) return;
  p.dp.live = false;
  p.announced = false;
  republish();
  publisher_.after_grace([this, id] { emit("port-down", id); });
}

void Switch::shut_down_ports() {
  stop_workers();  // no worker reads the ports any more: no grace period to wait for
  for (auto& [id, p] : ports_.ports()) {
    if (!p.dp.live) continue;
    p.dp.live = false;
    p.announced = false;
    emit("port-down", id);
  }
}

void Switch::clean_socket_dir() {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(cfg_.vhost_socket_dir, ec)) return;
  std::set<std::string> ours;
  for (const auto& [id, p] : model_.ports())
    if (p.attach.kind == Attachment::Kind::kVhost) ours.insert(p.attach.path);
  for (const auto& e : fs::directory_iterator(cfg_.vhost_socket_dir, ec)) {
    const std::string path = e.path().string();
    // Bindings keep one spelling of a path: socket_dir may have "//" or "./".
    if (!e.is_socket(ec) || ours.count(normal_socket_path(path)) || !is_dead_socket(path)) continue;
    if (unlink(path.c_str()) == 0) {
      spdlog::info("removed leftover vhost socket {}", path);
      lifecycle_counts_.handled["leftover_sockets_removed"]++;
    }
  }
}

nlohmann::json Switch::lifecycle_json() const {
  nlohmann::json j = watcher_ ? watcher_->status() : nlohmann::json{{"enabled", false}};
  j["handled"] = lifecycle_counts_.handled;  // by kind, as applied to ports
  j["skipped"] = lifecycle_counts_.skipped;
  return j;
}

}  // namespace strait::ctl
