#pragma once
// The persistent state: networks, port bindings with their local VLANs and
// security groups with their rules, in SQLite under state_dir. Every API change is one transaction, committed
// before the change is published, so what an acknowledged reply promised
// survives a crash. Rows hold the same JSON the API takes, so loading goes
// through the same validation as a request.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "control/model.h"
#include "control/result.h"

struct sqlite3;

namespace strait::ctl {

class Store {
 public:
  // 2: security_groups table (a v1 database is upgraded in place on open).
  static constexpr int kSchemaVersion = 2;

  // Opens (creating if needed) state_dir/strait.db. Refuses a database of
  // a newer schema than this build knows.
  static Result<std::unique_ptr<Store>> open(const std::string& state_dir);
  ~Store();

  Status put_network(const NetworkSpec& n);
  Status delete_network(const std::string& id);
  Status put_port(const PortSpec& p, uint16_t local_vlan);
  // Several bindings in one transaction: all of them are saved or none.
  Status put_ports(const std::vector<std::pair<PortSpec, uint16_t>>& ports);
  Status delete_port(const std::string& id);
  // A group with all its rules (rule changes rewrite their group's row).
  Status put_security_group(const SecurityGroup& g);
  Status delete_security_group(const std::string& id);

  struct Saved {
    std::vector<NetworkSpec> networks;
    std::vector<std::pair<PortSpec, uint16_t>> ports;  // with their local VLAN
    std::vector<SecurityGroup> security_groups;
  };
  // Everything saved; a row that no longer validates is an error naming it.
  Result<Saved> load() const;

  const std::string& path() const { return path_; }

 private:
  Store(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  Status exec(const std::string& sql, const std::vector<std::string>& args);

  sqlite3* db_;
  std::string path_;
};

}  // namespace strait::ctl
