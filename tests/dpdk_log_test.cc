// DPDK's log lines reach straitd's logger (control/dpdk_log.h): same format
// and stream as straitd's own messages, level kept, no syslog.
#include "control/dpdk_log.h"

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

}  // namespace
