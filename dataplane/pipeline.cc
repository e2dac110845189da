#include "dataplane/pipeline.h"

#include "dataplane/port_security.h"
#include "dataplane/vxlan.h"

namespace strait::dp {
namespace {

constexpr uint16_t kVidMask = 0x0fff;

// Whether a flood in network `net` reaches anyone besides the ingress port:
// its local ports and, for a frame not out of a tunnel, its flood VTEPs.
bool flood_reaches(const Snapshot& snap, const Network& net, const FlowKey& key,
                   const Action& a) noexcept {
  for (const FloodTarget& t : net.flood)
    if (t.port != key.in_port) return true;
  return net.type == NetType::kVxlan && !(a.flags & kActDecap) && snap.vtep.enabled &&
         !net.flood_vteps.empty();
}

// A destination behind remote VTEP `port` (kVtepPortBase + index).
Action to_vtep(const Snapshot& snap, uint16_t port, Action a) noexcept {
  // Split horizon: what came out of a tunnel never goes back into one.
  if (a.flags & kActDecap) return drop_action(DropReason::kSamePort);
  if (!snap.vtep.enabled) return drop_action(DropReason::kTunnelNoVtep);
  if (!snap.vtep_of(port)) return drop_action(DropReason::kUnknownPort);
  a.kind = ActionKind::kEncap;
  a.out_port = port;
  return a;
}

// Where a frame's destination MAC leads inside network `lvlan`.
Action l2_forward(const Snapshot& snap, const Network& net, uint16_t lvlan, const FlowKey& key,
                  Action a) noexcept {
  a.lvlan = lvlan;
  a.mtu = net.mtu;
  if (!mac_is_multicast(key.dl_dst)) {
    if (const FdbEntry* e = snap.fdb.find(lvlan, key.dl_dst)) {
      if (e->port == key.in_port) return drop_action(DropReason::kSamePort);
      if (is_vtep_port(e->port)) return to_vtep(snap, e->port, a);
      const PortEntry* out = snap.port(e->port);
      if (!out) return drop_action(DropReason::kUnknownPort);
      a.kind = ActionKind::kOutput;
      a.out_port = e->port;
      a.egress_vid = (e->port == net.uplink && net.type == NetType::kVlan) ? net.seg_id : 0;
      return a;
    }
  }
  // Broadcast, multicast, unknown unicast: the network's flood list (the
  // ingress port skipped at execution) and, from a VM of a VXLAN network,
  // one copy per flood VTEP.
  if (!flood_reaches(snap, net, key, a)) {
    const bool tunnel_only = net.type == NetType::kVxlan && !(a.flags & kActDecap) &&
                             !net.flood_vteps.empty();
    return drop_action(tunnel_only ? DropReason::kTunnelNoVtep : DropReason::kFloodNoTarget);
  }
  a.kind = ActionKind::kFlood;
  return a;
}

// The sending VM's side of port security: anti-spoofing, then what its
// egress rules say. Returns false with *a set to the drop.
bool sender_security(const PortSecurity& sec, const FlowKey& key, Action* a) noexcept {
  if (DropReason r = spoof_check(sec, key); r != DropReason::kNone) {
    *a = drop_action(r);
    return false;
  }
  DropReason why = DropReason::kNone;
  switch (egress_class(key, &why)) {
    case SgClass::kDeny:
      *a = drop_action(why);
      return false;
    case SgClass::kAllow:
      return true;
    case SgClass::kRules:
      a->flags |= kActTrack | kActNewOk | kActEgressRules;  // resolve_rules
      return true;
  }
  return true;
}

// The receiving VM's side of a unicast output: its ingress rules join the
// decision (floods check each target per packet, in the worker).
Action receiver_security(const PortSecurity& sec, const FlowKey& key, Action a) noexcept {
  DropReason why = DropReason::kNone;
  switch (ingress_class(key, &why)) {
    case SgClass::kDeny:
      return drop_action(why);
    case SgClass::kAllow:
      return a;
    case SgClass::kRules:
      break;
  }
  // Untracked so far (the sender has no port security, or its side always
  // allows this): new connections are the receiver's rules' alone.
  if (!(a.flags & kActTrack)) a.flags |= kActTrack | kActNewOk;
  a.flags |= kActIngressRules;  // resolve_rules
  return a;
}

Action from_access(const Snapshot& snap, const PortEntry& port, const FlowKey& key) noexcept {
  // An access port carries one network, untagged: a tag from a VM is an
  // attempt to reach another VLAN (or to smuggle a double tag).
  if (key.n_tags != 0) return drop_action(DropReason::kTaggedOnAccess);
  const Network& net = snap.networks[port.lvlan];
  if (!net.present) return drop_action(DropReason::kPortDown);
  Action a;
  if (port.security && !sender_security(*port.security, key, &a)) return a;
  if (const ArpEntry* e = arp_responder_entry(net, key)) {
    Action r;
    r.kind = ActionKind::kArpReply;
    r.lvlan = port.lvlan;
    r.out_port = uint16_t(e - net.arp.data());
    return r;
  }
  return l2_forward(snap, net, port.lvlan, key, a);
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

// A decapsulated frame (the key describes the inner frame, tun_* the outer
// headers): ours only to our VTEP address and port, then into the network of
// its VNI, where it is treated like a frame from an uplink: learned behind
// the VTEP that sent it, delivered to local ports through their ingress
// security, never back into a tunnel.
Action from_tunnel(const Snapshot& snap, const FlowKey& key) noexcept {
  const VtepConfig& v = snap.vtep;
  if (!v.enabled || key.in_port != v.uplink || key.tun_dst != v.local_ip ||
      key.tun_dport != v.udp_port)
    return drop_action(DropReason::kVxlanNotOurs);
  const uint16_t lvlan = snap.lvlan_of_vni(key.tun_vni);
  if (lvlan == 0) return drop_action(DropReason::kUnknownVni);
  const Network& net = snap.networks[lvlan];
  if (!net.present || net.type != NetType::kVxlan) return drop_action(DropReason::kUnknownVni);
  if (mac_is_multicast(key.dl_src) || mac_is_zero(key.dl_src))
    return drop_action(DropReason::kInvalidSourceMac);
  // VXLAN networks carry untagged frames only (VMs sit on access ports).
  if (key.n_tags != 0) return drop_action(DropReason::kNestedVlan);
  Action a;
  a.flags = kActDecap;
  if (const FdbEntry* e = snap.fdb.find(lvlan, key.dl_src)) {
    a.learn_slot = e->learn_slot;
  } else if (v.learning && vtep_index_of(snap, key.tun_src) != kNoPort) {
    a.flags |= kActLearn;  // the worker names the VTEP (kVtepPortBase + index)
  }
  return l2_forward(snap, net, lvlan, key, a);
}

}  // namespace

Action resolve_rules(const Snapshot& snap, const FlowKey& key, Action a) noexcept {
  if (!(a.flags & kActRulesPending)) return a;
  // The sender's egress rules first, then the receiver's ingress rules: the
  // reason names the first side that refuses.
  if ((a.flags & kActEgressRules) && (a.flags & kActNewOk) &&
      !rules_allow(*snap.ports[key.in_port].security, SgDirection::kEgress, key)) {
    a.flags &= ~kActNewOk;
    a.reason = DropReason::kSgEgressDenied;
  }
  if ((a.flags & kActIngressRules) && (a.flags & kActNewOk) &&
      !rules_allow(*snap.ports[a.out_port].security, SgDirection::kIngress, key)) {
    a.flags &= ~kActNewOk;
    a.reason = DropReason::kSgIngressDenied;
  }
  a.flags &= ~kActRulesPending;
  return a;
}

Action pipeline_decide(const Snapshot& snap, const FlowKey& key) noexcept {
  return resolve_rules(snap, key, pipeline_decide_deferred(snap, key));
}

Action pipeline_decide_deferred(const Snapshot& snap, const FlowKey& key) noexcept {
  const PortEntry* port = snap.port(key.in_port);
  if (!port) return drop_action(DropReason::kUnknownPort);
  if (!port->enabled) return drop_action(DropReason::kPortDown);
  Action a;
  if (key.tun_flags & kTunValid) {
    a = from_tunnel(snap, key);
  } else if (mac_is_multicast(key.dl_src) || mac_is_zero(key.dl_src)) {
    return drop_action(DropReason::kInvalidSourceMac);
  } else if (port->role == PortRole::kAccess) {
    a = from_access(snap, *port, key);
  } else if (is_vtep_arp(snap, *port, key)) {
    a.kind = ActionKind::kVtepArp;
    return a;
  } else {
    a = from_uplink(snap, *port, key);
  }
  if (a.kind == ActionKind::kOutput) {
    // l2_forward checked that the output port exists.
    if (const PortSecurity* sec = snap.ports[a.out_port].security)
      return receiver_security(*sec, key, a);
  }
  return a;
}

}  // namespace strait::dp
