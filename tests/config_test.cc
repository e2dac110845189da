// straitd's config file: every key, its defaults, and an error naming the key
// path for every way a value can be wrong.
#include "control/daemon/config.h"

#include <gmock/gmock.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <pwd.h>
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
  EXPECT_EQ(c.ct_capacity, 65536u);
  EXPECT_FALSE(c.ct_tcp_loose);
}

TEST(Config, EmptyFileGivesDefaults) {
  auto r = parse("");
  ASSERT_TRUE(r.ok()) << r.error().message;
  Config defaults;
  EXPECT_EQ(r->state_dir, "/var/lib/strait");
  EXPECT_EQ(r->api_socket, "/run/strait/api.sock");
  EXPECT_EQ(r->worker_lcores, std::vector<unsigned>{1});
  EXPECT_EQ(r->flow_cache_entries, 262144u);
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
  EXPECT_EQ(r->flow_cache_entries, 262144u);
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

TEST(Config, PhysnetVlanRanges) {
  auto c = parse("[physnets.p1]\ndevice = \"net_ring0\"\nvlan_ranges = [\"100:199\", \"4094:4094\"]\n"
                 "[physnets.p2]\ndevice = \"net_ring1\"\n");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->vlan_ranges.at("p1"), (std::vector<VlanRange>{{100, 199}, {4094, 4094}}));
  EXPECT_FALSE(c->vlan_ranges.count("p2"));  // every VLAN
  const std::string p = "[physnets.p1]\ndevice = \"net_ring0\"\nvlan_ranges = ";
  EXPECT_EQ(refusal(p + "[\"100-199\"]\n"),
            "config /etc/strait.toml: physnets.p1.vlan_ranges[0]: \"100-199\" is not MIN:MAX (e.g. \"100:199\")");
  EXPECT_EQ(refusal(p + "[\"100:199\", \"200:100\"]\n"),
            "config /etc/strait.toml: physnets.p1.vlan_ranges[1]: \"200:100\": VLAN ids are 1..4094 and MIN <= MAX");
  EXPECT_THAT(refusal(p + "[\"0:10\"]\n"), HasSubstr("VLAN ids are 1..4094"));
  EXPECT_THAT(refusal(p + "[\"1:4095\"]\n"), HasSubstr("VLAN ids are 1..4094"));
  EXPECT_THAT(refusal(p + "[\"99999999999:1\"]\n"), HasSubstr("VLAN ids are 1..4094"));
  EXPECT_THAT(refusal(p + "[\"1:2:3\"]\n"), HasSubstr("is not MIN:MAX"));
  EXPECT_THAT(refusal(p + "\"100:199\"\n"), HasSubstr("expected an array"));
  EXPECT_THAT(refusal(p + "[100]\n"), HasSubstr("vlan_ranges[0]: expected a string"));
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

// ---- [libvirt] -------------------------------------------------------------

TEST(Config, LibvirtDefaults) {
  auto r = parse("");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->libvirt_enabled);
  EXPECT_EQ(r->libvirt_uri, "qemu:///system");
  r = parse("[libvirt]\n");  // an empty table changes nothing
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->libvirt_enabled);
  EXPECT_EQ(r->libvirt_uri, "qemu:///system");
}

