// The state database: what is saved loads back through the API's parsers,
// the v1 -> v2 (security groups), v2 -> v3 (VXLAN tunnels) and v4 -> v5
// (recorded physnets and VTEP) upgrades happen in place, a database of a
// newer schema, an empty file and another program's SQLite file are refused
// and left alone, and the files are owner-only.
#include "control/model/store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/expect_refused.h"

namespace strait::ctl {
namespace {

using json = nlohmann::json;

constexpr const char* kUuidA = "11111111-2222-3333-4444-555555555555";
constexpr const char* kUuidB = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/strait-store-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<Store> open() {
    auto s = Store::open(dir_);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
    return s.ok() ? std::move(*s) : nullptr;
  }

  // Runs SQL on the database file directly, as another program would.
  void sql(const std::string& statements) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ + "/strait.db").c_str(), &db), SQLITE_OK);
    char* err = nullptr;
    const int rc = sqlite3_exec(db, statements.c_str(), nullptr, nullptr, &err);
    EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
    sqlite3_free(err);
    sqlite3_close(db);
  }

  std::string query_one(const std::string& q) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open((dir_ + "/strait.db").c_str(), &db), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    std::string out = "(none)";
    if (sqlite3_prepare_v2(db, q.c_str(), -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
      out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
  }

  std::string dir_;
};

NetworkSpec network(json j) { return *parse_network(j); }

PortSpec port(json j) {
  auto p = parse_port(j);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  return p.ok() ? *p : PortSpec{};
}

SecurityGroup group(json j) {
  auto g = parse_security_group(j);
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
  return g.ok() ? *g : SecurityGroup{};
}

json secured_port() {
  return {{"id", kUuidA},
          {"network", "net1"},
          {"mac", "02:00:00:00:00:01"},
          {"fixed_ips", {"10.0.0.1"}},
          {"attach", {{"type", "vhost"}, {"path", "/run/vhu0.sock"}}},
          {"security_groups", {"web", "db"}},
          {"allowed_address_pairs",
           {{{"ip_address", "10.0.0.100"}},
            {{"ip_address", "10.1.0.0/16"}, {"mac_address", "02:aa:00:00:00:09"}}}}};
}

json web_group() {
  return {{"id", "web"},
          {"name", "Web servers"},
          {"rules",
           {{{"id", "r1"},
             {"direction", "ingress"},
             {"protocol", "tcp"},
             {"port_range_min", 80},
             {"port_range_max", 80},
             {"remote_ip_prefix", "10.0.0.0/8"}},
            {{"id", "r2"}, {"direction", "ingress"}, {"remote_group_id", "db"}},
            {{"id", "r3"}, {"direction", "egress"}, {"ethertype", "IPv6"}}}}};
}

TEST_F(StoreTest, EverythingRoundTrips) {
  auto s = open();
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->put_network(network({{"id", "net1"}, {"type", "local"}})).ok());
  ASSERT_TRUE(s->put_security_group(group(web_group())).ok());
  ASSERT_TRUE(s->put_security_group(group({{"id", "db"}})).ok());
  PortSpec p = port(secured_port());
  ASSERT_TRUE(s->put_port(p, 7).ok());
  PortSpec plain = port({{"id", kUuidB},
                         {"network", "net1"},
                         {"mac", "02:00:00:00:00:02"},
                         {"attach", {{"type", "ethdev"}, {"devargs", "net_ring1"}}},
                         {"port_security_enabled", true}});
  ASSERT_TRUE(s->put_port(plain, 7).ok());
  s.reset();

  s = open();
  ASSERT_TRUE(s);
  auto saved = s->load();
  ASSERT_TRUE(saved.ok()) << saved.error().message;
  ASSERT_EQ(saved->networks.size(), 1u);
  ASSERT_EQ(saved->ports.size(), 2u);
  EXPECT_EQ(to_json(saved->ports[0].first), to_json(p));
  EXPECT_EQ(saved->ports[0].second, 7);
  EXPECT_TRUE(saved->ports[0].first.port_security_enabled);
  EXPECT_EQ(saved->ports[0].first.allowed_address_pairs, p.allowed_address_pairs);
  EXPECT_EQ(to_json(saved->ports[1].first), to_json(plain));
  EXPECT_TRUE(saved->ports[1].first.port_security_enabled);
  ASSERT_EQ(saved->security_groups.size(), 2u);
  EXPECT_EQ(saved->security_groups[0].id, "db");  // id order
  EXPECT_EQ(to_json(saved->security_groups[1]), to_json(group(web_group())));
  EXPECT_EQ(saved->security_groups[1].name, "Web servers");
}

