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
)";

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
      sqlite3_exec(db, kSchema, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "?";
    sqlite3_free(err);
    return Error{"internal", "state database " + path + ": " + msg};
  }
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key='schema_version'", -1, &st, nullptr);
  int version = 0;
  if (sqlite3_step(st) == SQLITE_ROW) version = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  if (version > kSchemaVersion)
    return Error{"invalid_argument", "state database " + path + ": schema version " +
                                         std::to_string(version) + " is newer than this straitd (" +
                                         std::to_string(kSchemaVersion) + ")"};
  if (version == 0) {
    if (Status r = s->exec("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                           {std::to_string(kSchemaVersion)});
        !r)
      return r.error();
  }
  return s;
}

Store::~Store() { sqlite3_close(db_); }

// One statement, one transaction (SQLite's autocommit).
Status Store::exec(const std::string& sql, const std::vector<std::string>& args) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK)
    return db_error(db_, "prepare");
  for (size_t i = 0; i < args.size(); i++)
    sqlite3_bind_text(st, static_cast<int>(i + 1), args[i].c_str(), -1, SQLITE_TRANSIENT);
  const int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return db_error(db_, "write");
  return ok();
}

Status Store::put_network(const NetworkSpec& n) {
  return exec("INSERT OR REPLACE INTO networks VALUES (?, ?)", {n.id, to_json(n).dump()});
}

Status Store::delete_network(const std::string& id) {
  return exec("DELETE FROM networks WHERE id = ?", {id});
}

Status Store::put_ports(const std::vector<std::pair<PortSpec, uint16_t>>& ports) {
  if (Status st = exec("BEGIN IMMEDIATE", {}); !st) return st;
  for (const auto& [p, lvlan] : ports) {
    if (Status st = put_port(p, lvlan); !st) {
      (void)exec("ROLLBACK", {});
      return st;
    }
  }
  if (Status st = exec("COMMIT", {}); !st) {
    (void)exec("ROLLBACK", {});
    return st;
  }
  return ok();
}

Status Store::put_port(const PortSpec& p, uint16_t local_vlan) {
  return exec("INSERT OR REPLACE INTO ports VALUES (?, ?, ?)",
              {p.id, to_json(p).dump(), std::to_string(local_vlan)});
}

Status Store::delete_port(const std::string& id) {
  return exec("DELETE FROM ports WHERE id = ?", {id});
}

Result<Store::Saved> Store::load() const {
  Saved saved;
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db_, "SELECT id, spec FROM networks ORDER BY id", -1, &st, nullptr);
  while (sqlite3_step(st) == SQLITE_ROW) {
    const std::string id = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    auto n = parse_network(nlohmann::json::parse(
        reinterpret_cast<const char*>(sqlite3_column_text(st, 1)), nullptr, false));
    if (!n) {
      sqlite3_finalize(st);
      return Error{"invalid_argument", path_ + ": network " + id + ": " + n.error().message};
    }
    saved.networks.push_back(*n);
  }
  sqlite3_finalize(st);
  sqlite3_prepare_v2(db_, "SELECT id, spec, local_vlan FROM ports ORDER BY id", -1, &st, nullptr);
  while (sqlite3_step(st) == SQLITE_ROW) {
    const std::string id = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    auto p = parse_port(nlohmann::json::parse(
        reinterpret_cast<const char*>(sqlite3_column_text(st, 1)), nullptr, false));
    if (!p) {
      sqlite3_finalize(st);
      return Error{"invalid_argument", path_ + ": port " + id + ": " + p.error().message};
    }
    saved.ports.emplace_back(*p, static_cast<uint16_t>(sqlite3_column_int(st, 2)));
  }
  sqlite3_finalize(st);
  return saved;
}

}  // namespace strait::ctl
