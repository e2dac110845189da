#include "control/lifecycle/libvirt_watcher.h"

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "control/lifecycle/libvirt_events.h"

namespace strait::ctl {

const char* kind_name(DomainEvent::Kind k) {
  switch (k) {
    case DomainEvent::Kind::kStarted:
      return "started";
    case DomainEvent::Kind::kStopped:
      return "stopped";
    case DomainEvent::Kind::kSuspended:
      return "suspended";
    case DomainEvent::Kind::kResumed:
      return "resumed";
    case DomainEvent::Kind::kRebooted:
      return "rebooted";
    case DomainEvent::Kind::kDeviceAdded:
      return "device_added";
    case DomainEvent::Kind::kDeviceRemoved:
      return "device_removed";
    case DomainEvent::Kind::kUndefined:
      return "undefined";
    case DomainEvent::Kind::kDefined:
      return "defined";
  }
  return "unknown";
}

namespace {

using Clock = std::chrono::steady_clock;
using Kind = DomainEvent::Kind;

constexpr double kFirstRetryS = 0.1;
constexpr double kMaxRetryS = 30.0;
// A connection that lasted this long was healthy: the next loss retries from
// kFirstRetryS again. One that drops sooner keeps doubling, so a daemon that
// accepts and then fails does not get a connection and a full listing 10x a second.
constexpr auto kStableAfter = std::chrono::seconds(30);
// The same failure again is logged at most this often (with a count).
constexpr auto kRepeatLogEvery = std::chrono::minutes(5);

// libvirt prints every error on stderr unless an error function is set;
// callers report what matters through last_error and the log.
void libvirt_error_to_log(void*, virErrorPtr e) {
  if (e && e->message) spdlog::debug("libvirt: {}", e->message);
}

std::string libvirt_error_message() {
  const virError* e = virGetLastError();
  return e && e->message ? e->message : "unknown libvirt error";
}

int libvirt_error_code() {
  const virError* e = virGetLastError();
  return e ? e->code : VIR_ERR_OK;
}

// virConnectOpen refused for lack of rights (socket permissions, polkit):
// a read-only connection still sees events and XML.
bool refused_for_permission(const virError* e) {
  if (!e) return false;
  switch (e->code) {
    case VIR_ERR_AUTH_FAILED:
    case VIR_ERR_AUTH_CANCELLED:
    case VIR_ERR_AUTH_UNAVAILABLE:
    case VIR_ERR_ACCESS_DENIED:
    case VIR_ERR_OPERATION_DENIED:
      return true;
    case VIR_ERR_SYSTEM_ERROR:  // int1 carries errno for system errors
      return e->int1 == EACCES || e->int1 == EPERM;
    default:
      return false;
  }
}

std::string uuid_of(virDomainPtr dom) {
  char buf[VIR_UUID_STRING_BUFLEN] = {};
  if (virDomainGetUUIDString(dom, buf) < 0) return "";
  std::string s(buf);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string name_of(virDomainPtr dom) {
  const char* n = virDomainGetName(dom);
  return n ? n : "";
}

std::string xml_of(virDomainPtr dom) {
  char* xml = virDomainGetXMLDesc(dom, 0);
  if (!xml) return "";
  std::string s(xml);
  free(xml);
  return s;
}

const char* close_reason(int reason) {
  switch (reason) {
    case VIR_CONNECT_CLOSE_REASON_ERROR:
      return "I/O error";
    case VIR_CONNECT_CLOSE_REASON_EOF:
      return "end of file from the daemon";
    case VIR_CONNECT_CLOSE_REASON_KEEPALIVE:
      return "keepalive timeout";
    case VIR_CONNECT_CLOSE_REASON_CLIENT:
      return "closed by the client";
    default:
      return "unknown reason";
  }
}

// LIFECYCLE (event, detail) -> what we report; nullopt: ignored.
std::optional<Kind> lifecycle_kind(int event, int detail) {
  switch (event) {
    case VIR_DOMAIN_EVENT_DEFINED:
      return Kind::kDefined;
    case VIR_DOMAIN_EVENT_UNDEFINED:
      return Kind::kUndefined;
    case VIR_DOMAIN_EVENT_STARTED:
      return Kind::kStarted;
    case VIR_DOMAIN_EVENT_SUSPENDED:
      return Kind::kSuspended;
    case VIR_DOMAIN_EVENT_RESUMED:
      return Kind::kResumed;
    case VIR_DOMAIN_EVENT_STOPPED:
      return Kind::kStopped;
    case VIR_DOMAIN_EVENT_SHUTDOWN:
      // FINISHED, and its refinements GUEST/HOST (libvirt >= 3.4 with a QEMU
      // that says who asked): the guest is down. Not sent for a fake reboot.
      if (detail == VIR_DOMAIN_EVENT_SHUTDOWN_FINISHED ||
          detail == VIR_DOMAIN_EVENT_SHUTDOWN_GUEST || detail == VIR_DOMAIN_EVENT_SHUTDOWN_HOST) {
        return Kind::kStopped;
      }
      return std::nullopt;
    default:  // PMSUSPENDED, CRASHED (STOPPED(CRASHED) follows unless preserved)
      return std::nullopt;
  }
}

std::once_flag g_error_func_once;

}  // namespace

struct LibvirtWatcher::Impl {
  Impl(EventLoop& l, std::string u, Callbacks c);
  ~Impl();

