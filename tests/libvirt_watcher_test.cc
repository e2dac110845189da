// The libvirt event implementation on EventLoop, and LibvirtWatcher against
// libvirt's in-process test driver (no daemon): listing, lifecycle events,
// retrying with backoff until a connection can be made.
#include "control/lifecycle/libvirt_watcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <libvirt/libvirt.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "control/daemon/event_loop.h"
#include "control/lifecycle/libvirt_events.h"

namespace strait::ctl {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using Kind = DomainEvent::Kind;

// libvirt takes one event implementation per process: one loop for every
// test, never destroyed (libvirt may call into it until exit).
EventLoop& loop() {
  static EventLoop* l = [] {
    auto* created = new EventLoop;
    install_libvirt_event_impl(*created);
    return created;
  }();
  return *l;
}

// Runs the loop until pred() holds or timeout; returns pred().
bool pump_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!pred() && Clock::now() < deadline) loop().run_once(10);
  return pred();
}

void pump_for(std::chrono::milliseconds d) {
  pump_until([] { return false; }, d);
}

// ---- the event implementation, through libvirt's public API ----

struct Counter {
  int fired = 0;
  int freed = 0;
  int last_events = 0;
};

// Every test may run alone (ctest runs one per process): the loop first.
class LibvirtEvents : public ::testing::Test {
 protected:
  void SetUp() override { loop(); }
};

void count_timeout(int, void* opaque) { static_cast<Counter*>(opaque)->fired++; }
void count_free(void* opaque) { static_cast<Counter*>(opaque)->freed++; }

TEST_F(LibvirtEvents, InstallIsOncePerProcess) {
  EXPECT_TRUE(install_libvirt_event_impl(loop()));  // same loop: fine
  EventLoop other;
  EXPECT_FALSE(install_libvirt_event_impl(other));
}

TEST_F(LibvirtEvents, ZeroTimeoutFiresOnEveryIteration) {
  Counter c;
  const int t = virEventAddTimeout(0, count_timeout, &c, count_free);
  ASSERT_GE(t, 0);
  const auto start = Clock::now();
  for (int i = 0; i < 5; i++) loop().run_once(1000);
  EXPECT_EQ(c.fired, 5);
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(500));  // never waited for the 1 s
  EXPECT_EQ(virEventRemoveTimeout(t), 0);
  EXPECT_EQ(c.freed, 0) << "free callbacks must not run inside removeTimeout";
  loop().run_once(0);
  EXPECT_EQ(c.freed, 1);
  pump_for(std::chrono::milliseconds(30));
  EXPECT_EQ(c.fired, 5);
}

TEST_F(LibvirtEvents, PeriodicTimeout) {
  Counter c;
  const auto start = Clock::now();
  const int t = virEventAddTimeout(20, count_timeout, &c, count_free);
  ASSERT_GE(t, 0);
  ASSERT_TRUE(pump_until([&] { return c.fired >= 1; }, std::chrono::milliseconds(1000)));
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(19));
  pump_for(std::chrono::milliseconds(100));
  EXPECT_GE(c.fired, 3);  // about 6 in 120 ms; slack for a loaded machine
  EXPECT_LE(c.fired, 7);
  virEventRemoveTimeout(t);
  loop().run_once(0);
  EXPECT_EQ(c.freed, 1);
}

TEST_F(LibvirtEvents, DisabledTimeoutNeverFiresUntilEnabled) {
  Counter c;
  const int t = virEventAddTimeout(-1, count_timeout, &c, nullptr);
  ASSERT_GE(t, 0);
  pump_for(std::chrono::milliseconds(50));
  EXPECT_EQ(c.fired, 0);
  virEventUpdateTimeout(t, 0);
  loop().run_once(100);
  EXPECT_EQ(c.fired, 1);
  virEventUpdateTimeout(t, -1);
  pump_for(std::chrono::milliseconds(50));
  EXPECT_EQ(c.fired, 1);
  virEventRemoveTimeout(t);
}

// The libvirt pattern: a timeout that disables itself when it fires.
void one_shot(int timer, void* opaque) {
  static_cast<Counter*>(opaque)->fired++;
  virEventUpdateTimeout(timer, -1);
}

TEST_F(LibvirtEvents, TimeoutCanDisableItselfFromItsCallback) {
  Counter c;
  const int t = virEventAddTimeout(0, one_shot, &c, nullptr);
  pump_for(std::chrono::milliseconds(50));
  EXPECT_EQ(c.fired, 1);
  virEventUpdateTimeout(t, 0);
  pump_for(std::chrono::milliseconds(50));
  EXPECT_EQ(c.fired, 2);
  virEventRemoveTimeout(t);
}

