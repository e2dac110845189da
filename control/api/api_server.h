#pragma once
// The control API: a Unix stream socket, owner-only, newline-delimited JSON
// (docs/api.md). Requests of one connection are answered in order; a request
// that waits for a grace period holds the requests behind it, not the loop.
//
// No client can take the switch or the other clients down with it: each
// connection gets a bounded slice of requests per loop turn (the others are
// served in between), its unanswered requests and unread replies are
// bounded (past them it is not read until it catches up; an event
// subscriber that stops reading is disconnected), a request nested deeper
// than kMaxDepth is refused before it is parsed, and a reply is serialised
// without throwing.
#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "control/daemon/event_loop.h"
#include "control/switch/switch.h"
#include "dataplane/result.h"

namespace strait::ctl {

// One request line, decoded: {"id"?, "method", "params"?}; the id goes to
// decode_request's *id, accepted or not.
struct ApiRequest {
  std::string method;
  nlohmann::json params;  // an object ({} when absent)
};
// invalid_argument for a line that is not such a request (too deeply
// nested, not JSON, no method, params not an object). Either way *id is
// the line's id once it parsed (else null), so the reply can carry it.
// Pure: the API fuzz target (tests/fuzz/api_fuzz.cc) runs the same code.
Result<ApiRequest> decode_request(std::string_view line, int max_depth, nlohmann::json* id);

class ApiServer {
 public:
  static constexpr size_t kMaxLine = 1 << 20;      // one request, bytes
  static constexpr int kMaxDepth = 64;             // nesting of a request's JSON
  static constexpr unsigned kSlice = 16;           // requests per connection per loop turn
  static constexpr size_t kMaxQueued = 256;        // unanswered requests before reading stops
  static constexpr size_t kOutPause = 1 << 20;     // unread reply bytes before reading stops
  static constexpr size_t kOutLimit = 16 << 20;    // unread event bytes before disconnecting

  static Result<std::unique_ptr<ApiServer>> listen(const std::string& path, EventLoop* loop,
                                                   Switch* sw);
  ~ApiServer();  // closes every connection and removes the socket file

 private:
  struct Conn;
  ApiServer(std::string path, int fd, EventLoop* loop, Switch* sw);
  void accept_all();
  void on_conn(const std::shared_ptr<Conn>& c, unsigned events);
  // Reads what the socket holds, unless the connection is paused.
  void read_requests(const std::shared_ptr<Conn>& c);
  // Answers up to kSlice requests; defers the rest to the loop's next turn.
  void dispatch(const std::shared_ptr<Conn>& c);
  void handle(const std::shared_ptr<Conn>& c, const std::string& line);
  void subscribe(const std::shared_ptr<Conn>& c, const nlohmann::json& id,
                 const nlohmann::json& params);
  void reply(const std::shared_ptr<Conn>& c, const nlohmann::json& msg);
  void send(const std::shared_ptr<Conn>& c, const std::string& bytes);
  void rearm(const std::shared_ptr<Conn>& c);
  void close_conn(const std::shared_ptr<Conn>& c);

  std::string path_;
  int fd_;
  EventLoop* loop_;
  Switch* sw_;
  std::map<int, std::shared_ptr<Conn>> conns_;
};

}  // namespace strait::ctl