  void connect();
  bool setup();  // keepalive, close callback, event callbacks
  bool deliver_listing();
  void teardown();
  void abort_connection(const std::string& why);  // from our own code: tear down now, retry later
  void request_teardown(const std::string& why);  // from inside libvirt: defer to the loop
  double schedule_retry();                        // returns the delay
  void arm_timer(double delay_s);
  void on_timer();
  void log_failure(const std::string& msg, double retry_in_s);
  void report(Kind kind, virDomainPtr dom, int event, std::string device = "");

  static void on_lifecycle(virConnectPtr, virDomainPtr dom, int event, int detail, void* opaque);
  static void on_reboot(virConnectPtr, virDomainPtr dom, void* opaque);
  static void on_device_added(virConnectPtr, virDomainPtr dom, const char* alias, void* opaque);
  static void on_device_removed(virConnectPtr, virDomainPtr dom, const char* alias, void* opaque);
  static void on_close(virConnectPtr, int reason, void* opaque);

  EventLoop& loop;
  const std::string uri;
  Callbacks cb;
  bool impl_ok;  // libvirt's event implementation runs on `loop`

  virConnectPtr conn = nullptr;
  bool read_only = false;
  std::vector<int> callback_ids;
  bool close_callback = false;
  Clock::time_point connected_at;

  // One timerfd on the loop: the next connection attempt, or (armed to fire
  // at once) a teardown a libvirt callback asked for.
  int timer_fd = -1;
  bool teardown_pending = false;
  std::optional<Clock::time_point> next_retry;
  double backoff_s = kFirstRetryS;  // delay before the next attempt

  uint64_t connects = 0;
  uint64_t events = 0;
  std::string last_error;
  std::string last_logged;  // rate limit for repeated identical failures
  Clock::time_point last_logged_at;
  uint64_t suppressed = 0;