void on_pipe(int, int fd, int events, void* opaque) {
  auto* c = static_cast<Counter*>(opaque);
  c->fired++;
  c->last_events = events;
  char buf[16];
  if (events & VIR_EVENT_HANDLE_READABLE) (void)!read(fd, buf, sizeof(buf));
}

TEST_F(LibvirtEvents, HandleOnAPipe) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  Counter c;
  const int w = virEventAddHandle(p[0], VIR_EVENT_HANDLE_READABLE, on_pipe, &c, count_free);
  ASSERT_GE(w, 0);
  loop().run_once(20);
  EXPECT_EQ(c.fired, 0);

  ASSERT_EQ(write(p[1], "x", 1), 1);
  ASSERT_TRUE(pump_until([&] { return c.fired == 1; }, std::chrono::milliseconds(500)));
  EXPECT_EQ(c.last_events, VIR_EVENT_HANDLE_READABLE);

  // Disabled: readable, but not reported; reported once enabled again.
  virEventUpdateHandle(w, 0);
  ASSERT_EQ(write(p[1], "y", 1), 1);
  pump_for(std::chrono::milliseconds(30));
  EXPECT_EQ(c.fired, 1);
  virEventUpdateHandle(w, VIR_EVENT_HANDLE_READABLE);
  ASSERT_TRUE(pump_until([&] { return c.fired == 2; }, std::chrono::milliseconds(500)));

  // The writer goes away: a hangup, even though only READABLE was asked for.
  close(p[1]);
  ASSERT_TRUE(pump_until([&] { return c.last_events & VIR_EVENT_HANDLE_HANGUP; },
                         std::chrono::milliseconds(500)));

  EXPECT_EQ(virEventRemoveHandle(w), 0);
  EXPECT_EQ(c.freed, 0) << "free callbacks must not run inside removeHandle";
  const int fired = c.fired;
  pump_for(std::chrono::milliseconds(30));
  EXPECT_EQ(c.freed, 1);
  EXPECT_EQ(c.fired, fired);
  EXPECT_EQ(virEventRemoveHandle(w), -1);
  close(p[0]);
}

struct Pair {
  Counter a, b;
  int watch_a = -1, watch_b = -1;
};

// Each watch removes both: whichever runs first, the other must not run.
void remove_both(int watch, int, int, void* opaque) {
  auto* p = static_cast<Pair*>(opaque);
  (watch == p->watch_a ? p->a : p->b).fired++;
  virEventRemoveHandle(p->watch_a);
  virEventRemoveHandle(p->watch_b);
}

TEST_F(LibvirtEvents, TwoWatchesOnOneFdAndRemovalWhileDispatching) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  ASSERT_EQ(write(p[1], "x", 1), 1);
  Pair pair;
  pair.watch_a = virEventAddHandle(p[0], VIR_EVENT_HANDLE_READABLE, remove_both, &pair, nullptr);
  pair.watch_b = virEventAddHandle(p[0], VIR_EVENT_HANDLE_READABLE, remove_both, &pair, nullptr);
  ASSERT_NE(pair.watch_a, pair.watch_b);
  pump_for(std::chrono::milliseconds(50));
  EXPECT_EQ(pair.a.fired + pair.b.fired, 1);
  close(p[0]);
  close(p[1]);
}

// ---- the watcher ----

struct Recorder {
  std::vector<DomainEvent> events;
  std::vector<std::vector<DomainState>> listings;

  LibvirtWatcher::Callbacks callbacks() {
    return {[this](const DomainEvent& e) { events.push_back(e); },
            [this](const std::vector<DomainState>& l) { listings.push_back(l); }};
  }
  std::vector<DomainEvent> of(const std::string& uuid) const {
    std::vector<DomainEvent> out;
    for (const auto& e : events) {
      if (e.uuid == uuid) out.push_back(e);
    }
    return out;
  }
};

