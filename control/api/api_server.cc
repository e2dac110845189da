#include "control/api/api_server.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "control/api/json_fields.h"

namespace strait::ctl {

using nlohmann::json;

namespace {

constexpr size_t kMaxConns = 1024;  // a client that leaks connections runs out, not straitd

json refusal(const json& id, const std::string& code, const std::string& msg) {
  return json{{"id", id}, {"ok", false}, {"error", {{"code", code}, {"message", msg}}}};
}

}  // namespace

struct ApiServer::Conn {
  int fd;
  std::string in;                 // bytes not yet split into lines
  std::deque<std::string> lines;  // requests waiting for the one in flight
  std::string out;                // reply bytes; those before out_at are sent
  size_t out_at = 0;
  bool busy = false;         // a request is in flight
  bool dispatching = false;  // in dispatch(): a reply given at once must not recurse
  bool deferred = false;     // a dispatch waits for the loop's next turn
  bool open = true;
  bool eof = false;          // peer finished sending: close once all is answered
  bool watched = true;       // in the event loop (not once the peer hung up)
  uint64_t subscription = 0;  // events.subscribe: EventLog subscriber token

  size_t unsent() const { return out.size() - out_at; }
  // Not read while it has this much to be answered or to read back: the
  // kernel's socket buffer then holds the client back.
  bool paused() const { return lines.size() >= kMaxQueued || unsent() >= kOutPause; }
};

Result<std::unique_ptr<ApiServer>> ApiServer::listen(const std::string& path, EventLoop* loop,
                                                     Switch* sw) {
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof(addr.sun_path))
    return invalid("api_socket: path must be 1.." + std::to_string(sizeof(addr.sun_path) - 1) +
                   " characters");
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  // A socket file nobody answers on is left from a crash: take it over.
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    close(fd);
    return Error{"conflict", "api_socket " + path + ": another straitd is answering there"};
  }
  unlink(path.c_str());
  // Owner-only from the first moment: no window with a wider mode.
  mode_t old = umask(0177);
  int rc = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  umask(old);
  if (rc < 0 || ::listen(fd, 64) < 0) {
    std::string err = strerror(errno);
    close(fd);
    return Error{"invalid_argument", "api_socket " + path + ": " + err};
  }
  return std::unique_ptr<ApiServer>(new ApiServer(path, fd, loop, sw));
}

ApiServer::ApiServer(std::string path, int fd, EventLoop* loop, Switch* sw)
    : path_(std::move(path)), fd_(fd), loop_(loop), sw_(sw) {
  loop_->add(fd_, EPOLLIN, [this](unsigned) { accept_all(); });
}

ApiServer::~ApiServer() {
  while (!conns_.empty()) close_conn(conns_.begin()->second);
  loop_->remove(fd_);
  close(fd_);
  unlink(path_.c_str());
}

void ApiServer::accept_all() {
  for (;;) {
    int cfd = accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (cfd < 0) return;
    if (conns_.size() >= kMaxConns) {
      const std::string msg =
          refusal(nullptr, "resource_exhausted",
                  "connection: " + std::to_string(kMaxConns) + " API connections are open already")
              .dump() + "\n";
      (void)!::send(cfd, msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      close(cfd);
      continue;
    }
    auto c = std::make_shared<Conn>();
    c->fd = cfd;
    conns_[cfd] = c;
    loop_->add(cfd, EPOLLIN | EPOLLRDHUP, [this, c](unsigned ev) { on_conn(c, ev); });
  }
}

void ApiServer::on_conn(const std::shared_ptr<Conn>& c, unsigned events) {
  if (events & EPOLLOUT) send(c, "");
  if (!c->open) return;
  if (events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP | EPOLLERR)) read_requests(c);
  if (!c->open) return;
  // Hung up: what it sent is all read and nothing will wake us for it again
  // (its level-triggered HUP would, every turn, until its last answer).
  if ((events & (EPOLLHUP | EPOLLERR)) && c->eof && c->watched) {
    loop_->remove(c->fd);
    c->watched = false;
  }
  dispatch(c);
}

