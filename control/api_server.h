#pragma once
// The control API: a Unix stream socket, owner-only, newline-delimited JSON
// (docs/api.md). Requests of one connection are answered in order; a request
// that waits for a grace period holds the requests behind it, not the loop.
#include <memory>
#include <string>

#include "control/event_loop.h"
#include "control/result.h"
#include "control/switch.h"

namespace strait::ctl {

class ApiServer {
 public:
  static Result<std::unique_ptr<ApiServer>> listen(const std::string& path, EventLoop* loop,
                                                   Switch* sw);
  ~ApiServer();  // closes every connection and removes the socket file

 private:
  struct Conn;
  ApiServer(std::string path, int fd, EventLoop* loop, Switch* sw);
  void accept_all();
  void on_conn(const std::shared_ptr<Conn>& c, unsigned events);
  void dispatch(const std::shared_ptr<Conn>& c);
  void send(const std::shared_ptr<Conn>& c, const std::string& line);
  void rearm(const std::shared_ptr<Conn>& c);
  void close_conn(const std::shared_ptr<Conn>& c);

  std::string path_;
  int fd_;
  EventLoop* loop_;
  Switch* sw_;
  std::map<int, std::shared_ptr<Conn>> conns_;
};

}  // namespace strait::ctl
