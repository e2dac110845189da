#include "dataplane/trace.h"

#include <rte_cycles.h>

#include "dataplane/parse.h"
#include "dataplane/pipeline.h"
#include "dataplane/pipeline_impl.h"
#include "dataplane/port_security.h"
#include "dataplane/sg_stage.h"
#include "dataplane/vxlan.h"

namespace strait::dp {
namespace {

using pipeline_impl::format;
using pipeline_impl::ip4_str;
using pipeline_impl::mac_str;
using pipeline_impl::rule_str;

// Records the pipeline's steps (pipeline_impl.h). The rules of a new
// connection are the one decision the pipeline defers (resolve_rules): the
// tracer words what they say where the pipeline meets them, and keeps what
// they decide, so trace_frame can hold it against the real verdict.
class Tracer {
 public:
  static constexpr bool kOn = true;
  explicit Tracer(std::vector<TraceStep>* out) : out_(*out) {}

  TraceStep& add(TraceStage st, DropReason drop) {
    out_.push_back(TraceStep{st, drop});
    if (drop != DropReason::kNone) dropped_ = drop;
    return out_.back();
  }
  void egress_rules(const PortSecurity& sec, const FlowKey& key) {
    track_ = true;
    new_ok_ = rules_allow(sec, SgDirection::kEgress, key);
    if (!new_ok_) denied_ = DropReason::kSgEgressDenied;
    add(TraceStage::kEgressSg, DropReason::kNone).detail =
        rule_str(sec, SgDirection::kEgress, key) +
        (new_ok_ ? " allows a new connection" : ": a new connection is denied");
  }
  void ingress_rules(const PortSecurity& sec, const FlowKey& key, uint16_t port) {
    if (!track_) track_ = new_ok_ = true;
    const bool ok = rules_allow(sec, SgDirection::kIngress, key);
    TraceStep& s = add(TraceStage::kIngressSg, DropReason::kNone);
    s.port = port;
    s.detail = "receiver: " + rule_str(sec, SgDirection::kIngress, key) +
               (ok ? " allows a new connection" : ": a new connection is denied");
    if (new_ok_ && !ok) {
      new_ok_ = false;
      denied_ = DropReason::kSgIngressDenied;
    }
  }
  // What the steps arrive at: the drop of the step that ended the frame, or,
  // for a tracked frame, what the rules said of a new connection. A drop the
  // pipeline makes without saying why would show here.
  DropReason verdict() const { return dropped_ != DropReason::kNone ? dropped_ : denied_; }

 private:
  std::vector<TraceStep>& out_;
  DropReason dropped_ = DropReason::kNone;
  bool track_ = false;
  bool new_ok_ = false;
  DropReason denied_ = DropReason::kNone;  // why a new connection is refused
};

// Conntrack, which trace does not consult: what a new connection meets.
void conntrack_step(const Action& a, TraceResult* r) {
  if (a.flags & kActNewOk) {
    r->steps.push_back(TraceStep{TraceStage::kConntrack});
    r->steps.back().detail =
        "tracked: a new connection is allowed by the rules and opened; replies and related "
        "ICMP errors of tracked connections pass";
    return;
  }
  r->steps.push_back(TraceStep{TraceStage::kConntrack, a.reason});
  r->steps.back().detail =
      std::string("tracked: a new connection is denied by the ") +
      (a.reason == DropReason::kSgEgressDenied ? "sender's egress" : "receiver's ingress") +
      " rules; only packets of tracked connections (replies, related ICMP errors) "
      "pass (conntrack state is not consulted by trace)";
}

// The transmit side of Worker::execute / Worker::flood. Flood targets with
// port security check their ingress side per packet (sg_flood_target), here
// as for a packet of no tracked connection.
// A port's QoS in one direction, in neutron's units (qos.h: the meters'
// TSC units back to rates), and what becomes of this frame.
std::string qos_words(const PortQos& q, QosDir d, const FlowKey& key) {
  const double hz = double(rte_get_tsc_hz());
  const unsigned i = unsigned(d);
  std::string out = d == QosDir::kEgress ? "from the VM:" : "to the VM:";
  auto limit = [&](const QosMeter& m, double unit_scale, const char* rate, const char* burst) {
    if (!m.cost) return;
    const double per_s = hz * double(1u << kQosShift) / double(m.cost) / unit_scale;
    out += format(" at most %.0f %s (burst %.0f %s),", per_s, rate, per_s * double(m.tau) / hz, burst);
  };
  limit(q.bytes[i], 125.0, "kbit/s", "kbit");   // bytes -> kbit
  limit(q.packets[i], 1000.0, "kpps", "kframes");
  if (q.polices(d))
    out += " frames over a limit are dropped (qos_bandwidth, qos_packet_rate; trace charges no meter)";
  if (d == QosDir::kEgress && q.dscp >= 0) {
    const bool ip = key.dl_type == kEthTypeIpv4 || key.dl_type == kEthTypeIpv6;
    out += format("%s DSCP set to %d", q.polices(d) ? ";" : "", q.dscp) +
           (ip ? "" : " on IP frames (not this one)");
  }
  return out;
}

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
    case TraceStage::kTrunk: return "trunk";
    case TraceStage::kQos: return "qos";
  }
  return "?";
}

TraceResult trace_frame(const Snapshot& snap, const uint8_t* frame, uint32_t len,
                        uint16_t in_port, const Fdb* learned) {
  TraceResult r;
  r.generation = snap.generation;
  r.frame_len = len;
  // As Worker::process: a trunk parent's frame tagged with a subport's VLAN
  // is the subport's, without the tag.
  std::vector<uint8_t> untagged;
  if (const PortEntry* in = snap.port(in_port)) {
    if (const uint16_t sub = trunk_subport(*in, frame, len); sub != kNoPort) {
      TraceStep& t = r.steps.emplace_back(TraceStep{TraceStage::kTrunk, DropReason::kNone, sub});
      t.vid = snap.ports[sub].trunk_vid;
      t.detail = format("802.1Q VLAN %u on a trunk's parent: the frame of its subport, tag removed",
                        t.vid);
      untagged.assign(frame, frame + 12);
      untagged.insert(untagged.end(), frame + 16, frame + len);
      frame = untagged.data();
      len -= 4;
      in_port = sub;
    }
  }
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
  // Per packet in the worker, before the decision: the port's egress QoS.
  if (const PortQos* q = snap.ports[in_port].qos) {
    TraceStep& t = r.steps.emplace_back(TraceStep{TraceStage::kQos, DropReason::kNone, in_port});
    t.detail = qos_words(*q, QosDir::kEgress, r.key);
  }
  // The worker's own decision, its steps recorded on the way.
  Tracer tracer(&r.steps);
  LearnedLookup lk{learned};
  r.action = resolve_rules(snap, r.key, pipeline_impl::decide_deferred(snap, &lk, r.key, tracer));
  r.learn = r.action.flags & kActLearn;
  r.tracked = r.action.flags & kActTrack;
  if (r.tracked) conntrack_step(r.action, &r);
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
    // As the worker queues a copy for a VM: its ingress limits.
    for (const TraceOutput& o : r.outputs)
      if (const PortQos* q = o.port < kMaxPorts ? snap.ports[o.port].qos : nullptr;
          q && q->polices(QosDir::kIngress)) {
        TraceStep& t = r.steps.emplace_back(TraceStep{TraceStage::kQos, DropReason::kNone, o.port});
        t.detail = qos_words(*q, QosDir::kIngress, r.key);
      }
  }
  r.consistent = tracer.verdict() == r.action.reason;
  return r;
}

}  // namespace strait::dp
