#include "dataplane/conntrack.h"

#include <rte_hash_crc.h>
#include <rte_pause.h>
#include <rte_prefetch.h>

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstring>
#include <vector>

namespace strait::dp {
namespace {

// CtEntry::word: everything about a connection that changes, in one CAS-able
// word. Endpoints are named absolutely (the key's lo/hi), not by direction.
constexpr uint64_t kWordStateMask = 0xff;    // CtState
constexpr uint64_t kWordOrigHi = 1u << 8;    // the opener is the hi endpoint
constexpr uint64_t kWordCloserHi = 1u << 9;  // the first FIN came from hi
constexpr uint64_t kWordDead = 1u << 10;     // unlinked by the control thread
constexpr unsigned kWordExpiryShift = 16;    // 48 bits of expiry time (ms)
constexpr uint64_t kExpiryMax = (uint64_t(1) << 48) - 1;

CtState state_of_word(uint64_t w) { return CtState(w & kWordStateMask); }
uint64_t expiry_of_word(uint64_t w) { return w >> kWordExpiryShift; }
bool dead(uint64_t w) { return w & kWordDead; }
bool live_at(uint64_t w, uint64_t now) { return !dead(w) && expiry_of_word(w) > now; }
uint64_t with_state(uint64_t w, CtState s) { return (w & ~kWordStateMask) | uint64_t(s); }
uint64_t with_expiry(uint64_t w, uint64_t exp) {
  return (w & ((uint64_t(1) << kWordExpiryShift) - 1)) |
         (std::min(exp, kExpiryMax) << kWordExpiryShift);
}

constexpr uint8_t kTcpFin = 0x01, kTcpSyn = 0x02, kTcpRst = 0x04, kTcpAck = 0x10;
constexpr uint8_t kIpProtoSctp = 132, kIpProtoUdpLite = 136;

// Single-writer increment (per-worker counters): no locked instruction.
void bump_counter(std::atomic<uint64_t>& c) {
  c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

uint16_t be16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }

bool has_ports(uint8_t proto) {
  return proto == kIpProtoTcp || proto == kIpProtoUdp || proto == kIpProtoSctp ||
         proto == kIpProtoUdpLite;
}
uint8_t icmp_proto(uint8_t family) { return family == kCtIpv4 ? kIpProtoIcmp : kIpProtoIcmpv6; }

// Query/response ICMP types tracked by their id: 0 = not one, 1 = request,
// 2 = reply. IPv4: echo, timestamp, information, address mask; IPv6: echo.
int icmp_query_kind(uint8_t family, uint8_t type) {
  if (family == kCtIpv4) {
    switch (type) {
      case 8:
      case 13:
      case 15:
      case 17:
        return 1;
      case 0:
      case 14:
      case 16:
      case 18:
        return 2;
      default:
        return 0;
    }
  }
  return type == 128 ? 1 : type == 129 ? 2 : 0;
}

// An ICMP query's tuple: its id and query type in the port fields, request
// (id, type) and reply (type, id) mirrored so they are one connection, and the
// requester's side in the zone's spare top bit, so that a request from the
// answering side (same id) is never taken for a reply of the connection.
void icmp_query_tuple(CtTuple& t, uint8_t family, uint8_t type, uint16_t id) {
  const bool request = icmp_query_kind(family, type) == 1;
  const uint16_t query = family == kCtIpv6 ? 128 : request ? type : (type == 0 ? 8 : type - 1);
  t.sport = request ? id : query;
  t.dport = request ? query : id;
  const uint8_t* requester = request ? t.src : t.dst;
  const uint8_t* responder = request ? t.dst : t.src;
  if (std::memcmp(requester, responder, 16) < 0) t.zone |= kCtZoneRequesterLo;
}

uint64_t load64(const void* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}

// Source endpoint compared with the destination: > 0 when src is the hi one.
// Addresses compare as big-endian numbers (memcmp order) without a call.
int compare_endpoints(const CtTuple& t) {
  for (unsigned i = 0; i < 16; i += 8) {
    const uint64_t a = __builtin_bswap64(load64(t.src + i)),
                   b = __builtin_bswap64(load64(t.dst + i));
    if (a != b) return a < b ? -1 : 1;
  }
  return int(t.sport) - int(t.dport);
}

// Two CRC32C chains over the key's five words, in opposite orders (a chain
// over the same order with another seed would differ by a constant only):
// the low half picks bucket 1, the high half bucket 2 and the signature.
// Two independent 3-cycle-latency chains overlap: ~15 cycles.
uint64_t hash_key(const CtKey& k) {
  const auto* p = reinterpret_cast<const uint8_t*>(&k);
  uint32_t a = 0x5f3759dfu, b = 0x9e3779b9u;
  for (unsigned i = 0; i < 5; i++) {
    a = rte_hash_crc_8byte(load64(p + 8 * i), a);
    b = rte_hash_crc_8byte(load64(p + 8 * (4 - i)), b);
  }
  return uint64_t(a) << 32 | b;
}
static_assert(sizeof(CtKey) == 5 * 8, "hash_key reads five words");

uint32_t signature(uint64_t h) { return uint32_t(h >> 32) | 1; }  // never 0: 0 = empty slot
uint32_t slot_index1(uint64_t v) { return uint32_t(v); }
uint64_t slot_value(uint64_t h, uint32_t idx1) { return uint64_t(signature(h)) << 32 | idx1; }

uint32_t round_up_pow2(uint32_t v) {
  uint32_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

}  // namespace

const char* ct_state_name(CtState s) {
  switch (s) {
#define STRAIT_CT_NAME(e, n) \
  case CtState::e:           \
    return n;
    STRAIT_FOREACH_CT_STATE(STRAIT_CT_NAME)
#undef STRAIT_CT_NAME
  }
  return "?";
}

CtKey ct_make_key(const CtTuple& t, bool* src_is_hi) noexcept {
  CtKey k;
  const bool hi = compare_endpoints(t) > 0;
  std::memcpy(k.lo_addr, hi ? t.dst : t.src, 16);
  std::memcpy(k.hi_addr, hi ? t.src : t.dst, 16);
  // The last word in one store: hash_key() reads it as one load, which
  // five narrow stores could not forward to (a stall of ~15 cycles).
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "CtKey tail layout");
  static_assert(offsetof(CtKey, lo_port) == 32 && offsetof(CtKey, proto) == 39);
  const uint64_t tail = uint64_t(hi ? t.dport : t.sport) | uint64_t(hi ? t.sport : t.dport) << 16 |
                        uint64_t(t.zone) << 32 | uint64_t(t.family) << 48 | uint64_t(t.proto) << 56;
  std::memcpy(&k.lo_port, &tail, 8);
  *src_is_hi = hi;
  return k;
}

bool ct_icmp_is_error(uint8_t family, uint8_t type) noexcept {
  if (family == kCtIpv4) return type == 3 || type == 4 || type == 5 || type == 11 || type == 12;
  return family == kCtIpv6 && type >= 1 && type <= 4;
}

bool ct_icmp_error_inner(uint8_t family, const uint8_t* icmp, uint32_t len, uint16_t zone,
                         CtTuple* inner) noexcept {
  constexpr uint32_t kIcmpHdr = 8;
  if (icmp == nullptr || len < kIcmpHdr) return false;
  const uint8_t* ip = icmp + kIcmpHdr;
  const uint32_t rem = len - kIcmpHdr;
  CtTuple t{};
  uint32_t ip_len;
  if (family == kCtIpv4) {
    if (rem < 20 || (ip[0] >> 4) != 4) return false;
    ip_len = (ip[0] & 0x0f) * 4u;
    if (ip_len < 20) return false;
    if ((be16(ip + 6) & 0x1fff) != 0) return false;  // a later fragment: no L4 header
    t.proto = ip[9];
    std::memcpy(t.src, ip + 12, 4);
    std::memcpy(t.dst, ip + 16, 4);
  } else if (family == kCtIpv6) {
    ip_len = 40;
    if (rem < ip_len || (ip[0] >> 4) != 6) return false;
    t.proto = ip[6];  // extension headers are not walked: such errors stay unrelated
    std::memcpy(t.src, ip + 8, 16);
    std::memcpy(t.dst, ip + 24, 16);
  } else {
    return false;
  }
  const uint8_t* l4 = ip + ip_len;
  const uint32_t l4_len = rem >= ip_len ? rem - ip_len : 0;
  if (has_ports(t.proto)) {
    if (l4_len < 4) return false;
    t.sport = be16(l4);
    t.dport = be16(l4 + 2);
  } else if (t.proto == icmp_proto(family)) {
    // Only a query can be a tracked connection (an error about an error is not).
    if (l4_len < 8 || icmp_query_kind(family, l4[0]) == 0) return false;
    t.zone = zone;
    icmp_query_tuple(t, family, l4[0], be16(l4 + 4));
    zone = t.zone;
  } else if (t.proto == kIpProtoIcmp || t.proto == kIpProtoIcmpv6) {
    return false;  // ICMP of the other family
  }
  t.zone = zone;
  t.family = family;
  *inner = t;
  return true;
}

void ct_packet_from_key(const FlowKey& key, uint16_t zone, const uint8_t* l4, uint32_t l4_len,
                        CtPacket* pkt) noexcept {
  *pkt = CtPacket{};
  uint8_t family;
  if (key.dl_type == kEthTypeIpv4)
    family = kCtIpv4;
  else if (key.dl_type == kEthTypeIpv6)
    family = kCtIpv6;
  else
    return;
  if (key.nw_frag == kFragLater) return;  // no L4 header: the pipeline decides
  CtTuple& t = pkt->tuple;
  std::memcpy(t.src, key.nw_src, 16);
  std::memcpy(t.dst, key.nw_dst, 16);
  if (family == kCtIpv4) {  // FlowKey zeroes the tail; do not rely on it for the key
    std::memset(t.src + 4, 0, 12);
    std::memset(t.dst + 4, 0, 12);
  }
  t.zone = zone;
  t.family = family;
  t.proto = key.nw_proto;
  if (has_ports(key.nw_proto)) {
    t.sport = key.tp_src;
    t.dport = key.tp_dst;
    if (key.nw_proto == kIpProtoTcp) pkt->tcp_flags = key.tcp_flags;
    pkt->kind = CtPacketKind::kConn;
  } else if (key.nw_proto == icmp_proto(family)) {
    const uint8_t type = uint8_t(key.tp_src);
    if (const int q = icmp_query_kind(family, type); q != 0) {
      if (l4 == nullptr || l4_len < 8) return;
      icmp_query_tuple(t, family, type, be16(l4 + 4));
      pkt->icmp_echo_reply = q == 2;
      pkt->kind = CtPacketKind::kConn;
    } else if (ct_icmp_is_error(family, type) &&
               ct_icmp_error_inner(family, l4, l4_len, zone, &t)) {
      pkt->kind = CtPacketKind::kRelated;
    }
  } else {
    pkt->kind = CtPacketKind::kConn;  // generic: addresses and protocol only
  }
}

// ---- table -----------------------------------------------------------------

Conntrack::Conntrack(const CtConfig& cfg)
    : capacity_(std::max<uint32_t>(cfg.capacity, 1)),
      n_workers_(std::max<uint16_t>(cfg.n_workers, 1)),
      tcp_loose_(cfg.tcp_loose) {
  assert(cfg.capacity < (1u << 31) && "entry index + 1 must fit a slot's low word");
  const CtTimeouts& to = cfg.timeouts;
  const uint32_t secs[kNumCtStates] = {0,
                                       to.tcp_syn_sent,
                                       to.tcp_syn_recv,
                                       to.tcp_established,
                                       to.tcp_fin_wait,
                                       to.tcp_close_wait,
                                       to.tcp_last_ack,
                                       to.tcp_time_wait,
                                       to.tcp_close,
                                       to.udp,
                                       to.udp_stream,
                                       to.icmp,
                                       to.icmp,
                                       to.generic,
                                       to.generic};
  // At least 1 ms: an expiry of 0 marks an end()ed entry.
  for (unsigned i = 0; i < kNumCtStates; i++)
    timeout_ms_[i] = std::max<uint64_t>(secs[i] * 1000ull, 1);

  // Two candidate buckets of 7 slots per key, at most 4 entries per bucket
  // at full capacity: a key finding both buckets full is vanishingly rare.
  const uint32_t n_buckets = std::max<uint32_t>(round_up_pow2((capacity_ + 3) / 4), 2);
  bucket_mask_ = n_buckets - 1;
  // Huge pages: a worker's probes land anywhere in these (huge_array.h).
  buckets_ = HugeArray<Bucket>(n_buckets);
  for (uint32_t b = 0; b < n_buckets; b++)
    for (auto& s : buckets_[b].slot) s.store(0, std::memory_order_relaxed);
  entries_ = HugeArray<CtEntry>(capacity_);
  for (uint32_t i = 0; i < capacity_; i++)
    entries_[i].next_free.store(i + 1 < capacity_ ? i + 2 : 0, std::memory_order_relaxed);
  free_head_.store(1, std::memory_order_release);
  counters_.reset(new WorkerCounters[n_workers_]);
}

Conntrack::~Conntrack() = default;

uint32_t Conntrack::bucket2(uint64_t h) const {
  const uint32_t b1 = bucket1(h);
  const uint32_t b2 = uint32_t(h >> 32 ^ h >> 51) & bucket_mask_;
  return b2 != b1 ? b2 : b1 ^ 1;  // always two distinct buckets (there are >= 2)
}

void Conntrack::lock_buckets(uint64_t h) noexcept {
  uint32_t a = bucket1(h), b = bucket2(h);
  if (a > b) std::swap(a, b);  // one global order: no deadlock between creators
  for (uint32_t i : {a, b}) {
    std::atomic<uint32_t>& l = buckets_[i].lock;
    while (l.exchange(1, std::memory_order_acquire) != 0)
      while (l.load(std::memory_order_relaxed) != 0) rte_pause();
  }
}

void Conntrack::unlock_buckets(uint64_t h) noexcept {
  buckets_[bucket1(h)].lock.store(0, std::memory_order_release);
  buckets_[bucket2(h)].lock.store(0, std::memory_order_release);
}

template <typename Pred>
CtEntry* Conntrack::find(const CtKey& k, uint64_t h, uint64_t* w, Pred pred) const noexcept {
  const uint32_t sig = signature(h);
  for (uint32_t b : {bucket1(h), bucket2(h)}) {
    for (const auto& slot : buckets_[b].slot) {
      // acquire: pairs with link()'s release, so the key and word are visible.
      const uint64_t v = slot.load(std::memory_order_acquire);
      if (v == 0 || uint32_t(v >> 32) != sig) continue;
      CtEntry* e = &entries_[slot_index1(v) - 1];
      if (!(e->key == k)) continue;
      *w = e->word.load(std::memory_order_acquire);
      if (pred(*w)) return e;
    }
  }
  return nullptr;
}

void Conntrack::probe(const CtTuple& t, CtProbe* p) const noexcept {
  p->key = ct_make_key(t, &p->src_hi);
  p->hash = hash_key(p->key);
  rte_prefetch0(&buckets_[bucket1(p->hash)]);
  rte_prefetch0(&buckets_[bucket2(p->hash)]);
}

void Conntrack::prefetch_entries(const CtProbe& p) const noexcept {
  const uint32_t sig = signature(p.hash);
  for (uint32_t b : {bucket1(p.hash), bucket2(p.hash)})
    for (const auto& slot : buckets_[b].slot) {
      const uint64_t v = slot.load(std::memory_order_relaxed);
      if (v != 0 && uint32_t(v >> 32) == sig) rte_prefetch0(&entries_[slot_index1(v) - 1]);
    }
}

CtLookup Conntrack::lookup(const CtProbe& p, uint64_t now_ms) const noexcept {
  uint64_t w = 0;
  CtEntry* e = find(p.key, p.hash, &w, [now_ms](uint64_t x) { return live_at(x, now_ms); });
  if (e == nullptr) return {};
  return {e, p.src_hi != bool(w & kWordOrigHi), p.src_hi};
}

bool ct_hintable(const CtPacket& pkt) noexcept {
  return pkt.kind == CtPacketKind::kConn && pkt.tuple.proto != kIpProtoIcmp &&
         pkt.tuple.proto != kIpProtoIcmpv6;
}

namespace {
constexpr uint32_t kHintSrcHi = 1u << 31;
}

CtHint Conntrack::hint(const CtEntry* e, bool src_hi) const noexcept {
  const uint32_t idx1 = uint32_t(e - &entries_[0]) + 1;
  return {idx1 | (src_hi ? kHintSrcHi : 0), e->serial.load(std::memory_order_relaxed)};
}

void Conntrack::prefetch(CtHint h) const noexcept {
  const uint32_t idx1 = h.ref & ~kHintSrcHi;
  if (idx1 != 0 && idx1 <= capacity_) rte_prefetch0(&entries_[idx1 - 1]);
}

CtLookup Conntrack::lookup(CtHint h, uint64_t now_ms) const noexcept {
  const uint32_t idx1 = h.ref & ~kHintSrcHi;
  if (idx1 == 0 || idx1 > capacity_) return {};
  CtEntry* e = &entries_[idx1 - 1];
  // The word first (acquire), then the serial: create() writes a new
  // life's serial before its first word (release), so a live word of a
  // later life comes with that life's serial, and a stale hint misses.
  // An earlier life's word is dead or expired: no match either. Between
  // removal and reuse lies a grace period, so the entry cannot change life
  // while the caller holds it.
  const uint64_t w = e->word.load(std::memory_order_acquire);
  if (!live_at(w, now_ms) || e->serial.load(std::memory_order_relaxed) != h.serial) return {};
  const bool src_hi = h.ref & kHintSrcHi;
  return {e, src_hi != bool(w & kWordOrigHi), src_hi};
}

CtLookup Conntrack::lookup(const CtTuple& t, uint64_t now_ms) const noexcept {
  CtProbe p;
  p.key = ct_make_key(t, &p.src_hi);
  p.hash = hash_key(p.key);
  return lookup(p, now_ms);
}

// The word after one packet from the pkt_hi endpoint: state transition and a
// refreshed expiry. Pure.
uint64_t Conntrack::transition(uint64_t w, bool pkt_hi, const CtPacket& pkt,
                               uint64_t now_ms) const noexcept {
  const bool reply = pkt_hi != bool(w & kWordOrigHi);
  const CtState old_state = state_of_word(w);
  CtState s = old_state;
  const uint8_t f = pkt.tcp_flags;
  const bool syn = f & kTcpSyn, ack = f & kTcpAck, fin = f & kTcpFin;
  const bool from_closer = pkt_hi == bool(w & kWordCloserHi);
  auto close_by_sender = [&] {
    s = CtState::kTcpFinWait;
    w = pkt_hi ? w | kWordCloserHi : w & ~kWordCloserHi;
  };
  // No sequence-number window tracking: any RST closes (anti-spoofing keeps
  // VMs from forging one for another VM's connection).
  const bool tcp = s >= CtState::kTcpSynSent && s <= CtState::kTcpClose;
  if (tcp && (f & kTcpRst))
    s = CtState::kTcpClose;
  else
    switch (s) {
      case CtState::kTcpSynSent:
        if (reply && syn) s = CtState::kTcpSynRecv;  // SYN+ACK, or simultaneous open
        break;
      case CtState::kTcpSynRecv:
        if (!reply && ack && !syn) fin ? close_by_sender() : void(s = CtState::kTcpEstablished);
        break;
      case CtState::kTcpEstablished:
        if (fin) close_by_sender();
        break;
      case CtState::kTcpFinWait:
        if (!from_closer && fin)
          s = CtState::kTcpLastAck;
        else if (!from_closer && ack)
          s = CtState::kTcpCloseWait;
        break;
      case CtState::kTcpCloseWait:
        if (!from_closer && fin) s = CtState::kTcpLastAck;
        break;
      case CtState::kTcpLastAck:
        if (from_closer && ack) s = CtState::kTcpTimeWait;
        break;
      case CtState::kTcpTimeWait:
      case CtState::kTcpClose:
        if (syn && !ack) {  // port reuse: a new connection, opened by pkt_hi
          s = CtState::kTcpSynSent;
          w = (pkt_hi ? w | kWordOrigHi : w & ~kWordOrigHi) & ~kWordCloserHi;
        }
        break;
      case CtState::kUdpUnreplied:
        if (reply) s = CtState::kUdpReplied;
        break;
      case CtState::kIcmpRequest:
        if (reply && pkt.icmp_echo_reply) s = CtState::kIcmpReplied;
        break;
      case CtState::kGenericNew:
        if (reply) s = CtState::kGenericReplied;
        break;
      default:
        break;
    }
  const uint64_t old_exp = expiry_of_word(w);
  const uint64_t t = timeout_ms_[unsigned(s)];
  const uint64_t exp = now_ms + t;
  w = with_state(w, s);
  // Same state and the expiry moves by less than min(1 s, timeout/8): keep
  // the old word, so a busy connection does not write its cache line (shared
  // by the workers of both directions) on every packet.
  if (s == old_state && exp >= old_exp && exp - old_exp < std::min<uint64_t>(1000, t / 8)) return w;
  return with_expiry(w, exp);
}

uint64_t Conntrack::initial_word(const CtPacket& pkt, bool src_hi, uint64_t now_ms) const noexcept {
  CtState s;
  CtPacket p = pkt;
  switch (pkt.tuple.proto) {
    case kIpProtoTcp:
      s = (pkt.tcp_flags & kTcpSyn) ? CtState::kTcpSynSent : CtState::kTcpEstablished;
      if (s == CtState::kTcpSynSent) p.tcp_flags = 0;  // the SYN itself moves nothing
      break;
    case kIpProtoUdp:
      s = CtState::kUdpUnreplied;
      break;
    case kIpProtoIcmp:
    case kIpProtoIcmpv6:
      s = CtState::kIcmpRequest;
      break;
    default:
      s = CtState::kGenericNew;
      break;
  }
  const uint64_t w = transition(uint64_t(s) | (src_hi ? kWordOrigHi : 0), src_hi, p, now_ms);
  // transition() may keep the (zero) expiry: set it for the state reached.
  // A picked-up TCP packet (loose) may carry FIN: the machine placed it.
  return with_expiry(w, now_ms + timeout_ms_[unsigned(state_of_word(w))]);
}

CtState Conntrack::apply(CtEntry* e, bool pkt_hi, const CtPacket& pkt, uint64_t now_ms) noexcept {
  uint64_t w = e->word.load(std::memory_order_acquire);
  for (;;) {
    if (dead(w) || expiry_of_word(w) == 0) return CtState::kNone;
    const uint64_t nw = transition(w, pkt_hi, pkt, now_ms);
    if (nw == w) return state_of_word(w);
    // acq_rel: workers of both directions and the control thread's expiry
    // CAS this word; whoever loses re-reads and re-decides.
    if (e->word.compare_exchange_weak(w, nw, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
      // A SYN re-opened a closed connection, maybe from the other side: make
      // the pipeline verify it against the rules again (F10 path).
      if (state_of_word(nw) == CtState::kTcpSynSent && state_of_word(w) != CtState::kTcpSynSent)
        e->verified_gen.store(0, std::memory_order_relaxed);
      return state_of_word(nw);
    }
  }
}

CtState Conntrack::update(CtEntry* e, const CtPacket& pkt, uint64_t now_ms) noexcept {
  return apply(e, compare_endpoints(pkt.tuple) > 0, pkt, now_ms);
}

CtState Conntrack::update(const CtLookup& l, const CtPacket& pkt, uint64_t now_ms) noexcept {
  return apply(l.entry, l.src_hi, pkt, now_ms);
}

void Conntrack::end(CtEntry* e) noexcept {
  uint64_t w = e->word.load(std::memory_order_acquire);
  while (!dead(w) && !e->word.compare_exchange_weak(w, with_expiry(w, 0), std::memory_order_acq_rel,
                                                    std::memory_order_acquire)) {
  }
}

CtState Conntrack::state_of(const CtEntry* e) noexcept {
  return state_of_word(e->word.load(std::memory_order_acquire));
}

uint64_t Conntrack::expires_ms(const CtEntry* e) noexcept {
  return expiry_of_word(e->word.load(std::memory_order_acquire));
}

CtTuple Conntrack::original_tuple(const CtEntry* e) noexcept {
  const bool orig_hi = e->word.load(std::memory_order_acquire) & kWordOrigHi;
  const CtKey& k = e->key;
  CtTuple t;
  std::memcpy(t.src, orig_hi ? k.hi_addr : k.lo_addr, 16);
  std::memcpy(t.dst, orig_hi ? k.lo_addr : k.hi_addr, 16);
  t.sport = orig_hi ? k.hi_port : k.lo_port;
  t.dport = orig_hi ? k.lo_port : k.hi_port;
  t.zone = k.zone & kCtZoneMask;
  t.family = k.family;
  t.proto = k.proto;
  return t;
}

// ---- create ------------------------------------------------------------------

uint32_t Conntrack::pop_free() noexcept {
  // acquire: the pusher's release makes next_free (and the entry's old life)
  // visible. The tag in the high word defeats ABA between load and CAS.
  uint64_t head = free_head_.load(std::memory_order_acquire);
  for (;;) {
    const uint32_t idx1 = uint32_t(head);
    if (idx1 == 0) return 0;
    const uint32_t next = entries_[idx1 - 1].next_free.load(std::memory_order_relaxed);
    const uint64_t nh = ((head >> 32) + 1) << 32 | next;
    if (free_head_.compare_exchange_weak(head, nh, std::memory_order_acquire,
                                         std::memory_order_acquire))
      return idx1;
  }
}

void Conntrack::push_free(uint32_t first, uint32_t last) noexcept {
  uint64_t head = free_head_.load(std::memory_order_relaxed);
  for (;;) {
    entries_[last - 1].next_free.store(uint32_t(head), std::memory_order_relaxed);
    const uint64_t nh = ((head >> 32) + 1) << 32 | first;
    if (free_head_.compare_exchange_weak(head, nh, std::memory_order_release,
                                         std::memory_order_relaxed))
      return;
  }
}

bool Conntrack::link(uint64_t h, uint32_t idx1) noexcept {
  // Caller holds both bucket locks: only we fill empty slots now. The
  // emptier bucket keeps the two balanced.
  auto free_slot = [](Bucket& b, unsigned* used) -> std::atomic<uint64_t>* {
    std::atomic<uint64_t>* found = nullptr;
    *used = 0;
    for (auto& s : b.slot) {
      if (s.load(std::memory_order_relaxed) != 0)
        ++*used;
      else if (found == nullptr)
        found = &s;
    }
    return found;
  };
  unsigned u1, u2;
  std::atomic<uint64_t>* s1 = free_slot(buckets_[bucket1(h)], &u1);
  std::atomic<uint64_t>* s2 = free_slot(buckets_[bucket2(h)], &u2);
  std::atomic<uint64_t>* s = (s1 && (!s2 || u1 <= u2)) ? s1 : s2;
  if (s == nullptr) return false;
  s->store(slot_value(h, idx1), std::memory_order_release);  // publishes key + word
  return true;
}

CtCreate Conntrack::create(const CtPacket& pkt, uint32_t rule_gen, uint64_t now_ms,
                           uint16_t worker) noexcept {
  assert(worker < n_workers_ && "counters are per worker");
  WorkerCounters& c = counters_[worker];
  const uint8_t f = pkt.tcp_flags;
  const bool tcp = pkt.tuple.proto == kIpProtoTcp;
  if (pkt.kind != CtPacketKind::kConn || (tcp && (f & kTcpRst)) ||
      (tcp && (f & kTcpSyn) && (f & kTcpAck)) || (tcp && !(f & kTcpSyn) && !tcp_loose_) ||
      pkt.icmp_echo_reply) {
    bump_counter(c.invalid);
    return {nullptr, CtCreateStatus::kInvalid, false};
  }
  bool src_hi;
  const CtKey k = ct_make_key(pkt.tuple, &src_hi);
  const uint64_t h = hash_key(k);
  uint64_t w;
  lock_buckets(h);
  // Re-check under the locks: another worker may have just created it.
  if (CtEntry* e = find(k, h, &w, [now_ms](uint64_t x) { return live_at(x, now_ms); })) {
    unlock_buckets(h);
    apply(e, src_hi, pkt, now_ms);
    return {e, CtCreateStatus::kExisting, src_hi != bool(w & kWordOrigHi), src_hi};
  }
  const uint64_t init = initial_word(pkt, src_hi, now_ms);
  // A timed-out or end()ed entry of this key not yet removed: re-open it in
  // place. The CAS loses to the control thread's dead-marking CAS, or wins.
  while (CtEntry* e = find(k, h, &w, [](uint64_t x) { return !dead(x); })) {
    if (live_at(w, now_ms)) {  // refreshed meanwhile by an update()
      unlock_buckets(h);
      apply(e, src_hi, pkt, now_ms);
      return {e, CtCreateStatus::kExisting, src_hi != bool(w & kWordOrigHi), src_hi};
    }
    if (e->word.compare_exchange_strong(w, init, std::memory_order_acq_rel)) {
      e->verified_gen.store(rule_gen, std::memory_order_relaxed);
      unlock_buckets(h);
      bump_counter(c.reopened);
      return {e, CtCreateStatus::kCreated, false, src_hi};
    }
  }
  const uint32_t idx1 = pop_free();
  if (idx1 == 0) {
    unlock_buckets(h);
    bump_counter(c.refused_full);
    return {nullptr, CtCreateStatus::kFull, false};
  }
  CtEntry* e = &entries_[idx1 - 1];
  e->key = k;  // unreachable until link(): no reader can see it yet
  e->verified_gen.store(rule_gen, std::memory_order_relaxed);
  // A new life: hints of the last one stop matching. The serial before the
  // live word, which releases it (lookup(CtHint) reads them the other way).
  e->serial.store(e->serial.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  e->word.store(init, std::memory_order_release);
  if (!link(h, idx1)) {
    unlock_buckets(h);
    push_free(idx1, idx1);  // never published: reusable at once
    bump_counter(c.refused_bucket);
    bump_counter(c.refused_full);
    return {nullptr, CtCreateStatus::kFull, false};
  }
  unlock_buckets(h);
  bump_counter(c.created);
  return {e, CtCreateStatus::kCreated, false, src_hi};
}

// ---- removal (control thread) ------------------------------------------------------

void Conntrack::park(uint32_t idx1) noexcept {
  entries_[idx1 - 1].next_free.store(0, std::memory_order_relaxed);
  if (limbo_tail_ != 0)
    entries_[limbo_tail_ - 1].next_free.store(idx1, std::memory_order_relaxed);
  else
    limbo_head_ = idx1;
  limbo_tail_ = idx1;
  limbo_n_++;
  parked_.store(parked_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

template <typename Pred>
uint32_t Conntrack::remove_if(uint32_t first, uint32_t n_buckets, Pred pred) noexcept {
  uint32_t removed = 0;
  for (uint32_t i = 0; i < n_buckets; i++) {
    Bucket& b = buckets_[(first + i) & bucket_mask_];
    for (auto& slot : b.slot) {
      const uint64_t v = slot.load(std::memory_order_acquire);
      if (v == 0) continue;
      CtEntry* e = &entries_[slot_index1(v) - 1];
      uint64_t w = e->word.load(std::memory_order_acquire);
      bool marked = false;
      while (!dead(w) && pred(*e, w))
        if (e->word.compare_exchange_weak(w, w | kWordDead, std::memory_order_acq_rel,
                                          std::memory_order_acquire)) {
          marked = true;
          break;
        }
      if (!marked) continue;
      // Only this thread empties slots and create() only fills empty ones,
      // so this cannot fail; CAS all the same, never clobber a new entry.
      uint64_t expect = v;
      slot.compare_exchange_strong(expect, 0, std::memory_order_release);
      park(slot_index1(v));
      removed++;
    }
  }
  return removed;
}

uint32_t Conntrack::expire(uint64_t now_ms, uint32_t max_buckets) noexcept {
  const uint32_t n = bucket_mask_ + 1;
  const uint32_t todo = (max_buckets == 0 || max_buckets > n) ? n : max_buckets;
  const uint32_t removed = remove_if(expire_cursor_, todo, [now_ms](const CtEntry&, uint64_t w) {
    return expiry_of_word(w) <= now_ms;
  });
  expire_cursor_ = (expire_cursor_ + todo) & bucket_mask_;
  expired_.store(expired_.load(std::memory_order_relaxed) + removed, std::memory_order_relaxed);
  return removed;
}

uint32_t Conntrack::flush_zone(uint16_t zone) noexcept {
  const uint32_t removed = remove_if(
      0, bucket_mask_ + 1, [zone](const CtEntry& e, uint64_t) { return (e.key.zone & kCtZoneMask) == zone; });
  flushed_.store(flushed_.load(std::memory_order_relaxed) + removed, std::memory_order_relaxed);
  return removed;
}

uint32_t Conntrack::flush_addresses(uint16_t zone,
                                    std::span<const std::array<uint8_t, 16>> addrs) noexcept {
  // Sorted: a batch of many ports' addresses costs a binary search per entry.
  std::vector<std::array<uint8_t, 16>> sorted(addrs.begin(), addrs.end());
  std::sort(sorted.begin(), sorted.end());
  auto has = [&sorted](const uint8_t* a) {
    std::array<uint8_t, 16> k;
    std::memcpy(k.data(), a, 16);
    return std::binary_search(sorted.begin(), sorted.end(), k);
  };
  const uint32_t removed = remove_if(0, bucket_mask_ + 1, [zone, &has](const CtEntry& e, uint64_t) {
    return (e.key.zone & kCtZoneMask) == zone && (has(e.key.lo_addr) || has(e.key.hi_addr));
  });
  flushed_.store(flushed_.load(std::memory_order_relaxed) + removed, std::memory_order_relaxed);
  return removed;
}

bool Conntrack::retire_begin() noexcept {
  if (waiting_n_ != 0 || limbo_n_ == 0) return false;
  waiting_head_ = limbo_head_;
  waiting_tail_ = limbo_tail_;
  waiting_n_ = limbo_n_;
  limbo_head_ = limbo_tail_ = limbo_n_ = 0;
  return true;
}

void Conntrack::retire_end() noexcept {
  if (waiting_n_ == 0) return;
  push_free(waiting_head_, waiting_tail_);
  parked_.store(parked_.load(std::memory_order_relaxed) - waiting_n_, std::memory_order_relaxed);
  waiting_head_ = waiting_tail_ = waiting_n_ = 0;
}

// ---- statistics ------------------------------------------------------------------

CtStats Conntrack::stats() const {
  CtStats s;
  for (uint16_t i = 0; i < n_workers_; i++) {
    const WorkerCounters& c = counters_[i];
    s.created += c.created.load(std::memory_order_relaxed);
    s.reopened += c.reopened.load(std::memory_order_relaxed);
    s.refused_full += c.refused_full.load(std::memory_order_relaxed);
    s.refused_bucket += c.refused_bucket.load(std::memory_order_relaxed);
    s.invalid += c.invalid.load(std::memory_order_relaxed);
  }
  s.expired = expired_.load(std::memory_order_relaxed);
  s.flushed = flushed_.load(std::memory_order_relaxed);
  s.parked = parked_.load(std::memory_order_relaxed);
  const uint64_t gone = s.expired + s.flushed;
  s.entries = s.created > gone ? s.created - gone : 0;
  return s;
}

std::array<uint64_t, kNumCtStates> Conntrack::count_states(uint64_t now_ms) const {
  std::array<uint64_t, kNumCtStates> n{};
  for (uint32_t b = 0; b <= bucket_mask_; b++)
    for (const auto& slot : buckets_[b].slot) {
      const uint64_t v = slot.load(std::memory_order_acquire);
      if (v == 0) continue;
      const uint64_t w = entries_[slot_index1(v) - 1].word.load(std::memory_order_acquire);
      if (live_at(w, now_ms)) n[unsigned(state_of_word(w))]++;
    }
  return n;
}

}  // namespace strait::dp
