#pragma once
// What the pipeline decided for a flow: cached per flow, executed per packet.
#include <cstdint>

#include "dataplane/drop_reasons.h"

namespace strait::dp {

inline constexpr uint16_t kNoPort = 0xffff;
inline constexpr uint16_t kNoSlot = 0xffff;

enum class ActionKind : uint8_t {
  kDrop,    // count `reason`, free
  kOutput,  // send to out_port with egress_vid
  kFlood,   // replicate to the network's flood list, skipping the ingress port
  kEncap,   // VXLAN-encapsulate (VNI of network lvlan) to remote VTEP out_port
            // (kVtepPortBase + index) and send it on the underlay NIC
  kVtepArp, // an ARP for our VTEP address on the underlay: the worker answers
            // a request, reports a reply to the control thread
  kArpReply,  // the ARP responder: a local VM asked for a remote port's IP; the
              // worker answers it to the ingress port with
              // Snapshot::networks[lvlan].arp[out_port], nothing else is sent
};

// Action flags.
inline constexpr uint8_t kActLearn = 1;          // source MAC unknown here: tell control
inline constexpr uint8_t kActIngressTagged = 2;  // frame carries the network's tag: strip or rewrite
// Stateful security groups (a port with port security on the path, traffic
// that is not always allowed): every packet goes through conntrack, also on
// a flow-cache hit. Established and related packets pass; a packet of no
// connection passes and opens one only with kActNewOk.
inline constexpr uint8_t kActTrack = 4;
// The rules allow this packet to open a connection: the egress rules of the
// ingress port and the ingress rules of the output port (floods: the ingress
// port's; each target's ingress is checked per packet). Without it, `reason`
// says which side refused (kSgEgressDenied / kSgIngressDenied).
inline constexpr uint8_t kActNewOk = 8;
// The frame came out of a VXLAN tunnel to us: the worker strips the outer
// headers (PacketMeta::inner_ofs) before it goes anywhere; floods of it
// reach local ports only.
inline constexpr uint8_t kActDecap = 16;
// Rules not applied yet (pipeline_decide_deferred): kActNewOk then says only
// that nothing else refuses new connections; the egress rules of the ingress
// port (kActEgressRules) and the ingress rules of the output port
// (kActIngressRules) still have to allow them (resolve_rules). The worker
// resolves them only for a packet of no verified connection, so established
// traffic never runs the classifier (VPP's reflexive ACL sessions).
inline constexpr uint8_t kActEgressRules = 32;
inline constexpr uint8_t kActIngressRules = 64;
inline constexpr uint8_t kActRulesPending = kActEgressRules | kActIngressRules;

struct Action {
  ActionKind kind = ActionKind::kDrop;
  DropReason reason = DropReason::kNone;  // kDrop; kActTrack without kActNewOk: why new is refused
  uint8_t flags = 0;
  uint8_t pad = 0;
  uint16_t out_port = kNoPort;  // kOutput: datapath port index; kArpReply: Network::arp index
  uint16_t egress_vid = 0;      // kOutput: VLAN id to carry out, 0 = untagged
  uint16_t lvlan = 0;           // the network's local VLAN (flood list, learning)
  uint16_t mtu = 0;             // largest L3 length allowed; checked per packet, 0 = no check
  uint16_t learn_slot = kNoSlot;  // learned-FDB slot this traffic keeps alive
  uint16_t pad2 = 0;
};
static_assert(sizeof(Action) == 16);

inline Action drop_action(DropReason r) {
  Action a;
  a.kind = ActionKind::kDrop;
  a.reason = r;
  return a;
}

}  // namespace strait::dp
