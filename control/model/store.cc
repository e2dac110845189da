#include "control/model/store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

namespace strait::ctl {
namespace {

Error db_error(sqlite3* db, const std::string& what) {
  return {"internal", "state database: " + what + ": " + sqlite3_errmsg(db)};
}

constexpr const char* kSchema = R"(
  CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS networks (id TEXT PRIMARY KEY, spec TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS ports (id TEXT PRIMARY KEY, spec TEXT NOT NULL,
                                    local_vlan INTEGER NOT NULL);
  CREATE TABLE IF NOT EXISTS security_groups (id TEXT PRIMARY KEY, spec TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS tunnels (network TEXT PRIMARY KEY, spec TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS physnets (name TEXT PRIMARY KEY, device TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS vtep (id INTEGER PRIMARY KEY CHECK (id = 1), spec TEXT NOT NULL);
)";

// The rows of `sql` (id, spec JSON, ...) through `parse`, in id order; a row
// that no longer parses is an error naming it.
template <typename Parse, typename Add>
Status load_rows(sqlite3* db, const std::string& path, const char* sql, const char* what,
                 Parse parse, Add add) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) != SQLITE_OK)
    return db_error(db, std::string("read ") + what);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const std::string id = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    auto v = parse(nlohmann::json::parse(reinterpret_cast<const char*>(sqlite3_column_text(st, 1)),
                                         nullptr, false));
    if (!v) {
      sqlite3_finalize(st);
      return Error{"invalid_argument", path + ": " + what + " " + id + ": " + v.error().message};
    }
    add(std::move(*v), st);
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return db_error(db, std::string("read ") + what);
  return ok();
}

Error os_error(const std::string& path, const std::string& what) {
  return {"internal", "state database " + path + ": " + what + ": " + std::strerror(errno)};
}

// Creates the missing tables and sets the schema version, in one
// transaction: the version moves with the tables.
Status write_schema(sqlite3* db, const std::string& path) {
  const std::string sql = std::string("BEGIN IMMEDIATE;") + kSchema +
                          "INSERT OR REPLACE INTO meta VALUES ('schema_version', '" +
                          std::to_string(Store::kSchemaVersion) + "'); COMMIT;";
  char* err = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) == SQLITE_OK) return ok();
  std::string msg = err ? err : "?";
  sqlite3_free(err);
  sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  return Error{"internal", "state database " + path + ": " + msg};
}

// A new database is made whole as strait.db.new and renamed into place, so
// an existing strait.db is always one a straitd finished making: an empty
// one is damage, never a first start cut short.
Status create_database(const std::string& path) {
  const std::string fresh = path + ".new";
  unlink(fresh.c_str());  // what a first start cut short left
  unlink((fresh + "-journal").c_str());
  // Owner-only from its first byte: the database names every port.
  const int fd = open(fresh.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return os_error(fresh, "create");
  close(fd);
  sqlite3* db = nullptr;
  Status made = sqlite3_open_v2(fresh.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK
                    ? write_schema(db, fresh)
                    : Status(db_error(db, "create " + fresh));
  sqlite3_close(db);
  if (!made) return made;
  if (rename(fresh.c_str(), path.c_str()) != 0) return os_error(path, "rename " + fresh);
  // The new name is on disk before any change is committed under it.
  const std::string dir = path.substr(0, path.rfind('/') + 1);
  const int dfd = open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0 || fsync(dfd) != 0) {
    Error e = os_error(path, "sync its directory");
    if (dfd >= 0) close(dfd);
    return e;
  }
  close(dfd);
  return ok();
}

// A missing database is created; an empty one is refused: SQLite would take
// it for a new database, and the switch would start empty, every network
// and port forgotten without a word.
Status create_unless_there(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return os_error(path, "stat");
    return create_database(path);
  }
  if (st.st_size == 0)
    return invalid("state database " + path +
                   " is empty (0 bytes): the state it held is lost (a truncated file?); "
                   "restore it from a backup, or remove it to start as a new switch");
  return ok();
}

// The schema version of a database of Strait's. Every Strait database has
// had meta.schema_version since the first; an SQLite file without it is
// someone else's (or a different program's), never upgraded into ours.
Result<int> schema_version(sqlite3* db, const std::string& path) {
  sqlite3_stmt* st = nullptr;
  constexpr const char* kHasMeta =
      "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='meta'";
  if (sqlite3_prepare_v2(db, kHasMeta, -1, &st, nullptr) != SQLITE_OK)
    return db_error(db, "open " + path);  // "file is not a database", ...
  const bool has_meta = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == 1;
  sqlite3_finalize(st);
  std::optional<int> version;
  if (has_meta &&
      sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key='schema_version'", -1, &st,
                         nullptr) == SQLITE_OK) {
    if (sqlite3_step(st) == SQLITE_ROW) version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
  }
  if (!version || *version < 1)
    return invalid("state database " + path +
                   " is not Strait's: it has no schema_version in a meta table (another "
                   "program's SQLite file?); move it away, or point state_dir elsewhere");
  return *version;
}

