#include "control/switch/switch.h"

#include <algorithm>
#include <set>

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>
#include <rte_vhost.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <ctime>

#include "control/model/recorded_config.h"
#include "vhost/vhost_port.h"

namespace strait::ctl {
namespace {

constexpr size_t kMaxLearnedPerNetwork = 1024;
constexpr unsigned kMinMbufs = 8192;

}  // namespace

Switch::Switch(const Config& cfg)
    : cfg_(cfg),
      model_(cfg.physnets),
      publisher_(&shared_),
      ports_(dp::kMaxPorts, static_cast<uint16_t>(cfg.worker_lcores.size())),
      rebalancer_(workers_, ports_, cfg.rebalance_interval_s, cfg.rebalance_improvement_pct,
                  [this](std::function<void()> then) {
                    republish();
                    publisher_.after_grace(std::move(then));
                  }),
      learned_(dp::kMaxLearned, kMaxLearnedPerNetwork),
      offload_(cfg.offload_rte_flow),
      groups_(*this),
      tunnels_(cfg.vtep, *this, ports_, learned_, workers_),
      lifecycle_(cfg.vhost_socket_dir, *this, ports_,
                 {.replug = [this](const std::string& id, PortRuntime& p) { return replug(id, p); },
                  .unplug = [this](const std::string& id, PortRuntime& p) { unplug(id, p); },
                  .take_down = [this](const std::string& id, PortRuntime& p) { take_down(id, p); }}) {
  model_.set_vlan_ranges(cfg.vlan_ranges);
  if (cfg.vtep) model_.set_vxlan({true, cfg.vtep->local_ip, cfg.vtep->underlay_mtu});
}

Result<std::unique_ptr<Switch>> Switch::create(const Config& cfg) {
  std::unique_ptr<Switch> sw(new Switch(cfg));
  const auto n_workers = static_cast<uint16_t>(cfg.worker_lcores.size());
  if (n_workers == 0 || n_workers > dp::kMaxWorkers)
    return invalid("datapath.workers: between 1 and " + std::to_string(dp::kMaxWorkers));
  for (unsigned lc : cfg.worker_lcores) {
    if (!rte_lcore_is_enabled(lc) || lc == rte_get_main_lcore())
      return invalid("datapath.workers: lcore " + std::to_string(lc) +
                     " is not an EAL worker lcore (give it to EAL with -l/--lcores, "
                     "and keep it off the main lcore)");
  }
  // The shared pool: frames from vhost ports (the guest's buffers are
  // copied into it), flood copies, VXLAN headers, ARP. They may wait in the
  // physnet NICs' tx rings (a ring per worker each) and in every worker's
  // bursts and tx buffers. Ethdev ports fill their rx rings from pools of
  // their own, sized from their queues (open_ethdev): nothing here grows
  // with the ports bound.
  const unsigned n_mbufs = std::max<unsigned>(
      kMinMbufs, (4096u + 1024u * unsigned(cfg.physnets.size())) * n_workers);
  sw->pool_ = rte_pktmbuf_pool_create("strait_mbufs", n_mbufs, 256, 0,
                                      RTE_MBUF_DEFAULT_BUF_SIZE, rte_socket_id());
  if (!sw->pool_)
    return Error{"resource_exhausted", "mbuf pool of " + std::to_string(n_mbufs) +
                                           " buffers: " + rte_strerror(rte_errno) +
                                           " (give EAL more memory: -m)"};
  spdlog::info("mbuf pool: {} buffers of {} bytes", n_mbufs, RTE_MBUF_DEFAULT_BUF_SIZE);
  const size_t qsz = rte_rcu_qsbr_get_memsize(n_workers);
  sw->shared_.qsbr = static_cast<rte_rcu_qsbr*>(rte_zmalloc("strait_qsbr", qsz, RTE_CACHE_LINE_SIZE));
  if (!sw->shared_.qsbr || rte_rcu_qsbr_init(sw->shared_.qsbr, n_workers) != 0)
    return Error{"internal", "rte_rcu_qsbr init failed"};
  sw->shared_.pool = sw->pool_;
  dp::CtConfig ctc;
  ctc.capacity = cfg.ct_capacity;
  ctc.n_workers = n_workers;
  ctc.tcp_loose = cfg.ct_tcp_loose;
  sw->ct_ = std::make_unique<ConntrackUpkeep>(ctc, sw->publisher_);
  sw->shared_.ct = &sw->ct_->table();
  spdlog::info("conntrack: {} entries", ctc.capacity);
  for (uint16_t w = 0; w < n_workers; w++)
    sw->workers_.push_back(std::make_unique<dp::Worker>(
        w, cfg.worker_lcores[w], &sw->shared_, cfg.flow_cache_entries, cfg.idle_sleep_us));
  vhost::set_control_thread();
  vhost::Backend::instance().notify_fd();
  sw->start_tsc_ = rte_rdtsc();
  // Where etcd drives, what a power loss takes from the store comes back from it.
  auto store = Store::open(cfg.state_dir, cfg.etcd ? Store::Durability::kEtcdReplays
                                                   : Store::Durability::kEveryCommit);
  if (!store) return store.error();
  sw->store_ = std::move(*store);
  auto saved = sw->store_->load();
  if (!saved) return saved.error();
  // Before any device opens: a saved network the config no longer maps
  // would forward on no wire, or a wrong one.
  auto changes = check_config_against_record(cfg, saved->networks, saved->config,
                                             sw->store_->path());
  if (!changes) return changes.error();
  for (const std::string& w : *changes) spdlog::warn("{}", w);
  if (Status st = sw->open_physnets(); !st) return st.error();
  if (Status st = sw->restore(*saved); !st) return st.error();
  // What is in force from now on, recorded before the first snapshot enables a port.
  sw->recorded_ = record_of(cfg, std::time(nullptr));
  if (Status st = sw->store_->record_config(sw->recorded_); !st) return st.error();
  sw->republish();  // one snapshot with everything, before any worker runs
  // Leftovers of ports that no longer exist go once the new state is live (F3).
  sw->publisher_.after_grace([s = sw.get()] { s->lifecycle_.clean_socket_dir(); });
  return sw;
}

Status Switch::restore(const Store::Saved& saved) {
  if (Status st = model_.restore_security_groups(saved.security_groups); !st)
    return Error{st.error().code, store_->path() + ": " + st.error().message};
  for (const NetworkSpec& n : saved.networks)
    if (Status st = model_.add_network(n); !st)
      return Error{st.error().code, store_->path() + ": network " + n.id + ": " + st.error().message};
  for (const auto& [net, t] : saved.tunnels)
    if (Status st = model_.restore_tunnel(net, t); !st)
      return Error{st.error().code, store_->path() + ": tunnel of network " + net + ": " +
                                        st.error().message};
  // A trunk's subports after every parent (model: a subport's parent is bound).
  auto rows = saved.ports;
  std::stable_partition(rows.begin(), rows.end(), [](const auto& row) {
    return row.first.attach.kind != Attachment::Kind::kSubport;
  });
  for (const auto& [spec, lvlan] : rows) {
    if (Status st = model_.restore_port(spec, lvlan); !st)
      return Error{st.error().code, store_->path() + ": port " + spec.id + ": " + st.error().message};
    auto idx = ports_.alloc_index();
    if (!idx) return exhausted("restoring port " + spec.id + ": no free datapath port index");
    auto rt = attach(spec, *idx);
    if (!rt) {
      spdlog::error("port {}: {} (bound, down until re-bound)", spec.id, rt.error().message);
      PortRuntime down;
      down.dp.dp = *idx;
      ports_.add(spec.id, std::move(down));
      continue;
    }
    ports_.add(spec.id, std::move(*rt));
    if (device_live(spec.id)) announce_up_when_live(spec.id);
  }
  // Every port's rules are compiled before the first snapshot enables any
  // port (F1, F11).
  auto sets = groups_.prepare(model_);
  if (!sets) return Error{sets.error().code, store_->path() + ": " + sets.error().message};
  groups_.commit(std::move(*sets));
  spdlog::info("restored {} security group(s), {} network(s), {} port(s) from {}",
               saved.security_groups.size(), saved.networks.size(), saved.ports.size(),
               store_->path());
  return ok();
}

Result<PortRuntime> Switch::attach(const PortSpec& spec, uint16_t idx) {
  PortRuntime rt;
  rt.base = port_counter_sums(idx);
  if (spec.attach.kind == Attachment::Kind::kSubport) {
    rt.dp.dp = idx;  // no device: its frames travel on its parent's (snapshot_builder)
    return rt;
  }
  if (spec.attach.kind == Attachment::Kind::kVhost) {
    // Bound now; forwards once its guest driver is ready (drain_vhost_events).
    const auto mode = spec.attach.mode == Attachment::Mode::kServer ? vhost::Mode::kServer
                                                                     : vhost::Mode::kClient;
    const vhost::SocketOptions opts{cfg_.vhost_socket_dir, cfg_.vhost_socket_mode,
                                    cfg_.vhost_socket_owner, cfg_.vhost_socket_group};
    if (Status st = vhost::Backend::instance().add_socket(spec.attach.path, mode, opts); !st)
      return st.error();
    rt.dp = DpPort{idx, 0, {}, 1, false, dp::PortKind::kVhost, -1};
    rt.vhost_path = spec.attach.path;
  } else {
    auto dev = open_ethdev(spec.attach.devargs, static_cast<uint16_t>(workers_.size()));
    if (!dev) return dev.error();
    rt.dp = DpPort{idx, dev->port_id, ports_.assign_rx_queues(dev->n_rxq), dev->n_txq, true};
    rt.dev = *dev;
  }
  rt.has_device = true;
  return rt;
}

// Only once no worker can reach the device (after a grace period, or with
// the workers stopped).
void Switch::detach(const PortRuntime& rt) {
  if (rt.capture) close_capture_dev(*rt.capture);
  if (!rt.has_device) return;
  if (rt.dp.kind == dp::PortKind::kVhost) {
    vhost::Backend::instance().remove_socket(rt.vhost_path);
  } else {
    close_and_retire(rt.dev);
  }
}

// The device goes now; its pool once every buffer is back (free_retired_pools).
void Switch::close_and_retire(const Ethdev& dev) {
  close_ethdev(dev);
  retired_pools_.push_back(dev.pool);
}

// Pools of closed ports go once every buffer is back (frames of theirs may
// have waited in other ports' tx rings).
void Switch::free_retired_pools() {
  std::erase_if(retired_pools_, [](rte_mempool* p) {
    if (p && !rte_mempool_full(p)) return false;
    rte_mempool_free(p);
    return true;
  });
}

Switch::~Switch() {
  stop_workers();
  // No worker runs: vhost devices can go at once (remove_socket releases any
  // destroy_device waiting for us). Every ethdev closes, its interrupt
  // callbacks with it, before the pools it used go (below): on the interrupt
  // thread, so that no callback of its can still be running then.
  for (auto& [id, p] : ports_.ports()) detach(p);
  offload_.clear();
  for (const auto& [name, u] : ports_.uplinks()) close_and_retire(u.dev);
  ports_.clear();
  publisher_.poll();  // workers stopped: run what waited for a grace period
  rte_free(shared_.qsbr);
  // Every device is closed and no worker runs: whatever buffers are still
  // out are nobody's any more.
  for (rte_mempool* p : retired_pools_) rte_mempool_free(p);
  rte_mempool_free(pool_);
}

Status Switch::open_physnets() {
  for (const auto& [name, devargs] : cfg_.physnets) {
    auto dev = open_ethdev(devargs, static_cast<uint16_t>(workers_.size()));
    if (!dev) return Error{"device_error", "physnets." + name + ".device: " + dev.error().message};
    if (Status st = ports_.add_uplink(name, *dev); !st) {
      close_and_retire(*dev);
      return st;
    }
    offload_.add_port(name, dev->port_id, dev->n_rxq);
  }
  return ok();
}

void Switch::start_workers() {
  if (running_) return;
  shared_.stop.store(false, std::memory_order_relaxed);
  for (auto& w : workers_) rte_eal_remote_launch(&dp::Worker::lcore_main, w.get(), w->lcore());
  running_ = true;
}

void Switch::stop_workers() {
  if (!running_) return;
  shared_.stop.store(true, std::memory_order_relaxed);
  for (auto& w : workers_) rte_eal_wait_lcore(w->lcore());
  running_ = false;
  publisher_.poll();  // no worker is online: every grace period is over
}

Status Switch::apply(const Change& c) {
  Model next = model_;
  if (Status st = c.model(next); !st) return st;
  auto sets = groups_.prepare(next);  // the classifiers the new model needs, built aside
  if (!sets) return sets.error();
  if (c.open) {
    if (Status st = c.open(next); !st) {
      if (c.close) c.close();
      return st;
    }
  }
  if (Status st = c.save(next); !st) {
    if (c.close) c.close();
    return st;
  }
  // Nothing below refuses.
  model_ = std::move(next);
  groups_.commit(std::move(*sets));
  if (c.commit) c.commit();
  republish();
  return ok();
}

void Switch::republish() {
  // Learned MACs first: those of a VLAN released now go before the VLAN
  // can mean another network.
  publish_learned();
  BuildInput in;
  in.model = &model_;
  in.n_workers = static_cast<uint16_t>(workers_.size());
  ports_.fill(in);
  in.classifiers = groups_.classifiers();
  in.vtep = tunnels_.sync(learned_.entries());
  in.tsc_hz = rte_get_tsc_hz();
  publisher_.publish(build_snapshot(in));
  // The NIC may drop a VLAN only once no snapshot maps it; a VLAN mapped now
  // gets its allow rule right away (frames the NIC dropped meanwhile were
  // unknown_vlan drops anyway).
  offload_.sync_all(model_);
}

void Switch::publish_learned() {
  if (!learned_.changed()) return;
  publisher_.publish_learned(build_learned_fdb(learned_.entries()), learned_.take_changes());
}

void Switch::poll() {
  shared_.now_sec.store(static_cast<uint32_t>((rte_rdtsc() - start_tsc_) / rte_get_tsc_hz()),
                        std::memory_order_relaxed);
  publisher_.poll();
  drain_vhost_events();
  drain_learn_events();
  tunnels_.poll();
  age_learned();
  poll_cache_dumps();
  ct_->poll();
  rebalancer_.poll(shared_.now_sec.load(std::memory_order_relaxed));
  free_retired_pools();
}

// A guest driver came or went. The port forwards only when its device is
// ready AND the snapshot that says so is live; destroy_device is held until
// no worker can touch the guest's memory (F14, F15).
void Switch::drain_vhost_events() {
  vhost::Event ev;
  while (vhost::Backend::instance().pop(&ev)) {
    std::string id;
    if (ev.kind == vhost::EventKind::kNewDevice) {
      PortRuntime* p = ports_.by_vhost_path(ev.path, &id);
      if (!p) {
        spdlog::warn("vhost {}: device {} on a socket no port is bound to", ev.path, ev.vid);
        continue;
      }
      if (!p->has_device) {  // its socket is being removed: the device goes with it
        spdlog::info("port {}: vhost device {} on a socket being detached, ignored", id, ev.vid);
        continue;
      }
      const uint16_t nq = std::clamp<uint16_t>(rte_vhost_get_vring_num(ev.vid) / 2, 1,
                                               dp::kMaxVhostQueues);
      ports_.vhost_ready(*p, ev.vid, nq);
      spdlog::info("port {}: vhost device {} ready, {} queue pair(s)", id, ev.vid, nq);
      republish();
      announce_up_when_live(id);
    } else if (ev.kind == vhost::EventKind::kDestroyDevice) {
      PortRuntime* p = ports_.by_vid(ev.vid, &id);
      if (!p) {
        vhost::Backend::instance().complete(ev.vid);
        continue;
      }
      const bool was_live = p->dp.live;  // not after a STOPPED took it down
      ports_.vhost_gone(*p);
      p->announced = false;
      spdlog::info("port {}: vhost device {} gone", id, ev.vid);
      republish();
      const int vid = ev.vid;
      publisher_.after_grace([this, vid, id, was_live] {
        vhost::Backend::instance().complete(vid);
        if (was_live) emit("port-down", id);
      });
    }
  }
}

// Registers the port's vhost socket again if an interface detach removed it.
bool Switch::replug(const std::string& id, PortRuntime& p) {
  if (p.has_device || p.dp.kind != dp::PortKind::kVhost) return true;
  const PortSpec* spec = model_.port(id);
  if (!spec) return true;
  auto rt = attach(*spec, p.dp.dp);
  if (!rt) {
    spdlog::error("port {}: re-attaching its socket: {}", id, rt.error().message);
    return false;
  }
  p.vhost_path = rt->vhost_path;
  p.has_device = true;
  spdlog::info("port {}: socket {} attached again", id, p.vhost_path);
  return true;
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
  // The instance is gone or stopped: so are its connections, and those of
  // its trunk's subports (the bindings and rules stay for its next start).
  auto flush = [&](const std::string& port) {
    if (const PortSpec* spec = model_.port(port))
      ct_->flush_port_after_grace(*spec, model_.local_vlan(spec->network));
  };
  flush(id);
  for (const auto& [vid, sub] : model_.subports_of(id)) flush(sub);
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

bool Switch::device_live(const std::string& id) const {
  const PortSpec* spec = model_.port(id);
  const bool sub = spec && spec->attach.kind == Attachment::Kind::kSubport;
  const PortRuntime* d = ports_.find(sub ? spec->attach.parent : id);
  return d && d->dp.live;
}

void Switch::announce_up_when_live(const std::string& id) {
  publisher_.after_grace([this, id] {
    PortRuntime* p = ports_.find(id);
    if (!p || !device_live(id)) return;  // gone again meanwhile
    p->announced = true;
    emit("port-up", id);
    emit("vif-plugged", id);
  });
}

void Switch::emit(const char* event, const std::string& port_id) {
  using namespace std::chrono;
  const double ts = duration<double>(system_clock::now().time_since_epoch()).count();
  nlohmann::json ev = {{"event", event}, {"port", port_id}, {"ts", ts}};
  spdlog::info("event {} port {}", event, port_id);
  events_.publish(std::move(ev));
  // A trunk's subports come and go with their parent's device.
  const std::string_view e(event);
  if (e != "port-up" && e != "vif-plugged" && e != "port-down") return;
  for (const auto& [vid, sub] : model_.subports_of(port_id)) {
    if (PortRuntime* sp = ports_.find(sub)) sp->announced = e != "port-down";
    emit(event, sub);
  }
}

void Switch::drain_learn_events() {
  bool changed = false, behind_vtep = false;
  const dp::Snapshot* s = publisher_.current();
  const uint32_t now = shared_.now_sec.load(std::memory_order_relaxed);
  for (auto& w : workers_) {
    dp::LearnEvent ev;
    while (w->learn_queue().pop(ev)) {
      Mac mac;
      std::copy(std::begin(ev.mac), std::end(ev.mac), mac.begin());
      if (s->fdb.find(ev.lvlan, ev.mac)) continue;  // a bound port's or a remote one
      if (!learned_.learn(ev.lvlan, mac, ev.port, now)) continue;  // known, or no room
      changed = true;
      behind_vtep |= dp::is_vtep_port(ev.port);
    }
  }
  // A MAC behind a remote VTEP keeps that VTEP in the snapshot
  // (Tunnels::sync); any other needs only the learned FDB.
  if (behind_vtep)
    republish();
  else if (changed)
    publish_learned();
}

void Switch::forget_learned_of_released_vlans() {
  std::set<uint16_t> live;
  for (const auto& [id, n] : model_.networks())
    if (uint16_t v = model_.local_vlan(id)) live.insert(v);
  learned_.keep_vlans(live);
}

void Switch::age_learned() {
  const uint32_t now = shared_.now_sec.load(std::memory_order_relaxed);
  if (now == last_age_sec_) return;
  last_age_sec_ = now;
  const bool changed = learned_.age(now, cfg_.mac_aging_s, [&](uint16_t slot) {
    uint32_t seen = 0;
    for (auto& w : workers_) seen = std::max(seen, w->learn_seen(slot));
    return seen;
  });
  if (changed) publish_learned();
}

std::vector<uint64_t> Switch::port_counter_sums(uint16_t dp) const {
  std::vector<uint64_t> v(4 + dp::kNumDropReasons, 0);
  for (const auto& w : workers_) {
    const dp::PortCounters& c = w->stats().ports[dp];
    v[0] += dp::read(c.rx_packets);
    v[1] += dp::read(c.rx_bytes);
    v[2] += dp::read(c.tx_packets);
    v[3] += dp::read(c.tx_bytes);
    for (unsigned r = 0; r < dp::kNumDropReasons; r++) v[4 + r] += dp::read(c.drops[r]);
  }
  return v;
}

}  // namespace strait::ctl
