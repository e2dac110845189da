#pragma once
// The persistent state: networks, port bindings with their local VLANs,
// security groups with their rules, VXLAN tunnel state and the physnet
// mappings and VTEP settings in force, in SQLite under state_dir. Every
// API change is one transaction, committed before the change is published,
// so what an acknowledged reply promised survives a crash. Rows hold the
// same JSON the API takes, so loading goes through the same validation as
// a request.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "control/model/model.h"
#include "dataplane/result.h"

struct sqlite3;
struct sqlite3_stmt;

namespace strait::ctl {

class Store {
 public:
  // 2: security_groups table; 3: tunnels table (VXLAN FDB and flood list
  // per network); 4: tunnel FDB entries may carry the remote port's "ip" and
  // vxlan networks "arp_responder" (rows an older straitd cannot read: it
  // refuses the newer version rather than a row); 5: physnets and vtep
  // tables (the config's mappings in force, see RecordedConfig). An older
  // database is upgraded in place on open.
  static constexpr int kSchemaVersion = 5;

  // What the config put in force at the last start: the physnet mappings
  // and the [vtep] settings. The config file stays the operator's source;
  // this is the record a restart compares it with (control/model/recorded_config.h).
  struct RecordedConfig {
    std::map<std::string, std::string> physnets;  // name -> device devargs
    std::string vtep;                             // [vtep] as JSON; empty: none
    int64_t recorded_at = 0;                      // Unix seconds; 0: never recorded
  };

  // Opens state_dir/strait.db, or creates it when there is none; the
  // database and its -wal and -shm files are owner-only (0600). Refuses,
  // leaving it as it is, an empty file (SQLite would start it afresh: the
  // state it held is lost), an SQLite file that is not Strait's (no
  // meta.schema_version) and a database of a newer schema than this build
  // knows. Takes no lock: the caller holds the state directory
  // (control/daemon/state_dir.h).
  //
  // Durability: every commit is on disk before it returns (synchronous=FULL:
  // an acknowledged change survives a power loss), or, where etcd holds the
  // desired state and the store only speeds up a start without it,
  // committed to the WAL without an fsync (synchronous=NORMAL: it survives
  // straitd's crash; a power loss may take the last changes, which the next
  // resync with etcd brings back). On a busy host the fsync was the largest
  // part of a port's way from etcd to the datapath.
  enum class Durability { kEveryCommit, kEtcdReplays };
  static Result<std::unique_ptr<Store>> open(const std::string& state_dir,
                                             Durability d = Durability::kEveryCommit);
  ~Store();

  Status put_network(const NetworkSpec& n);
  // The network's tunnel state goes with it.
  Status delete_network(const std::string& id);
  // A vxlan network's whole tunnel state; an empty one deletes its row.
  Status put_tunnel(const std::string& network, const TunnelSpec& t);
  Status put_port(const PortSpec& p, uint16_t local_vlan);
  // Several bindings in one transaction: all of them are saved or none.
  Status put_ports(const std::vector<std::pair<PortSpec, uint16_t>>& ports);
  Status delete_port(const std::string& id);
  // A group with all its rules (rule changes rewrite their group's row).
  Status put_security_group(const SecurityGroup& g);
  Status delete_security_group(const std::string& id);
  // Replaces the recorded mappings and settings in one transaction.
  Status record_config(const RecordedConfig& c);

  struct Saved {
    std::vector<NetworkSpec> networks;
    std::vector<std::pair<PortSpec, uint16_t>> ports;  // with their local VLAN
    std::vector<SecurityGroup> security_groups;
    std::vector<std::pair<std::string, TunnelSpec>> tunnels;  // by network id
    RecordedConfig config;
  };
  // Everything saved; a row that no longer validates is an error naming it.
  Result<Saved> load() const;

  const std::string& path() const { return path_; }

 private:
  Store(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  // Runs one statement; each distinct SQL text is prepared once and kept
  // (a bulk bind writes a thousand rows through the same INSERT).
  Status exec(const std::string& sql, const std::vector<std::string>& args);
  Result<RecordedConfig> load_recorded_config() const;
  // Runs the statements of `body` in one transaction.
  Status transaction(const std::function<Status()>& body);

  sqlite3* db_;
  std::string path_;
  std::map<std::string, sqlite3_stmt*, std::less<>> stmts_;
};

}  // namespace strait::ctl
