#pragma once
// `straitctl trace` (OVS's ofproto/trace): what one frame would meet on its
// way through a worker, step by step, without sending it or touching any
// flow cache. Runs on the control thread against a snapshot it holds.
//
// It runs the worker's own code: the real parser, and the pipeline's
// decisions (pipeline_impl.h) with a tracer that records each step in words
// as the code takes it; the worker runs the same code with an empty tracer,
// compiled away. Then the action is expanded the way Worker::execute does.
// The rules of a new connection, which the worker defers, are worded where
// the pipeline meets them; if what they say ever disagrees with the verdict,
// or a drop has no step that says why, the result says so
// (TraceResult::consistent).
#include <cstdint>
#include <string>
#include <vector>

#include "dataplane/action.h"
#include "dataplane/drop_reasons.h"
#include "dataplane/flow_key.h"
#include "dataplane/snapshot.h"

namespace strait::dp {

enum class TraceStage : uint8_t {
  kParse,       // the parser: the flow key, or why the frame is malformed
  kInPort,      // the ingress port: role, state
  kSourceMac,   // source MAC sanity
  kIngress,     // access port -> its network; uplink: VLAN id / flat -> network
  kNetwork,     // the network the frame is now in
  kLearn,       // uplink: the source MAC known here or to be learned
  kFdb,         // destination MAC lookup
  kFlood,       // the network's flood list
  kMtu,         // frame length against the network MTU (checked per packet)
  // Port security (issue 5), in the order the pipeline applies it:
  kAntiSpoof,   // a secured VM's source MAC / IP / ARP sender
  kEgressSg,    // a secured sender: always allowed / dropped, or its egress rules
  kIngressSg,   // a secured receiver (unicast output or flood target)
  kConntrack,   // the packet is tracked: new connections allowed or not
  // VXLAN (issue 6):
  kDecap,       // underlay frame to our VTEP: VNI -> network, outer headers removed
  kEncap,       // to a remote VTEP: its address, next hop resolved or not
  kVtepArp,     // ARP on the underlay for our VTEP address: answered / reported
  kArpResponder,  // a VM's ARP request in a vxlan network: answered here or flooded
  kTrunk,       // a trunk parent's frame tagged with a subport's VLAN: the subport's, untagged
  kQos,         // a port's QoS limits and DSCP marking (applied per packet, meters not charged)
};
const char* trace_stage_name(TraceStage s);

struct TraceStep {
  TraceStage stage;
  DropReason drop = DropReason::kNone;  // the frame ends here for this reason
  uint16_t port = kNoPort;   // a datapath port the step is about (in-port, FDB hit)
  uint16_t vid = 0;          // a VLAN id on the wire (uplink tag, egress tag)
  uint16_t lvlan = 0;        // a local VLAN (network)
  bool hit = false;          // kFdb / kLearn: MAC found
  bool learned = false;      // kFdb / kLearn hit: learned from traffic (else a bound port)
  std::string detail{};      // the step in words, without port names
};

struct TraceOutput {
  uint16_t port;     // datapath port index
  uint16_t vid;      // VLAN id the frame leaves with, 0 = untagged
  bool enabled;      // false: the worker would count a port_down drop at transmit
  uint16_t vtep = kNoPort;  // VXLAN-encapsulated to this remote VTEP (kVtepPortBase + index)
};

struct TraceResult {
  uint32_t generation = 0;       // of the snapshot traced against
  uint32_t frame_len = 0;
  DropReason parse = DropReason::kNone;
  FlowKey key{};                 // valid when parse == kNone
  PacketMeta meta{};
  std::vector<TraceStep> steps;
  Action action;                 // what the worker would cache for this key
  DropReason drop = DropReason::kNone;  // final: kNone when the frame goes out
  std::vector<TraceOutput> outputs;     // in transmit order
  bool learn = false;            // the worker would report the source MAC to control
  // Stateful security groups apply (kActTrack). The verdict is that of a new
  // connection: trace does not consult conntrack, and packets of tracked
  // connections (replies, related ICMP errors) pass even when it says drop.
  bool tracked = false;
  bool consistent = true;        // the steps arrive at the verdict (always, unless a bug)
};

// Traces `len` contiguous bytes received on datapath port `in_port`, with
// the learned MACs of `learned` (learned_fdb.h; null: none).
TraceResult trace_frame(const Snapshot& snap, const uint8_t* frame, uint32_t len,
                        uint16_t in_port, const Fdb* learned = nullptr);

}  // namespace strait::dp
