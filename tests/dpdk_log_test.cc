// DPDK's log lines reach straitd's logger (control/daemon/dpdk_log.h): same format
// and stream as straitd's own messages, level kept, no syslog.
#include "control/daemon/dpdk_log.h"

#include <gtest/gtest.h>
#include <rte_log.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <sstream>

namespace {

class DpdkLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = spdlog::default_logger();
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    sink->set_pattern("%l|%v");
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink));
    ASSERT_TRUE(strait::ctl::route_dpdk_log());
  }
  void TearDown() override {
    rte_openlog_stream(nullptr);
    spdlog::set_default_logger(saved_);
  }
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> saved_;
};

TEST_F(DpdkLogTest, LinesKeepTheirLevelAndLoseTheNewline) {
  rte_log(RTE_LOG_WARNING, RTE_LOGTYPE_EAL, "EAL: port %d is %s\n", 3, "gone");
  rte_log(RTE_LOG_ERR, RTE_LOGTYPE_EAL, "EAL: cannot do it\n");
  rte_log(RTE_LOG_INFO, RTE_LOGTYPE_EAL, "EAL: fine\n");
  EXPECT_EQ(out_.str(), "warning|EAL: port 3 is gone\nerror|EAL: cannot do it\ninfo|EAL: fine\n");
}

TEST_F(DpdkLogTest, AMessageWithoutNewlineIsNotHeldBack) {
  rte_log(RTE_LOG_NOTICE, RTE_LOGTYPE_EAL, "no newline");
  EXPECT_EQ(out_.str(), "info|no newline\n");
}

TEST_F(DpdkLogTest, DebugLinesDpdkWasAskedForAreShown) {
  const int saved = rte_log_get_level(RTE_LOGTYPE_EAL);
  rte_log_set_level(RTE_LOGTYPE_EAL, RTE_LOG_DEBUG);
  rte_log(RTE_LOG_DEBUG, RTE_LOGTYPE_EAL, "EAL: details\n");
  rte_log_set_level(RTE_LOGTYPE_EAL, saved);
  // (rte_log_set_level says so itself, at debug level: that line comes first)
  EXPECT_TRUE(out_.str().ends_with("\ninfo|(debug) EAL: details\n")) << out_.str();
}

TEST_F(DpdkLogTest, LinesDpdkFiltersOutStayOut) {
  const int saved = rte_log_get_level(RTE_LOGTYPE_EAL);
  rte_log_set_level(RTE_LOGTYPE_EAL, RTE_LOG_WARNING);
  rte_log(RTE_LOG_INFO, RTE_LOGTYPE_EAL, "EAL: chatter\n");
  rte_log_set_level(RTE_LOGTYPE_EAL, saved);
  EXPECT_EQ(out_.str(), "");
}

// ---- rte_vhost: what is normal on a host full of VMs is not news (#23) ----

class VhostLogTest : public DpdkLogTest {
 protected:
  // Registering a registered name returns its type (rte_vhost's own).
  const int vhost_ = rte_log_register("lib.vhost.config");
};

TEST_F(VhostLogTest, VhostUserMessagesOfAGuestBootAreDebug) {
  ASSERT_GE(vhost_, 0);
  rte_log(RTE_LOG_INFO, vhost_, "VHOST_CONFIG: (/run/vhu1.sock) read message %s\n",
          "VHOST_USER_SET_VRING_KICK");
  rte_log(RTE_LOG_INFO, vhost_, "VHOST_CONFIG: (/run/vhu1.sock) vring kick idx:0 file:51\n");
  EXPECT_EQ(out_.str(), "");
  spdlog::set_level(spdlog::level::debug);  // log.level debug shows them
  rte_log(RTE_LOG_INFO, vhost_, "VHOST_CONFIG: (/run/vhu1.sock) read message %s\n",
          "VHOST_USER_SET_VRING_CALL");
  EXPECT_EQ(out_.str(), "debug|VHOST_CONFIG: (/run/vhu1.sock) read message VHOST_USER_SET_VRING_CALL\n");
}

TEST_F(VhostLogTest, VhostUserMessagesAreShownWhenDpdkIsAskedForThem) {
  const int saved = rte_log_get_level(vhost_);
  rte_log_set_level(vhost_, RTE_LOG_DEBUG);  // --log-level=lib.vhost.config:debug
  out_.str("");
  rte_log(RTE_LOG_INFO, vhost_, "VHOST_CONFIG: (/run/vhu1.sock) read message %s\n",
          "VHOST_USER_GET_FEATURES");
  rte_log_set_level(vhost_, saved);
  EXPECT_TRUE(out_.str().starts_with(
      "info|(debug) VHOST_CONFIG: (/run/vhu1.sock) read message VHOST_USER_GET_FEATURES\n"))
      << out_.str();
}

TEST_F(VhostLogTest, AGuestResettingItsSocketIsNotAnError) {
  rte_log(RTE_LOG_ERR, vhost_,
          "VHOST_CONFIG: (/run/vhu1.sock) recvmsg failed on fd 47 (Connection reset by peer)\n");
  rte_log(RTE_LOG_ERR, vhost_, "VHOST_CONFIG: (/run/vhu1.sock) vhost read message failed\n");
  rte_log(RTE_LOG_INFO, vhost_, "VHOST_CONFIG: (/run/vhu2.sock) vhost peer closed\n");
  EXPECT_EQ(out_.str(),
            "info|VHOST_CONFIG: (/run/vhu1.sock) recvmsg failed on fd 47 (Connection reset by "
            "peer)\n"
            "info|VHOST_CONFIG: (/run/vhu1.sock) vhost read message failed\n"
            "info|VHOST_CONFIG: (/run/vhu2.sock) vhost peer closed\n");
}

TEST_F(VhostLogTest, OtherVhostErrorsStayErrors) {
  rte_log(RTE_LOG_ERR, vhost_,
          "VHOST_CONFIG: (/run/vhu1.sock) recvmsg failed on fd 47 (Bad file descriptor)\n");
  rte_log(RTE_LOG_ERR, vhost_, "VHOST_CONFIG: (/run/vhu1.sock) vhost read message failed\n");
  // A read failure of another socket than the one reset, or one after a
  // line of its own that says why, is not a peer leaving.
  rte_log(RTE_LOG_ERR, vhost_,
          "VHOST_CONFIG: (/run/vhu1.sock) recvmsg failed on fd 47 (Connection reset by peer)\n");
  rte_log(RTE_LOG_ERR, vhost_, "VHOST_CONFIG: (/run/vhu2.sock) vhost read message failed\n");
  rte_log(RTE_LOG_ERR, vhost_, "VHOST_CONFIG: (/run/vhu3.sock) Unexpected header size read\n");
  rte_log(RTE_LOG_ERR, vhost_, "VHOST_CONFIG: (/run/vhu3.sock) vhost read message failed\n");
  EXPECT_EQ(out_.str(),
            "error|VHOST_CONFIG: (/run/vhu1.sock) recvmsg failed on fd 47 (Bad file descriptor)\n"
            "error|VHOST_CONFIG: (/run/vhu1.sock) vhost read message failed\n"
            "info|VHOST_CONFIG: (/run/vhu1.sock) recvmsg failed on fd 47 (Connection reset by "
            "peer)\n"
            "error|VHOST_CONFIG: (/run/vhu2.sock) vhost read message failed\n"
            "error|VHOST_CONFIG: (/run/vhu3.sock) Unexpected header size read\n"
            "error|VHOST_CONFIG: (/run/vhu3.sock) vhost read message failed\n");
}

}  // namespace
