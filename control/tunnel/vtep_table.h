#pragma once
// Remote VTEPs as this host's datapath knows them: an index each (frames to
// a remote MAC go to datapath port kVtepPortBase + index) while the model or
// a learned MAC names the VTEP, and the MAC of the next hop each one is
// reached through, from the underlay's ARP answers. An index is never given
// to another address while a snapshot or a queued learn event may still name
// it: a VTEP no longer wanted leaves the datapath at once and keeps its index
// until the caller releases it, two grace periods later. Bookkeeping only:
// no DPDK; the Switch feeds it and schedules the releases.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "control/switch/snapshot_builder.h"
#include "dataplane/result.h"

namespace strait::ctl {

class VtepTable {
 public:
  // `next_hop`: the gateway every VTEP is reached through (IPv4, network
  // order; none: each VTEP's own address); `next_hop_mac`: its MAC, given
  // statically (no ARP at all).
  VtepTable(std::optional<uint32_t> next_hop, std::optional<Mac> next_hop_mac);

  // Refuses VTEPs (IPv4, network order) that would not all get an index;
  // indexes on their way back are still taken.
  Status check_capacity(const std::set<uint32_t>& vteps) const;
  // Makes `want` the VTEPs in the datapath. New ones get an index. Each one
  // no longer wanted is returned with a token: release(ip, token) frees its
  // index, unless it was wanted again meanwhile.
  std::vector<std::pair<uint32_t, uint64_t>> sync(const std::set<uint32_t>& want);
  void release(uint32_t ip, uint64_t token);
  // An ARP answer from the underlay: true when it resolved, or moved, the
  // next hop of a VTEP in the datapath.
  bool on_arp(uint32_t ip, const Mac& mac);

  struct Remote {
    uint32_t ip;
    uint16_t index;
  };
  // The VTEPs in the datapath, in address order.
  std::vector<Remote> live() const;
  // The VTEP an index belongs to (a learned MAC's), if any.
  std::optional<uint32_t> ip_of(uint16_t index) const;
  // Who is ARPed for to reach a VTEP: the gateway, or the VTEP itself.
  uint32_t arp_ip(uint32_t vtep_ip) const { return next_hop_ ? *next_hop_ : vtep_ip; }
  // The remote VTEPs of the next snapshot, with their next hops.
  void fill(VtepInput& in) const;

 private:
  struct State {
    uint16_t index = 0;
    bool referenced = true;      // wanted: in the datapath
    uint64_t release_token = 0;  // which release may free it
  };
  std::optional<uint32_t> next_hop_;
  std::optional<Mac> next_hop_mac_;
  std::map<uint32_t, State> vteps_;  // by IPv4, network order
  std::vector<bool> used_;           // by index
  uint64_t tokens_ = 0;
  std::map<uint32_t, Mac> arp_;      // next hop IPv4 (network order) -> MAC
};

}  // namespace strait::ctl