const DomainState* find(const std::vector<DomainState>& l, const std::string& name) {
  for (const auto& d : l) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

// The test driver's shared default connection, opened by "the hypervisor
// admin": what it does reaches every connection to test:///default.
class DefaultDriver : public ::testing::Test {
 protected:
  void SetUp() override {
    loop();
    admin_ = virConnectOpen("test:///default");
    ASSERT_NE(admin_, nullptr);
  }
  void TearDown() override {
    if (admin_) virConnectClose(admin_);
  }
  virConnectPtr admin_ = nullptr;
};

TEST_F(DefaultDriver, ListingOnConnect) {
  Recorder r;
  LibvirtWatcher w(loop(), "test:///default", r.callbacks());
  EXPECT_FALSE(w.connected());
  w.start();
  ASSERT_TRUE(w.connected()) << w.status().dump();
  ASSERT_EQ(r.listings.size(), 1u);  // delivered from start(), not later
  const DomainState* d = find(r.listings[0], "test");
  ASSERT_NE(d, nullptr);
  EXPECT_TRUE(d->active);
  EXPECT_TRUE(d->running);
  EXPECT_THAT(d->xml, HasSubstr("<name>test</name>"));
  EXPECT_EQ(d->uuid.size(), 36u);
  EXPECT_EQ(d->uuid, "6695eb01-f6a4-8304-79aa-97f2502e193f");  // the test driver's, lowercase

  const auto s = w.status();
  EXPECT_EQ(s["uri"], "test:///default");
  EXPECT_EQ(s["connected"], true);
  EXPECT_EQ(s["connects"], 1);
  EXPECT_EQ(s["events"], 0);
  EXPECT_TRUE(s["next_retry_s"].is_null());
}

constexpr const char* kVmUuid = "5a4c1d3e-7b2f-4c44-9a55-0d3b2c1e9f01";
constexpr const char* kVmXml = R"(<domain type='test'>
  <name>strait-vm1</name>
  <uuid>5A4C1D3E-7B2F-4C44-9A55-0D3B2C1E9F01</uuid>
  <memory>262144</memory>
  <os><type>hvm</type></os>
  <devices>
    <interface type='vhostuser'>
      <mac address='52:54:00:12:34:56'/>
      <source type='unix' path='/tmp/strait-test/vm1-port1.sock' mode='server'/>
      <model type='virtio'/>
    </interface>
  </devices>
</domain>)";

TEST_F(DefaultDriver, LifecycleEventsInOrder) {
  Recorder r;
  LibvirtWatcher w(loop(), "test:///default", r.callbacks());
  w.start();
  ASSERT_TRUE(w.connected());

  virDomainPtr dom = virDomainDefineXML(admin_, kVmXml);
  ASSERT_NE(dom, nullptr);
  auto count = [&] { return r.of(kVmUuid).size(); };
  ASSERT_TRUE(pump_until([&] { return count() == 1; }, std::chrono::seconds(2)));
  ASSERT_EQ(virDomainCreate(dom), 0);
  ASSERT_TRUE(pump_until([&] { return count() == 2; }, std::chrono::seconds(2)));
  ASSERT_EQ(virDomainSuspend(dom), 0);
  ASSERT_EQ(virDomainResume(dom), 0);
  ASSERT_TRUE(pump_until([&] { return count() == 4; }, std::chrono::seconds(2)));
  ASSERT_EQ(virDomainDestroy(dom), 0);
  ASSERT_EQ(virDomainUndefine(dom), 0);
  virDomainFree(dom);
  ASSERT_TRUE(pump_until([&] { return count() == 6; }, std::chrono::seconds(2)));
  pump_for(std::chrono::milliseconds(50));  // nothing more

  const auto evs = r.of(kVmUuid);
  std::vector<Kind> kinds;
  for (const auto& e : evs) kinds.push_back(e.kind);
  EXPECT_EQ(kinds, (std::vector<Kind>{Kind::kDefined, Kind::kStarted, Kind::kSuspended,
                                      Kind::kResumed, Kind::kStopped, Kind::kUndefined}));
  for (const auto& e : evs) EXPECT_EQ(e.name, "strait-vm1") << kind_name(e.kind);
  EXPECT_THAT(evs[0].xml, HasSubstr("/tmp/strait-test/vm1-port1.sock"));
  EXPECT_THAT(evs[1].xml, HasSubstr("/tmp/strait-test/vm1-port1.sock"));
  EXPECT_THAT(evs[1].xml, HasSubstr("type='vhostuser'"));
  EXPECT_EQ(evs[5].xml, "");  // gone once undefined
  EXPECT_EQ(w.status()["events"], r.events.size());
  EXPECT_EQ(r.listings.size(), 1u);
}

