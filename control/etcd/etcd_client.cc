#include "control/etcd/etcd_client.h"

#include <curl/curl.h>
#include <openssl/evp.h>

#include <mutex>

#include <nlohmann/json.hpp>

namespace strait::ctl {
namespace {

using nlohmann::json;

std::string b64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  out.resize(n < 0 ? 0 : size_t(n));
  return out;
}

Result<std::string> unb64(const std::string& in) {
  if (in.empty()) return std::string();
  if (in.size() % 4) return Error{"internal", "etcd: base64 of odd length"};
  std::string out(in.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  if (n < 0) return Error{"internal", "etcd: bad base64"};
  size_t pad = 0;  // EVP_DecodeBlock counts the padding as zero bytes
  for (size_t i = in.size(); i > 0 && in[i - 1] == '='; i--) pad++;
  out.resize(size_t(n) - pad);
  return out;
}

// int64 fields come as strings ("123"); absent ones are 0.
int64_t num(const json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_string()) {
    try {
      return std::stoll(it->get<std::string>());
    } catch (...) {
      return 0;
    }
  }
  return 0;
}

Result<KeyValue> read_kv(const json& kv) {
  KeyValue out;
  auto k = unb64(kv.value("key", ""));
  if (!k) return k.error();
  auto v = unb64(kv.value("value", ""));
  if (!v) return v.error();
  out.key = std::move(*k);
  out.value = std::move(*v);
  out.mod_revision = num(kv, "mod_revision");
  return out;
}

size_t append_body(char* p, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(p, size * n);
  return size * n;
}

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// One watch stream: its request, what came so far, what it said.
struct Stream {
  CURL* h = nullptr;
  std::string body, buf;
  bool created = false;
  bool compacted = false;
  std::string error;
  std::vector<WatchEvent> events;  // parsed, not yet handed on
  int64_t revision = 0;
  bool ended = false;

  // The gateway sends one JSON object per message, each followed by "\n".
  void take(const char* p, size_t n) {
    buf.append(p, n);
    size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      const std::string line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      if (line.find_first_not_of(" \r\t") == std::string::npos) continue;
      json msg = json::parse(line, nullptr, false);
      if (msg.is_discarded() || !msg.is_object()) {
        error = "etcd watch: a message that is not JSON";
        continue;
      }
      if (msg.contains("error")) {
        error = "etcd watch: " + msg["error"].dump();
        continue;
      }
      const json& r = msg.value("result", json::object());
      if (r.value("created", false)) created = true;
      if (num(r, "compact_revision") > 0) compacted = true;
      if (r.value("canceled", false) && !compacted)
        error = "etcd watch canceled: " + r.value("cancel_reason", std::string("no reason given"));
      revision = std::max(revision, num(r.value("header", json::object()), "revision"));
      for (const json& e : r.value("events", json::array())) {
        auto kv = read_kv(e.value("kv", json::object()));
        if (!kv) {
          error = kv.error().message;
          continue;
        }
        events.push_back({e.value("type", std::string("PUT")) != "DELETE", std::move(*kv)});
      }
    }
  }
};

size_t stream_body(char* p, size_t size, size_t n, void* s) {
  static_cast<Stream*>(s)->take(p, size * n);
  return size * n;
}

}  // namespace

std::string prefix_range_end(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

EtcdClient::EtcdClient(std::vector<std::string> endpoints, long timeout_ms)
    : endpoints_(std::move(endpoints)), timeout_ms_(timeout_ms) {
  global_init();
  curl_ = curl_easy_init();
}

EtcdClient::~EtcdClient() { curl_easy_cleanup(static_cast<CURL*>(curl_)); }

Result<json> EtcdClient::post(const std::string& path, const json& body) {
  CURL* h = static_cast<CURL*>(curl_);
  if (!h) return Error{"internal", "etcd: libcurl handle"};
  const std::string req = body.dump();
  std::string last;
  for (size_t tries = 0; tries < endpoints_.size(); tries++) {
    const std::string url = endpoints_[current_] + path;
    std::string resp;
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, req.c_str());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, long(req.size()));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, append_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &resp);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms_);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, std::min(timeout_ms_, 1000L));
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    const CURLcode rc = curl_easy_perform(h);
    if (rc != CURLE_OK) {
      last = url + ": " + curl_easy_strerror(rc);
      current_ = (current_ + 1) % endpoints_.size();
      continue;
    }
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    json j = json::parse(resp, nullptr, false);
    if (status != 200 || j.is_discarded()) {
      // The gateway answers gRPC errors as {"error": ..., "code": N, "message": ...}.
      const std::string msg = !j.is_discarded() && j.is_object() && j.contains("message")
                                  ? j["message"].dump()
                                  : resp.substr(0, 200);
      const bool gone = msg.find("not found") != std::string::npos;
      return Error{gone ? "not_found" : "unavailable",
                   "etcd " + url + ": HTTP " + std::to_string(status) + ": " + msg};
    }
    return j;
  }
  return Error{"unavailable", "etcd: no endpoint answered (" + last + ")"};
}

Result<EtcdClient::Range> EtcdClient::range_prefix(const std::string& prefix) {
  auto r = post("/v3/kv/range", {{"key", b64(prefix)}, {"range_end", b64(prefix_range_end(prefix))}});
  if (!r) return r.error();
  Range out;
  out.revision = num(r->value("header", json::object()), "revision");
  for (const json& kv : r->value("kvs", json::array())) {
    auto k = read_kv(kv);
    if (!k) return k.error();
    out.kvs.push_back(std::move(*k));
  }
  return out;
}