TEST_F(StoreTest, PutReplacesAndDeleteRemovesAGroup) {
  auto s = open();
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->put_security_group(group(web_group())).ok());
  SecurityGroup g = group(web_group());
  g.rules.erase(g.rules.begin());  // a rule deleted: the group's row is rewritten
  ASSERT_TRUE(s->put_security_group(g).ok());
  auto saved = s->load();
  ASSERT_TRUE(saved.ok()) << saved.error().message;
  ASSERT_EQ(saved->security_groups.size(), 1u);
  EXPECT_EQ(saved->security_groups[0].rules.size(), 2u);
  ASSERT_TRUE(s->delete_security_group("web").ok());
  ASSERT_TRUE(s->delete_security_group("never-saved").ok());
  saved = s->load();
  ASSERT_TRUE(saved.ok());
  EXPECT_TRUE(saved->security_groups.empty());
}

TEST_F(StoreTest, NewDatabaseHasSchemaV5) {
  ASSERT_TRUE(open());
  EXPECT_EQ(query_one("SELECT value FROM meta WHERE key='schema_version'"), "5");
  EXPECT_EQ(query_one("SELECT name FROM sqlite_master WHERE name='physnets'"), "physnets");
  EXPECT_EQ(query_one("SELECT name FROM sqlite_master WHERE name='vtep'"), "vtep");
  EXPECT_EQ(query_one("SELECT name FROM sqlite_master WHERE name='tunnels'"), "tunnels");
  EXPECT_EQ(query_one("SELECT name FROM sqlite_master WHERE name='security_groups'"),
            "security_groups");
}

// A database written by the release before security groups.
TEST_F(StoreTest, UpgradesV1InPlace) {
  sql(R"(
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE networks (id TEXT PRIMARY KEY, spec TEXT NOT NULL);
    CREATE TABLE ports (id TEXT PRIMARY KEY, spec TEXT NOT NULL, local_vlan INTEGER NOT NULL);
    INSERT INTO meta VALUES ('schema_version', '1');
    INSERT INTO networks VALUES ('net1', '{"id":"net1","type":"local","physnet":null,"segmentation_id":null,"mtu":1500}');
    INSERT INTO ports VALUES ('11111111-2222-3333-4444-555555555555',
      '{"id":"11111111-2222-3333-4444-555555555555","network":"net1","mac":"02:00:00:00:00:01","fixed_ips":["10.0.0.1"],"attach":{"type":"vhost","path":"/run/vhu0.sock","mode":"client"}}', 3);
  )");
  EXPECT_EQ(query_one("SELECT name FROM sqlite_master WHERE name='security_groups'"), "(none)");
  auto s = open();
  ASSERT_TRUE(s);
  EXPECT_EQ(query_one("SELECT value FROM meta WHERE key='schema_version'"), "5");
  auto saved = s->load();
  ASSERT_TRUE(saved.ok()) << saved.error().message;
  ASSERT_EQ(saved->ports.size(), 1u);
  const PortSpec& p = saved->ports[0].first;
  EXPECT_EQ(p.id, kUuidA);
  EXPECT_EQ(saved->ports[0].second, 3);
  EXPECT_FALSE(p.port_security_enabled);
  EXPECT_TRUE(p.security_groups.empty());
  EXPECT_TRUE(saved->security_groups.empty());
  // The upgraded database takes groups, and a port rewritten in the new form.
  ASSERT_TRUE(s->put_security_group(group({{"id", "db"}})).ok());
  PortSpec q = p;
  q.security_groups = {"db"};
  q.port_security_enabled = true;
  ASSERT_TRUE(s->put_port(q, 3).ok());
  s.reset();
  s = open();  // opening again is no second upgrade
  ASSERT_TRUE(s);
  saved = s->load();
  ASSERT_TRUE(saved.ok()) << saved.error().message;
  EXPECT_EQ(saved->security_groups.size(), 1u);
  EXPECT_EQ(saved->ports[0].first.security_groups, std::vector<std::string>{"db"});
}

