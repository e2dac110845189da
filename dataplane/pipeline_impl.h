#pragma once
// The pipeline's decisions (pipeline.h), written once for two callers: the
// worker, through pipeline.cc with NoTrace, and `straitctl trace`, through
// trace.cc with a tracer that records each step in words. Every tracing
// statement sits in `if constexpr (Tr::kOn)`, and what it says is built in a
// lambda called only there: with NoTrace nothing of it is compiled into the
// worker's code. Only pipeline.cc and trace.cc include this header.
//
// A tracer Tr has `static constexpr bool kOn` and, when on:
//   TraceStep& add(TraceStage, DropReason)  a step (drop: the frame ends there)
//   void egress_rules(const PortSecurity&, const FlowKey&)   the sender's rules
//   void ingress_rules(const PortSecurity&, const FlowKey&, uint16_t port)
//                                           the receiver's rules (trace.cc)
#include <arpa/inet.h>

#include <cstdio>
#include <string>

#include "dataplane/action.h"
#include "dataplane/flow_key.h"
#include "dataplane/learned_fdb.h"
#include "dataplane/port_security.h"
#include "dataplane/snapshot.h"
#include "dataplane/trace.h"
#include "dataplane/vxlan.h"

namespace strait::dp::pipeline_impl {

// The worker's tracer: nothing at all.
struct NoTrace {
  static constexpr bool kOn = false;
};

inline constexpr uint16_t kVidMask = 0x0fff;

// ---- words for the steps (trace only) ---------------------------------------

template <typename... A>
std::string format(const char* fmt, A... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

inline std::string mac_str(const uint8_t* m) {
  return format("%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
}

// An IPv4 address in network order.
inline std::string ip4_str(uint32_t ip) {
  char buf[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &ip, buf, sizeof buf);
  return buf;
}

// The L3 source of a key: IPv4 / IPv6 address, ARP sender IP.
inline std::string src_ip_str(const FlowKey& k) {
  char buf[INET6_ADDRSTRLEN] = "?";
  inet_ntop(k.dl_type == kEthTypeIpv6 ? AF_INET6 : AF_INET, k.nw_src, buf, sizeof buf);
  return buf;
}

inline std::string spoof_detail(const FlowKey& k, DropReason r) {
  switch (r) {
    case DropReason::kSpoofedMac:
      return "source MAC " + mac_str(k.dl_src) + " is neither the port's nor an allowed pair's";
    case DropReason::kSpoofedArp:
      return "ARP sender " + mac_str(k.nw_src + 4) + " / " + src_ip_str(k) +
             " is not the frame's source MAC with an address of the port";
    case DropReason::kSpoofedIp:
      return "source " + src_ip_str(k) + " is not a fixed IP, allowed pair or link-local address" +
             " of the port with MAC " + mac_str(k.dl_src);
    default:
      return std::string(drop_reason_help(r));
  }
}

// "rule #n of the port's security groups" / "no rule".
inline std::string rule_str(const PortSecurity& sec, SgDirection dir, const FlowKey& k) {
  const char* d = dir == SgDirection::kEgress ? "egress" : "ingress";
  if (!sec.sg) return format("the port has no security group: no %s rule", d);
  const uint32_t m = sec.sg->match(dir, k);
  return m ? format("%s rule #%u of the port's security groups", d, m)
           : format("no %s rule of the port's security groups", d);
}

inline const char* net_type_str(NetType t) {
  switch (t) {
    case NetType::kLocal: return "local";
    case NetType::kFlat: return "flat";
    case NetType::kVlan: return "vlan";
    case NetType::kVxlan: return "vxlan";
  }
  return "?";
}

// A step, described by `fill` (which sets its detail and fields).
template <typename Tr, typename F>
inline void step(Tr& t, TraceStage st, F&& fill) {
  if constexpr (Tr::kOn) fill(t.add(st, DropReason::kNone));
}

// The frame ends here: the step that says why, and the drop.
template <typename Tr, typename F>
inline Action drop(Tr& t, TraceStage st, DropReason r, F&& fill) {
  if constexpr (Tr::kOn) fill(t.add(st, r));
  return drop_action(r);
}

// A frame from an uplink or a tunnel that goes nowhere still tells where its
// source is: a drop after the learning step keeps the mark (kActLearn, and
// kActDecap to name the VTEP) and the network, or the learned source's
// aging slot, so a host whose frames all get dropped stays learned while it
// sends. The worker never executes a drop's flags; it reports the source on
// the flow's first miss, and stamps the slot per frame.
inline Action keep_learning(Action d, const Action& a, uint16_t lvlan) {
  if (d.kind != ActionKind::kDrop || (!(a.flags & kActLearn) && a.learn_slot == kNoSlot))
    return d;
  d.flags = a.flags & (kActLearn | kActDecap);
  d.learn_slot = a.learn_slot;
  d.lvlan = lvlan;
  return d;
}

// ---- the decisions ----------------------------------------------------------

// Whether a flood in network `net` reaches anyone besides the ingress port:
// its local ports and, for a frame not out of a tunnel, its flood VTEPs.
inline bool flood_reaches(const Snapshot& snap, const Network& net, const FlowKey& key,
                          const Action& a) noexcept {
  for (const FloodTarget& t : net.flood)
    if (t.port != key.in_port) return true;
  return net.type == NetType::kVxlan && !(a.flags & kActDecap) && snap.vtep.enabled &&
         !net.flood_vteps.empty();
}

// A destination behind remote VTEP `port` (kVtepPortBase + index).
template <typename Tr>
Action to_vtep(const Snapshot& snap, uint16_t port, Action a, Tr& t) noexcept {
  // Split horizon: what came out of a tunnel never goes back into one.
  if (a.flags & kActDecap)
    return drop(t, TraceStage::kFdb, DropReason::kSamePort, [&](TraceStep& s) {
      s.detail = "destination is behind a tunnel and the frame came out of one: never back in";
    });
  if (!snap.vtep.enabled)
    return drop(t, TraceStage::kFdb, DropReason::kTunnelNoVtep, [&](TraceStep& s) {
      s.detail = "destination is behind a remote VTEP, but this host has no VTEP";
    });
  if (!snap.vtep_of(port))
    return drop(t, TraceStage::kFdb, DropReason::kUnknownPort, [&](TraceStep& s) {
      s.detail = "FDB names a remote VTEP not in the snapshot";
    });
  a.kind = ActionKind::kEncap;
  a.out_port = port;
  return a;
}

// The FDB entry of (lvlan, mac): a bound port's or a tunnel's (the
// snapshot's), else a learned one (learned_fdb.h; null: none consulted).
inline const FdbEntry* fdb_find(const Snapshot& snap, LearnedLookup* learned, uint16_t lvlan,
                                const uint8_t* mac) noexcept {
  if (const FdbEntry* e = snap.fdb.find(lvlan, mac)) return e;
  return learned ? learned->find(lvlan, mac) : nullptr;
}

// Where a frame's destination MAC leads inside network `lvlan`.
template <typename Tr>
Action l2_forward(const Snapshot& snap, LearnedLookup* learned, const Network& net, uint16_t lvlan,
                  const FlowKey& key, Action a, Tr& t) noexcept {
  a.lvlan = lvlan;
  a.mtu = net.mtu;
  step(t, TraceStage::kNetwork, [&](TraceStep& s) {
    s.lvlan = lvlan;
    s.vid = net.type == NetType::kVlan ? net.seg_id : 0;
    s.detail = format("local VLAN %u: %s network", lvlan, net_type_str(net.type)) +
               (net.type == NetType::kVlan ? format(", segmentation id %u", net.seg_id) : "") +
               (net.type == NetType::kVxlan
                    ? format(", VNI %u, %zu flood VTEP(s)", net.vni, net.flood_vteps.size())
                    : "") +
               format(", MTU %u, %zu port(s) in its flood list", net.mtu, net.flood.size());
  });
  if (!mac_is_multicast(key.dl_dst)) {
    if (const FdbEntry* e = fdb_find(snap, learned, lvlan, key.dl_dst)) {
      step(t, TraceStage::kFdb, [&](TraceStep& s) {
        s.hit = true;
        s.port = e->port;
        s.learned = e->learn_slot != kNoSlot;
        s.detail = "destination " + mac_str(key.dl_dst) + " known: " +
                   (s.learned ? "learned" : is_vtep_port(e->port) ? "remote" : "bound port");
        if (is_vtep_port(e->port))
          if (const RemoteVtep* v = snap.vtep_of(e->port)) s.detail += ", behind VTEP " + ip4_str(v->ip);
      });
      if (is_vtep_port(e->port)) return to_vtep(snap, e->port, a, t);
      if (e->port == key.in_port)
        return drop(t, TraceStage::kFdb, DropReason::kSamePort, [&](TraceStep& s) {
          s.detail = "destination is behind the ingress port";
        });
      const PortEntry* out = snap.port(e->port);
      if (!out)
        return drop(t, TraceStage::kFdb, DropReason::kUnknownPort, [&](TraceStep& s) {
          s.detail = "FDB names a port not in the snapshot";
        });
      a.kind = ActionKind::kOutput;
      a.out_port = e->port;
      // The physnet NIC of a vlan network carries its tag; a trunk's
      // subport the subport's (0 for any other port: untagged).
      a.egress_vid =
          (e->port == net.uplink && net.type == NetType::kVlan) ? net.seg_id : out->trunk_vid;
      return a;
    }
    step(t, TraceStage::kFdb, [&](TraceStep& s) {
      s.detail = "destination " + mac_str(key.dl_dst) + " unknown: flood";
    });
  } else {
    step(t, TraceStage::kFdb, [&](TraceStep& s) {
      s.detail = "destination " + mac_str(key.dl_dst) + " is broadcast/multicast: flood";
    });
  }
  // Broadcast, multicast, unknown unicast: the network's flood list (the
  // ingress port skipped at execution) and, from a VM of a VXLAN network,
  // one copy per flood VTEP.
  const bool decap = a.flags & kActDecap;
  if (!flood_reaches(snap, net, key, a)) {
    const bool tunnel_only = net.type == NetType::kVxlan && !decap && !net.flood_vteps.empty();
    if (tunnel_only)
      return drop(t, TraceStage::kFlood, DropReason::kTunnelNoVtep, [&](TraceStep& s) {
        s.detail = "only remote VTEPs to flood to, but this host has no VTEP";
      });
    return drop(t, TraceStage::kFlood, DropReason::kFloodNoTarget, [&](TraceStep& s) {
      s.detail = "no port in the network besides the ingress port";
    });
  }
  step(t, TraceStage::kFlood, [&](TraceStep& s) {
    const bool vxlan_out = net.type == NetType::kVxlan && !decap;
    const size_t vteps = vxlan_out && snap.vtep.enabled ? net.flood_vteps.size() : 0;
    s.detail = format("to every port of local VLAN %u except the ingress port", lvlan) +
               (vteps   ? format(", and a copy to each of %zu remote VTEP(s)", vteps)
                : decap ? std::string(": local ports only (out of a tunnel)")
                        : std::string());
  });
  a.kind = ActionKind::kFlood;
  return a;
}

// The sending VM's side of port security: anti-spoofing, then what its
// egress rules say. Returns false with *a set to the drop.
template <typename Tr>
bool sender_security(const PortSecurity& sec, const FlowKey& key, Action* a, Tr& t) noexcept {
  if (DropReason r = spoof_check(sec, key); r != DropReason::kNone) {
    *a = drop(t, TraceStage::kAntiSpoof, r, [&](TraceStep& s) { s.detail = spoof_detail(key, r); });
    return false;
  }
  step(t, TraceStage::kAntiSpoof, [&](TraceStep& s) {
    s.detail = key.dl_type == kEthTypeArp ? "ARP sender MAC and IP are the port's"
                                          : "source MAC (and address) are the port's";
  });
  DropReason why = DropReason::kNone;
  switch (egress_class(key, &why)) {
    case SgClass::kDeny:
      *a = drop(t, TraceStage::kEgressSg, why, [&](TraceStep& s) {
        s.detail = "port security: " + std::string(drop_reason_help(why));
      });
      return false;
    case SgClass::kAllow:
      step(t, TraceStage::kEgressSg, [&](TraceStep& s) {
        s.detail = "always allowed from a VM (ARP, DHCP client, ND, MLD): not tracked";
      });
      return true;
    case SgClass::kRules:
      if constexpr (Tr::kOn) t.egress_rules(sec, key);
      a->flags |= kActTrack | kActNewOk | kActEgressRules;  // resolve_rules
      return true;
  }
  return true;
}

// The receiving VM's side of a unicast output: its ingress rules join the
// decision (floods check each target per packet, in the worker).
template <typename Tr>
Action receiver_security(const PortSecurity& sec, const FlowKey& key, Action a, Tr& t) noexcept {
  DropReason why = DropReason::kNone;
  switch (ingress_class(key, &why)) {
    case SgClass::kDeny: {
      // Learned all the same (as OVS's NORMAL and VPP's l2-learn do
      // before forwarding): keep_learning.
      Action d = drop(t, TraceStage::kIngressSg, why, [&](TraceStep& s) {
        s.port = a.out_port;
        s.detail = "receiver's port security: " + std::string(drop_reason_help(why));
      });
      return keep_learning(d, a, a.lvlan);
    }
    case SgClass::kAllow:
      step(t, TraceStage::kIngressSg, [&](TraceStep& s) {
        s.port = a.out_port;
        s.detail = "always allowed to a VM (ARP, DHCP reply, ND, MLD)";
      });
      return a;
    case SgClass::kRules:
      break;
  }
  if constexpr (Tr::kOn) t.ingress_rules(sec, key, a.out_port);
  // Untracked so far (the sender has no port security, or its side always
  // allows this): new connections are the receiver's rules' alone.
  if (!(a.flags & kActTrack)) a.flags |= kActTrack | kActNewOk;
  a.flags |= kActIngressRules;  // resolve_rules
  return a;
}

// A source MAC no frame may carry.
template <typename Tr>
bool bad_source(const FlowKey& key, Tr& t) noexcept {
  if (mac_is_multicast(key.dl_src) || mac_is_zero(key.dl_src)) {
    drop(t, TraceStage::kSourceMac, DropReason::kInvalidSourceMac, [&](TraceStep& s) {
      s.detail = "source " + mac_str(key.dl_src) + " is multicast or zero";
    });
    return true;
  }
  step(t, TraceStage::kSourceMac,
       [&](TraceStep& s) { s.detail = "source " + mac_str(key.dl_src) + " is a unicast address"; });
  return false;
}

// The learning step when the frame's source MAC is in network lvlan's FDB
// (`bound`: how a bound port's entry is described).
template <typename Tr>
void known_source(const FlowKey& key, const FdbEntry& e, const char* bound, Tr& t) noexcept {
  step(t, TraceStage::kLearn, [&](TraceStep& s) {
    s.hit = true;
    s.port = e.port;
    s.learned = e.learn_slot != kNoSlot;
    s.detail = "source " + mac_str(key.dl_src) + " already known (" + (s.learned ? "learned" : bound) +
               ")";
  });
}

// A VM's ARP request in a vxlan network, answered here or not (`e`).
template <typename Tr>
void arp_responder_step(const Network& net, const FlowKey& key, const ArpEntry* e, Tr& t) noexcept {
  if (net.type != NetType::kVxlan || key.dl_type != kEthTypeArp || key.nw_proto != kArpOpRequest)
    return;
  step(t, TraceStage::kArpResponder, [&](TraceStep& s) {
    const std::string ask =
        "ARP request from " + ip4_str(arp_sender_ip(key)) + " for " + ip4_str(arp_target_ip(key));
    if (e) {
      s.port = key.in_port;
      s.detail = ask + ": a remote port's address (tunnel FDB), answered by the ARP responder with " +
                 mac_str(e->mac) + " to the ingress port only; not flooded, nothing to the tunnels";
      return;
    }
    const char* why = net.arp.empty() ? "the network's ARP responder is off or knows no address"
                      : !mac_is_multicast(key.dl_dst) ? "not broadcast: left to its destination"
                      : arp_target_ip(key) == arp_sender_ip(key)
                          ? "gratuitous: an announcement for everyone"
                          : "no remote port has this address";
    s.detail = ask + ": not answered here (" + why + "), forwarded as any frame";
  });
}

template <typename Tr>
Action from_access(const Snapshot& snap, LearnedLookup* learned, const PortEntry& port,
                   const FlowKey& key, Tr& t) noexcept {
  // An access port carries one network, untagged: a tag from a VM is an
  // attempt to reach another VLAN (or to smuggle a double tag).
  if (key.n_tags != 0)
    return drop(t, TraceStage::kIngress, DropReason::kTaggedOnAccess, [&](TraceStep& s) {
      s.detail = format("frame carries %u VLAN tag(s) (outer VLAN %u); ", key.n_tags,
                        key.vlan_tci & kVidMask) +
                 (port.trunk ? "no subport of this trunk has that VLAN"
                             : "access ports are untagged");
    });
  step(t, TraceStage::kIngress, [&](TraceStep& s) {
    s.lvlan = port.lvlan;
    s.detail = format("untagged on an access port: its network, local VLAN %u", port.lvlan);
  });
  const Network& net = snap.networks[port.lvlan];
  if (!net.present)
    return drop(t, TraceStage::kNetwork, DropReason::kPortDown,
                [&](TraceStep& s) { s.detail = "the port's network is not live"; });
  Action a;
  if (port.security && !sender_security(*port.security, key, &a, t)) return a;
  const ArpEntry* e = arp_responder_entry(net, key);
  arp_responder_step(net, key, e, t);
  if (e) {
    Action r;
    r.kind = ActionKind::kArpReply;
    r.lvlan = port.lvlan;
    r.out_port = uint16_t(e - net.arp.data());
    return r;
  }
  return l2_forward(snap, learned, net, port.lvlan, key, a, t);
}

template <typename Tr>
Action from_uplink(const Snapshot& snap, LearnedLookup* learned, const PortEntry& port,
                   const FlowKey& key, Tr& t) noexcept {
  const UplinkMap& map = snap.uplinks[port.uplink_map];
  Action a;
  uint16_t lvlan;
  if (key.n_tags == 0) {
    lvlan = map.flat_lvlan;
    if (lvlan == 0)
      return drop(t, TraceStage::kIngress, DropReason::kNoFlatNetwork, [&](TraceStep& s) {
        s.detail = "untagged, and this physnet has no flat network";
      });
    step(t, TraceStage::kIngress, [&](TraceStep& s) {
      s.lvlan = lvlan;
      s.detail = format("untagged: the physnet's flat network, local VLAN %u", lvlan);
    });
  } else {
    const uint16_t vid = key.vlan_tci & kVidMask;
    // Provider networks are 802.1Q; an S-tag (QinQ) is no network of ours.
    if (key.vlan_tpid != kEthTypeVlan)
      return drop(t, TraceStage::kIngress, DropReason::kUnknownVlan, [&](TraceStep& s) {
        s.vid = vid;
        s.detail = format("outer tag has TPID 0x%04x, not 802.1Q: no provider network", key.vlan_tpid);
      });
    lvlan = map.vid_to_lvlan[vid];
    if (lvlan == 0)
      return drop(t, TraceStage::kIngress, DropReason::kUnknownVlan, [&](TraceStep& s) {
        s.vid = vid;
        s.detail = format("VLAN %u is no network of this physnet", vid);
      });
    // What is left after removing the network's tag must be untagged: VMs
    // sit on access ports.
    if (key.n_tags > 1)
      return drop(t, TraceStage::kIngress, DropReason::kNestedVlan, [&](TraceStep& s) {
        s.vid = vid;
        s.detail = format("VLAN %u -> local VLAN %u, but another tag follows", vid, lvlan);
      });
    step(t, TraceStage::kIngress, [&](TraceStep& s) {
      s.vid = vid;
      s.lvlan = lvlan;
      s.detail = format("VLAN %u -> local VLAN %u (tag removed or rewritten on output)", vid, lvlan);
    });
    a.flags |= kActIngressTagged;
  }
  const Network& net = snap.networks[lvlan];
  if (!net.present)
    return drop(t, TraceStage::kNetwork, DropReason::kUnknownVlan,
                [&](TraceStep& s) { s.detail = "network not live"; });
  // Learning: a source MAC not known in this network lives behind the uplink.
  if (const FdbEntry* e = fdb_find(snap, learned, lvlan, key.dl_src)) {
    known_source(key, *e, "a bound port's MAC, never moved by learning", t);
    a.learn_slot = e->learn_slot;  // kNoSlot for a bound port's MAC: never moved by learning
  } else {
    step(t, TraceStage::kLearn, [&](TraceStep& s) {
      s.detail = "source " + mac_str(key.dl_src) +
                 " unknown here: reported to control, learned behind this uplink";
    });
    a.flags |= kActLearn;
  }
  return keep_learning(l2_forward(snap, learned, net, lvlan, key, a, t), a, lvlan);
}

// A decapsulated frame (the key describes the inner frame, tun_* the outer
// headers): ours only to our VTEP address and port, then into the network of
// its VNI, where it is treated like a frame from an uplink: learned behind
// the VTEP that sent it, delivered to local ports through their ingress
// security, never back into a tunnel.
template <typename Tr>
Action from_tunnel(const Snapshot& snap, LearnedLookup* learned, const FlowKey& key,
                   Tr& t) noexcept {
  const VtepConfig& v = snap.vtep;
  auto outer = [&] {
    return "VXLAN " + ip4_str(key.tun_src) + " -> " + ip4_str(key.tun_dst) +
           format(":%u, VNI %u", key.tun_dport, key.tun_vni);
  };
  if (!v.enabled || key.in_port != v.uplink || key.tun_dst != v.local_ip ||
      key.tun_dport != v.udp_port)
    return drop(t, TraceStage::kDecap, DropReason::kVxlanNotOurs, [&](TraceStep& s) {
      s.detail = outer() + ": not to our VTEP " + ip4_str(v.local_ip) + format(":%u", v.udp_port);
    });
  const uint16_t lvlan = snap.lvlan_of_vni(key.tun_vni);
  const Network& net = snap.networks[lvlan];
  if (lvlan == 0 || !net.present || net.type != NetType::kVxlan)
    return drop(t, TraceStage::kDecap, DropReason::kUnknownVni, [&](TraceStep& s) {
      s.detail = outer() + ": no network of this VNI on this host";
    });
  step(t, TraceStage::kDecap, [&](TraceStep& s) {
    s.lvlan = lvlan;
    s.detail = outer() + format(": to our VTEP, network local VLAN %u; outer headers removed", lvlan);
  });
  if (bad_source(key, t)) return drop_action(DropReason::kInvalidSourceMac);
  // VXLAN networks carry untagged frames only (VMs sit on access ports).
  if (key.n_tags != 0)
    return drop(t, TraceStage::kIngress, DropReason::kNestedVlan, [&](TraceStep& s) {
      s.detail = "the inner frame is VLAN-tagged; VXLAN networks carry untagged frames";
    });
  Action a;
  a.flags = kActDecap;
  if (const FdbEntry* e = fdb_find(snap, learned, lvlan, key.dl_src)) {
    known_source(key, *e, "static", t);
    a.learn_slot = e->learn_slot;
  } else if (v.learning && vtep_index_of(snap, key.tun_src) != kNoPort) {
    step(t, TraceStage::kLearn, [&](TraceStep& s) {
      s.detail = "source " + mac_str(key.dl_src) +
                 " unknown here: reported to control, learned behind VTEP " + ip4_str(key.tun_src);
    });
    a.flags |= kActLearn;  // the worker names the VTEP (kVtepPortBase + index)
  } else {
    step(t, TraceStage::kLearn, [&](TraceStep& s) {
      s.detail = "source " + mac_str(key.dl_src) + " unknown here, not learned (" +
                 (v.learning ? "the sender is no known VTEP" : "learning off") + ")";
    });
  }
  return keep_learning(l2_forward(snap, learned, net, lvlan, key, a, t), a, lvlan);
}

// ARP on the underlay for our VTEP (vxlan.h is_vtep_arp).
template <typename Tr>
void vtep_arp_step(const Snapshot& snap, const FlowKey& key, Tr& t) noexcept {
  step(t, TraceStage::kVtepArp, [&](TraceStep& s) {
    const bool answered = key.nw_proto == kArpOpRequest && arp_target_ip(key) == snap.vtep.local_ip;
    s.detail = "ARP " + std::string(key.nw_proto == kArpOpRequest ? "request" : "reply") + " from " +
               ip4_str(arp_sender_ip(key)) + " for " + ip4_str(arp_target_ip(key)) +
               " on the underlay, for our VTEP " + ip4_str(snap.vtep.local_ip) +
               ": the sender's address goes to the control thread (next-hop resolution)" +
               (answered ? "; answered with " + mac_str(snap.vtep.mac) : "");
  });
}

template <typename Tr>
Action decide_deferred(const Snapshot& snap, LearnedLookup* learned, const FlowKey& key,
                       Tr& t) noexcept {
  const PortEntry* port = snap.port(key.in_port);
  if (!port)
    return drop(t, TraceStage::kInPort, DropReason::kUnknownPort,
                [&](TraceStep& s) { s.detail = "no such port"; });
  auto in_port = [&](TraceStep& s) {
    s.port = key.in_port;
    s.detail = port->role == PortRole::kAccess ? "access port (a VM's NIC)" : "uplink (physnet NIC)";
    if (!port->enabled) s.detail += ", down (binding or device not live)";
  };
  if (!port->enabled) return drop(t, TraceStage::kInPort, DropReason::kPortDown, in_port);
  step(t, TraceStage::kInPort, in_port);
  Action a;
  if (key.tun_flags & kTunValid) {
    a = from_tunnel(snap, learned, key, t);
  } else if (bad_source(key, t)) {
    return drop_action(DropReason::kInvalidSourceMac);
  } else if (port->role == PortRole::kAccess) {
    a = from_access(snap, learned, *port, key, t);
  } else if (is_vtep_arp(snap, *port, key)) {
    vtep_arp_step(snap, key, t);
    a.kind = ActionKind::kVtepArp;
    return a;
  } else {
    a = from_uplink(snap, learned, *port, key, t);
  }
  if (a.kind == ActionKind::kOutput) {
    // l2_forward checked that the output port exists.
    if (const PortSecurity* sec = snap.ports[a.out_port].security)
      return receiver_security(*sec, key, a, t);
  }
  return a;
}

}  // namespace strait::dp::pipeline_impl