TEST(Config, LibvirtKeys) {
  auto r = parse("[libvirt]\nenabled = false\nuri = \"test:///default\"\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->libvirt_enabled);
  EXPECT_EQ(r->libvirt_uri, "test:///default");
  r = parse("[libvirt]\nuri = \"qemu+ssh://root@host/system\"\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->libvirt_enabled);
  EXPECT_EQ(r->libvirt_uri, "qemu+ssh://root@host/system");
}

TEST(Config, LibvirtErrors) {
  EXPECT_EQ(refusal("libvirt = 1\n"),
            "config /etc/strait.toml: libvirt: expected a table, got integer 1");
  EXPECT_EQ(refusal("[libvirt]\nenable = true\n"),
            "config /etc/strait.toml: libvirt.enable: unknown key (expected enabled, uri)");
  EXPECT_EQ(refusal("[libvirt]\nenabled = \"yes\"\n"),
            "config /etc/strait.toml: libvirt.enabled: expected true or false, got \"yes\"");
  EXPECT_EQ(refusal("[libvirt]\nenabled = 1\n"),
            "config /etc/strait.toml: libvirt.enabled: expected true or false, got integer 1");
  EXPECT_EQ(refusal("[libvirt]\nuri = 5\n"),
            "config /etc/strait.toml: libvirt.uri: expected a string, got integer 5");
  EXPECT_EQ(refusal("[libvirt]\nuri = \"\"\n"), "config /etc/strait.toml: libvirt.uri: is empty");
  EXPECT_EQ(refusal("[libvirt]\nuri = \"qemu\"\n"),
            "config /etc/strait.toml: libvirt.uri: \"qemu\" is not a libvirt URI "
            "(driver:///path)");
}

// ---- [vhost] ---------------------------------------------------------------

TEST(Config, VhostDefaults) {
  auto r = parse("");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->vhost_socket_dir, "/run/strait/vhost");
  EXPECT_EQ(r->vhost_socket_owner, "");
  EXPECT_EQ(r->vhost_socket_group, "");
  EXPECT_EQ(r->vhost_socket_mode, 0660u);
  r = parse("[vhost]\nsocket_group = \"kvm\"\n");  // one key: the others keep their defaults
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->vhost_socket_dir, "/run/strait/vhost");
  EXPECT_EQ(r->vhost_socket_group, "kvm");
  EXPECT_EQ(r->vhost_socket_mode, 0660u);
}