TunnelSpec tunnel(json j) {
  auto t = parse_tunnel(j);
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message);
  return t.ok() ? *t : TunnelSpec{};
}

json vxlan_net(const std::string& id, int vni) {
  return {{"id", id}, {"type", "vxlan"}, {"segmentation_id", vni}, {"mtu", 1450}};
}

TEST_F(StoreTest, TunnelsRoundTripAndGoWithTheirNetwork) {
  auto s = open();
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->put_network(network(vxlan_net("vx1", 5001))).ok());
  json quiet = vxlan_net("vx2", 16777215);
  quiet["arp_responder"] = false;
  ASSERT_TRUE(s->put_network(network(quiet)).ok());
  const TunnelSpec t1 = tunnel({{"fdb",
                                 {{{"mac", "02:00:00:00:01:01"}, {"vtep", "10.99.0.2"},
                                   {"ip", "10.0.0.2"}},
                                  {{"mac", "02:00:00:00:01:02"}, {"vtep", "10.99.0.3"}}}},
                                {"flood", {"10.99.0.2", "10.99.0.3"}}});
  const TunnelSpec t2 = tunnel({{"flood", {"10.99.0.4"}}});
  ASSERT_TRUE(s->put_tunnel("vx1", t1).ok());
  ASSERT_TRUE(s->put_tunnel("vx2", t2).ok());
  s.reset();
  s = open();
  ASSERT_TRUE(s);
  auto saved = s->load();
  ASSERT_TRUE(saved.ok()) << saved.error().message;
  ASSERT_EQ(saved->networks.size(), 2u);
  EXPECT_EQ(saved->networks[1].seg_id, 16777215u);
  EXPECT_EQ(saved->networks[1].type, dp::NetType::kVxlan);
  EXPECT_TRUE(saved->networks[0].arp_responder);
  EXPECT_FALSE(saved->networks[1].arp_responder);
  ASSERT_EQ(t1.ips.size(), 1u);  // the remote port's address, for the ARP responder
  ASSERT_EQ(saved->tunnels.size(), 2u);
  EXPECT_EQ(saved->tunnels[0].first, "vx1");
  EXPECT_EQ(saved->tunnels[0].second, t1);
  EXPECT_EQ(saved->tunnels[1].second, t2);
  // An empty state deletes the row; deleting a network deletes its tunnels.
  ASSERT_TRUE(s->put_tunnel("vx2", TunnelSpec{}).ok());
  ASSERT_TRUE(s->delete_network("vx1").ok());
  saved = s->load();
  ASSERT_TRUE(saved.ok()) << saved.error().message;
  EXPECT_TRUE(saved->tunnels.empty());
  EXPECT_EQ(saved->networks.size(), 1u);
}

// A database written by the release before VXLAN (schema 2).
TEST_F(StoreTest, UpgradesV2InPlace) {
  sql(R"(
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE networks (id TEXT PRIMARY KEY, spec TEXT NOT NULL);
    CREATE TABLE ports (id TEXT PRIMARY KEY, spec TEXT NOT NULL, local_vlan INTEGER NOT NULL);
    CREATE TABLE security_groups (id TEXT PRIMARY KEY, spec TEXT NOT NULL);
    INSERT INTO meta VALUES ('schema_version', '2');
    INSERT INTO networks VALUES ('net1', '{"id":"net1","type":"vlan","physnet":"p1","segmentation_id":100,"mtu":1500}');
    INSERT INTO security_groups VALUES ('db', '{"id":"db","name":"","rules":[]}');
  )");
  auto s = open();
  ASSERT_TRUE(s);
  EXPECT_EQ(query_one("SELECT value FROM meta WHERE key='schema_version'"), "5");
  auto saved = s->load();
  ASSERT_TRUE(saved.ok()) << saved.error().message;
  ASSERT_EQ(saved->networks.size(), 1u);
  EXPECT_EQ(saved->networks[0].seg_id, 100u);
  EXPECT_EQ(saved->security_groups.size(), 1u);
  EXPECT_TRUE(saved->tunnels.empty());
  ASSERT_TRUE(s->put_network(network(vxlan_net("vx1", 7))).ok());
  ASSERT_TRUE(s->put_tunnel("vx1", tunnel({{"flood", {"10.99.0.2"}}})).ok());
  s.reset();
  s = open();
  ASSERT_TRUE(s);
  saved = s->load();
  ASSERT_TRUE(saved.ok()) << saved.error().message;
  EXPECT_EQ(saved->tunnels.size(), 1u);
}