TEST_F(DefaultDriver, ShutdownIsReportedOnce) {
  Recorder r;
  LibvirtWatcher w(loop(), "test:///default", r.callbacks());
  w.start();
  std::string xml = kVmXml;
  xml.replace(xml.find("strait-vm1"), 10, "strait-vm2");
  xml.replace(xml.find("5A4C1D3E"), 8, "5A4C1D3F");
  const std::string uuid = "5a4c1d3f-7b2f-4c44-9a55-0d3b2c1e9f01";
  virDomainPtr dom = virDomainCreateXML(admin_, xml.c_str(), 0);  // transient
  ASSERT_NE(dom, nullptr);
  ASSERT_EQ(virDomainShutdown(dom), 0);
  virDomainFree(dom);
  ASSERT_TRUE(pump_until([&] { return r.of(uuid).size() >= 2; }, std::chrono::seconds(2)));
  pump_for(std::chrono::milliseconds(50));
  std::vector<Kind> kinds;
  for (const auto& e : r.of(uuid)) kinds.push_back(e.kind);
  EXPECT_EQ(kinds, (std::vector<Kind>{Kind::kStarted, Kind::kStopped}));
}

TEST_F(DefaultDriver, NoEventsAfterDestruction) {
  Recorder r;
  {
    LibvirtWatcher w(loop(), "test:///default", r.callbacks());
    w.start();
    ASSERT_TRUE(w.connected());
  }
  std::string xml = kVmXml;
  xml.replace(xml.find("strait-vm1"), 10, "strait-vm3");
  xml.replace(xml.find("5A4C1D3E"), 8, "5A4C1D40");
  virDomainPtr dom = virDomainDefineXML(admin_, xml.c_str());
  ASSERT_NE(dom, nullptr);
  virDomainUndefine(dom);
  virDomainFree(dom);
  pump_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(r.events.empty());
}

// ---- reconnecting ----

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/strait-libvirt-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

constexpr const char* kNodeXml = R"(<node>
  <domain type='test'>
    <name>from-file</name>
    <uuid>0b6c1a52-2f6e-4f0e-8d7c-3f1b9a7e5d11</uuid>
    <memory>262144</memory>
    <os><type>hvm</type></os>
  </domain>
</node>
)";

TEST(LibvirtWatcher, ConnectsOnceTheNodeFileAppears) {
  loop();
  TempDir dir;
  const std::string file = dir.path() + "/node.xml";
  Recorder r;
  LibvirtWatcher w(loop(), "test://" + file, r.callbacks());
  w.start();
  EXPECT_FALSE(w.connected());
  auto s = w.status();
  EXPECT_EQ(s["connects"], 0);
  EXPECT_NE(s["last_error"], "");
  ASSERT_TRUE(s["next_retry_s"].is_number()) << s.dump();
  EXPECT_LE(s["next_retry_s"].get<double>(), 0.1);

  pump_for(std::chrono::milliseconds(250));  // attempts at 0.1 s and 0.3 s from the start
  EXPECT_FALSE(w.connected());
  EXPECT_TRUE(r.listings.empty());
  std::ofstream(file) << kNodeXml;
  // Next attempt 0.4 s after the last failure at the latest.
  ASSERT_TRUE(pump_until([&] { return w.connected(); }, std::chrono::seconds(2)))
      << w.status().dump();
  ASSERT_EQ(r.listings.size(), 1u);
  const DomainState* d = find(r.listings[0], "from-file");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->uuid, "0b6c1a52-2f6e-4f0e-8d7c-3f1b9a7e5d11");
  EXPECT_TRUE(d->running);
  EXPECT_THAT(d->xml, HasSubstr("<name>from-file</name>"));
  s = w.status();
  EXPECT_EQ(s["connects"], 1);
  EXPECT_TRUE(s["next_retry_s"].is_null());
}

TEST(LibvirtWatcher, BadUriKeepsRetrying) {
  loop();
  Recorder r;
  LibvirtWatcher w(loop(), "nosuchdriver:///x", r.callbacks());
  w.start();
  pump_for(std::chrono::milliseconds(400));  // failures at 0, 0.1, 0.3 s: backoff 0.4 s next
  EXPECT_FALSE(w.connected());
  const auto s = w.status();
  EXPECT_EQ(s["connects"], 0);
  EXPECT_THAT(s["last_error"].get<std::string>(), HasSubstr("nosuchdriver:///x"));
  ASSERT_TRUE(s["next_retry_s"].is_number()) << s.dump();
  EXPECT_GT(s["next_retry_s"].get<double>(), 0.0);
  EXPECT_LE(s["next_retry_s"].get<double>(), 0.8);
  EXPECT_TRUE(r.listings.empty());
  EXPECT_TRUE(r.events.empty());
}

