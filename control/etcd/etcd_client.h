#pragma once
// etcd's v3 API through its JSON gateway (POST /v3/kv/range, /v3/watch, ...),
// with libcurl. Debian ships no C++ etcd client; the gateway is part of etcd's
// v3 API (stable at /v3/ since etcd 3.4) and needs nothing beyond libcurl and
// the JSON library straitd already uses, where gRPC would need etcd's .proto
// files, which Debian ships only inside its Go sources. Keys and values are
// bytes (base64 on the wire); 64-bit numbers come back as strings.
//
// Every call blocks (up to the timeout): for straitd's etcd threads
// (control/etcd/etcd_agent.h), never for the control thread. One client per
// thread: a client holds a libcurl handle.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "dataplane/result.h"

namespace strait::ctl {

struct KeyValue {
  std::string key, value;
  int64_t mod_revision = 0;
};

struct WatchEvent {
  bool put = true;  // false: the key was deleted (value empty)
  KeyValue kv;
};

class EtcdClient {
 public:
  // endpoints: client URLs ("http://127.0.0.1:2379"), tried in turn when one
  // does not answer.
  explicit EtcdClient(std::vector<std::string> endpoints, long timeout_ms = 3000);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // Every key under `prefix` (keys that start with it), and the store's
  // revision the read saw: a watch from revision + 1 misses nothing.
  struct Range {
    std::vector<KeyValue> kvs;
    int64_t revision = 0;
  };
  Result<Range> range_prefix(const std::string& prefix);
  Status put(const std::string& key, const std::string& value, int64_t lease = 0);
  Status del(const std::string& key);
  Status del_prefix(const std::string& prefix);
  // A lease of ttl_s seconds; its id.
  Result<int64_t> lease_grant(uint32_t ttl_s);
  // not_found when the lease is gone (expired, or etcd lost it).
  Status lease_keepalive(int64_t id);
  // The lease and every key attached to it go now.
  Status lease_revoke(int64_t id);

  // Watches every key under each prefix from `start_revision` (one stream
  // each, all on this thread). `on_events` gets each batch in the order etcd
  // sent it. Returns when `stop` is set (looked at every 200 ms), when a
  // stream breaks (unavailable), or when start_revision was compacted
  // ("compacted": re-read, then watch again).
  using OnEvents = std::function<void(const std::vector<WatchEvent>& events, int64_t revision)>;
  Status watch(const std::vector<std::string>& prefixes, int64_t start_revision,
               const OnEvents& on_events, const std::atomic<bool>& stop);

  // The endpoint the last call went to.
  const std::string& endpoint() const { return endpoints_[current_]; }

 private:
  Result<nlohmann::json> post(const std::string& path, const nlohmann::json& body);

  std::vector<std::string> endpoints_;
  size_t current_ = 0;
  long timeout_ms_;
  void* curl_ = nullptr;  // CURL*, reused: one connection while it lasts
};

// The end of the range of every key that starts with `prefix` (etcd's
// range_end: the prefix with its last byte incremented).
std::string prefix_range_end(const std::string& prefix);

}  // namespace strait::ctl
