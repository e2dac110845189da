#include "control/etcd/etcd_agent.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include "control/daemon/event_loop.h"
#include "control/switch/switch.h"

namespace strait::ctl {

using nlohmann::json;
using namespace std::chrono_literals;

EtcdKeys::EtcdKeys(const std::string& prefix, const std::string& host)
    : ports(prefix + "/nodes/" + host + "/ports/"),
      groups(prefix + "/global/secgroups/"),
      members(prefix + "/global/remote_group/"),
      alive(prefix + "/states/" + host + "/alive"),
      states(prefix + "/states/" + host + "/") {}

json alive_json(const Config& cfg) {
  json physnets = json::array();
  for (const auto& [name, dev] : cfg.physnets) physnets.push_back(name);
  json j = {{"host", cfg.etcd ? cfg.etcd->host : ""}, {"physnets", physnets},
            {"vhost_socket_dir", cfg.vhost_socket_dir}, {"version", STRAIT_VERSION},
            {"pid", getpid()}, {"network_types", json::array({"flat", "vlan"})}};
  json ranges = json::object();  // physnets that carry only some VLANs
  for (const auto& [name, rs] : cfg.vlan_ranges) {
    ranges[name] = json::array();
    for (const VlanRange& r : rs) ranges[name].push_back({r.min, r.max});
  }
  j["vlan_ranges"] = ranges;
  if (cfg.vtep) {
    j["vtep"] = ip_to_string(cfg.vtep->local_ip);
    j["network_types"].push_back("vxlan");
  }
  return j;
}

EtcdAgent::EtcdAgent(const EtcdSettings& s, EventLoop& loop, Switch& sw, json alive)
    : cfg_(s),
      keys_(s.prefix, s.host),
      loop_(loop),
      sw_(sw),
      intake_(sw, [this](const std::string& id, const json* st) { write_state(id, st); }),
      alive_value_(alive.dump()) {
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

EtcdAgent::~EtcdAgent() {
  if (events_token_) sw_.events().unsubscribe(events_token_);
  stop_.store(true);
  cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  if (writer_.joinable()) writer_.join();
  if (wake_fd_ >= 0) {
    loop_.remove(wake_fd_);
    close(wake_fd_);
  }
}

void EtcdAgent::start() {
  loop_.add(wake_fd_, 0x001 /* EPOLLIN */, [this](unsigned) {
    uint64_t n;
    (void)!read(wake_fd_, &n, sizeof n);
    on_inbound();
  });
  events_token_ = sw_.events().subscribe([this](const json& ev) { intake_.on_event(ev); });
  watcher_ = std::thread([this] { watcher_main(); });
  writer_ = std::thread([this] { writer_main(); });
  spdlog::info("etcd: host {}, prefix {}, endpoints {}", cfg_.host, cfg_.prefix,
               json(cfg_.endpoints).dump());
}

void EtcdAgent::sleep_for(std::chrono::milliseconds d) {
  std::unique_lock lk(mu_);
  cv_.wait_for(lk, d, [&] { return stop_.load(); });
}

void EtcdAgent::set_error(const std::string& who, const std::string& error) {
  std::lock_guard lk(mu_);
  if (last_error_ != error) spdlog::warn("etcd {}: {}", who, error);
  last_error_ = error;
}

void EtcdAgent::post(Inbound in) {
  {
    std::lock_guard lk(mu_);
    inbox_.push_back(std::move(in));
  }
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
}

void EtcdAgent::watcher_main() {
  EtcdClient etcd(cfg_.endpoints);
  auto backoff = 100ms;
  while (!stop_.load()) {
    // Everything, then every change after it.
    auto ports = etcd.range_prefix(keys_.ports);
    auto groups = ports ? etcd.range_prefix(keys_.groups) : Result<EtcdClient::Range>(ports.error());
    auto members = groups ? etcd.range_prefix(keys_.members) : Result<EtcdClient::Range>(groups.error());
    if (!members) {
      set_error("watch", members.error().message);
      {
        std::lock_guard lk(mu_);
        watching_ = false;
      }
      sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
      continue;
    }
    backoff = 100ms;
    // The earliest of the reads: a watch from there misses nothing that
    // happened between them (and what it hands again is applied idempotently).
    const int64_t rev = std::min({ports->revision, groups->revision, members->revision});
    Inbound all;
    all.resync = true;
    all.ports = std::move(ports->kvs);
    all.groups = std::move(groups->kvs);
    all.members = std::move(members->kvs);
    all.revision = rev;
    post(std::move(all));
    {
      std::lock_guard lk(mu_);
      watching_ = true;
      revision_ = rev;
      full_reads_++;
    }
    Status st = etcd.watch(
        {keys_.ports, keys_.groups, keys_.members}, rev + 1,
        [&](const std::vector<WatchEvent>& events, int64_t revision) {
          Inbound in;
          in.events = events;
          in.revision = revision;
          post(std::move(in));
          std::lock_guard lk(mu_);
          revision_ = std::max(revision_, revision);
        },
        stop_);
    {
      std::lock_guard lk(mu_);
      watching_ = false;
    }
    if (!st && !stop_.load()) {
      set_error("watch", st.error().message);
      sleep_for(st.error().code == "compacted" ? 0ms : backoff);
    }
  }
}

void EtcdAgent::on_inbound() {
  std::vector<Inbound> inbox;
  {
    std::lock_guard lk(mu_);
    inbox.swap(inbox_);
  }
  // The rest of `key` after `prefix` when it is `parts` non-empty segments
  // ("ID", or "GROUP_ID/PORT_ID"), else "".
  auto rest_of = [](const std::string& key, const std::string& prefix, int parts) -> std::string {
    if (key.size() <= prefix.size() || key.compare(0, prefix.size(), prefix) != 0) return "";
    std::string rest = key.substr(prefix.size());
    size_t from = 0;
    for (int i = 1; i < parts; i++) {
      const size_t slash = rest.find('/', from);
      if (slash == std::string::npos || slash == from) return "";
      from = slash + 1;
    }
    return from < rest.size() && rest.find('/', from) == std::string::npos ? rest : "";
  };
  auto id_of = [&](const std::string& key, const std::string& prefix) { return rest_of(key, prefix, 1); };
  auto member_of = [&](const std::string& key) { return rest_of(key, keys_.members, 2); };
  for (Inbound& in : inbox) {
    if (in.resync) {
      std::map<std::string, EtcdIntake::Doc> ports, groups, members;
      for (KeyValue& kv : in.ports)
        if (std::string id = id_of(kv.key, keys_.ports); !id.empty())
          ports[id] = {std::move(kv.value), kv.mod_revision};
      for (KeyValue& kv : in.groups)
        if (std::string id = id_of(kv.key, keys_.groups); !id.empty())
          groups[id] = {std::move(kv.value), kv.mod_revision};
      for (KeyValue& kv : in.members)
        if (std::string key = member_of(kv.key); !key.empty())
          members[key] = {std::move(kv.value), kv.mod_revision};
      intake_.resync(std::move(ports), std::move(groups), std::move(members));
      std::lock_guard lk(mu_);
      reported_ = true;
      cv_.notify_all();
      continue;
    }
    for (WatchEvent& e : in.events) {
      if (std::string id = id_of(e.kv.key, keys_.ports); !id.empty()) {
        if (e.put) {
          intake_.put_port(id, {std::move(e.kv.value), e.kv.mod_revision});
        } else {
          intake_.delete_port(id);
        }
      } else if (std::string gid = id_of(e.kv.key, keys_.groups); !gid.empty()) {
        if (e.put) {
          intake_.put_group(gid, {std::move(e.kv.value), e.kv.mod_revision});
        } else {
          intake_.delete_group(gid);
        }
      } else if (std::string key = member_of(e.kv.key); !key.empty()) {
        if (e.put) {
          intake_.put_member(key, {std::move(e.kv.value), e.kv.mod_revision});
        } else {
          intake_.delete_member(key);
        }
      }
    }
  }
}

void EtcdAgent::write_state(const std::string& rel, const json* state) {
  const std::string key = keys_.states + rel;
  std::lock_guard lk(mu_);
  if (state) {
    // Never throws: a reason may quote what a document held.
    std::string v = state->dump(-1, ' ', false, json::error_handler_t::replace);
    written_[key] = v;
    outbox_[key] = std::move(v);
  } else {
    written_.erase(key);
    outbox_[key] = std::nullopt;
  }
  cv_.notify_all();
}

void EtcdAgent::writer_main() {
  EtcdClient etcd(cfg_.endpoints);
  const auto keepalive_every = std::chrono::milliseconds(cfg_.lease_ttl_s * 1000 / 3);
  auto next_keepalive = std::chrono::steady_clock::now();
  int64_t lease = 0;
  bool fresh = true;  // (re)connected: everything is written again
  while (!stop_.load()) {
    if (!lease) {
      auto l = etcd.lease_grant(cfg_.lease_ttl_s);
      Status st = l ? etcd.put(keys_.alive, alive_value_, *l) : Status(l.error());
      if (!st) {
        set_error("liveness", st.error().message);
        sleep_for(500ms);
        continue;
      }
      lease = *l;
      fresh = true;
      next_keepalive = std::chrono::steady_clock::now() + keepalive_every;
      std::lock_guard lk(mu_);
      lease_ = lease;
      alive_ = true;
      spdlog::info("etcd: {} is alive (lease {:x}, ttl {} s)", keys_.alive, lease, cfg_.lease_ttl_s);
    }
    bool complete;
    {
      std::lock_guard lk(mu_);
      complete = reported_;
    }
    if (fresh && complete) {
      // Ours is what the intake reported, and nothing else: once it has
      // reported on everything it holds (after its first resync), state keys
      // of ports this host no longer has go.
      auto have = etcd.range_prefix(keys_.states);
      if (!have) {
        set_error("states", have.error().message);
        sleep_for(500ms);
        continue;
      }
      std::lock_guard lk(mu_);
      for (const auto& [k, v] : written_) outbox_.try_emplace(k, v);
      for (const KeyValue& kv : have->kvs)
        if (kv.key != keys_.alive && !written_.count(kv.key))
          outbox_.try_emplace(kv.key, std::nullopt);
      fresh = false;
    }
    std::map<std::string, std::optional<std::string>> batch;
    {
      std::unique_lock lk(mu_);
      cv_.wait_until(lk, next_keepalive,
                     [&] { return stop_.load() || !outbox_.empty() || (fresh && reported_); });
      batch.swap(outbox_);
    }
    bool failed = false;
    for (auto it = batch.begin(); it != batch.end() && !failed; ++it) {
      Status st = it->second ? etcd.put(it->first, *it->second) : etcd.del(it->first);
      if (!st) {
        set_error("states", st.error().message);
        failed = true;
        break;
      }
      std::lock_guard lk(mu_);
      writes_++;
    }
    if (failed) {  // what was not written goes back, unless superseded meanwhile
      std::lock_guard lk(mu_);
      for (auto& [k, v] : batch) outbox_.try_emplace(k, std::move(v));
    }
    if (std::chrono::steady_clock::now() >= next_keepalive || failed) {
      Status st = etcd.lease_keepalive(lease);
      next_keepalive = std::chrono::steady_clock::now() + keepalive_every;
      if (!st) {
        set_error("liveness", st.error().message);
        std::lock_guard lk(mu_);
        alive_ = false;
        if (st.error().code == "not_found") {
          lease = 0;  // etcd lost it: a new lease, the alive key again
        } else {
          fresh = true;  // unreachable: rewrite everything once it answers
        }
        lease_ = lease;
        next_keepalive = std::chrono::steady_clock::now() + 500ms;
      } else {
        std::lock_guard lk(mu_);
        alive_ = true;
      }
    }
  }
  // The host goes at once, not after the TTL.
  if (Status st = lease ? etcd.lease_revoke(lease) : ok(); !st)
    spdlog::warn("etcd: revoking lease {:x}: {}", lease, st.error().message);
}

json EtcdAgent::status() const {
  std::lock_guard lk(mu_);
  json j = {{"host", cfg_.host}, {"prefix", cfg_.prefix}, {"endpoints", cfg_.endpoints},
            {"watching", watching_}, {"alive", alive_}, {"revision", revision_},
            {"full_reads", full_reads_}, {"state_writes", writes_},
            {"states_pending", outbox_.size()}, {"last_error", last_error_}};
  j["intake"] = intake_.status();
  return j;
}

}  // namespace strait::ctl