// A database of schema 3 (tunnels without addresses): rows read as they
// are, the responder on by default, and rows with addresses from then on.
TEST_F(StoreTest, UpgradesV3InPlace) {
  sql(R"(
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE networks (id TEXT PRIMARY KEY, spec TEXT NOT NULL);
    CREATE TABLE ports (id TEXT PRIMARY KEY, spec TEXT NOT NULL, local_vlan INTEGER NOT NULL);
    CREATE TABLE security_groups (id TEXT PRIMARY KEY, spec TEXT NOT NULL);
    CREATE TABLE tunnels (network TEXT PRIMARY KEY, spec TEXT NOT NULL);
    INSERT INTO meta VALUES ('schema_version', '3');
    INSERT INTO networks VALUES ('vx1', '{"id":"vx1","type":"vxlan","physnet":null,"segmentation_id":5001,"mtu":1450}');
    INSERT INTO tunnels VALUES ('vx1', '{"fdb":[{"mac":"02:00:00:00:01:01","vtep":"10.99.0.2"}],"flood":[]}');
  )");
  auto s = open();
  ASSERT_TRUE(s);
  EXPECT_EQ(query_one("SELECT value FROM meta WHERE key='schema_version'"), "5");
  auto saved = s->load();
  ASSERT_TRUE(saved.ok()) << saved.error().message;
  ASSERT_EQ(saved->networks.size(), 1u);
  EXPECT_TRUE(saved->networks[0].arp_responder);
  ASSERT_EQ(saved->tunnels.size(), 1u);
  EXPECT_EQ(saved->tunnels[0].second.fdb.size(), 1u);
  EXPECT_TRUE(saved->tunnels[0].second.ips.empty());
}

// The physnet mappings and VTEP settings in force: recorded whole, replaced
// whole (a physnet gone from the config goes from the record), read back.
TEST_F(StoreTest, RecordedConfigRoundTripsAndIsReplacedWhole) {
  auto s = open();
  ASSERT_TRUE(s);
  auto saved = s->load();
  ASSERT_TRUE(saved.ok());
  EXPECT_EQ(saved->config.recorded_at, 0);  // never recorded
  EXPECT_TRUE(saved->config.physnets.empty());
  Store::RecordedConfig c{{{"p1", "net_ring_a"}, {"p2", "0000:3b:00.0"}},
                          R"({"local_ip":"10.0.0.1","udp_port":4789})", 1700000000};
  ASSERT_TRUE(s->record_config(c).ok());
  s.reset();
  s = open();
  saved = s->load();
  ASSERT_TRUE(saved.ok()) << saved.error().message;
  EXPECT_EQ(saved->config.physnets, c.physnets);
  EXPECT_EQ(saved->config.vtep, c.vtep);
  EXPECT_EQ(saved->config.recorded_at, 1700000000);
  ASSERT_TRUE(s->record_config({{{"p1", "net_ring_b"}}, "", 1700000100}).ok());
  saved = s->load();
  ASSERT_TRUE(saved.ok());
  EXPECT_EQ(saved->config.physnets, (std::map<std::string, std::string>{{"p1", "net_ring_b"}}));
  EXPECT_EQ(saved->config.vtep, "");
  EXPECT_EQ(saved->config.recorded_at, 1700000100);
}