// A private session libvirtd (as nobody when we are root, so it never takes
// the system daemon's paths), serving the test driver over a socket in `dir`.
class SessionDaemon {
 public:
  static constexpr const char* kBinary = "/usr/sbin/libvirtd";
  explicit SessionDaemon(std::string dir) : dir_(std::move(dir)) {}
  ~SessionDaemon() { stop(); }
  std::string socket() const { return dir_ + "/run/libvirt/libvirt-sock"; }

  // Starts it and waits for its socket; false if it did not come up.
  bool start() {
    const passwd* nobody = getuid() == 0 ? getpwnam("nobody") : nullptr;
    if (nobody) chown(dir_.c_str(), nobody->pw_uid, nobody->pw_gid);
    pid_ = fork();
    if (pid_ == 0) {
      if (nobody && (setgid(nobody->pw_gid) != 0 || setuid(nobody->pw_uid) != 0)) _exit(126);
      const std::pair<const char*, const char*> env[] = {{"HOME", ""},
                                                         {"XDG_RUNTIME_DIR", "/run"},
                                                         {"XDG_CONFIG_HOME", "/config"},
                                                         {"XDG_CACHE_HOME", "/cache"},
                                                         {"XDG_DATA_HOME", "/data"}};
      for (const auto& [var, sub] : env) setenv(var, (dir_ + sub).c_str(), 1);
      const std::string log = dir_ + "/libvirtd.log";
      freopen(log.c_str(), "a", stderr);
      // --timeout: it goes away on its own should this test die.
      execl(kBinary, kBinary, "--timeout", "60", static_cast<char*>(nullptr));
      _exit(127);
    }
    const auto deadline = Clock::now() + std::chrono::seconds(15);
    while (Clock::now() < deadline) {
      if (access(socket().c_str(), F_OK) == 0) return true;
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) break;
      loop().run_once(20);
    }
    return false;
  }
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  std::string dir_;
  pid_t pid_ = -1;
};

TEST(LibvirtWatcher, ReconnectsAfterTheDaemonRestarts) {
  if (access(SessionDaemon::kBinary, X_OK) != 0) GTEST_SKIP() << "no libvirtd";
  loop();
  TempDir dir;
  SessionDaemon daemon(dir.path());
  ASSERT_TRUE(daemon.start()) << "libvirtd did not start; see its log in " << dir.path();
  const std::string uri = "test+unix:///default?socket=" + daemon.socket();
  Recorder r;
  LibvirtWatcher w(loop(), uri, r.callbacks());
  w.start();
  ASSERT_TRUE(w.connected()) << w.status().dump();
  ASSERT_EQ(r.listings.size(), 1u);
  EXPECT_NE(find(r.listings[0], "test"), nullptr);

  // Events over the daemon's socket: our epoll handle, libvirt's timers.
  virConnectPtr admin = virConnectOpen(uri.c_str());
  ASSERT_NE(admin, nullptr);
  virDomainPtr dom = virDomainDefineXML(admin, kVmXml);
  ASSERT_NE(dom, nullptr);
  virDomainFree(dom);
  ASSERT_TRUE(pump_until([&] { return r.of(kVmUuid).size() == 1; }, std::chrono::seconds(5)));
  EXPECT_EQ(r.events.back().kind, Kind::kDefined);
  EXPECT_THAT(r.events.back().xml, HasSubstr("vm1-port1.sock"));
  virConnectClose(admin);

  // The daemon goes away: the close callback, a teardown from the loop, retries.
  daemon.stop();
  ASSERT_TRUE(pump_until([&] { return !w.connected(); }, std::chrono::seconds(5)));
  pump_for(std::chrono::milliseconds(300));  // a few failed attempts against the dead socket
  auto s = w.status();
  EXPECT_FALSE(w.connected());
  EXPECT_TRUE(s["next_retry_s"].is_number()) << s.dump();
  EXPECT_NE(s["last_error"], "");

  // Back again: connected within the backoff, and a fresh listing (the new
  // daemon's test driver knows only its predefined domain).
  ASSERT_TRUE(daemon.start());
  ASSERT_TRUE(pump_until([&] { return w.connected(); }, std::chrono::seconds(10))) << s.dump();
  s = w.status();
  EXPECT_EQ(s["connects"], 2);
  ASSERT_EQ(r.listings.size(), 2u);
  EXPECT_NE(find(r.listings[1], "test"), nullptr);
  EXPECT_EQ(find(r.listings[1], "strait-vm1"), nullptr);
}

}  // namespace
}  // namespace strait::ctl
