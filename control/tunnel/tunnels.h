#pragma once
// VXLAN tunnels on the control side: the l2population requests
// (tunnel.fdb.add/delete, tunnel.flood.set) change the model through the
// switch's apply() like any other change, and answer once every worker
// forwards by the new state. Remote VTEPs become datapath "ports"
// kVtepPortBase + index (VtepTable); their next hop's MAC is configured or
// learned from the underlay by ARP (workers hand ARP replies over in
// ArpEvents). Control thread only.
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <vector>

#include "control/daemon/config.h"
#include "control/switch/change_path.h"
#include "control/switch/mac_table.h"
#include "control/switch/port_table.h"
#include "control/tunnel/vtep_table.h"
#include "dataplane/worker.h"

namespace strait::ctl {

class Tunnels {
 public:
  // `vtep`: the config's [vtep]; none: this host terminates no tunnel.
  Tunnels(const std::optional<VtepSettings>& vtep, ChangePath& sw, const PortTable& ports,
          const MacTable& learned, const std::vector<std::unique_ptr<dp::Worker>>& workers);

  // The API (docs/api.md): tunnel.fdb.add, tunnel.fdb.delete,
  // tunnel.flood.set, tunnel.show.
  void fdb_add(const nlohmann::json& params, Done done);
  void fdb_delete(const nlohmann::json& params, Done done);
  void flood_set(const nlohmann::json& params, Done done);
  void show(const nlohmann::json& params, Done done);

  // For the snapshot build: the remote VTEPs the model and `learned` name.
  // New ones get an index; ones no longer named give theirs back after two
  // grace periods. None without [vtep].
  std::optional<VtepInput> sync(const std::vector<LearnedMac>& learned);
  // The control tick: the workers' ArpEvents (a remote VTEP's next hop
  // answered); republishes when one resolved or moved.
  void poll();

 private:
  // Applies a tunnel change to the network and answers once it is live.
  void apply(const std::string& network, const std::function<Status(Model&)>& change, Done done);
  // Refuses a model whose remote VTEPs would not all get an index.
  Status check_capacity(const Model& m) const;
  // The remote VTEPs (IPv4, network order) the model and `learned` name.
  std::set<uint32_t> wanted(const std::vector<LearnedMac>& learned) const;
  nlohmann::json network_json(const NetworkSpec& n, const std::vector<LearnedMac>& learned) const;

  std::optional<VtepSettings> cfg_;
  ChangePath& sw_;
  const PortTable& ports_;
  const MacTable& learned_;
  const std::vector<std::unique_ptr<dp::Worker>>& workers_;
  VtepTable vteps_;  // remote VTEPs' indexes and next hops
};

}  // namespace strait::ctl