// A database of schema 4: everything in it loads as before; the new tables
// exist and stay empty until the next start records the config.
TEST_F(StoreTest, UpgradesV4InPlace) {
  sql(R"(
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE networks (id TEXT PRIMARY KEY, spec TEXT NOT NULL);
    CREATE TABLE ports (id TEXT PRIMARY KEY, spec TEXT NOT NULL, local_vlan INTEGER NOT NULL);
    CREATE TABLE security_groups (id TEXT PRIMARY KEY, spec TEXT NOT NULL);
    CREATE TABLE tunnels (network TEXT PRIMARY KEY, spec TEXT NOT NULL);
    INSERT INTO meta VALUES ('schema_version', '4');
    INSERT INTO networks VALUES ('n1', '{"id":"n1","type":"vlan","physnet":"p1","segmentation_id":100,"mtu":1500}');
    INSERT INTO networks VALUES ('vx1', '{"id":"vx1","type":"vxlan","physnet":null,"segmentation_id":5001,"mtu":1450,"arp_responder":false}');
    INSERT INTO ports VALUES ('11111111-2222-3333-4444-555555555555', '{"id":"11111111-2222-3333-4444-555555555555","network":"n1","mac":"02:00:00:00:00:01","attach":{"type":"ethdev","devargs":"net_ring_x"}}', 7);
    INSERT INTO security_groups VALUES ('sg1', '{"id":"sg1","rules":[]}');
    INSERT INTO tunnels VALUES ('vx1', '{"fdb":[{"mac":"02:00:00:00:01:01","vtep":"10.99.0.2","ip":"192.168.0.5"}],"flood":["10.99.0.3"]}');
  )");
  auto s = open();
  ASSERT_TRUE(s);
  EXPECT_EQ(query_one("SELECT value FROM meta WHERE key='schema_version'"), "5");
  EXPECT_EQ(query_one("SELECT count(*) FROM physnets"), "0");
  EXPECT_EQ(query_one("SELECT count(*) FROM vtep"), "0");
  auto saved = s->load();
  ASSERT_TRUE(saved.ok()) << saved.error().message;
  ASSERT_EQ(saved->networks.size(), 2u);
  EXPECT_EQ(saved->networks[0].physnet, "p1");
  EXPECT_FALSE(saved->networks[1].arp_responder);
  ASSERT_EQ(saved->ports.size(), 1u);
  EXPECT_EQ(saved->ports[0].second, 7);
  EXPECT_EQ(saved->security_groups.size(), 1u);
  ASSERT_EQ(saved->tunnels.size(), 1u);
  EXPECT_EQ(saved->tunnels[0].second.fdb.size(), 1u);
  EXPECT_EQ(saved->tunnels[0].second.flood.size(), 1u);
  EXPECT_EQ(saved->config.recorded_at, 0);
  EXPECT_TRUE(saved->config.physnets.empty());
  EXPECT_EQ(saved->config.vtep, "");
}

TEST_F(StoreTest, BadTunnelRowIsNamed) {
  auto s = open();
  ASSERT_TRUE(s);
  sql(R"(INSERT INTO tunnels VALUES ('vx1', '{"fdb":[{"mac":"ff:ff:ff:ff:ff:ff","vtep":"10.0.0.1"}]}');)");
  EXPECT_REFUSED(s->load(), "invalid_argument", "tunnel of network vx1: entries[0].mac");
}

TEST_F(StoreTest, NewerSchemaIsRefusedAndLeftAlone) {
  sql(R"(
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    INSERT INTO meta VALUES ('schema_version', '6');
  )");
  EXPECT_REFUSED(Store::open(dir_), "invalid_argument",
                 "schema version 6 is newer than this straitd (5)");
  EXPECT_EQ(query_one("SELECT name FROM sqlite_master WHERE name='security_groups'"), "(none)");
  EXPECT_EQ(query_one("SELECT value FROM meta WHERE key='schema_version'"), "6");
}

TEST_F(StoreTest, BadGroupRowIsNamed) {
  auto s = open();
  ASSERT_TRUE(s);
  sql(R"(INSERT INTO security_groups VALUES ('g1', '{"id":"g1","rules":[{"id":"r","direction":"up"}]}');)");
  EXPECT_REFUSED(s->load(), "invalid_argument",
                 "security group g1: rules[0].direction: \"up\" is not one of ingress, egress");
  sql("DELETE FROM security_groups; INSERT INTO security_groups VALUES ('g2', 'not json');");
  EXPECT_REFUSED(s->load(), "invalid_argument", "security group g2: params: expected an object");
}