void ApiServer::read_requests(const std::shared_ptr<Conn>& c) {
  char buf[65536];
  while (!c->eof && !c->paused()) {
    ssize_t n = read(c->fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0) return close_conn(c);
    if (n == 0) {
      c->eof = true;  // answer what was asked, then close
      break;
    }
    c->in.append(buf, static_cast<size_t>(n));
    size_t start = 0, nl;
    while ((nl = c->in.find('\n', start)) != std::string::npos) {
      c->lines.emplace_back(c->in, start, nl - start);
      start = nl + 1;
    }
    c->in.erase(0, start);
    if (c->in.size() > kMaxLine) {
      reply(c, refusal(nullptr, "invalid_argument", "request: longer than 1 MiB without a newline"));
      return close_conn(c);
    }
  }
}

// Interest follows the state: read until EOF unless paused, write while
// replies are queued.
void ApiServer::rearm(const std::shared_ptr<Conn>& c) {
  if (!c->open) return;
  if (c->eof && !c->busy && c->lines.empty() && !c->unsent() && !c->subscription)
    return close_conn(c);
  if (!c->watched) return;
  unsigned ev = (c->eof || c->paused()) ? 0u : unsigned(EPOLLIN | EPOLLRDHUP);
  if (c->unsent()) ev |= EPOLLOUT;
  loop_->modify(c->fd, ev);
}

void ApiServer::dispatch(const std::shared_ptr<Conn>& c) {
  if (c->dispatching) return;  // called by a reply given at once: the loop below goes on
  c->dispatching = true;
  unsigned served = 0;
  while (c->open && !c->busy && !c->lines.empty() && c->unsent() < kOutPause) {
    if (served++ == kSlice) {
      // The other connections' turn; this one goes on after their events.
      if (!c->deferred) {
        c->deferred = true;
        loop_->defer([this, c] {
          c->deferred = false;
          if (c->open) dispatch(c);
        });
      }
      break;
    }
    std::string line = std::move(c->lines.front());
    c->lines.pop_front();
    handle(c, line);
  }
  c->dispatching = false;
  rearm(c);
}

Result<ApiRequest> decode_request(std::string_view line, int max_depth, json* id) {
  *id = nullptr;
  // Copying, printing or freeing JSON recurses once per level.
  if (nested_deeper_than(line, max_depth))
    return invalid("request: nested deeper than " + std::to_string(max_depth) + " levels");
  json req = json::parse(line, nullptr, false);
  if (req.is_object() && req.contains("id")) *id = req["id"];
  if (req.is_discarded()) return invalid("request: not valid JSON");
  if (!req.is_object()) return invalid("request: must be a JSON object");
  if (!req.contains("method") || !req["method"].is_string()) return invalid("method: required string");
  ApiRequest r{req["method"].get<std::string>(),
               req.contains("params") ? std::move(req["params"]) : json::object()};
  if (!r.params.is_object()) return invalid("params: must be an object");
  return r;
}

void ApiServer::handle(const std::shared_ptr<Conn>& c, const std::string& line) {
  if (line.find_first_not_of(" \t\r") == std::string::npos) return;
  json id;
  auto req = decode_request(line, kMaxDepth, &id);
  if (!req) return reply(c, refusal(id, req.error().code, req.error().message));
  const std::string& method = req->method;
  const json& params = req->params;
  if (method == "events.subscribe") return subscribe(c, id, params);
  c->busy = true;
  auto answered = std::make_shared<bool>(false);
  try {
    sw_->call(method, params, [this, c, id, answered](json r) {
      *answered = true;
      c->busy = false;
      if (!c->open) return;
      r["id"] = id;
      reply(c, r);
      dispatch(c);
    });
  } catch (const std::exception& e) {
    // A bug, not the client's fault; the switch and its other clients go on.
    spdlog::error("API {}: {}", method, e.what());
    if (*answered) return;
    c->busy = false;
    reply(c, refusal(id, "internal", method + ": " + e.what()));
  }
}