// The database and the files SQLite keeps beside it in WAL mode.
Status make_owner_only(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm"}) {
    const std::string f = path + suffix;
    if (chmod(f.c_str(), 0600) != 0 && errno != ENOENT) return os_error(f, "chmod");
  }
  return ok();
}

}  // namespace

Result<std::unique_ptr<Store>> Store::open(const std::string& state_dir, Durability d) {
  const std::string path = state_dir + "/strait.db";
  if (Status there = create_unless_there(path); !there) return there.error();
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    Error e = db_error(db, "open " + path);
    sqlite3_close(db);
    return e;
  }
  std::unique_ptr<Store> s(new Store(db, path));
  // Read before anything is written: a database that is not ours, or is
  // newer, is left as it is.
  auto version = schema_version(db, path);
  if (!version) return version.error();
  if (*version > kSchemaVersion)
    return Error{"invalid_argument", "state database " + path + ": schema version " +
                                         std::to_string(*version) +
                                         " is newer than this straitd (" +
                                         std::to_string(kSchemaVersion) + ")"};
  // Owner-only before WAL mode makes -wal and -shm: SQLite gives them the
  // database's mode. Those of an older straitd (0644) are tightened too.
  if (Status own = make_owner_only(path); !own) return own.error();
  // WAL + synchronous=FULL: a committed change is on disk before we answer
  // (NORMAL where etcd replays what a power loss takes: store.h).
  char* err = nullptr;
  const char* pragmas = d == Durability::kEveryCommit
                            ? "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                            : "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;";
  if (sqlite3_exec(db, pragmas, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "?";
    sqlite3_free(err);
    return Error{"internal", "state database " + path + ": " + msg};
  }
  // An upgrade: every version only adds tables (v2: security_groups, v3:
  // tunnels, v5: physnets and vtep, filled at the next start) or optional
  // fields to rows (v4: FDB entries' ip, networks' arp_responder), so
  // creating the missing tables is the whole upgrade.
  if (*version < kSchemaVersion) {
    if (Status up = write_schema(db, path); !up) return up.error();
  }
  return s;
}

Store::~Store() {
  for (auto& [sql, st] : stmts_) sqlite3_finalize(st);
  sqlite3_close(db_);
}

// One statement, one transaction (SQLite's autocommit).
Status Store::exec(const std::string& sql, const std::vector<std::string>& args) {
  auto it = stmts_.find(sql);
  if (it == stmts_.end()) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK)
      return db_error(db_, "prepare");
    it = stmts_.emplace(sql, st).first;
  }
  sqlite3_stmt* st = it->second;
  for (size_t i = 0; i < args.size(); i++)
    sqlite3_bind_text(st, static_cast<int>(i + 1), args[i].c_str(), -1, SQLITE_TRANSIENT);
  const int rc = sqlite3_step(st);
  Status out = rc == SQLITE_DONE ? ok() : Status(db_error(db_, "write"));
  sqlite3_reset(st);  // ready for the next use, and no longer holding the transaction open
  sqlite3_clear_bindings(st);
  return out;
}

Status Store::put_network(const NetworkSpec& n) {
  return exec("INSERT OR REPLACE INTO networks VALUES (?, ?)", {n.id, to_json(n).dump()});
}

Status Store::delete_network(const std::string& id) {
  return transaction([&]() -> Status {
    if (Status st = exec("DELETE FROM tunnels WHERE network = ?", {id}); !st) return st;
    return exec("DELETE FROM networks WHERE id = ?", {id});
  });
}

Status Store::put_tunnel(const std::string& network, const TunnelSpec& t) {
  if (t.empty()) return exec("DELETE FROM tunnels WHERE network = ?", {network});
  return exec("INSERT OR REPLACE INTO tunnels VALUES (?, ?)", {network, to_json(t).dump()});
}

Status Store::transaction(const std::function<Status()>& body) {
  if (Status st = exec("BEGIN IMMEDIATE", {}); !st) return st;
  if (Status st = body(); !st) {
    (void)exec("ROLLBACK", {});
    return st;
  }
  if (Status st = exec("COMMIT", {}); !st) {
    (void)exec("ROLLBACK", {});
    return st;
  }
  return ok();
}

