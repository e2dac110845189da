#include "control/straitctl/client.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace strait::straitctl {
namespace {

// A reply larger than this is not a reply from straitd.
constexpr size_t kMaxReplyBytes = 64u << 20;

}  // namespace

Client::~Client() {
  if (fd_ >= 0) ::close(fd_);
}

bool Client::connect(const std::string& path, double timeout_seconds, std::string* err) {
  path_ = path;
  timeout_seconds_ = timeout_seconds;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path) {
    *err = "cannot connect to " + path + ": " + std::strerror(path.empty() ? ENOENT : ENAMETOOLONG);
    return false;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    *err = "cannot connect to " + path + ": " + std::strerror(errno);
    return false;
  }
  if (timeout_seconds > 0) {
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(timeout_seconds);
    tv.tv_usec = static_cast<suseconds_t>((timeout_seconds - static_cast<double>(tv.tv_sec)) * 1e6);
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  return true;
}

bool Client::call(const std::string& method, const nlohmann::json& params, nlohmann::json* reply,
                  std::string* err) {
  const int id = next_id_++;
  const std::string line =
      nlohmann::json{{"id", id}, {"method", method}, {"params", params}}.dump() + "\n";
  for (size_t sent = 0; sent < line.size();) {
    // MSG_NOSIGNAL: a switch that went away is an error message, not SIGPIPE.
    ssize_t n = ::send(fd_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *err = "cannot send to " + path_ + ": " + std::strerror(errno);
      return false;
    }
    sent += static_cast<size_t>(n);
  }
  std::string reply_line;
  if (!read_line(&reply_line, err)) return false;
  *reply = nlohmann::json::parse(reply_line, nullptr, /*allow_exceptions=*/false);
  if (reply->is_discarded() || !reply->is_object() || !reply->contains("ok") ||
      !(*reply)["ok"].is_boolean()) {
    *err = "malformed reply from " + path_ + ": " + reply_line.substr(0, 200);
    return false;
  }
  if (reply->contains("id") && (*reply)["id"] != id) {
    *err = "reply from " + path_ + " answers request " + (*reply)["id"].dump() + ", not " +
           std::to_string(id);
    return false;
  }
  return true;
}

bool Client::read_event(nlohmann::json* event, std::string* err) {
  std::string line;
  if (!read_line(&line, err)) return false;
  *event = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (event->is_discarded() || !event->is_object()) {
    *err = "malformed event from " + path_ + ": " + line.substr(0, 200);
    return false;
  }
  return true;
}

bool Client::read_line(std::string* line, std::string* err) {
  for (;;) {
    size_t nl = buf_.find('\n');
    if (nl != std::string::npos) {
      line->assign(buf_, 0, nl);
      buf_.erase(0, nl + 1);
      return true;
    }
    if (buf_.size() > kMaxReplyBytes) {
      *err = "reply from " + path_ + " is longer than " + std::to_string(kMaxReplyBytes) + " bytes";
      return false;
    }
    char chunk[65536];
    ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%g", timeout_seconds_);
      *err = "no reply from " + path_ + " within " + secs + " s";
      return false;
    }
    if (n < 0) {
      *err = "cannot read from " + path_ + ": " + std::strerror(errno);
      return false;
    }
    if (n == 0) {
      *err = "connection to " + path_ + " closed before the reply";
      return false;
    }
    buf_.append(chunk, static_cast<size_t>(n));
  }
}

}  // namespace strait::straitctl
