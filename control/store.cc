#include "control/store.h"

#include <sqlite3.h>

#include <nlohmann/json.hpp>

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

}  // namespace

Result<std::unique_ptr<Store>> Store::open(const std::string& state_dir) {
  const std::string path = state_dir + "/strait.db";
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    Error e = db_error(db, "open " + path);
    sqlite3_close(db);
    return e;
  }
  std::unique_ptr<Store> s(new Store(db, path));
  // WAL + synchronous=FULL: a committed change is on disk before we answer.
  char* err = nullptr;
  if (sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", nullptr, nullptr,
                   &err) != SQLITE_OK ||
      sqlite3_exec(db,
                   "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
                   nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "?";
    sqlite3_free(err);
    return Error{"internal", "state database " + path + ": " + msg};
  }
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key='schema_version'", -1, &st, nullptr);
  int version = 0;
  if (sqlite3_step(st) == SQLITE_ROW) version = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  // Checked before any table is created: a newer database is left as it is.
  if (version > kSchemaVersion)
    return Error{"invalid_argument", "state database " + path + ": schema version " +
                                         std::to_string(version) + " is newer than this straitd (" +
                                         std::to_string(kSchemaVersion) + ")"};
  if (version < kSchemaVersion) {
    // New database, or an upgrade: every version only adds tables (v2:
    // security_groups, v3: tunnels, v5: physnets and vtep, filled at the
    // next start) or optional fields to rows (v4: FDB entries' ip, networks'
    // arp_responder), so creating the missing tables is the whole upgrade.
    // One transaction: the version moves with the tables.
    if (Status r = s->exec("BEGIN IMMEDIATE", {}); !r) return r.error();
    if (sqlite3_exec(db, kSchema, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "?";
      sqlite3_free(err);
      (void)s->exec("ROLLBACK", {});
      return Error{"internal", "state database " + path + ": " + msg};
    }
    if (Status r = s->exec("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                           {std::to_string(kSchemaVersion)});
        !r) {
      (void)s->exec("ROLLBACK", {});
      return r.error();
    }
    if (Status r = s->exec("COMMIT", {}); !r) {
      (void)s->exec("ROLLBACK", {});
      return r.error();
    }
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
