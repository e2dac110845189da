// straitd's config file: every key, its defaults, and an error naming the key
// path for every way a value can be wrong.
#include "control/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace strait::ctl {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

Result<Config> parse(const std::string& text) { return parse_config(text, "/etc/strait.toml"); }

// The error message of a config that must be refused.
std::string refusal(const std::string& text) {
  auto r = parse(text);
  if (r.ok()) return "(accepted)";
  EXPECT_EQ(r.error().code, "invalid_argument");
  return r.error().message;
}

TEST(Config, FullFile) {
  auto r = load_config(STRAIT_SOURCE_DIR "/tests/data/config_full.toml");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const Config& c = r.value();
  EXPECT_EQ(c.state_dir, "/tmp/strait-state");
  EXPECT_EQ(c.api_socket, "/tmp/strait-test/api.sock");
  EXPECT_EQ(c.worker_lcores, (std::vector<unsigned>{1, 3}));
  EXPECT_EQ(c.flow_cache_entries, 131072u);
  EXPECT_EQ(c.idle_sleep_us, 50u);
  EXPECT_EQ(c.physnets, (std::map<std::string, std::string>{
                            {"physnet1", "net_ring0"},
                            {"physnet2", "net_pcap0,rx_pcap=/tmp/in.pcap,tx_pcap=/tmp/out.pcap"},
                            {"ext.net-3", "0000:01:00.0"}}));
}

TEST(Config, EmptyFileGivesDefaults) {
  auto r = parse("");
  ASSERT_TRUE(r.ok()) << r.error().message;
  Config defaults;
  EXPECT_EQ(r->state_dir, "/var/lib/strait");
  EXPECT_EQ(r->api_socket, "/run/strait/api.sock");
  EXPECT_EQ(r->worker_lcores, std::vector<unsigned>{1});
  EXPECT_EQ(r->flow_cache_entries, 65536u);
  EXPECT_EQ(r->idle_sleep_us, 0u);
  EXPECT_TRUE(r->physnets.empty());
  EXPECT_EQ(r->worker_lcores, defaults.worker_lcores);
}

