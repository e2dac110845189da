#pragma once
// The state directory (config state_dir) belongs to one straitd: two on one
// database silently undid each other's acknowledged changes, so the second
// is refused. And it is owner-only: the database names every port with its
// MAC and addresses, which no other local user has to read.
#include <string>
#include <utility>

#include "dataplane/result.h"

namespace strait::ctl {

class StateDirLock {
 public:
  // The lock file inside the state directory; it holds the holder's pid.
  static constexpr const char* kFileName = "strait.lock";

  // Creates `dir` owner-only (0700), or tightens an existing one with group
  // or other permissions to 0700, then locks it for as long as the returned
  // object lives (flock on dir/strait.lock, before the database is opened).
  // conflict, naming the directory and the holder's pid, when another
  // process holds it. A directory with group or other permissions that also
  // holds files that are not Strait's is not straitd's own: it is left as
  // it is and refused (invalid_argument).
  static Result<StateDirLock> take(const std::string& dir);

  StateDirLock(StateDirLock&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  StateDirLock& operator=(StateDirLock&&) = delete;
  ~StateDirLock();

 private:
  explicit StateDirLock(int fd) : fd_(fd) {}
  int fd_;  // the locked file: closing it (at exit too) releases the lock
};

}  // namespace strait::ctl