// events.subscribe {"since": SEQ, "epoch": E}: from now on the connection
// also carries one line per event, after the events since SEQ that the
// backlog holds (all it holds when E is not this straitd's epoch).
void ApiServer::subscribe(const std::shared_ptr<Conn>& c, const json& id, const json& params) {
  EventLog& log = sw_->events();
  auto refuse = [&](const Error& e) { reply(c, refusal(id, e.code, e.message)); };
  if (Status s = check_known_keys(params, {"since", "epoch"}, "params."); !s) return refuse(s.error());
  uint64_t since = log.last_seq();
  if (const json* v = find_field(params, "since")) {
    auto n = get_int(*v, "params.since", 0, INT64_MAX);
    if (!n) return refuse(n.error());
    since = static_cast<uint64_t>(*n);
  }
  if (const json* v = find_field(params, "epoch")) {
    auto e = get_string(*v, "params.epoch");
    if (!e) return refuse(e.error());
    if (*e != log.epoch()) since = 0;
  }
  if (!c->subscription) {
    std::weak_ptr<Conn> weak = c;
    c->subscription = log.subscribe([this, weak](const json& ev) {
      auto conn = weak.lock();
      if (!conn || !conn->open) return;
      if (conn->unsent() >= kOutLimit) {
        spdlog::warn("API client on fd {} reads no events: {} bytes unread, disconnected",
                     conn->fd, conn->unsent());
        return close_conn(conn);
      }
      send(conn, ev.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
    });
  }
  EventLog::Missed missed = log.since(since);
  reply(c, json{{"id", id},
                {"ok", true},
                {"result",
                 {{"subscribed", true},
                  {"epoch", log.epoch()},
                  {"seq", log.last_seq()},
                  {"replayed", missed.events.size()},
                  {"complete", missed.complete}}}});
  for (const json& ev : missed.events) reply(c, ev);
}

// Never throws: text that is not UTF-8 (from a client, libvirt or a device
// name) is replaced, not a reason to lose the reply or the switch.
void ApiServer::reply(const std::shared_ptr<Conn>& c, const json& msg) {
  send(c, msg.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
}

void ApiServer::send(const std::shared_ptr<Conn>& c, const std::string& bytes) {
  if (!c->open) return;
  c->out += bytes;
  while (c->unsent()) {
    // MSG_NOSIGNAL: a client that went away is an EPIPE, not a SIGPIPE.
    ssize_t n = ::send(c->fd, c->out.data() + c->out_at, c->unsent(), MSG_NOSIGNAL);
    if (n > 0) {
      c->out_at += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return close_conn(c);
  }
  // Sent bytes go in one move, not one per send: no quadratic copying.
  if (c->out_at == c->out.size()) {
    c->out.clear();
    c->out_at = 0;
  } else if (c->out_at > c->out.size() / 2) {
    c->out.erase(0, c->out_at);
    c->out_at = 0;
  }
  if (!c->dispatching) rearm(c);
}

void ApiServer::close_conn(const std::shared_ptr<Conn>& conn) {
  const std::shared_ptr<Conn> c = conn;  // `conn` may be the map's own, erased below
  if (!c->open) return;
  c->open = false;
  if (c->subscription) sw_->events().unsubscribe(c->subscription);
  if (c->watched) loop_->remove(c->fd);
  close(c->fd);
  conns_.erase(c->fd);
  // Nothing of a client that went away stays behind, however much it sent.
  std::string().swap(c->in);
  std::string().swap(c->out);
  std::deque<std::string>().swap(c->lines);
}

}  // namespace strait::ctl
