// The per-packet half of stateful security groups (sg_stage.h).
#include "dataplane/sg_stage.h"

#include "dataplane/pipeline.h"
#include "dataplane/port_security.h"

namespace strait::dp {
namespace {

SgVerdict pass(bool in_connection = false) { return {DropReason::kNone, in_connection}; }
SgVerdict drop(DropReason r) { return {r, false}; }

// Keeps the flow's hint pointing at e (only what a ct_hintable packet found).
void remember(const Conntrack& ct, const CtPacket& pkt, CtEntry* e, bool src_hi, CtHint* hint) {
  if (hint == nullptr || !ct_hintable(pkt)) return;
  const CtHint h = ct.hint(e, src_hi);
  if (*hint != h) *hint = h;
}

// No connection to go by: the decision on new connections. `a` has its
// rules applied (resolve_rules: the cached action of the worker leaves them
// for later, and only packets of no verified connection get here, so
// established traffic never classifies).
SgVerdict as_new(const Action& a) {
  return (a.flags & kActNewOk) ? pass() : drop(a.reason);
}

// What no connection starts with: a TCP SYN-ACK or RST, an ICMP echo reply,
// an ICMP error (conntrack refuses to open on these whatever the rules say).
bool never_opens(const CtPacket& pkt) {
  if (pkt.kind == CtPacketKind::kRelated || pkt.icmp_echo_reply) return true;
  constexpr uint8_t kSyn = 0x02, kRst = 0x04, kAck = 0x10;
  const uint8_t f = pkt.tcp_flags;
  return pkt.tuple.proto == kIpProtoTcp && ((f & kRst) || ((f & kSyn) && (f & kAck)));
}

// A packet of no live connection: refused by the rules, or invalid, or it
// opens one. `a` has its rules applied (resolve_rules).
SgVerdict open(Conntrack& ct, const Snapshot& s, const Action& a, const CtPacket& pkt,
               uint64_t now_ms, uint16_t worker, CtHint* hint) {
  if (!(a.flags & kActNewOk)) {
    if (!never_opens(pkt)) return drop(a.reason);
    // Invalid rather than denied: it belongs to no connection and could
    // start none. create() refuses it at once, storing nothing, and counts
    // it in CtStats::invalid like any other invalid packet.
    ct.create(pkt, s.generation, now_ms, worker);
    return drop(DropReason::kCtInvalid);
  }
  if (pkt.kind != CtPacketKind::kConn) return pass();  // a related error the rules allow
  const CtCreate c = ct.create(pkt, s.generation, now_ms, worker);
  switch (c.status) {
    case CtCreateStatus::kCreated:
    case CtCreateStatus::kExisting:
      remember(ct, pkt, c.entry, c.src_hi, hint);
      return pass();
    case CtCreateStatus::kFull:
      return drop(DropReason::kCtFull);
    case CtCreateStatus::kInvalid:
      return drop(DropReason::kCtInvalid);
  }
  return drop(DropReason::kCtInvalid);
}

// A packet of live connection l.entry: refresh it, and re-check it when the
// rules changed since they last allowed it (F10).
SgVerdict established(Conntrack& ct, const Snapshot& s, const Action& a, const FlowKey& key,
                      const CtPacket& pkt, CtLookup l, uint64_t now_ms, uint16_t worker,
                      CtHint* hint) {
  if (ct.update(l, pkt, now_ms) == CtState::kNone)  // removed meanwhile: new
    return open(ct, s, resolve_rules(s, key, a), pkt, now_ms, worker, hint);
  remember(ct, pkt, l.entry, l.src_hi, hint);
  const uint32_t vg = Conntrack::verified_generation(l.entry);
  // Generations compare by their difference: they wrap.
  if (vg != 0 && int32_t(vg - rules_floor(s, key.in_port, a.out_port)) >= 0) return pass(true);
  // vg 0: a SYN re-opened the entry with this packet's sender as opener.
  const bool allowed = (vg == 0 || !l.reply) ? (resolve_rules(s, key, a).flags & kActNewOk) != 0
                                             : sg_original_allowed(s, key, a.out_port);
  if (!allowed) {
    Conntrack::end(l.entry);
    return drop(DropReason::kCtRevoked);
  }
  Conntrack::mark_verified(l.entry, s.generation);
  return pass(true);
}

}  // namespace

void sg_prepare(const Conntrack* ct, const Action& a, const FlowKey& key, const uint8_t* l4,
                uint32_t l4_len, CtHint hint, SgPrepared* p) noexcept {
  ct_packet_from_key(key, a.lvlan, l4, l4_len, &p->pkt);
  p->hint = {};
  if (ct == nullptr || p->pkt.kind == CtPacketKind::kUntracked) return;
  if (hint.ref != 0 && ct_hintable(p->pkt)) {
    p->hint = hint;
    ct->prefetch(hint);
  } else {
    ct->probe(p->pkt.tuple, &p->probe);
  }
}

SgVerdict sg_track(const Snapshot& s, Conntrack* ct, const Action& a, const FlowKey& key,
                   const SgPrepared& p, uint64_t now_ms, uint16_t worker,
                   CtHint* hint) noexcept {
  if (ct == nullptr) return as_new(resolve_rules(s, key, a));
  const CtPacket& pkt = p.pkt;
  switch (pkt.kind) {
    case CtPacketKind::kUntracked:
      return as_new(resolve_rules(s, key, a));
    case CtPacketKind::kRelated:
      if (ct->lookup(p.probe, now_ms).entry) return pass(true);
      return open(*ct, s, resolve_rules(s, key, a), pkt, now_ms, worker, hint);  // never creates
    case CtPacketKind::kConn:
      break;
  }
  CtLookup l = p.hint.ref != 0 ? ct->lookup(p.hint, now_ms) : ct->lookup(p.probe, now_ms);
  // A stale hint: its connection ended, maybe another took its place.
  if (!l.entry && p.hint.ref != 0) l = ct->lookup(pkt.tuple, now_ms);
  if (l.entry) return established(*ct, s, a, key, pkt, l, now_ms, worker, hint);
  return open(*ct, s, resolve_rules(s, key, a), pkt, now_ms, worker, hint);
}

SgVerdict sg_track(const Snapshot& s, Conntrack* ct, const Action& a, const FlowKey& key,
                   const uint8_t* l4, uint32_t l4_len, uint64_t now_ms, uint16_t worker) noexcept {
  SgPrepared p;
  sg_prepare(ct, a, key, l4, l4_len, CtHint{}, &p);
  return sg_track(s, ct, a, key, p, now_ms, worker, nullptr);
}

bool sg_in_connection(const Conntrack* ct, const FlowKey& key, uint16_t zone, const uint8_t* l4,
                      uint32_t l4_len, uint64_t now_ms) noexcept {
  if (ct == nullptr) return false;
  CtPacket pkt;
  ct_packet_from_key(key, zone, l4, l4_len, &pkt);
  return pkt.kind != CtPacketKind::kUntracked && ct->lookup(pkt.tuple, now_ms).entry != nullptr;
}

DropReason sg_flood_target(const PortSecurity& target, const FlowKey& key,
                           bool in_connection) noexcept {
  DropReason why = DropReason::kNone;
  switch (ingress_class(key, &why)) {
    case SgClass::kDeny:
      return why;
    case SgClass::kAllow:
      return DropReason::kNone;
    case SgClass::kRules:
      break;
  }
  return in_connection || rules_allow(target, SgDirection::kIngress, key)
             ? DropReason::kNone
             : DropReason::kSgIngressDenied;
}

uint32_t rules_floor(const Snapshot& s, uint16_t in_port, uint16_t out_port) noexcept {
  uint32_t floor = s.verify_generation;
  auto later = [&](uint16_t port) {
    if (const PortEntry* p = s.port(port); p && p->security && int32_t(p->rules_gen - floor) > 0)
      floor = p->rules_gen;
  };
  later(in_port);
  later(out_port);
  return floor;
}

bool sg_original_allowed(const Snapshot& s, const FlowKey& reply, uint16_t out_port) noexcept {
  const FlowKey orig = reverse_key(reply, out_port);
  // The original went out of this reply's output port (its sender) and into
  // this reply's input port (its receiver).
  if (const PortEntry* p = s.port(out_port); p && p->security)
    if (!rules_allow(*p->security, SgDirection::kEgress, orig)) return false;
  if (const PortEntry* p = s.port(reply.in_port); p && p->security)
    if (!rules_allow(*p->security, SgDirection::kIngress, orig)) return false;
  return true;
}

}  // namespace strait::dp