// SQLite takes a 0-byte file for a new database: a truncated strait.db
// started an empty switch without a word.
TEST_F(StoreTest, EmptyDatabaseIsRefusedNotStartedAfresh) {
  const std::string db = dir_ + "/strait.db";
  { std::ofstream create(db); }
  EXPECT_REFUSED(Store::open(dir_), "invalid_argument",
                 "state database " + db + " is empty (0 bytes): the state it held is lost");
  EXPECT_EQ(std::filesystem::file_size(db), 0u);
}

TEST_F(StoreTest, ForeignSqliteFileIsRefusedAndLeftAlone) {
  sql("CREATE TABLE notes (text TEXT);");
  EXPECT_REFUSED(Store::open(dir_), "invalid_argument",
                 "state database " + dir_ + "/strait.db is not Strait's: it has no schema_version");
  EXPECT_EQ(query_one("SELECT count(*) FROM sqlite_master"), "1");
  EXPECT_EQ(query_one("PRAGMA journal_mode"), "delete");
  // A meta table without the version is not enough.
  sql("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);");
  EXPECT_REFUSED(Store::open(dir_), "invalid_argument", "is not Strait's");
  EXPECT_EQ(query_one("SELECT count(*) FROM sqlite_master WHERE type='table'"), "2");
}

TEST_F(StoreTest, NotAnSqliteFileIsRefused) {
  std::ofstream(dir_ + "/strait.db") << std::string(8192, 'x');
  EXPECT_REFUSED(Store::open(dir_), "internal", "file is not a database");
}

// A new database appears whole: the first open leaves no strait.db.new, and
// one a start cut short left behind is replaced.
TEST_F(StoreTest, NewDatabaseIsMadeAsideAndRenamedWhole) {
  std::ofstream(dir_ + "/strait.db.new") << "half";
  auto s = open();
  ASSERT_TRUE(s);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/strait.db.new"));
  EXPECT_EQ(query_one("SELECT value FROM meta WHERE key='schema_version'"), "5");
}

unsigned file_mode(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Any local user could read the ports table (0644).
TEST_F(StoreTest, DatabaseFilesAreOwnerOnly) {
  const std::string db = dir_ + "/strait.db";
  {
    auto s = open();
    ASSERT_TRUE(s);
    ASSERT_TRUE(s->put_network(network({{"id", "n1"}, {"type", "local"}})).ok());
    for (const char* f : {"", "-wal", "-shm"}) EXPECT_EQ(file_mode(db + f), 0600u) << f;
  }
  // As an older straitd left them.
  ASSERT_EQ(chmod(db.c_str(), 0644), 0);
  auto s = open();
  ASSERT_TRUE(s);
  for (const char* f : {"", "-wal", "-shm"}) EXPECT_EQ(file_mode(db + f), 0600u) << f;
  auto saved = s->load();
  ASSERT_TRUE(saved.ok());
  EXPECT_EQ(saved->networks.size(), 1u);
}

// Rows saved before socket paths were normalised load in the one spelling.
TEST_F(StoreTest, OldRowWithAnUnnormalisedSocketPathLoadsNormalised) {
  auto s = open();
  ASSERT_TRUE(s);
  PortSpec p = port({{"id", kUuidA},
                     {"network", "n1"},
                     {"mac", "02:00:00:00:00:01"},
                     {"attach", {{"type", "vhost"}, {"path", "/run/vhost/vm1.sock"}}}});
  json row = to_json(p);
  row["attach"]["path"] = "/run//vhost/./vm1.sock";
  sql("INSERT INTO ports VALUES ('" + std::string(kUuidA) + "', '" + row.dump() + "', 3);");
  auto saved = s->load();
  ASSERT_TRUE(saved.ok()) << saved.error().message;
  ASSERT_EQ(saved->ports.size(), 1u);
  EXPECT_EQ(saved->ports[0].first.attach.path, "/run/vhost/vm1.sock");
}

}  // namespace
}  // namespace strait::ctl
