#include "control/daemon/state_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace strait::ctl {
namespace {

Error os_error(const std::string& dir, const std::string& what, int err) {
  return invalid("state_dir " + dir + ": " + what + ": " + std::strerror(err));
}

// What straitd keeps in its state directory: the lock, the database and
// the files SQLite keeps beside it (strait.db-wal, -shm; strait.db.new
// while a new one is made).
bool is_strait_file(const std::string& name) {
  return name == StateDirLock::kFileName || name.rfind("strait.db", 0) == 0;
}

// Tightening is what a daemon does to its own directory (older straitd
// made it 0755). A directory that holds other files too is shared (a
// state_dir of "/var/lib" by mistake): making it 0700 would lock every other
// user out of it, so it is refused instead.
Status make_owner_only(const std::string& dir) {
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0) return os_error(dir, "stat", errno);
  if (!S_ISDIR(st.st_mode)) return invalid("state_dir " + dir + ": not a directory");
  if ((st.st_mode & 077) == 0) return ok();
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!is_strait_file(name)) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
      return invalid("state_dir " + dir + ": mode " + mode + " lets other users in, and it holds " +
                     name + ", which is not Strait's: give straitd a directory of its own, or " +
                     "make this one owner-only (chmod 0700)");
    }
  }
  if (ec) return os_error(dir, "read", ec.value());
  if (chmod(dir.c_str(), st.st_mode & 0700) != 0) return os_error(dir, "chmod", errno);
  return ok();
}

// The pid the holder wrote, "" when unreadable.
std::string holder_pid(int fd) {
  char buf[32] = {};
  const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return "";
  std::string pid(buf, static_cast<size_t>(n));
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return pid.find_first_not_of("0123456789") == std::string::npos ? pid : "";
}

}  // namespace

Result<StateDirLock> StateDirLock::take(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return invalid("state_dir " + dir + ": " + ec.message());
  if (Status st = make_owner_only(dir); !st) return st.error();
  const std::string path = dir + "/" + kFileName;
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return os_error(dir, std::string("open ") + kFileName, errno);
  // flock: held by this open file, released when the process ends however
  // it ends; never by a close() of some other descriptor (POSIX locks are).
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string pid = holder_pid(fd);
    close(fd);
    if (err != EWOULDBLOCK) return os_error(dir, std::string("lock ") + kFileName, err);
    return conflict("state_dir " + dir + " is in use by another straitd" +
                    (pid.empty() ? "" : " (pid " + pid + ")") +
                    ": one straitd per state directory");
  }
  const std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    const int err = errno;
    close(fd);
    return os_error(dir, std::string("write ") + kFileName, err);
  }
  return StateDirLock(fd);
}

StateDirLock::~StateDirLock() {
  if (fd_ >= 0) close(fd_);
}

}  // namespace strait::ctl
