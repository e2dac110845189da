#include "control/api_server.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>

#include <spdlog/spdlog.h>

namespace strait::ctl {

using nlohmann::json;

namespace {
constexpr size_t kMaxLine = 1 << 20;  // a request larger than this is refused
}

struct ApiServer::Conn {
  int fd;
  std::string in;                 // bytes not yet split into lines
  std::deque<std::string> lines;  // requests waiting for the one in flight
  std::string out;                // reply bytes the socket did not take yet
  bool busy = false;              // a request is in flight
  bool open = true;
  bool eof = false;               // peer finished sending: close once all is answered
  uint64_t subscription = 0;      // events.subscribe: Switch subscriber token
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
    auto c = std::make_shared<Conn>();
    c->fd = cfd;
    conns_[cfd] = c;
    loop_->add(cfd, EPOLLIN | EPOLLRDHUP, [this, c](unsigned ev) { on_conn(c, ev); });
  }
}

void ApiServer::on_conn(const std::shared_ptr<Conn>& c, unsigned events) {
  if (events & EPOLLOUT) send(c, "");
  if (!(events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP | EPOLLERR))) return;
  char buf[65536];
  for (;;) {
    ssize_t n = read(c->fd, buf, sizeof(buf));
    if (n > 0) {
      c->in.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0) return close_conn(c);
    c->eof = true;  // answer what was asked, then close
    break;
  }
  size_t pos;
  while ((pos = c->in.find('\n')) != std::string::npos) {
    c->lines.push_back(c->in.substr(0, pos));
    c->in.erase(0, pos + 1);
  }
  if (c->in.size() > kMaxLine) {
    send(c, json{{"id", nullptr}, {"ok", false},
                 {"error", {{"code", "invalid_argument"},
                            {"message", "request: longer than 1 MiB without a newline"}}}}
                    .dump() + "\n");
    return close_conn(c);
  }
  dispatch(c);
}

// Interest follows the state: read until EOF, write while replies are queued.
void ApiServer::rearm(const std::shared_ptr<Conn>& c) {
  if (!c->open) return;
  if (c->eof && !c->busy && c->lines.empty() && c->out.empty() && !c->subscription)
    return close_conn(c);
  unsigned ev = (c->eof ? 0u : unsigned(EPOLLIN | EPOLLRDHUP)) | (c->out.empty() ? 0u : unsigned(EPOLLOUT));
  loop_->modify(c->fd, ev);
}

void ApiServer::dispatch(const std::shared_ptr<Conn>& c) {
  while (c->open && !c->busy && !c->lines.empty()) {
    std::string line = std::move(c->lines.front());
    c->lines.pop_front();
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json req = json::parse(line, nullptr, false);
    json id = req.is_object() && req.contains("id") ? req["id"] : json(nullptr);
    auto refuse = [&](const std::string& msg) {
      send(c, json{{"id", id}, {"ok", false},
                   {"error", {{"code", "invalid_argument"}, {"message", msg}}}}.dump() + "\n");
    };
    if (req.is_discarded()) { refuse("request: not valid JSON"); continue; }
    if (!req.is_object()) { refuse("request: must be a JSON object"); continue; }
    if (!req.contains("method") || !req["method"].is_string()) {
      refuse("method: required string");
      continue;
    }
    json params = req.contains("params") ? std::move(req["params"]) : json::object();
    if (!params.is_object()) { refuse("params: must be an object"); continue; }
    if (req["method"] == "events.subscribe") {
      // From now on this connection also carries one line per event.
      if (!c->subscription) {
        std::weak_ptr<Conn> weak = c;
        c->subscription = sw_->subscribe([this, weak](const json& ev) {
          if (auto conn = weak.lock()) send(conn, ev.dump() + "\n");
        });
      }
      send(c, json{{"id", id}, {"ok", true}, {"result", {{"subscribed", true}}}}.dump() + "\n");
      continue;
    }
    c->busy = true;
    sw_->call(req["method"].get<std::string>(), params, [this, c, id](json reply) {
      reply["id"] = id;
      c->busy = false;
      if (!c->open) return;
      send(c, reply.dump() + "\n");
      dispatch(c);
    });
  }
  rearm(c);
}

void ApiServer::send(const std::shared_ptr<Conn>& c, const std::string& line) {
  if (!c->open) return;
  c->out += line;
  while (!c->out.empty()) {
    // MSG_NOSIGNAL: a client that went away is an EPIPE, not a SIGPIPE.
    ssize_t n = ::send(c->fd, c->out.data(), c->out.size(), MSG_NOSIGNAL);
    if (n > 0) {
      c->out.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return close_conn(c);
  }
  rearm(c);
}

void ApiServer::close_conn(const std::shared_ptr<Conn>& c) {
  if (!c->open) return;
  c->open = false;
  if (c->subscription) sw_->unsubscribe(c->subscription);
  loop_->remove(c->fd);
  close(c->fd);
  conns_.erase(c->fd);
}

}  // namespace strait::ctl
