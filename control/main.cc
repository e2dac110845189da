// straitd: the switch. `straitd [--config FILE] [-- EAL args]`.
// The main lcore runs the control thread; the configured worker lcores poll.
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <rte_eal.h>
#include <rte_errno.h>
#include <spdlog/spdlog.h>

#include "control/api/api_server.h"
#include "control/daemon/config.h"
#include "control/daemon/dpdk_log.h"
#include "control/daemon/event_loop.h"
#include "control/daemon/privileges.h"
#include "control/daemon/state_dir.h"
#include "control/devices/eal_interrupts.h"
#include "control/etcd/etcd_agent.h"
#include "control/lifecycle/libvirt_watcher.h"
#include "control/ops/metrics.h"
#include "control/ops/telemetry.h"
#include "control/switch/switch.h"
#include "vhost/vhost_port.h"

namespace {

using strait::ctl::Config;

bool has_lcore_arg(const std::vector<std::string>& eal) {
  return std::any_of(eal.begin(), eal.end(), [](const std::string& a) {
    return a == "-l" || a == "-c" || a.rfind("--lcores", 0) == 0 || a.rfind("-l", 0) == 0;
  });
}

// EAL needs the worker lcores; unless the operator placed lcores himself,
// run the control thread on the lowest CPU that is not a worker.
std::vector<std::string> eal_args(const char* argv0, const Config& cfg,
                                  std::vector<std::string> user) {
  std::vector<std::string> args{argv0};
  if (!has_lcore_arg(user)) {
    unsigned main_lcore = 0;
    while (std::count(cfg.worker_lcores.begin(), cfg.worker_lcores.end(), main_lcore)) main_lcore++;
    std::string list = std::to_string(main_lcore);
    for (unsigned w : cfg.worker_lcores) list += "," + std::to_string(w);
    args.insert(args.end(), {"-l", list, "--main-lcore", std::to_string(main_lcore)});
  }
  args.insert(args.end(), user.begin(), user.end());
  return args;
}

int run(const Config& cfg) {
  strait::ctl::EventLoop loop;
  auto sw = strait::ctl::Switch::create(cfg);
  if (!sw) {
    spdlog::error("{}", sw.error().message);
    // The config no longer fits the saved state: an operator's error, like a bad config.
    return sw.error().code == "failed_precondition" ? 2 : 1;
  }
  auto api = strait::ctl::ApiServer::listen(cfg.api_socket, &loop, sw->get());
  if (!api) {
    spdlog::error("{}", api.error().message);
    return 1;
  }
  // The switch forwards without its metrics: a port taken by something else
  // is logged, not fatal (docs/api.md, [metrics]).
  std::unique_ptr<strait::ctl::MetricsServer> metrics;
  if (cfg.metrics_enabled) {
    auto m = strait::ctl::MetricsServer::listen(cfg.metrics_address, cfg.metrics_port, &loop,
                                                sw->get());
    if (m) {
      metrics = std::move(*m);
    } else {
      spdlog::error("{}; running without the metrics endpoint", m.error().message);
    }
  }
  // Everything that needed root is open: become [privileges] user.
  if (auto st = strait::ctl::drop_privileges(cfg); !st) {
    spdlog::error("{}", st.error().message);
    return st.error().code == "failed_precondition" ? 2 : 1;
  }
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  int sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
  bool stop = false;
  loop.add(sfd, 0x001 /* EPOLLIN */, [&](unsigned) {
    signalfd_siginfo si;
    while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
      spdlog::info("signal {}: shutting down", si.ssi_signo);
      stop = true;
    }
  });
  // A vhost device coming or going wakes the loop at once.
  const int vhost_fd = strait::vhost::Backend::instance().notify_fd();
  loop.add(vhost_fd, 0x001 /* EPOLLIN */, [vhost_fd](unsigned) {
    uint64_t n;
    (void)!read(vhost_fd, &n, sizeof(n));
  });
  (*sw)->start_workers();
  // The instance lifecycle: libvirt runs on this loop; its listing
  // reconciles the restored state once workers forward (F2, F3).
  std::unique_ptr<strait::ctl::LibvirtWatcher> watcher;
  if (cfg.libvirt_enabled) {
    strait::ctl::Switch* s = sw->get();
    watcher = std::make_unique<strait::ctl::LibvirtWatcher>(
        loop, cfg.libvirt_uri,
        strait::ctl::LibvirtWatcher::Callbacks{
            [s](const strait::ctl::DomainEvent& ev) { s->lifecycle().on_domain_event(ev); },
            [s](const std::vector<strait::ctl::DomainState>& d) {
              s->lifecycle().on_domain_listing(d);
            }});
    s->lifecycle().set_watcher(watcher.get());
    watcher->start();
  }
  // Desired state from etcd (neutron's ML2 driver), when configured: the
  // one source of it on this host from now on.
  std::unique_ptr<strait::ctl::EtcdAgent> etcd;
  if (cfg.etcd) {
    strait::ctl::Switch* s = sw->get();
    s->set_desired_state_source("etcd (" + cfg.etcd->prefix + ", host " + cfg.etcd->host + ")");
    etcd = std::make_unique<strait::ctl::EtcdAgent>(*cfg.etcd, loop, *s,
                                                    strait::ctl::alive_json(cfg));
    s->set_status("etcd", [e = etcd.get()] { return e->status(); });
    etcd->start();
  }
  spdlog::info("straitd {} ready: {} worker(s), API on {}", STRAIT_VERSION,
               cfg.worker_lcores.size(), cfg.api_socket);
  while (!stop) {
    loop.run_once((*sw)->busy() ? 1 : 10);
    (*sw)->poll();
    strait::ctl::telemetry_tick(**sw);
  }
  if (etcd) {  // the lease is revoked: neutron sees this host gone at once
    (*sw)->set_status("", nullptr);
    etcd.reset();
  }
  if (watcher) {
    (*sw)->lifecycle().set_watcher(nullptr);
    watcher.reset();
  }
  strait::ctl::telemetry_shutdown();
  (*sw)->shut_down_ports();  // port-down events while the API still carries them
  metrics.reset();
  api->reset();  // no more requests; removes the socket
  sw->reset();   // closes every device
  close(sfd);
  spdlog::info("straitd stopped");
  return 0;
}

