#pragma once
// The per-packet half of stateful security groups: what the worker does with
// a packet whose cached action says kActTrack (conntrack), and with each flood
// target that has port security. pipeline_decide (cached per flow) has
// already applied everything that depends on the flow alone; what is left
// depends on conntrack state, which changes per packet.
//
// Tracked packet (sg_track), by CtPacketKind of the packet:
//   kUntracked (later fragment, ICMP neither query nor error): passes iff
//     kActNewOk, else dropped with Action::reason.
//   kRelated (ICMP error): passes when the embedded packet's connection is
//     live, else iff kActNewOk (kCtInvalid without); never opens one.
//   kConn with a live entry: the entry is updated; it passes when its rules
//     were verified at or after rules_floor(). Else (the rules changed,
//     F10) it is re-checked: from the original direction (or a connection a
//     SYN just re-opened, verified generation 0) by this packet's own
//     kActNewOk; from the reply direction by the original's key
//     (reverse_key) against the egress rules of the output port and the
//     ingress rules of the input port. Allowed: marked verified; else the
//     connection is ended and the packet dropped (kCtRevoked).
//   kConn without a live entry: with kActNewOk it opens one (kCtFull /
//     kCtInvalid when conntrack refuses), else dropped with Action::reason,
//     or kCtInvalid for what could open no connection anyway (TCP SYN-ACK
//     or RST, ICMP echo reply): "belongs to none and cannot open one".
// An action of pipeline_decide_deferred has its rules applied
// (resolve_rules) only where kActNewOk is consulted: never for a packet of a
// connection verified since its ports' rules last changed (rules_floor).
// Without a conntrack table (ct == nullptr: tests, or a switch built
// without one) every tracked packet is new and never recorded: kActNewOk
// alone decides, replies of allowed connections need rules of their own.
#include <cstdint>

#include "dataplane/action.h"
#include "dataplane/conntrack.h"
#include "dataplane/drop_reasons.h"
#include "dataplane/flow_key.h"
#include "dataplane/snapshot.h"

namespace strait::dp {

struct SgVerdict {
  DropReason drop = DropReason::kNone;  // kNone: the packet goes on
  // It belongs to a connection that was live before it (established, a
  // reply, a related error): flood targets' ingress rules let it through.
  bool in_connection = false;
};

// A tracked packet's conntrack view and table probe, made ahead of its turn
// (sg_prepare) so that a burst's bucket cache misses overlap: the worker
// prepares every tracked packet of a burst, then tracks them in order.
struct SgPrepared {
  CtPacket pkt;
  CtHint hint;    // the flow's, when the packet may go by it (ct_hintable): no probe made
  CtProbe probe;  // of pkt.tuple (kConn, kRelated), unless hint
};

// `l4` points at the L4 header (PacketMeta::l4_ofs; null when there is none)
// with l4_len bytes readable. `hint`: what sg_track left for an earlier
// packet of this flow (kept with its full key), else none.
// Prefetches the hinted entry, or else the entry's buckets.
void sg_prepare(const Conntrack* ct, const Action& a, const FlowKey& key, const uint8_t* l4,
                uint32_t l4_len, CtHint hint, SgPrepared* p) noexcept;

// What conntrack makes of one packet whose action has kActTrack, prepared by
// sg_prepare (a create() of an earlier packet of the burst is seen: the
// lookup happens here). `worker` < CtConfig::n_workers, one thread per id.
// `hint`: where the flow keeps its connection's hint (null: nowhere); set
// to the live connection a ct_hintable packet opened or belongs to, so the
// flow's next packets start from it. (An out parameter: returned in the
// verdict, the 12-byte struct went through the stack and its reload
// stalled on the narrower stores.)
SgVerdict sg_track(const Snapshot& s, Conntrack* ct, const Action& a, const FlowKey& key,
                   const SgPrepared& p, uint64_t now_ms, uint16_t worker, CtHint* hint) noexcept;
// Both at once, for a single packet.
SgVerdict sg_track(const Snapshot& s, Conntrack* ct, const Action& a, const FlowKey& key,
                   const uint8_t* l4, uint32_t l4_len, uint64_t now_ms, uint16_t worker) noexcept;

// Whether a packet of no tracked sender (an uplink, a port without port
// security) belongs to a live connection: a lookup, nothing updated. For
// flood targets with port security.
bool sg_in_connection(const Conntrack* ct, const FlowKey& key, uint16_t zone, const uint8_t* l4,
                      uint32_t l4_len, uint64_t now_ms) noexcept;

// Whether flood target `target` (port security on) takes the packet: kNone,
// or why not. in_connection: as SgVerdict / sg_in_connection say.
DropReason sg_flood_target(const PortSecurity& target, const FlowKey& key,
                           bool in_connection) noexcept;

// The generation a connection between in_port and out_port (either way;
// kNoPort or a VTEP: none) must have been verified at to pass unchecked:
// Snapshot::verify_generation, or the later rules_gen of the two ports. A
// change of rules that left both ports' rules alone re-checks nothing.
uint32_t rules_floor(const Snapshot& s, uint16_t in_port, uint16_t out_port) noexcept;

// F10 re-check from a reply: whether the rules of this snapshot still let the
// original direction open the connection. `reply` came in on reply.in_port
// and goes out to out_port (kNoPort for a flood: no output port's rules).
bool sg_original_allowed(const Snapshot& s, const FlowKey& reply, uint16_t out_port) noexcept;

}  // namespace strait::dp