Status Store::put_ports(const std::vector<std::pair<PortSpec, uint16_t>>& ports) {
  return transaction([&]() -> Status {
    for (const auto& [p, lvlan] : ports)
      if (Status st = put_port(p, lvlan); !st) return st;
    return ok();
  });
}

Status Store::put_port(const PortSpec& p, uint16_t local_vlan) {
  return exec("INSERT OR REPLACE INTO ports VALUES (?, ?, ?)",
              {p.id, to_json(p).dump(), std::to_string(local_vlan)});
}

Status Store::delete_port(const std::string& id) {
  return exec("DELETE FROM ports WHERE id = ?", {id});
}

Status Store::put_security_group(const SecurityGroup& g) {
  return exec("INSERT OR REPLACE INTO security_groups VALUES (?, ?)", {g.id, to_json(g).dump()});
}

Status Store::delete_security_group(const std::string& id) {
  return exec("DELETE FROM security_groups WHERE id = ?", {id});
}

Status Store::record_config(const RecordedConfig& c) {
  return transaction([&]() -> Status {
    if (Status st = exec("DELETE FROM physnets", {}); !st) return st;
    for (const auto& [name, device] : c.physnets)
      if (Status st = exec("INSERT INTO physnets VALUES (?, ?)", {name, device}); !st) return st;
    if (Status st = exec("DELETE FROM vtep", {}); !st) return st;
    if (!c.vtep.empty())
      if (Status st = exec("INSERT INTO vtep VALUES (1, ?)", {c.vtep}); !st) return st;
    return exec("INSERT OR REPLACE INTO meta VALUES ('config_recorded_at', ?)",
                {std::to_string(c.recorded_at)});
  });
}

Result<Store::RecordedConfig> Store::load_recorded_config() const {
  RecordedConfig c;
  auto each_row = [&](const char* sql, auto add) -> Status {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, sql, -1, &st, nullptr) != SQLITE_OK)
      return db_error(db_, "read recorded config");
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) add(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return db_error(db_, "read recorded config");
    return ok();
  };
  auto text = [](sqlite3_stmt* st, int col) {
    return std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, col)));
  };
  Status st = each_row("SELECT name, device FROM physnets ORDER BY name",
                       [&](sqlite3_stmt* row) { c.physnets.emplace(text(row, 0), text(row, 1)); });
  if (!st) return st.error();
  st = each_row("SELECT spec FROM vtep", [&](sqlite3_stmt* row) { c.vtep = text(row, 0); });
  if (!st) return st.error();
  st = each_row("SELECT value FROM meta WHERE key = 'config_recorded_at'",
                [&](sqlite3_stmt* row) { c.recorded_at = sqlite3_column_int64(row, 0); });
  if (!st) return st.error();
  return c;
}

Result<Store::Saved> Store::load() const {
  Saved saved;
  Status st =
      load_rows(db_, path_, "SELECT id, spec FROM networks ORDER BY id", "network", parse_network,
                [&](NetworkSpec n, sqlite3_stmt*) { saved.networks.push_back(std::move(n)); });
  if (!st) return st.error();
  // Rows of schema v1 have no port-security fields: they parse as a plain port.
  st = load_rows(db_, path_, "SELECT id, spec, local_vlan FROM ports ORDER BY id", "port",
                 parse_port, [&](PortSpec p, sqlite3_stmt* row) {
                   saved.ports.emplace_back(std::move(p),
                                            static_cast<uint16_t>(sqlite3_column_int(row, 2)));
                 });
  if (!st) return st.error();
  st = load_rows(db_, path_, "SELECT id, spec FROM security_groups ORDER BY id", "security group",
                 parse_security_group, [&](SecurityGroup g, sqlite3_stmt*) {
                   saved.security_groups.push_back(std::move(g));
                 });
  if (!st) return st.error();
  st = load_rows(db_, path_, "SELECT network, spec FROM tunnels ORDER BY network", "tunnel of network",
                 parse_tunnel, [&](TunnelSpec t, sqlite3_stmt* row) {
                   saved.tunnels.emplace_back(
                       reinterpret_cast<const char*>(sqlite3_column_text(row, 0)), std::move(t));
                 });
  if (!st) return st.error();
  auto recorded = load_recorded_config();
  if (!recorded) return recorded.error();
  saved.config = std::move(*recorded);
  return saved;
}

}  // namespace strait::ctl