TEST(Config, PartialDatapathKeepsOtherDefaults) {
  EXPECT_EQ(parse("[datapath]\nmac_aging_s = 1\n")->mac_aging_s, 1u);
  EXPECT_EQ(parse("")->mac_aging_s, 300u);
  EXPECT_EQ(refusal("[datapath]\nmac_aging_s = 0\n"),
            "config /etc/strait.toml: datapath.mac_aging_s: 0 is outside 1..86400");
  auto r = parse("[datapath]\nidle_sleep_us = 100000\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->idle_sleep_us, 100000u);
  EXPECT_EQ(r->flow_cache_entries, 65536u);
  EXPECT_EQ(r->worker_lcores, std::vector<unsigned>{1});
}

TEST(Config, BoundsAccepted) {
  auto r = parse("[datapath]\nworkers = [0, 127]\nflow_cache_entries = 1024\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->worker_lcores, (std::vector<unsigned>{0, 127}));
  r = parse("[datapath]\nflow_cache_entries = 16777216\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
}

TEST(Config, SyntaxErrorHasLineAndColumn) {
  std::string msg = refusal("state_dir = \"/x\"\n\n[datapath]\nworkers = [1,\n");
  EXPECT_THAT(msg, StartsWith("config /etc/strait.toml:"));
  auto r = parse("state_dir = \"/x\"\napi_socket = /run/x\n");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, StartsWith("config /etc/strait.toml:2:")) << r.error().message;
}

TEST(Config, SyntaxErrorInFileNamesTheFile) {
  char path[] = "/tmp/strait-config-test-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string text = "[datapath]\nworkers = [1]\nworkers = [2]\n";  // duplicate key
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  auto r = load_config(path);
  std::remove(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "invalid_argument");
  EXPECT_THAT(r.error().message, StartsWith(std::string("config ") + path + ":3:"));
}

TEST(Config, MissingFile) {
  auto r = load_config("/nonexistent/strait.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "invalid_argument");
  EXPECT_EQ(r.error().message,
            "config /nonexistent/strait.toml: cannot open: No such file or directory");
}

TEST(Config, DirectoryIsNotAFile) {
  auto r = load_config("/tmp");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("config /tmp: cannot read"));
}

TEST(Config, UnknownTopLevelKey) {
  EXPECT_THAT(refusal("state_dir = \"/x\"\nstatedir = \"/y\"\n"),
              StartsWith("config /etc/strait.toml: statedir: unknown key"));
}

TEST(Config, UnknownTable) {
  EXPECT_THAT(refusal("[vxlan]\nvtep = \"10.0.0.1\"\n"),
              StartsWith("config /etc/strait.toml: vxlan: unknown table"));
}

TEST(Config, UnknownDatapathKey) {
  EXPECT_THAT(refusal("[datapath]\nworker = [1]\n"),
              StartsWith("config /etc/strait.toml: datapath.worker: unknown key"));
}

TEST(Config, UnknownPhysnetKey) {
  EXPECT_THAT(refusal("[physnets.p1]\ndevice = \"net_ring0\"\nmtu = 9000\n"),
              StartsWith("config /etc/strait.toml: physnets.p1.mtu: unknown key"));
}

TEST(Config, StateDirMustBeNonEmptyString) {
  EXPECT_EQ(refusal("state_dir = 5\n"),
            "config /etc/strait.toml: state_dir: expected a string, got integer 5");
  EXPECT_EQ(refusal("state_dir = \"\"\n"), "config /etc/strait.toml: state_dir: is empty");
}

TEST(Config, ApiSocketMustFitSunPath) {
  EXPECT_EQ(refusal("api_socket = true\n"),
            "config /etc/strait.toml: api_socket: expected a string, got true");
  EXPECT_THAT(refusal("api_socket = \"/" + std::string(120, 's') + "\"\n"),
              StartsWith("config /etc/strait.toml: api_socket: path is longer than 107 bytes"));
}

TEST(Config, DatapathMustBeATable) {
  EXPECT_EQ(refusal("datapath = 1\n"),
            "config /etc/strait.toml: datapath: expected a table, got integer 1");
}

TEST(Config, WorkersOutOfRange) {
  EXPECT_EQ(refusal("[datapath]\nworkers = [1, 200]\n"),
            "config /etc/strait.toml: datapath.workers[1]: 200 is outside 0..127");
  EXPECT_EQ(refusal("[datapath]\nworkers = [-1]\n"),
            "config /etc/strait.toml: datapath.workers[0]: -1 is outside 0..127");
}

TEST(Config, WorkersMustBeDistinct) {
  EXPECT_EQ(refusal("[datapath]\nworkers = [1, 2, 1]\n"),
            "config /etc/strait.toml: datapath.workers[2]: lcore 1 is listed twice");
}

TEST(Config, WorkersMustBeANonEmptyArrayOfIntegers) {
  EXPECT_THAT(refusal("[datapath]\nworkers = []\n"),
              StartsWith("config /etc/strait.toml: datapath.workers: is empty"));
  EXPECT_THAT(refusal("[datapath]\nworkers = 1\n"),
              StartsWith("config /etc/strait.toml: datapath.workers: expected an array"));
  EXPECT_EQ(refusal("[datapath]\nworkers = [1, \"2\"]\n"),
            "config /etc/strait.toml: datapath.workers[1]: expected an integer, got \"2\"");
  EXPECT_EQ(refusal("[datapath]\nworkers = [1.5]\n"),
            "config /etc/strait.toml: datapath.workers[0]: expected an integer, got float 1.5");
}

TEST(Config, FlowCacheEntriesRange) {
  EXPECT_EQ(refusal("[datapath]\nflow_cache_entries = 1023\n"),
            "config /etc/strait.toml: datapath.flow_cache_entries: 1023 is outside 1024..16777216");
  EXPECT_EQ(refusal("[datapath]\nflow_cache_entries = 16777217\n"),
            "config /etc/strait.toml: datapath.flow_cache_entries: 16777217 is outside "
            "1024..16777216");
  EXPECT_THAT(refusal("[datapath]\nflow_cache_entries = \"64k\"\n"),
              HasSubstr("datapath.flow_cache_entries: expected an integer"));
}

TEST(Config, IdleSleepRange) {
  EXPECT_EQ(refusal("[datapath]\nidle_sleep_us = 100001\n"),
            "config /etc/strait.toml: datapath.idle_sleep_us: 100001 is outside 0..100000");
  EXPECT_EQ(refusal("[datapath]\nidle_sleep_us = -5\n"),
            "config /etc/strait.toml: datapath.idle_sleep_us: -5 is outside 0..100000");
}

TEST(Config, PhysnetNeedsDevice) {
  EXPECT_THAT(refusal("[physnets.p1]\n"),
              StartsWith("config /etc/strait.toml: physnets.p1.device: missing"));
  EXPECT_EQ(refusal("[physnets.p1]\ndevice = \"\"\n"),
            "config /etc/strait.toml: physnets.p1.device: is empty");
  EXPECT_EQ(refusal("[physnets.p1]\ndevice = 0\n"),
            "config /etc/strait.toml: physnets.p1.device: expected a string, got integer 0");
  EXPECT_THAT(refusal("[physnets.p1]\ndevice = \"net_pcap0, rx_pcap=a\"\n"),
              StartsWith("config /etc/strait.toml: physnets.p1.device: "));
}

TEST(Config, PhysnetMustBeATable) {
  EXPECT_EQ(refusal("[physnets]\np1 = \"net_ring0\"\n"),
            "config /etc/strait.toml: physnets.p1: expected a table, got \"net_ring0\"");
  EXPECT_EQ(refusal("physnets = [1]\n"),
            "config /etc/strait.toml: physnets: expected a table, got an array");
}

TEST(Config, PhysnetNameSyntax) {
  EXPECT_THAT(refusal("[physnets.\"a b\"]\ndevice = \"net_ring0\"\n"),
              StartsWith("config /etc/strait.toml: physnets.\"a b\": is not a physnet name"));
  EXPECT_THAT(refusal("[physnets.\"" + std::string(65, 'p') + "\"]\ndevice = \"net_ring0\"\n"),
              HasSubstr("is not a physnet name"));
}

TEST(Config, PhysnetsMayNotShareADevice) {
  // Other devargs, same ethdev name: the same device.
  EXPECT_EQ(refusal("[physnets.a]\ndevice = \"net_pcap0,rx_pcap=x\"\n"
                    "[physnets.b]\ndevice = \"net_pcap0,rx_pcap=y\"\n"),
            "config /etc/strait.toml: physnets.b.device: ethdev net_pcap0 is already the device "
            "of physnets.a");
}

}  // namespace
}  // namespace strait::ctl
