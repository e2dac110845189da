#pragma once
// A connection to straitd's API socket: one JSON request line out, one reply
// line back (docs/api.md). Plain POSIX sockets; nothing of the daemon's code.
#include <nlohmann/json.hpp>
#include <string>

namespace strait::straitctl {

class Client {
 public:
  Client() = default;
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // false with *err = "cannot connect to PATH: strerror". A reply that takes
  // longer than `timeout_seconds` (0: no limit) is an error.
  bool connect(const std::string& path, double timeout_seconds, std::string* err);
  // Sends {"id", "method", "params"} and reads the reply object. false with
  // *err describing a transport or protocol failure (not an error reply).
  bool call(const std::string& method, const nlohmann::json& params, nlohmann::json* reply,
            std::string* err);

 // After events.subscribe: the next event object (blocks).
  bool read_event(nlohmann::json* event, std::string* err);

 private:
  bool read_line(std::string* line, std::string* err);

  int fd_ = -1;
  std::string path_;
  double timeout_seconds_ = 0;
  std::string buf_;  // bytes received after the last reply line
  int next_id_ = 1;
};

}  // namespace strait::straitctl