Status EtcdClient::put(const std::string& key, const std::string& value, int64_t lease) {
  json body = {{"key", b64(key)}, {"value", b64(value)}};
  if (lease) body["lease"] = std::to_string(lease);
  auto r = post("/v3/kv/put", body);
  if (!r) return r.error();
  return ok();
}

Status EtcdClient::del(const std::string& key) {
  auto r = post("/v3/kv/deleterange", {{"key", b64(key)}});
  if (!r) return r.error();
  return ok();
}

Status EtcdClient::del_prefix(const std::string& prefix) {
  auto r = post("/v3/kv/deleterange",
                {{"key", b64(prefix)}, {"range_end", b64(prefix_range_end(prefix))}});
  if (!r) return r.error();
  return ok();
}

Result<int64_t> EtcdClient::lease_grant(uint32_t ttl_s) {
  auto r = post("/v3/lease/grant", {{"TTL", std::to_string(ttl_s)}});
  if (!r) return r.error();
  const int64_t id = num(*r, "ID");
  if (!id) return Error{"unavailable", "etcd lease grant: no lease id in " + r->dump()};
  return id;
}

Status EtcdClient::lease_keepalive(int64_t id) {
  auto r = post("/v3/lease/keepalive", {{"ID", std::to_string(id)}});
  if (!r) return r.error();
  // One message of the keepalive stream: {"result": {"ID", "TTL"}}; TTL 0 (absent): gone.
  const json& res = r->value("result", json::object());
  if (num(res, "TTL") <= 0) return not_found("etcd lease " + std::to_string(id) + " has expired");
  return ok();
}

Status EtcdClient::lease_revoke(int64_t id) {
  auto r = post("/v3/lease/revoke", {{"ID", std::to_string(id)}});
  if (!r) return r.error();
  return ok();
}

Status EtcdClient::watch(const std::vector<std::string>& prefixes, int64_t start_revision,
                         const OnEvents& on_events, const std::atomic<bool>& stop) {
  CURLM* m = curl_multi_init();
  std::vector<std::unique_ptr<Stream>> streams;
  const std::string url = endpoint() + "/v3/watch";
  for (const std::string& p : prefixes) {
    auto s = std::make_unique<Stream>();
    json create = {{"key", b64(p)}, {"range_end", b64(prefix_range_end(p))}};
    if (start_revision > 0) create["start_revision"] = std::to_string(start_revision);
    s->body = json{{"create_request", create}}.dump();
    s->h = curl_easy_init();
    curl_easy_setopt(s->h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(s->h, CURLOPT_POSTFIELDS, s->body.c_str());
    curl_easy_setopt(s->h, CURLOPT_POSTFIELDSIZE, long(s->body.size()));
    curl_easy_setopt(s->h, CURLOPT_WRITEFUNCTION, stream_body);
    curl_easy_setopt(s->h, CURLOPT_WRITEDATA, s.get());
    curl_easy_setopt(s->h, CURLOPT_CONNECTTIMEOUT_MS, std::min(timeout_ms_, 1000L));
    curl_easy_setopt(s->h, CURLOPT_NOSIGNAL, 1L);
    // A dead peer is noticed by TCP keepalive, not by silence: a watch of
    // keys nobody changes is silent for as long as it lasts.
    curl_easy_setopt(s->h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(s->h, CURLOPT_TCP_KEEPIDLE, 5L);
    curl_easy_setopt(s->h, CURLOPT_TCP_KEEPINTVL, 2L);
    curl_multi_add_handle(m, s->h);
    streams.push_back(std::move(s));
  }
  Status result = ok();
  while (!stop.load(std::memory_order_relaxed)) {
    int running = 0;
    if (curl_multi_perform(m, &running) != CURLM_OK) {
      result = Error{"unavailable", "etcd watch: libcurl multi failed"};
      break;
    }
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(m, &left)) {
      if (msg->msg != CURLMSG_DONE) continue;
      for (auto& s : streams)
        if (s->h == msg->easy_handle && !s->ended) {
          s->ended = true;
          if (s->error.empty())
            s->error = std::string("etcd watch ") + url + ": " +
                       (msg->data.result == CURLE_OK ? "stream ended"
                                                     : curl_easy_strerror(msg->data.result));
        }
    }
    bool failed = false;
    for (auto& s : streams) {
      if (!s->events.empty()) {
        std::vector<WatchEvent> batch;
        batch.swap(s->events);
        on_events(batch, s->revision);
      }
      if (s->compacted) {
        result = Error{"compacted", "etcd watch: revision " + std::to_string(start_revision) +
                                        " is compacted"};
        failed = true;
      } else if (!s->error.empty()) {
        result = Error{"unavailable", s->error};
        failed = true;
      }
    }
    if (failed) break;
    curl_multi_poll(m, nullptr, 0, 200, nullptr);
  }
  for (auto& s : streams) {
    curl_multi_remove_handle(m, s->h);
    curl_easy_cleanup(s->h);
  }
  curl_multi_cleanup(m);
  if (!result) current_ = (current_ + 1) % endpoints_.size();  // the next try, elsewhere
  return result;
}

}  // namespace strait::ctl
