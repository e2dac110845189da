// The state directory: one holder at a time, owner-only, and a shared
// directory is never chmod-ed.
#include "control/daemon/state_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/expect_refused.h"

namespace strait::ctl {
namespace {

class StateDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/strait-state-dir-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    top_ = tmpl;
    dir_ = top_ + "/state";
  }
  void TearDown() override { std::filesystem::remove_all(top_); }

  unsigned mode(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
    return st.st_mode & 07777;
  }

  std::string top_, dir_;
};

TEST_F(StateDirTest, NewDirectoryIsOwnerOnly) {
  auto lock = StateDirLock::take(dir_);
  ASSERT_TRUE(lock.ok()) << lock.error().message;
  EXPECT_EQ(mode(dir_), 0700u);
  EXPECT_EQ(mode(dir_ + "/strait.lock"), 0600u);
}

TEST_F(StateDirTest, SecondHolderIsRefusedNamingTheDirectoryAndPid) {
  auto first = StateDirLock::take(dir_);
  ASSERT_TRUE(first.ok()) << first.error().message;
  // flock conflicts between two open files, also in one process.
  EXPECT_REFUSED(StateDirLock::take(dir_), "conflict",
                 "state_dir " + dir_ + " is in use by another straitd (pid " +
                     std::to_string(getpid()) + ")");
}

TEST_F(StateDirTest, LockGoesWithItsHolder) {
  { auto first = StateDirLock::take(dir_); ASSERT_TRUE(first.ok()); }
  auto again = StateDirLock::take(dir_);
  EXPECT_TRUE(again.ok()) << again.error().message;
}

TEST_F(StateDirTest, WiderDirectoryOfAnOlderStraitdIsTightened) {
  std::filesystem::create_directories(dir_);
  std::ofstream(dir_ + "/strait.db") << "x";
  std::ofstream(dir_ + "/strait.db-wal") << "x";
  ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
  auto lock = StateDirLock::take(dir_);
  ASSERT_TRUE(lock.ok()) << lock.error().message;
  EXPECT_EQ(mode(dir_), 0700u);
}

TEST_F(StateDirTest, SharedDirectoryIsRefusedAndLeftAsItIs) {
  std::filesystem::create_directories(dir_);
  std::ofstream(dir_ + "/someone-elses.conf") << "x";
  ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
  EXPECT_REFUSED(StateDirLock::take(dir_), "invalid_argument",
                 "state_dir " + dir_ + ": mode 0755 lets other users in, and it holds "
                 "someone-elses.conf, which is not Strait's");
  EXPECT_EQ(mode(dir_), 0755u);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/strait.lock"));
}

}  // namespace
}  // namespace strait::ctl