// The kernel grows a process's descriptor table by doubling it, and once the
// process has threads every growth waits for an RCU grace period (several
// ms here). A thousand ports bound at once would pay five of them, a third
// of the whole bind. Growing it now, before EAL starts any thread, is free.
void reserve_fd_table(rlim_t limit) {
  constexpr rlim_t kReserve = 8192;  // ~1000 vhost ports: sockets, eventfds, memory fds
  const int top = static_cast<int>(std::min(limit, kReserve)) - 1;
  if (top <= 2) return;
  // F_DUPFD takes the lowest free descriptor from `top` up: unlike dup2 it
  // never closes one the process inherited there.
  const int fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, top);
  if (fd >= 0) close(fd);
}

// Why rte_eal_init failed. A --file-prefix another DPDK process uses fails
// without rte_errno (it read "Success"): EAL could not take the write lock
// on the prefix's runtime config file. F_GETLK names the holder; a lock of
// this process's own is never reported, so another failure is not taken
// for this one.
std::string eal_failure_reason(int err) {
  const std::string runtime_dir = rte_eal_get_runtime_dir();
  const int fd = runtime_dir.empty()
                     ? -1
                     : open((runtime_dir + "/config").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    struct flock holder {};
    holder.l_type = F_WRLCK;
    holder.l_whence = SEEK_SET;  // l_start 0, l_len 0: the whole file
    const bool held = fcntl(fd, F_GETLK, &holder) == 0 && holder.l_type != F_UNLCK;
    close(fd);
    if (held)
      return "file prefix " + std::filesystem::path(runtime_dir).filename().string() +
             " is in use by another DPDK process (pid " + std::to_string(holder.l_pid) + ")";
  }
  return err ? rte_strerror(err) : "see DPDK's messages above";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> own, eal;
  bool after_dashes = false;
  for (int i = 1; i < argc; i++) {
    if (!after_dashes && std::string(argv[i]) == "--") {
      after_dashes = true;
      continue;
    }
    (after_dashes ? eal : own).push_back(argv[i]);
  }
  CLI::App app{"straitd: userspace virtual switch (DPDK).\n"
               "Usage: straitd [--config FILE] [-- EAL arguments]"};
  std::string config_path;
  app.add_option("-c,--config", config_path, "configuration file (TOML)")->check(CLI::ExistingFile);
  app.set_version_flag("--version", std::string("straitd ") + STRAIT_VERSION);
  std::reverse(own.begin(), own.end());  // CLI11 takes them in reverse order
  try {
    app.parse(own);
  } catch (const CLI::ParseError& e) {
    // --help/--version exit 0; every usage error exits 2, like a bad config.
    return app.exit(e) == 0 ? 0 : 2;
  }
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");

  Config cfg;
  if (!config_path.empty()) {
    auto c = strait::ctl::load_config(config_path);
    if (!c) {
      fprintf(stderr, "straitd: %s\n", c.error().message.c_str());
      return 2;
    }
    cfg = *c;
  }
  // Without lcore arguments of the operator's, worker lcore N is CPU N: say
  // so here rather than let EAL print its usage text.
  if (!has_lcore_arg(eal)) {
    const long n_cpus = sysconf(_SC_NPROCESSORS_CONF);
    for (size_t i = 0; i < cfg.worker_lcores.size(); i++) {
      if (cfg.worker_lcores[i] >= n_cpus) {
        fprintf(stderr, "straitd: config %s: datapath.workers[%zu]: lcore %u is not a CPU of this host (0..%ld)\n",
                config_path.empty() ? "(defaults)" : config_path.c_str(), i, cfg.worker_lcores[i], n_cpus - 1);
        return 2;
      }
    }
  }
  // One straitd per state directory, held until exit: taken before EAL
  // starts (a second straitd leaves no trace) and before the database opens.
  auto state_lock = strait::ctl::StateDirLock::take(cfg.state_dir);
  if (!state_lock) {
    fprintf(stderr, "straitd: %s\n", state_lock.error().message.c_str());
    return state_lock.error().code == "conflict" ? 1 : 2;
  }

  // Signals go to the control loop's signalfd; block them before EAL starts
  // its threads so every thread inherits the mask.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  // A peer closing a socket (API client, vhost-user peer) must never kill us.
  signal(SIGPIPE, SIG_IGN);
  // Every vhost-user port holds a socket (and its guest's memory fds): a
  // thousand ports outgrow the default soft limit of 1024 descriptors.
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  reserve_fd_table(nofile.rlim_cur);
  // rte_acl_build takes its scratch memory in 8 MiB callocs. With glibc's
  // sliding mmap threshold the second and later ones come from the heap and
  // are zeroed whole, page faults included: about 1 ms a build, four builds a
  // group set. Above a fixed threshold they are fresh mappings, already zero
  // (their unmapping costs each worker one TLB-shootdown interrupt, a few us,
  // per build). Fixing it stops the sliding of the trim threshold too: set it
  // as glibc would have, twice the mmap threshold.
  mallopt(M_MMAP_THRESHOLD, 4 << 20);
  mallopt(M_TRIM_THRESHOLD, 8 << 20);
  // Before EAL starts a thread, so that every thread has it.
  strait::ctl::forbid_new_privileges();

  if (!strait::ctl::route_dpdk_log())
    spdlog::warn("DPDK's log lines keep EAL's default stream (stderr and syslog)");
  std::vector<std::string> args = eal_args(argv[0], cfg, eal);
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  if (rte_eal_init(static_cast<int>(cargs.size()), cargs.data()) < 0) {
    fprintf(stderr, "straitd: DPDK EAL initialisation failed: %s\n",
            eal_failure_reason(rte_errno).c_str());
    return 1;
  }
  // dpdk-telemetry.py's /strait/* commands and dpdk-dumpcap (control/ops/telemetry.h).
  if (auto st = strait::ctl::telemetry_init(); !st) {
    fprintf(stderr, "straitd: %s\n", st.error().message.c_str());
    return 1;
  }
  int rc = run(cfg);
  strait::ctl::park_interrupt_thread();  // every device is closed (run)
  rte_eal_cleanup();
  return rc;
}