TEST(Config, VhostKeys) {
  auto r = parse(
      "[vhost]\nsocket_dir = \"/var/run/vhost\"\nsocket_owner = \"libvirt-qemu\"\n"
      "socket_group = \"kvm\"\nsocket_mode = \"0640\"\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->vhost_socket_dir, "/var/run/vhost");
  EXPECT_EQ(r->vhost_socket_owner, "libvirt-qemu");
  EXPECT_EQ(r->vhost_socket_group, "kvm");
  EXPECT_EQ(r->vhost_socket_mode, 0640u);
}

TEST(Config, VhostOwnerAndGroupMayBeNumbers) {
  auto r = parse("[vhost]\nsocket_owner = 64055\nsocket_group = 0\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->vhost_socket_owner, "64055");
  EXPECT_EQ(r->vhost_socket_group, "0");
  r = parse("[vhost]\nsocket_owner = 4294967294\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->vhost_socket_owner, "4294967294");
}

TEST(Config, VhostModeAsOctalTextOrInteger) {
  EXPECT_EQ(parse("[vhost]\nsocket_mode = \"660\"\n")->vhost_socket_mode, 0660u);
  EXPECT_EQ(parse("[vhost]\nsocket_mode = \"0600\"\n")->vhost_socket_mode, 0600u);
  EXPECT_EQ(parse("[vhost]\nsocket_mode = 0o666\n")->vhost_socket_mode, 0666u);
  EXPECT_EQ(parse("[vhost]\nsocket_mode = 0o777\n")->vhost_socket_mode, 0777u);
}

TEST(Config, VhostErrors) {
  EXPECT_EQ(refusal("vhost = \"x\"\n"),
            "config /etc/strait.toml: vhost: expected a table, got \"x\"");
  EXPECT_EQ(refusal("[vhost]\nsocket_path = \"/x\"\n"),
            "config /etc/strait.toml: vhost.socket_path: unknown key (expected socket_dir, "
            "socket_owner, socket_group, socket_mode)");
  EXPECT_EQ(refusal("[vhost]\nsocket_dir = \"run/vhost\"\n"),
            "config /etc/strait.toml: vhost.socket_dir: \"run/vhost\" is not an absolute path");
  EXPECT_EQ(refusal("[vhost]\nsocket_dir = \"\"\n"),
            "config /etc/strait.toml: vhost.socket_dir: is empty");
  EXPECT_EQ(refusal("[vhost]\nsocket_dir = 1\n"),
            "config /etc/strait.toml: vhost.socket_dir: expected a string, got integer 1");
}

TEST(Config, VhostOwnerAndGroupErrors) {
  EXPECT_EQ(refusal("[vhost]\nsocket_owner = -1\n"),
            "config /etc/strait.toml: vhost.socket_owner: -1 is outside 0..4294967294");
  EXPECT_EQ(refusal("[vhost]\nsocket_group = 4294967295\n"),
            "config /etc/strait.toml: vhost.socket_group: 4294967295 is outside 0..4294967294");
  EXPECT_EQ(refusal("[vhost]\nsocket_owner = \"\"\n"),
            "config /etc/strait.toml: vhost.socket_owner: is empty");
  EXPECT_EQ(refusal("[vhost]\nsocket_group = true\n"),
            "config /etc/strait.toml: vhost.socket_group: expected a string, got true");
  EXPECT_EQ(refusal("[vhost]\nsocket_owner = 1.5\n"),
            "config /etc/strait.toml: vhost.socket_owner: expected a string, got float 1.5");
}

TEST(Config, VhostModeErrors) {
  const std::string bits =
      "config /etc/strait.toml: vhost.socket_mode: expected permission bits such as \"0660\" "
      "(0..0777)";
  EXPECT_EQ(refusal("[vhost]\nsocket_mode = \"0999\"\n"), bits);
  EXPECT_EQ(refusal("[vhost]\nsocket_mode = \"rw-rw----\"\n"), bits);
  EXPECT_EQ(refusal("[vhost]\nsocket_mode = \"\"\n"), bits);
  EXPECT_EQ(refusal("[vhost]\nsocket_mode = \"01660\"\n"), bits);  // no setuid/sticky bits
  EXPECT_EQ(refusal("[vhost]\nsocket_mode = 0o1000\n"), bits);
  EXPECT_EQ(refusal("[vhost]\nsocket_mode = -1\n"), bits);
  EXPECT_EQ(refusal("[vhost]\nsocket_mode = true\n"), bits);
  const std::string owner_rw =
      "config /etc/strait.toml: vhost.socket_mode: must give the owner read and write (0600)";
  EXPECT_EQ(refusal("[vhost]\nsocket_mode = \"0460\"\n"), owner_rw);
  EXPECT_EQ(refusal("[vhost]\nsocket_mode = 0o200\n"), owner_rw);
}

// ---- [metrics] -------------------------------------------------------------

TEST(Config, MetricsDefaults) {
  auto r = parse("");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->metrics_enabled);
  EXPECT_EQ(r->metrics_address, "127.0.0.1");
  EXPECT_EQ(r->metrics_port, 9464);
  r = parse("[metrics]\n");  // an empty table changes nothing
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->metrics_enabled);
  EXPECT_EQ(r->metrics_address, "127.0.0.1");
  EXPECT_EQ(r->metrics_port, 9464);
}

TEST(Config, MetricsKeys) {
  auto r = parse("[metrics]\nenabled = false\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->metrics_enabled);
  r = parse("[metrics]\nlisten = \"0.0.0.0:1\"\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->metrics_enabled);
  EXPECT_EQ(r->metrics_address, "0.0.0.0");
  EXPECT_EQ(r->metrics_port, 1);
  r = parse("[metrics]\nlisten = \"[::1]:65535\"\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->metrics_address, "::1");  // without brackets: what inet_pton takes
  EXPECT_EQ(r->metrics_port, 65535);
  r = parse("[metrics]\nlisten = \"[fe80::1:2]:9100\"\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->metrics_address, "fe80::1:2");
  EXPECT_EQ(r->metrics_port, 9100);
}

TEST(Config, MetricsErrors) {
  const std::string at = "config /etc/strait.toml: metrics.";
  EXPECT_EQ(refusal("metrics = true\n"),
            "config /etc/strait.toml: metrics: expected a table, got true");
  EXPECT_EQ(refusal("[metrics]\nport = 9464\n"),
            at + "port: unknown key (expected enabled, listen)");
  EXPECT_EQ(refusal("[metrics]\nenabled = \"no\"\n"),
            at + "enabled: expected true or false, got \"no\"");
  EXPECT_EQ(refusal("[metrics]\nlisten = 9464\n"),
            at + "listen: expected a string, got integer 9464");
  EXPECT_EQ(refusal("[metrics]\nlisten = \"\"\n"), at + "listen: is empty");
  EXPECT_EQ(refusal("[metrics]\nlisten = \"127.0.0.1\"\n"),
            at + "listen: \"127.0.0.1\" is not ADDRESS:PORT (such as \"127.0.0.1:9464\" or "
                 "\"[::1]:9464\")");
  EXPECT_EQ(refusal("[metrics]\nlisten = \"[::1\"\n"),
            at + "listen: \"[::1\" is not ADDRESS:PORT (such as \"127.0.0.1:9464\" or "
                 "\"[::1]:9464\")");
  EXPECT_EQ(refusal("[metrics]\nlisten = \"[::1]9464\"\n"),
            at + "listen: \"[::1]9464\" is not ADDRESS:PORT (such as \"127.0.0.1:9464\" or "
                 "\"[::1]:9464\")");
  EXPECT_EQ(refusal("[metrics]\nlisten = \"::1:9464\"\n"),
            at + "listen: \"::1:9464\": an IPv6 address goes in brackets (\"[::1]:9464\")");
  // Host names are refused: no resolver at start-up.
  EXPECT_EQ(refusal("[metrics]\nlisten = \"localhost:9464\"\n"),
            at + "listen: \"localhost\" is not a numeric IPv4 address");
  EXPECT_EQ(refusal("[metrics]\nlisten = \":9464\"\n"),
            at + "listen: \"\" is not a numeric IPv4 address");
  EXPECT_EQ(refusal("[metrics]\nlisten = \"127.0.0.256:9464\"\n"),
            at + "listen: \"127.0.0.256\" is not a numeric IPv4 address");
  EXPECT_EQ(refusal("[metrics]\nlisten = \"[127.0.0.1]:9464\"\n"),
            at + "listen: \"127.0.0.1\" is not a numeric IPv6 address");
  for (const char* port : {"http", "", "0", "65536", "99999999999", "-1", "+80", " 80", "9464 "}) {
    EXPECT_EQ(refusal("[metrics]\nlisten = \"127.0.0.1:" + std::string(port) + "\"\n"),
              at + "listen: port \"" + port + "\" is not a number 1..65535")
        << port;
  }
  EXPECT_EQ(refusal("[metrics]\nlisten = \"[::1]:x\"\n"),
            at + "listen: port \"x\" is not a number 1..65535");
}

// ---- [conntrack] -----------------------------------------------------------

TEST(Config, ConntrackDefaults) {
  for (const char* text : {"", "[conntrack]\n"}) {
    auto r = parse(text);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->ct_capacity, 262144u);
    EXPECT_TRUE(r->ct_tcp_loose);
  }
}

TEST(Config, ConntrackKeys) {
  auto r = parse("[conntrack]\ncapacity = 1024\ntcp_loose = false\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->ct_capacity, 1024u);
  EXPECT_FALSE(r->ct_tcp_loose);
  r = parse("[conntrack]\ncapacity = 16777216\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->ct_capacity, 16777216u);
  EXPECT_TRUE(r->ct_tcp_loose);
}

TEST(Config, ConntrackErrors) {
  const std::string at = "config /etc/strait.toml: conntrack.";
  EXPECT_EQ(refusal("conntrack = 5\n"),
            "config /etc/strait.toml: conntrack: expected a table, got integer 5");
  EXPECT_EQ(refusal("[conntrack]\nsize = 5\n"),
            at + "size: unknown key (expected capacity, tcp_loose)");
  EXPECT_EQ(refusal("[conntrack]\ncapacity = 1023\n"),
            at + "capacity: 1023 is outside 1024..16777216");
  EXPECT_EQ(refusal("[conntrack]\ncapacity = 16777217\n"),
            at + "capacity: 16777217 is outside 1024..16777216");
  EXPECT_EQ(refusal("[conntrack]\ncapacity = \"big\"\n"),
            at + "capacity: expected an integer, got \"big\"");
  EXPECT_EQ(refusal("[conntrack]\ntcp_loose = 1\n"),
            at + "tcp_loose: expected true or false, got integer 1");
}

// ---- [offload] -------------------------------------------------------------

TEST(Config, OffloadDefaultsAndKeys) {
  for (const char* text : {"", "[offload]\n"}) {
    auto r = parse(text);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE(r->offload_rte_flow);
  }
  auto r = parse("[offload]\nrte_flow = false\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->offload_rte_flow);
}

TEST(Config, OffloadErrors) {
  const std::string at = "config /etc/strait.toml: offload.";
  EXPECT_EQ(refusal("offload = true\n"),
            "config /etc/strait.toml: offload: expected a table, got true");
  EXPECT_EQ(refusal("[offload]\nflow = true\n"), at + "flow: unknown key (expected rte_flow)");
  EXPECT_EQ(refusal("[offload]\nrte_flow = \"yes\"\n"),
            at + "rte_flow: expected true or false, got \"yes\"");
}

constexpr const char* kUnderlay = "[physnets.underlay]\ndevice = \"net_ring9\"\n";

TEST(Config, NoVtepByDefault) { EXPECT_FALSE(parse("")->vtep.has_value()); }

TEST(Config, VtepDefaults) {
  auto r = parse(std::string(kUnderlay) + "[vtep]\nlocal_ip = \"10.99.0.1\"\nphysnet = \"underlay\"\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->vtep);
  EXPECT_EQ(ip_to_string(r->vtep->local_ip), "10.99.0.1");
  EXPECT_EQ(r->vtep->physnet, "underlay");
  EXPECT_EQ(r->vtep->udp_port, 4789);
  EXPECT_EQ(r->vtep->ttl, 64);
  EXPECT_FALSE(r->vtep->next_hop);
  EXPECT_FALSE(r->vtep->next_hop_mac);
  EXPECT_FALSE(r->vtep->learning);
  EXPECT_EQ(r->vtep->underlay_mtu, 1500);
}

TEST(Config, VtepKeys) {
  // [vtep] before [physnets] in the file: still found.
  auto r = parse(
      "[vtep]\nlocal_ip = \"10.99.0.1\"\nphysnet = \"underlay\"\nudp_port = 8472\nttl = 1\n"
      "next_hop = \"10.99.0.254\"\nnext_hop_mac = \"02:00:00:00:00:FE\"\nlearning = true\n"
      "underlay_mtu = 9000\n" +
      std::string(kUnderlay));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->vtep->udp_port, 8472);
  EXPECT_EQ(r->vtep->ttl, 1);
  EXPECT_EQ(ip_to_string(*r->vtep->next_hop), "10.99.0.254");
  EXPECT_EQ(mac_to_string(*r->vtep->next_hop_mac), "02:00:00:00:00:fe");
  EXPECT_TRUE(r->vtep->learning);
  EXPECT_EQ(r->vtep->underlay_mtu, 9000);
}

TEST(Config, VtepErrors) {
  const std::string at = "config /etc/strait.toml: vtep.";
  auto vtep = [](const std::string& extra, const char* local = "10.99.0.1") {
    return std::string(kUnderlay) + "[vtep]\nlocal_ip = \"" + local +
           "\"\nphysnet = \"underlay\"\n" + extra;
  };
  EXPECT_EQ(refusal(std::string(kUnderlay) + "[vtep]\nphysnet = \"underlay\"\n"),
            at + "local_ip: missing (the IPv4 address of this host's VTEP)");
  EXPECT_EQ(refusal(vtep("", "fe80::1")), at + "local_ip: \"fe80::1\" is not an IPv4 address");
  EXPECT_EQ(refusal(vtep("", "224.0.0.1")), at + "local_ip: 224.0.0.1 is not a unicast address");
  EXPECT_EQ(refusal(vtep("", "0.0.0.0")), at + "local_ip: 0.0.0.0 is not a unicast address");
  EXPECT_EQ(refusal(std::string(kUnderlay) + "[vtep]\nlocal_ip = \"10.99.0.1\"\n"),
            at + "physnet: missing (the physnet whose NIC carries the underlay)");
  EXPECT_EQ(refusal("[vtep]\nlocal_ip = \"10.99.0.1\"\nphysnet = \"underlay\"\n"),
            at + "physnet: \"underlay\" is not in [physnets]");
  EXPECT_EQ(refusal(vtep("udp_port = 0\n")), at + "udp_port: 0 is outside 1..65535");
  EXPECT_EQ(refusal(vtep("udp_port = 65536\n")), at + "udp_port: 65536 is outside 1..65535");
  EXPECT_EQ(refusal(vtep("ttl = 0\n")), at + "ttl: 0 is outside 1..255");
  EXPECT_EQ(refusal(vtep("ttl = 256\n")), at + "ttl: 256 is outside 1..255");
  EXPECT_EQ(refusal(vtep("underlay_mtu = 1279\n")), at + "underlay_mtu: 1279 is outside 1280..9216");
  EXPECT_EQ(refusal(vtep("underlay_mtu = 9217\n")), at + "underlay_mtu: 9217 is outside 1280..9216");
  EXPECT_EQ(refusal(vtep("next_hop = \"gw\"\n")), at + "next_hop: \"gw\" is not an IPv4 address");
  EXPECT_EQ(refusal(vtep("next_hop = \"10.99.0.1\"\n")),
            at + "next_hop: 10.99.0.1 is not a unicast address other than local_ip");
  EXPECT_EQ(refusal(vtep("next_hop_mac = \"01:00:5e:00:00:01\"\n")),
            at + "next_hop_mac: \"01:00:5e:00:00:01\" is not a unicast MAC address");
  EXPECT_EQ(refusal(vtep("next_hop_mac = \"zz\"\n")),
            at + "next_hop_mac: \"zz\" is not a unicast MAC address");
  EXPECT_EQ(refusal(vtep("learning = \"yes\"\n")),
            at + "learning: expected true or false, got \"yes\"");
  EXPECT_THAT(refusal(vtep("vni = 5\n")), StartsWith(at + "vni: unknown key (expected local_ip"));
  EXPECT_EQ(refusal("vtep = 1\n"), "config /etc/strait.toml: vtep: expected a table, got integer 1");
}

// ---- [privileges] ------------------------------------------------------------
// Users and groups come from this host's databases: `nobody`, `daemon` and
// root are in every Debian base system.

TEST(Config, NoPrivilegesByDefault) { EXPECT_FALSE(parse("")->privileges.has_value()); }

TEST(Config, PrivilegesUserByNameOrNumberAndItsLoginGroup) {
  const passwd* nobody = getpwnam("nobody");
  if (!nobody) GTEST_SKIP() << "no user nobody on this host";
  const group* login = getgrgid(nobody->pw_gid);
  for (const std::string& user : {std::string("\"nobody\""), std::to_string(nobody->pw_uid)}) {
    auto r = parse("[privileges]\nuser = " + user + "\n");
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_TRUE(r->privileges.has_value());
    EXPECT_EQ(r->privileges->user, "nobody");
    EXPECT_EQ(r->privileges->uid, nobody->pw_uid);
    EXPECT_EQ(r->privileges->gid, nobody->pw_gid);
    EXPECT_EQ(r->privileges->group, login ? login->gr_name : std::to_string(nobody->pw_gid));
    EXPECT_TRUE(r->privileges->capabilities.empty());
  }
}

TEST(Config, PrivilegesGroupAndCapabilities) {
  if (!getpwnam("nobody") || !getgrnam("daemon")) GTEST_SKIP() << "no nobody or daemon here";
  auto r = parse(
      "[privileges]\nuser = \"nobody\"\ngroup = \"daemon\"\n"
      "capabilities = [\"CAP_NET_ADMIN\", \"CAP_NET_RAW\"]\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->privileges->group, "daemon");
  EXPECT_EQ(r->privileges->gid, getgrnam("daemon")->gr_gid);
  EXPECT_EQ(r->privileges->capabilities, (std::vector<int>{CAP_NET_ADMIN, CAP_NET_RAW}));
}

TEST(Config, PrivilegesErrors) {
  if (!getpwnam("nobody") || !getpwnam("daemon")) GTEST_SKIP() << "no nobody or daemon here";
  const std::string at = "config /etc/strait.toml: privileges.";
  const std::string nobody = "[privileges]\nuser = \"nobody\"\n";
  EXPECT_EQ(refusal("[privileges]\n"),
            at + "user: missing (the user straitd becomes once started)");
  EXPECT_EQ(refusal("[privileges]\nuser = \"no-such-user\"\n"),
            at + "user: \"no-such-user\" is not a user of this host");
  EXPECT_EQ(refusal("[privileges]\nuser = \"root\"\n"),
            at + "user: \"root\" is root: name an unprivileged user");
  EXPECT_EQ(refusal("[privileges]\nuser = 0\n"), at + "user: \"0\" is root: name an unprivileged user");
  EXPECT_EQ(refusal("[privileges]\nuser = -1\n"), at + "user: -1 is outside 0..4294967294");
  EXPECT_EQ(refusal(nobody + "group = \"no-such-group\"\n"),
            at + "group: \"no-such-group\" is not a group of this host");
  EXPECT_THAT(refusal(nobody + "capabilities = [\"CAP_SETUID\"]\n"),
              StartsWith(at + "capabilities[0]: \"CAP_SETUID\" is not one straitd keeps "
                              "(CAP_NET_RAW, CAP_NET_ADMIN,"));
  EXPECT_EQ(refusal(nobody + "capabilities = [\"CAP_NET_RAW\", \"CAP_NET_RAW\"]\n"),
            at + "capabilities[1]: CAP_NET_RAW is listed twice");
  EXPECT_EQ(refusal(nobody + "capabilities = \"CAP_NET_RAW\"\n"),
            at + "capabilities: expected an array of names, got \"CAP_NET_RAW\"");
  EXPECT_EQ(refusal(nobody + "capabilities = [13]\n"),
            at + "capabilities[0]: expected a string, got integer 13");
  EXPECT_THAT(refusal(nobody + "uid = 1\n"), StartsWith(at + "uid: unknown key"));
  // Once it is the user, straitd can give its sockets to no one else.
  EXPECT_THAT(refusal(nobody + "[vhost]\nsocket_owner = \"daemon\"\n"),
              StartsWith("config /etc/strait.toml: vhost.socket_owner: straitd becomes nobody"));
  EXPECT_TRUE(parse(nobody + "[vhost]\nsocket_owner = \"nobody\"\n").ok());
  EXPECT_THAT(refusal(nobody + "[vhost]\nsocket_group = \"daemon\"\n"),
              StartsWith("config /etc/strait.toml: vhost.socket_group: user nobody ([privileges] "
                         "user) is not in group daemon"));
}

}  // namespace
}  // namespace strait::ctl
