#include "dataplane/pipeline.h"

namespace strait::dp {
namespace {

constexpr uint16_t kVidMask = 0x0fff;

// Where a frame's destination MAC leads inside network `lvlan`.
Action l2_forward(const Snapshot& snap, const Network& net, uint16_t lvlan, const FlowKey& key,
                  Action a) noexcept {
  a.lvlan = lvlan;
  a.mtu = net.mtu;
  if (!mac_is_multicast(key.dl_dst)) {
    if (const FdbEntry* e = snap.fdb.find(lvlan, key.dl_dst)) {
      if (e->port == key.in_port) return drop_action(DropReason::kSamePort);
      const PortEntry* out = snap.port(e->port);
      if (!out) return drop_action(DropReason::kUnknownPort);
      a.kind = ActionKind::kOutput;
      a.out_port = e->port;
      a.egress_vid = (e->port == net.uplink && net.type == NetType::kVlan) ? net.seg_id : 0;
      return a;
    }
  }
  // Broadcast, multicast, unknown unicast: the network's flood list. It
  // always holds the ingress port (skipped at execution), so fewer than two
  // entries means nobody else to reach.
  if (net.flood.size() < 2) return drop_action(DropReason::kFloodNoTarget);
  a.kind = ActionKind::kFlood;
  return a;
}

Action from_access(const Snapshot& snap, const PortEntry& port, const FlowKey& key) noexcept {
  // An access port carries one network, untagged: a tag from a VM is an
  // attempt to reach another VLAN (or to smuggle a double tag).
  if (key.n_tags != 0) return drop_action(DropReason::kTaggedOnAccess);
  const Network& net = snap.networks[port.lvlan];
  if (!net.present) return drop_action(DropReason::kPortDown);
  return l2_forward(snap, net, port.lvlan, key, Action{});
}

Action from_uplink(const Snapshot& snap, const PortEntry& port, const FlowKey& key) noexcept {
  const UplinkMap& map = snap.uplinks[port.uplink_map];
  Action a;
  uint16_t lvlan;
  if (key.n_tags == 0) {
    lvlan = map.flat_lvlan;
    if (lvlan == 0) return drop_action(DropReason::kNoFlatNetwork);
  } else {
    // Provider networks are 802.1Q; an S-tag (QinQ) is no network of ours.
    if (key.vlan_tpid != kEthTypeVlan) return drop_action(DropReason::kUnknownVlan);
    lvlan = map.vid_to_lvlan[key.vlan_tci & kVidMask];
    if (lvlan == 0) return drop_action(DropReason::kUnknownVlan);
    // What is left after removing the network's tag must be untagged: VMs
    // sit on access ports.
    if (key.n_tags > 1) return drop_action(DropReason::kNestedVlan);
    a.flags |= kActIngressTagged;
  }
  const Network& net = snap.networks[lvlan];
  if (!net.present) return drop_action(DropReason::kUnknownVlan);
  // Learning: a source MAC not known in this network lives behind the uplink.
  if (const FdbEntry* e = snap.fdb.find(lvlan, key.dl_src)) {
    a.learn_slot = e->learn_slot;  // kNoSlot for a bound port's MAC: never moved by learning
  } else {
    a.flags |= kActLearn;
  }
  return l2_forward(snap, net, lvlan, key, a);
}

}  // namespace

Action pipeline_decide(const Snapshot& snap, const FlowKey& key) noexcept {
  const PortEntry* port = snap.port(key.in_port);
  if (!port) return drop_action(DropReason::kUnknownPort);
  if (!port->enabled) return drop_action(DropReason::kPortDown);
  if (mac_is_multicast(key.dl_src) || mac_is_zero(key.dl_src))
    return drop_action(DropReason::kInvalidSourceMac);
  return port->role == PortRole::kAccess ? from_access(snap, *port, key)
                                         : from_uplink(snap, *port, key);
}

}  // namespace strait::dp