  // Domains whose SHUTDOWN(finished) was reported as kStopped: the STOPPED
  // that follows it is not reported again.
  std::set<std::string> stopped_by_shutdown;
};

LibvirtWatcher::Impl::Impl(EventLoop& l, std::string u, Callbacks c)
    : loop(l), uri(std::move(u)), cb(std::move(c)), impl_ok(install_libvirt_event_impl(l)) {
  std::call_once(g_error_func_once, [] { virSetErrorFunc(nullptr, libvirt_error_to_log); });
  timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (timer_fd >= 0) loop.add(timer_fd, EPOLLIN, [this](unsigned) { on_timer(); });
}

LibvirtWatcher::Impl::~Impl() {
  teardown();
  if (timer_fd >= 0) {
    loop.remove(timer_fd);
    close(timer_fd);
  }
}

void LibvirtWatcher::Impl::connect() {
  next_retry.reset();
  if (!impl_ok) {
    // Without our event loop libvirt would dispatch on another thread's loop.
    last_error = "libvirt's event implementation is installed on another event loop";
    spdlog::error("libvirt: {}; not connecting to {}", last_error, uri);
    return;
  }
  virResetLastError();
  virConnectPtr c = virConnectOpen(uri.c_str());
  bool ro = false;
  if (!c && refused_for_permission(virGetLastError())) {
    spdlog::info("libvirt: {} refused read-write access ({}); trying read-only", uri,
                 libvirt_error_message());
    virResetLastError();
    c = virConnectOpenReadOnly(uri.c_str());
    ro = true;
  }
  if (!c) return abort_connection("cannot connect to " + uri + ": " + libvirt_error_message());
  conn = c;
  read_only = ro;
  if (setup()) deliver_listing();
}

bool LibvirtWatcher::Impl::setup() {
  // Probes a remote daemon every 5 s, dropping the connection after 3
  // unanswered probes. In-process drivers (test://) have no keepalive.
  if (virConnectSetKeepAlive(conn, 5, 3) < 0 && libvirt_error_code() != VIR_ERR_NO_SUPPORT) {
    abort_connection("keepalive on " + uri + ": " + libvirt_error_message());
    return false;
  }
  virResetLastError();
  if (virConnectRegisterCloseCallback(conn, on_close, this, nullptr) < 0) {
    abort_connection("close callback on " + uri + ": " + libvirt_error_message());
    return false;
  }
  close_callback = true;
  const std::pair<int, virConnectDomainEventGenericCallback> wanted[] = {
      {VIR_DOMAIN_EVENT_ID_LIFECYCLE, VIR_DOMAIN_EVENT_CALLBACK(on_lifecycle)},
      {VIR_DOMAIN_EVENT_ID_REBOOT, VIR_DOMAIN_EVENT_CALLBACK(on_reboot)},
      {VIR_DOMAIN_EVENT_ID_DEVICE_ADDED, VIR_DOMAIN_EVENT_CALLBACK(on_device_added)},
      {VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED, VIR_DOMAIN_EVENT_CALLBACK(on_device_removed)},
  };
  // Registered before the listing: what changes while we list arrives as an
  // event afterwards (events are dispatched from the loop, after on_listing).
  for (const auto& [id, fn] : wanted) {
    const int cid = virConnectDomainEventRegisterAny(conn, nullptr, id, fn, this, nullptr);
    if (cid < 0) {
      abort_connection("domain events on " + uri + ": " + libvirt_error_message());
      return false;
    }
    callback_ids.push_back(cid);
  }
  return true;
}

bool LibvirtWatcher::Impl::deliver_listing() {
  virDomainPtr* doms = nullptr;
  const int n = virConnectListAllDomains(conn, &doms, 0);
  if (n < 0) {
    abort_connection("listing domains on " + uri + ": " + libvirt_error_message());
    return false;
  }
  std::vector<DomainState> listing;
  listing.reserve(n);
  for (int i = 0; i < n; i++) {
    int state = VIR_DOMAIN_NOSTATE;
    int reason = 0;
    // A domain that vanished since the list call is left out: its events follow.
    if (virDomainGetState(doms[i], &state, &reason, 0) == 0) {
      DomainState d;
      d.uuid = uuid_of(doms[i]);
      d.name = name_of(doms[i]);
      d.active = virDomainIsActive(doms[i]) == 1;
      d.running = state == VIR_DOMAIN_RUNNING;
      d.xml = xml_of(doms[i]);
      listing.push_back(std::move(d));
    }
    virDomainFree(doms[i]);
  }
  free(doms);
  if (virConnectIsAlive(conn) != 1) {
    abort_connection("connection to " + uri + " lost while listing domains");
    return false;
  }
  connects++;
  connected_at = Clock::now();
  stopped_by_shutdown.clear();
  if (!last_logged.empty() && suppressed > 0) {
    spdlog::info("libvirt: last failure repeated {} more times: {}", suppressed, last_logged);
  }
  last_logged.clear();
  suppressed = 0;
  spdlog::info("libvirt: connected to {}{}, {} domain(s)", uri, read_only ? " (read-only)" : "",
               listing.size());
  if (cb.on_listing) cb.on_listing(listing);
  return true;
}

void LibvirtWatcher::Impl::teardown() {
  if (!conn) return;
  // On a dead connection these fail at once (logged at debug); they still
  // release libvirt's side.
  for (int id : callback_ids) virConnectDomainEventDeregisterAny(conn, id);
  callback_ids.clear();
  if (close_callback) virConnectUnregisterCloseCallback(conn, on_close);
  close_callback = false;
  virConnectClose(conn);
  conn = nullptr;
  virResetLastError();
}

void LibvirtWatcher::Impl::abort_connection(const std::string& why) {
  teardown();
  teardown_pending = false;
  last_error = why;
  log_failure(why, schedule_retry());
}

void LibvirtWatcher::Impl::request_teardown(const std::string& why) {
  if (teardown_pending || !conn) return;
  last_error = why;
  teardown_pending = true;
  arm_timer(0);
}

double LibvirtWatcher::Impl::schedule_retry() {
  const double delay = backoff_s;
  backoff_s = std::min(backoff_s * 2, kMaxRetryS);
  next_retry = Clock::now() +
               std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(delay));
  arm_timer(delay);
  return delay;
}

void LibvirtWatcher::Impl::arm_timer(double delay_s) {
  if (timer_fd < 0) return;
  itimerspec its{};
  const auto ns = static_cast<long long>(std::max(delay_s, 0.0) * 1e9);
  its.it_value.tv_sec = ns / 1000000000LL;
  its.it_value.tv_nsec = std::max(ns % 1000000000LL, 1LL);  // 0 would disarm
  timerfd_settime(timer_fd, 0, &its, nullptr);
}

void LibvirtWatcher::Impl::on_timer() {
  uint64_t expirations;
  if (read(timer_fd, &expirations, sizeof(expirations)) != sizeof(expirations)) return;
  if (teardown_pending) {
    teardown_pending = false;
    if (Clock::now() - connected_at >= kStableAfter) backoff_s = kFirstRetryS;
    abort_connection(std::string(last_error));
    return;
  }
  if (!conn && next_retry) connect();
}

void LibvirtWatcher::Impl::log_failure(const std::string& msg, double retry_in_s) {
  const auto now = Clock::now();
  if (msg == last_logged && now - last_logged_at < kRepeatLogEvery) {
    suppressed++;
    return;
  }
  if (msg == last_logged && suppressed > 0) {
    spdlog::warn("libvirt: {} (failed {} more times since last logged); retrying in {:.1f} s", msg,
                 suppressed, retry_in_s);
  } else {
    spdlog::warn("libvirt: {}; retrying in {:.1f} s", msg, retry_in_s);
  }
  last_logged = msg;
  last_logged_at = now;
  suppressed = 0;
}

void LibvirtWatcher::Impl::report(Kind kind, virDomainPtr dom, int event, std::string device) {
  if (!conn || teardown_pending) return;  // a stale callback of a connection being torn down
  DomainEvent ev;
  ev.kind = kind;
  ev.uuid = uuid_of(dom);
  ev.name = name_of(dom);
  ev.device = std::move(device);
  // SHUTDOWN(finished) is the earliest word that the guest is down; the
  // STOPPED that follows once QEMU exits is then not reported again. Any
  // other lifecycle event in between (a restart) makes the next STOPPED count.
  if (event == VIR_DOMAIN_EVENT_SHUTDOWN) {
    if (!stopped_by_shutdown.insert(ev.uuid).second) return;
  } else if (event == VIR_DOMAIN_EVENT_STOPPED) {
    if (stopped_by_shutdown.erase(ev.uuid)) return;
  } else if (event >= 0) {
    stopped_by_shutdown.erase(ev.uuid);
  }
  ev.xml = xml_of(dom);  // "" once undefined, or if the connection broke
  if (ev.xml.empty() && virConnectIsAlive(conn) != 1) {
    request_teardown("connection to " + uri + " lost: " + libvirt_error_message());
  }
  virResetLastError();
  events++;
  if (cb.on_event) cb.on_event(ev);
}

void LibvirtWatcher::Impl::on_lifecycle(virConnectPtr, virDomainPtr dom, int event, int detail,
                                        void* opaque) {
  if (auto kind = lifecycle_kind(event, detail)) {
    static_cast<Impl*>(opaque)->report(*kind, dom, event);
  }
}

void LibvirtWatcher::Impl::on_reboot(virConnectPtr, virDomainPtr dom, void* opaque) {
  static_cast<Impl*>(opaque)->report(Kind::kRebooted, dom, -1);
}

void LibvirtWatcher::Impl::on_device_added(virConnectPtr, virDomainPtr dom, const char* alias,
                                           void* opaque) {
  static_cast<Impl*>(opaque)->report(Kind::kDeviceAdded, dom, -1, alias ? alias : "");
}

void LibvirtWatcher::Impl::on_device_removed(virConnectPtr, virDomainPtr dom, const char* alias,
                                             void* opaque) {
  static_cast<Impl*>(opaque)->report(Kind::kDeviceRemoved, dom, -1, alias ? alias : "");
}

void LibvirtWatcher::Impl::on_close(virConnectPtr, int reason, void* opaque) {
  auto* self = static_cast<Impl*>(opaque);
  // Inside libvirt, its connection locked: the teardown runs from the loop.
  self->request_teardown("connection to " + self->uri + " closed: " + close_reason(reason));
}

LibvirtWatcher::LibvirtWatcher(EventLoop& loop, std::string uri, Callbacks cb)
    : impl_(std::make_unique<Impl>(loop, std::move(uri), std::move(cb))) {}

LibvirtWatcher::~LibvirtWatcher() = default;

void LibvirtWatcher::start() {
  if (impl_->conn || impl_->next_retry) return;  // already running
  impl_->connect();
}

bool LibvirtWatcher::connected() const { return impl_->conn && !impl_->teardown_pending; }

nlohmann::json LibvirtWatcher::status() const {
  nlohmann::json j;
  j["uri"] = impl_->uri;
  j["connected"] = connected();
  j["read_only"] = impl_->read_only && impl_->conn;
  j["connects"] = impl_->connects;
  j["events"] = impl_->events;
  j["last_error"] = impl_->last_error;
  if (impl_->next_retry) {
    const double s = std::chrono::duration<double>(*impl_->next_retry - Clock::now()).count();
    j["next_retry_s"] = std::max(s, 0.0);
  } else {
    j["next_retry_s"] = nullptr;
  }
  return j;
}

}  // namespace strait::ctl
