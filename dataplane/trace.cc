#include "dataplane/trace.h"

#include <arpa/inet.h>

#include <cstdio>

#include "dataplane/parse.h"
#include "dataplane/pipeline.h"
#include "dataplane/port_security.h"
#include "dataplane/sg_stage.h"
#include "dataplane/vxlan.h"

namespace strait::dp {
namespace {

constexpr uint16_t kVidMask = 0x0fff;

std::string format(const char* fmt, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

std::string mac_str(const uint8_t* m) {
  return format("%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
}

// An IPv4 address in network order.
std::string ip4_str(uint32_t ip) {
  char buf[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &ip, buf, sizeof buf);
  return buf;
}

// The L3 source of a key: IPv4 / IPv6 address, ARP sender IP.
std::string src_ip_str(const FlowKey& k) {
  char buf[INET6_ADDRSTRLEN] = "?";
  inet_ntop(k.dl_type == kEthTypeIpv6 ? AF_INET6 : AF_INET, k.nw_src, buf, sizeof buf);
  return buf;
}

std::string spoof_detail(const FlowKey& k, DropReason r) {
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
std::string rule_str(const PortSecurity& sec, SgDirection dir, const FlowKey& k) {
  const char* d = dir == SgDirection::kEgress ? "egress" : "ingress";
  if (!sec.sg) return format("the port has no security group: no %s rule", d);
  const uint32_t m = sec.sg->match(dir, k);
  return m ? format("%s rule #%u of the port's security groups", d, m)
           : format("no %s rule of the port's security groups", d);
}

const char* net_type_str(NetType t) {
  switch (t) {
    case NetType::kLocal: return "local";
    case NetType::kFlat: return "flat";
    case NetType::kVlan: return "vlan";
    case NetType::kVxlan: return "vxlan";
  }
  return "?";
}

// Explains, step by step, the decision pipeline_decide makes (pipeline.cc),
// reading the same tables in the same order. Returns the drop reason the
// explanation arrives at (kNone: forwarded). Keep in step with pipeline.cc:
// trace_frame flags any disagreement.
class Explainer {
 public:
  Explainer(const Snapshot& s, const FlowKey& k, std::vector<TraceStep>* out)
      : snap_(s), key_(k), out_(*out) {}

  DropReason run() {
    const PortEntry* port = snap_.port(key_.in_port);
    if (!port) return stop(TraceStage::kInPort, DropReason::kUnknownPort, "no such port");
    TraceStep& in = add(TraceStage::kInPort, port->role == PortRole::kAccess
                                                 ? "access port (a VM's NIC)"
                                                 : "uplink (physnet NIC)");
    in.port = key_.in_port;
    if (!port->enabled) {
      in.drop = DropReason::kPortDown;
      in.detail += ", down (binding or device not live)";
      return in.drop;
    }
    DropReason r;
    if (key_.tun_flags & kTunValid) {
      r = tunnel();
    } else if ((r = source_mac()) != DropReason::kNone) {
      return r;
    } else if (port->role == PortRole::kAccess) {
      r = access(*port);
    } else if (is_vtep_arp(snap_, *port, key_)) {
      return vtep_arp();
    } else {
      r = uplink(*port);
    }
    if (r != DropReason::kNone) return r;
    if (out_port_ != kNoPort)
      if (const PortSecurity* sec = snap_.ports[out_port_].security)
        if (r = receiver(*sec); r != DropReason::kNone) return r;
    return tracked();
  }

 private:
  TraceStep& add(TraceStage st, std::string detail) {
    out_.push_back(TraceStep{st});
    out_.back().detail = std::move(detail);
    return out_.back();
  }
  TraceStep& drop_step(TraceStage st, DropReason r, std::string detail) {
    TraceStep& s = add(st, std::move(detail));
    s.drop = r;
    return s;
  }
  DropReason stop(TraceStage st, DropReason r, std::string detail) {
    drop_step(st, r, std::move(detail));
    return r;
  }

  // The sending VM's side (pipeline.cc sender_security).
  DropReason sender(const PortSecurity& sec) {
    if (DropReason r = spoof_check(sec, key_); r != DropReason::kNone)
      return stop(TraceStage::kAntiSpoof, r, spoof_detail(key_, r));
    add(TraceStage::kAntiSpoof, key_.dl_type == kEthTypeArp
                                    ? "ARP sender MAC and IP are the port's"
                                    : "source MAC (and address) are the port's");
    DropReason why = DropReason::kNone;
    switch (egress_class(key_, &why)) {
      case SgClass::kDeny:
        return stop(TraceStage::kEgressSg, why,
                    "port security: " + std::string(drop_reason_help(why)));
      case SgClass::kAllow:
        add(TraceStage::kEgressSg,
            "always allowed from a VM (ARP, DHCP client, ND, MLD): not tracked");
        return DropReason::kNone;
      case SgClass::kRules:
        break;
    }
    track_ = true;
    new_ok_ = rules_allow(sec, SgDirection::kEgress, key_);
    if (!new_ok_) denied_ = DropReason::kSgEgressDenied;
    add(TraceStage::kEgressSg, rule_str(sec, SgDirection::kEgress, key_) +
                                   (new_ok_ ? " allows a new connection"
                                            : ": a new connection is denied"));
    return DropReason::kNone;
  }

  // The receiving VM's side of a unicast output (pipeline.cc receiver_security).
  DropReason receiver(const PortSecurity& sec) {
    DropReason why = DropReason::kNone;
    TraceStep* s = nullptr;
    switch (ingress_class(key_, &why)) {
      case SgClass::kDeny:
        s = &drop_step(TraceStage::kIngressSg, why,
                       "receiver's port security: " + std::string(drop_reason_help(why)));
        s->port = out_port_;
        return why;
      case SgClass::kAllow:
        add(TraceStage::kIngressSg, "always allowed to a VM (ARP, DHCP reply, ND, MLD)").port =
            out_port_;
        return DropReason::kNone;
      case SgClass::kRules:
        break;
    }
    if (!track_) {
      track_ = new_ok_ = true;
    }
    const bool ok = rules_allow(sec, SgDirection::kIngress, key_);
    add(TraceStage::kIngressSg, "receiver: " + rule_str(sec, SgDirection::kIngress, key_) +
                                    (ok ? " allows a new connection"
                                        : ": a new connection is denied"))
        .port = out_port_;
    if (new_ok_ && !ok) {
      new_ok_ = false;
      denied_ = DropReason::kSgIngressDenied;
    }
    return DropReason::kNone;
  }

  // Conntrack, which trace does not consult: what a new connection meets.
  DropReason tracked() {
    if (!track_) return DropReason::kNone;
    if (new_ok_) {
      add(TraceStage::kConntrack,
          "tracked: a new connection is allowed by the rules and opened; replies and related "
          "ICMP errors of tracked connections pass");
      return DropReason::kNone;
    }
    return stop(TraceStage::kConntrack, denied_,
                std::string("tracked: a new connection is denied by the ") +
                    (denied_ == DropReason::kSgEgressDenied ? "sender's egress"
                                                            : "receiver's ingress") +
                    " rules; only packets of tracked connections (replies, related ICMP errors) "
                    "pass (conntrack state is not consulted by trace)");
  }

  // ARP on the underlay for our VTEP (pipeline.cc, vxlan.h is_vtep_arp).
  DropReason vtep_arp() {
    const bool answered =
        key_.nw_proto == kArpOpRequest && arp_target_ip(key_) == snap_.vtep.local_ip;
    add(TraceStage::kVtepArp,
        "ARP " + std::string(key_.nw_proto == kArpOpRequest ? "request" : "reply") + " from " +
            ip4_str(arp_sender_ip(key_)) + " for " + ip4_str(arp_target_ip(key_)) +
            " on the underlay, for our VTEP " + ip4_str(snap_.vtep.local_ip) +
            ": the sender's address goes to the control thread (next-hop resolution)" +
            (answered ? "; answered with " + mac_str(snap_.vtep.mac) : ""));
    return DropReason::kNone;
  }

  DropReason source_mac() {
    if (mac_is_multicast(key_.dl_src) || mac_is_zero(key_.dl_src))
      return stop(TraceStage::kSourceMac, DropReason::kInvalidSourceMac,
                  "source " + mac_str(key_.dl_src) + " is multicast or zero");
    add(TraceStage::kSourceMac, "source " + mac_str(key_.dl_src) + " is a unicast address");
    return DropReason::kNone;
  }

  // A decapsulated frame (pipeline.cc from_tunnel).
  DropReason tunnel() {
    const VtepConfig& v = snap_.vtep;
    const std::string outer = "VXLAN " + ip4_str(key_.tun_src) + " -> " + ip4_str(key_.tun_dst) +
                              format(":%u, VNI %u", key_.tun_dport, key_.tun_vni);
    if (!v.enabled || key_.in_port != v.uplink || key_.tun_dst != v.local_ip ||
        key_.tun_dport != v.udp_port)
      return stop(TraceStage::kDecap, DropReason::kVxlanNotOurs,
                  outer + ": not to our VTEP " + ip4_str(v.local_ip) + format(":%u", v.udp_port));
    const uint16_t lvlan = snap_.lvlan_of_vni(key_.tun_vni);
    const Network& net = snap_.networks[lvlan];
    if (lvlan == 0 || !net.present || net.type != NetType::kVxlan)
      return stop(TraceStage::kDecap, DropReason::kUnknownVni,
                  outer + ": no network of this VNI on this host");
    add(TraceStage::kDecap,
        outer + format(": to our VTEP, network local VLAN %u; outer headers removed", lvlan))
        .lvlan = lvlan;
    if (DropReason r = source_mac(); r != DropReason::kNone) return r;
    if (key_.n_tags != 0)
      return stop(TraceStage::kIngress, DropReason::kNestedVlan,
                  "the inner frame is VLAN-tagged; VXLAN networks carry untagged frames");
    decap_ = true;
    if (known_source(lvlan, "static")) {
      // refreshed, not learned again
    } else if (v.learning && vtep_index_of(snap_, key_.tun_src) != kNoPort) {
      add(TraceStage::kLearn, "source " + mac_str(key_.dl_src) +
                                  " unknown here: reported to control, learned behind VTEP " +
                                  ip4_str(key_.tun_src));
    } else {
      add(TraceStage::kLearn, "source " + mac_str(key_.dl_src) + " unknown here, not learned (" +
                                  (v.learning ? "the sender is no known VTEP" : "learning off") +
                                  ")");
    }
    return l2(net, lvlan);
  }

  // An FDB hit on remote VTEP `port` (pipeline.cc to_vtep).
  DropReason to_vtep(uint16_t port) {
    const RemoteVtep* v = snap_.vtep_of(port);
    if (decap_)
      return stop(TraceStage::kFdb, DropReason::kSamePort,
                  "destination is behind a tunnel and the frame came out of one: never back in");
    if (!snap_.vtep.enabled)
      return stop(TraceStage::kFdb, DropReason::kTunnelNoVtep,
                  "destination is behind a remote VTEP, but this host has no VTEP");
    if (!v)
      return stop(TraceStage::kFdb, DropReason::kUnknownPort,
                  "FDB names a remote VTEP not in the snapshot");
    encap_port_ = port;
    return DropReason::kNone;
  }

  DropReason access(const PortEntry& port) {
    if (key_.n_tags != 0)
      return stop(TraceStage::kIngress, DropReason::kTaggedOnAccess,
                  format("frame carries %u VLAN tag(s) (outer VLAN %u); access ports are untagged",
                         key_.n_tags, key_.vlan_tci & kVidMask));
    TraceStep& s = add(TraceStage::kIngress,
                       format("untagged on an access port: its network, local VLAN %u", port.lvlan));
    s.lvlan = port.lvlan;
    const Network& net = snap_.networks[port.lvlan];
    if (!net.present)
      return stop(TraceStage::kNetwork, DropReason::kPortDown, "the port's network is not live");
    if (port.security)
      if (DropReason r = sender(*port.security); r != DropReason::kNone) return r;
    if (arp_responder(net)) return DropReason::kNone;
    return l2(net, port.lvlan);
  }

  // A VM's ARP request in a vxlan network (pipeline.cc from_access, vxlan.h
  // arp_responder_entry): true when the switch answers it.
  bool arp_responder(const Network& net) {
    if (net.type != NetType::kVxlan || key_.dl_type != kEthTypeArp ||
        key_.nw_proto != kArpOpRequest)
      return false;
    const std::string ask = "ARP request from " + ip4_str(arp_sender_ip(key_)) + " for " +
                            ip4_str(arp_target_ip(key_));
    if (const ArpEntry* e = arp_responder_entry(net, key_)) {
      add(TraceStage::kArpResponder,
          ask + ": a remote port's address (tunnel FDB), answered by the ARP responder with " +
              mac_str(e->mac) + " to the ingress port only; not flooded, nothing to the tunnels")
          .port = key_.in_port;
      return true;
    }
    const char* why = net.arp.empty() ? "the network's ARP responder is off or knows no address"
                      : !mac_is_multicast(key_.dl_dst) ? "not broadcast: left to its destination"
                      : arp_target_ip(key_) == arp_sender_ip(key_)
                          ? "gratuitous: an announcement for everyone"
                          : "no remote port has this address";
    add(TraceStage::kArpResponder, ask + ": not answered here (" + why + "), forwarded as any frame");
    return false;
  }

  DropReason uplink(const PortEntry& port) {
    const UplinkMap& map = snap_.uplinks[port.uplink_map];
    uint16_t lvlan;
    if (key_.n_tags == 0) {
      lvlan = map.flat_lvlan;
      if (lvlan == 0)
        return stop(TraceStage::kIngress, DropReason::kNoFlatNetwork,
                    "untagged, and this physnet has no flat network");
      add(TraceStage::kIngress, format("untagged: the physnet's flat network, local VLAN %u", lvlan))
          .lvlan = lvlan;
    } else {
      const uint16_t vid = key_.vlan_tci & kVidMask;
      if (key_.vlan_tpid != kEthTypeVlan) {
        drop_step(TraceStage::kIngress, DropReason::kUnknownVlan,
             format("outer tag has TPID 0x%04x, not 802.1Q: no provider network", key_.vlan_tpid))
            .vid = vid;
        return DropReason::kUnknownVlan;
      }
      lvlan = map.vid_to_lvlan[vid];
      if (lvlan == 0) {
        drop_step(TraceStage::kIngress, DropReason::kUnknownVlan,
             format("VLAN %u is no network of this physnet", vid))
            .vid = vid;
        return DropReason::kUnknownVlan;
      }
      if (key_.n_tags > 1) {
        drop_step(TraceStage::kIngress, DropReason::kNestedVlan,
             format("VLAN %u -> local VLAN %u, but another tag follows", vid, lvlan))
            .vid = vid;
        return DropReason::kNestedVlan;
      }
      TraceStep& s = add(TraceStage::kIngress,
                         format("VLAN %u -> local VLAN %u (tag removed or rewritten on output)",
                                vid, lvlan));
      s.vid = vid;
      s.lvlan = lvlan;
    }
    const Network& net = snap_.networks[lvlan];
    if (!net.present)
      return stop(TraceStage::kNetwork, DropReason::kUnknownVlan, "network not live");
    if (!known_source(lvlan, "a bound port's MAC, never moved by learning")) {
      add(TraceStage::kLearn, "source " + mac_str(key_.dl_src) +
                                  " unknown here: reported to control, learned behind this uplink");
    }
    return l2(net, lvlan);
  }

  // The learning step when the frame's source MAC is in network lvlan's FDB
  // (`bound`: how a bound port's entry is described); false when it is not.
  bool known_source(uint16_t lvlan, const char* bound) {
    const FdbEntry* e = snap_.fdb.find(lvlan, key_.dl_src);
    if (!e) return false;
    TraceStep& s = add(TraceStage::kLearn, "");
    s.hit = true;
    s.port = e->port;
    s.learned = e->learn_slot != kNoSlot;
    s.detail = "source " + mac_str(key_.dl_src) + " already known (" +
               (s.learned ? "learned" : bound) + ")";
    return true;
  }

  DropReason l2(const Network& net, uint16_t lvlan) {
    TraceStep& n = add(TraceStage::kNetwork, "");
    n.lvlan = lvlan;
    n.vid = net.type == NetType::kVlan ? net.seg_id : 0;
    n.detail = format("local VLAN %u: %s network", lvlan, net_type_str(net.type)) +
               (net.type == NetType::kVlan ? format(", segmentation id %u", net.seg_id) : "") +
               (net.type == NetType::kVxlan
                    ? format(", VNI %u, %zu flood VTEP(s)", net.vni, net.flood_vteps.size())
                    : "") +
               format(", MTU %u, %zu port(s) in its flood list", net.mtu, net.flood.size());
    if (!mac_is_multicast(key_.dl_dst)) {
      if (const FdbEntry* e = snap_.fdb.find(lvlan, key_.dl_dst)) {
        TraceStep& s = add(TraceStage::kFdb, "");
        s.hit = true;
        s.port = e->port;
        s.learned = e->learn_slot != kNoSlot;
        s.detail = "destination " + mac_str(key_.dl_dst) + " known: " +
                   (s.learned ? "learned" : is_vtep_port(e->port) ? "remote" : "bound port");
        if (is_vtep_port(e->port)) {
          if (const RemoteVtep* v = snap_.vtep_of(e->port)) s.detail += ", behind VTEP " + ip4_str(v->ip);
          return to_vtep(e->port);
        }
        if (e->port == key_.in_port)
          return stop(TraceStage::kFdb, DropReason::kSamePort, "destination is behind the ingress port");
        if (!snap_.port(e->port))
          return stop(TraceStage::kFdb, DropReason::kUnknownPort, "FDB names a port not in the snapshot");
        out_port_ = e->port;
        return DropReason::kNone;
      }
      add(TraceStage::kFdb, "destination " + mac_str(key_.dl_dst) + " unknown: flood");
    } else {
      add(TraceStage::kFdb, "destination " + mac_str(key_.dl_dst) + " is broadcast/multicast: flood");
    }
    size_t locals = 0;
    for (const FloodTarget& t : net.flood) locals += t.port != key_.in_port;
    const bool vxlan_out = net.type == NetType::kVxlan && !decap_;
    const size_t vteps = vxlan_out && snap_.vtep.enabled ? net.flood_vteps.size() : 0;
    if (locals == 0 && vteps == 0) {
      if (vxlan_out && !net.flood_vteps.empty())
        return stop(TraceStage::kFlood, DropReason::kTunnelNoVtep,
                    "only remote VTEPs to flood to, but this host has no VTEP");
      return stop(TraceStage::kFlood, DropReason::kFloodNoTarget,
                  "no port in the network besides the ingress port");
    }
    add(TraceStage::kFlood,
        format("to every port of local VLAN %u except the ingress port", lvlan) +
            (vteps ? format(", and a copy to each of %zu remote VTEP(s)", vteps)
             : decap_ ? std::string(": local ports only (out of a tunnel)")
                      : std::string()));
    return DropReason::kNone;
  }

  const Snapshot& snap_;
  const FlowKey& key_;
  std::vector<TraceStep>& out_;
  uint16_t out_port_ = kNoPort;  // unicast output found by l2()
  uint16_t encap_port_ = kNoPort;  // remote VTEP found by l2()
  bool decap_ = false;           // the frame came out of a tunnel
  bool track_ = false;           // kActTrack
  bool new_ok_ = false;          // kActNewOk
  DropReason denied_ = DropReason::kNone;  // why new is refused
};

// The transmit side of Worker::execute / Worker::flood. Flood targets with
// port security check their ingress side per packet (sg_flood_target), here
// as for a packet of no tracked connection.
void expand_outputs(const Snapshot& snap, const FlowKey& key, const Action& a, TraceResult* r) {
  auto out = [&](uint16_t port, uint16_t vid, uint16_t vtep = kNoPort) {
    const PortEntry* p = snap.port(port);
    r->outputs.push_back({port, vid, p && p->enabled, vtep});
  };
  // Worker::resolve + encap: false when the VTEP's next hop is unknown.
  auto tunnel = [&](uint16_t vport) {
    const RemoteVtep* v = snap.vtep_of(vport);
    TraceStep& s = r->steps.emplace_back(TraceStep{TraceStage::kEncap});
    s.port = vport;
    s.lvlan = a.lvlan;
    const uint32_t vni = snap.networks[a.lvlan].vni;
    if (!v) {
      s.drop = DropReason::kUnknownPort;
      s.detail = "remote VTEP not in the snapshot";
      return false;
    }
    if (!v->resolved) {
      s.drop = DropReason::kVtepUnresolved;
      s.detail = format("VNI %u to VTEP ", vni) + ip4_str(v->ip) + ": next hop " +
                 ip4_str(v->arp_ip) + " not resolved yet: dropped, ARP asked (at most 1/s)";
      return false;
    }
    s.detail = format("VXLAN VNI %u to VTEP ", vni) + ip4_str(v->ip) + " via next hop " +
               mac_str(v->next_hop_mac) + format(", UDP %u -> %u, out of the underlay NIC",
                                                 vxlan_src_port(vxlan_flow_hash(key)),
                                                 snap.vtep.udp_port);
    out(snap.vtep.uplink, 0, vport);
    return true;
  };
  if (a.kind == ActionKind::kOutput) {
    out(a.out_port, a.egress_vid);
  } else if (a.kind == ActionKind::kEncap) {
    if (!tunnel(a.out_port)) r->drop = r->steps.back().drop;
  } else if (a.kind == ActionKind::kArpReply) {
    out(key.in_port, 0);  // the reply, to the VM that asked
  } else if (a.kind == ActionKind::kVtepArp) {
    if (key.nw_proto == kArpOpRequest && arp_target_ip(key) == snap.vtep.local_ip)
      out(snap.vtep.uplink, 0);
  } else if (a.kind == ActionKind::kFlood) {
    const Network& net = snap.networks[a.lvlan];
    if (!(a.flags & kActDecap) && net.type == NetType::kVxlan && snap.vtep.enabled)
      for (uint16_t v : net.flood_vteps) tunnel(kVtepPortBase + v);
    for (const FloodTarget& t : snap.networks[a.lvlan].flood) {
      if (t.port == key.in_port) continue;
      if (const PortSecurity* sec = snap.ports[t.port].security) {
        const DropReason d = sg_flood_target(*sec, key, false);
        TraceStep& s = r->steps.emplace_back(TraceStep{TraceStage::kIngressSg, d, t.port});
        s.detail = d == DropReason::kNone
                       ? "flood target takes it"
                       : "flood target refuses it (" + std::string(drop_reason_help(d)) + ")";
        DropReason unused;
        if (d == DropReason::kNone && ingress_class(key, &unused) == SgClass::kRules)
          s.detail += ": " + rule_str(*sec, SgDirection::kIngress, key) + " allows it";
        s.detail += "; packets of tracked connections pass";
        if (d != DropReason::kNone) continue;
      }
      out(t.port, t.egress_vid);
    }
  }
}

}  // namespace

const char* trace_stage_name(TraceStage s) {
  switch (s) {
    case TraceStage::kParse: return "parse";
    case TraceStage::kInPort: return "in_port";
    case TraceStage::kSourceMac: return "source_mac";
    case TraceStage::kIngress: return "ingress_vlan";
    case TraceStage::kNetwork: return "network";
    case TraceStage::kLearn: return "learn";
    case TraceStage::kFdb: return "fdb";
    case TraceStage::kFlood: return "flood";
    case TraceStage::kMtu: return "mtu";
    case TraceStage::kAntiSpoof: return "anti_spoof";
    case TraceStage::kEgressSg: return "egress_sg";
    case TraceStage::kIngressSg: return "ingress_sg";
    case TraceStage::kConntrack: return "conntrack";
    case TraceStage::kDecap: return "decap";
    case TraceStage::kEncap: return "encap";
    case TraceStage::kVtepArp: return "vtep_arp";
    case TraceStage::kArpResponder: return "arp_responder";
  }
  return "?";
}

TraceResult trace_frame(const Snapshot& snap, const uint8_t* frame, uint32_t len,
                        uint16_t in_port) {
  TraceResult r;
  r.generation = snap.generation;
  r.frame_len = len;
  // As Worker::process: VXLAN decoded on the underlay NIC only.
  const bool underlay = snap.vtep.enabled && in_port == snap.vtep.uplink;
  const ParseOptions opts{underlay ? snap.vtep.udp_port : uint16_t(0)};
  r.parse = parse_frame(frame, len, len, in_port, opts, &r.key, &r.meta);
  TraceStep& p = r.steps.emplace_back(TraceStep{TraceStage::kParse, r.parse, in_port});
  if (r.parse != DropReason::kNone) {
    p.detail = std::string(drop_reason_help(r.parse));
    r.drop = r.parse;
    r.action = drop_action(r.parse);
    return r;
  }
  p.detail = "well-formed";
  const DropReason explained = Explainer(snap, r.key, &r.steps).run();
  r.action = pipeline_decide(snap, r.key);
  r.learn = r.action.flags & kActLearn;
  r.tracked = r.action.flags & kActTrack;
  // Of the frame that goes out: a decapsulated one without its outer headers.
  const uint32_t l3_len = len - r.meta.inner_ofs - r.meta.l2_len;
  if (r.action.kind == ActionKind::kDrop) {
    r.drop = r.action.reason;
  } else if (r.tracked && !(r.action.flags & kActNewOk)) {
    r.drop = r.action.reason;  // as a new connection; see TraceResult::tracked
  } else if (r.action.mtu && l3_len > r.action.mtu) {
    // Checked per packet (Worker::execute), not part of the cached action.
    TraceStep& m = r.steps.emplace_back(TraceStep{TraceStage::kMtu, DropReason::kMtuExceeded});
    m.detail = format("L3 length %u above the network MTU %u", l3_len, r.action.mtu);
    r.drop = DropReason::kMtuExceeded;
  } else {
    if (r.action.mtu) {
      TraceStep& m = r.steps.emplace_back(TraceStep{TraceStage::kMtu});
      m.detail = format("L3 length %u within the network MTU %u", l3_len, r.action.mtu);
    }
    expand_outputs(snap, r.key, r.action, &r);
  }
  r.consistent = explained == r.action.reason;
  return r;
}

}  // namespace strait::dp
