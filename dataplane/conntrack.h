#pragma once
// Connection tracking for stateful security groups (issue 5, DESIGN.md
// "Conntrack"): one table shared by every worker.
//
// Zone = the network's local VLAN (F9). The key holds the two (address, port)
// endpoints normalised (smaller first), so both directions of a connection are
// ONE entry whichever worker sees them (vhost ports have no RSS); a bit in the
// entry says which endpoint opened it.
//
// Concurrency (who writes what):
//  - lookup(): lock-free, any worker. Reads bucket slots (acquire) and the
//    entry's key, which is immutable while the entry is reachable.
//  - create(): any worker. Takes the spinlock of the key's two candidate
//    buckets only (never a global lock), re-checks for the key (two workers
//    racing on one connection end with one entry), pops a free entry from a
//    lock-free stack, publishes it with a release store of the slot.
//  - update(): any worker. All mutable per-connection state (state,
//    originator side, closer side, expiry time, dead bit) is ONE 64-bit word
//    changed by compare-and-swap: no lock, no torn state, and the control
//    thread's "expire" CAS and a worker's "refresh" CAS cannot both win.
//  - expire() / flush_*(): the control thread only. CAS the word to dead,
//    then clear the bucket slot (CAS, lock-free: it never waits on a worker,
//    F16), then park the entry in a limbo list. Deferred reuse, the
//    rte_rcu_qsbr pattern:
//        ct.expire(now_ms);
//        if (ct.retire_begin()) token = rte_rcu_qsbr_start(qsbr);
//        ... later, when rte_rcu_qsbr_check(qsbr, token, false) == 1:
//        ct.retire_end();   // parked entries become free for create()
//    A worker must not keep a CtEntry* past its next quiescent report.
//
// Time is passed in by the caller (milliseconds, e.g. derived from the TSC);
// nothing here reads a clock. Counters are per worker (single writer each).
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

#include "dataplane/flow_key.h"
#include "dataplane/huge_array.h"

namespace strait::dp {

// Timeouts in seconds; defaults are Linux nf_conntrack's.
struct CtTimeouts {
  uint32_t tcp_syn_sent = 120;
  uint32_t tcp_syn_recv = 60;
  uint32_t tcp_established = 432000;  // 5 days
  uint32_t tcp_fin_wait = 120;
  uint32_t tcp_close_wait = 60;
  uint32_t tcp_last_ack = 30;
  uint32_t tcp_time_wait = 120;
  uint32_t tcp_close = 10;
  uint32_t udp = 30;          // unreplied
  uint32_t udp_stream = 120;  // replied
  uint32_t icmp = 30;
  uint32_t generic = 600;
};

struct CtConfig {
  uint32_t capacity = 65536;  // entries, fixed for the table's life (< 2^31)
  uint16_t n_workers = 1;     // worker ids passed to create() are < n_workers
  // A TCP packet without SYN may open an entry (ESTABLISHED), as Linux's
  // nf_conntrack_tcp_loose and OVS do: connections survive a restart.
  bool tcp_loose = true;
  CtTimeouts timeouts;
};

#define STRAIT_FOREACH_CT_STATE(_)                             \
  _(kNone, "none") /* no entry / entry gone */                 \
  _(kTcpSynSent, "tcp_syn_sent")                               \
  _(kTcpSynRecv, "tcp_syn_recv")                               \
  _(kTcpEstablished, "tcp_established")                        \
  _(kTcpFinWait, "tcp_fin_wait")     /* one side sent FIN */   \
  _(kTcpCloseWait, "tcp_close_wait") /* that FIN was ACKed */  \
  _(kTcpLastAck, "tcp_last_ack")     /* both sides sent FIN */ \
  _(kTcpTimeWait, "tcp_time_wait")   /* last FIN ACKed */      \
  _(kTcpClose, "tcp_close")          /* RST */                 \
  _(kUdpUnreplied, "udp_unreplied")                            \
  _(kUdpReplied, "udp_replied")                                \
  _(kIcmpRequest, "icmp_request")                              \
  _(kIcmpReplied, "icmp_replied")                              \
  _(kGenericNew, "generic_new")                                \
  _(kGenericReplied, "generic_replied")

enum class CtState : uint8_t {
#define STRAIT_CT_ENUM(e, n) e,
  STRAIT_FOREACH_CT_STATE(STRAIT_CT_ENUM)
#undef STRAIT_CT_ENUM
};
inline constexpr unsigned kNumCtStates = 0
#define STRAIT_CT_COUNT(e, n) +1
    STRAIT_FOREACH_CT_STATE(STRAIT_CT_COUNT)
#undef STRAIT_CT_COUNT
    ;
const char* ct_state_name(CtState s);

// CtTuple::zone: the local VLAN in the low 12 bits; ICMP queries use the top
// bit (conntrack.cc, icmp_query_tuple).
inline constexpr uint16_t kCtZoneMask = 0x0fff;
inline constexpr uint16_t kCtZoneRequesterLo = 0x8000;

inline constexpr uint8_t kCtIpv4 = 4;
inline constexpr uint8_t kCtIpv6 = 6;

// One direction of a connection, as a packet carries it.
struct CtTuple {
  uint8_t src[16];  // network order; IPv4 in the first 4 bytes, rest zero
  uint8_t dst[16];
  uint16_t sport;  // TCP/UDP ports, host order; ICMP query: (id, query type),
  uint16_t dport;  // its reply (query type, id)
  uint16_t zone;   // the network's local VLAN
  uint8_t family;  // kCtIpv4 / kCtIpv6
  uint8_t proto;   // IP protocol
};

// The table key: endpoints normalised, lo <= hi (address, then port).
struct alignas(8) CtKey {
  uint8_t lo_addr[16];
  uint8_t hi_addr[16];
  uint16_t lo_port;
  uint16_t hi_port;
  uint16_t zone;
  uint8_t family;
  uint8_t proto;
  // Five XORed words, one branch (the defaulted == compares byte by byte).
  bool operator==(const CtKey& o) const noexcept {
    uint64_t diff = 0;
    for (unsigned i = 0; i < 40; i += 8) {
      uint64_t a, b;
      std::memcpy(&a, reinterpret_cast<const uint8_t*>(this) + i, 8);
      std::memcpy(&b, reinterpret_cast<const uint8_t*>(&o) + i, 8);
      diff |= a ^ b;
    }
    return diff == 0;
  }
};
static_assert(sizeof(CtKey) == 40, "CtKey is compared and hashed as 5 words");

// The key of t; *src_is_hi tells whether t's source is the key's hi endpoint.
CtKey ct_make_key(const CtTuple& t, bool* src_is_hi) noexcept;

enum class CtPacketKind : uint8_t {
  kUntracked,  // not IP, a later fragment, or ICMP neither echo nor error (e.g. ND)
  kConn,       // tuple is this packet's
  kRelated,    // an ICMP error: tuple is the embedded packet's (as it was sent)
};

// What conntrack needs of one packet.
struct CtPacket {
  CtTuple tuple;
  CtPacketKind kind = CtPacketKind::kUntracked;
  uint8_t tcp_flags = 0;         // FlowKey::tcp_flags (TCP only)
  bool icmp_echo_reply = false;  // an echo reply never opens a connection
};

// ICMP types that report an error about an embedded packet: IPv4 3, 4, 5, 11,
// 12; ICMPv6 1-4.
bool ct_icmp_is_error(uint8_t family, uint8_t icmp_type) noexcept;

// The tuple of the packet embedded in an ICMP(v6) error. `icmp` points at the
// ICMP header (type, code, checksum, 4 bytes), `len` bytes are readable. Reads
// the inner IPv4 header (IHL honoured) or IPv6 fixed header (no extension
// headers) and the first 4 bytes of its L4 header (ports, or an echo's id).
// False when truncated, malformed, of another family, or the inner protocol
// is not TCP/UDP/ICMP echo.
bool ct_icmp_error_inner(uint8_t family, const uint8_t* icmp, uint32_t len, uint16_t zone,
                         CtTuple* inner) noexcept;

// Builds *pkt from a parsed frame. `l4` points at its L4 header (PacketMeta
// l4_ofs) with `l4_len` bytes readable: needed for ICMP (echo id, embedded
// packet), may be null otherwise.
void ct_packet_from_key(const FlowKey& key, uint16_t zone, const uint8_t* l4, uint32_t l4_len,
                        CtPacket* pkt) noexcept;

// One tracked connection. Workers hold pointers only until their next
// quiescent report.
struct alignas(64) CtEntry {
  CtKey key;  // written before publication; immutable while reachable
  // state | flags | expiry: see conntrack.cc (kWord*). Any thread, CAS.
  std::atomic<uint64_t> word{0};
  // Snapshot generation whose rules last allowed this connection (F10).
  // Any thread, relaxed: a stale read only causes one more re-check.
  std::atomic<uint32_t> verified_gen{0};
  std::atomic<uint32_t> next_free{0};  // free / limbo list link (index + 1)
  // Which life of the entry this is: create() changes it before a popped
  // entry gets its new key, so a CtHint of an earlier life stops matching.
  std::atomic<uint32_t> serial{0};
};

struct CtLookup {
  CtEntry* entry = nullptr;  // null: no live entry
  bool reply = false;        // the tuple goes from the answering side
  bool src_hi = false;       // the tuple's source is the key's hi endpoint
};

// A worker's memo of the entry a flow's packets belong to, kept with the
// flow (FlowCache) so that its next packet skips key, hash and bucket probe
// (VPP's session index in the ACL plugin's flow cache). Only for flows whose
// key names one connection (ct_hintable). A stale hint never misleads: it
// matches only the same life of the same entry (CtEntry::serial), which
// keeps its key; lookup(CtHint) then answers "no live entry" and the caller
// probes by key.
struct CtHint {
  uint32_t ref = 0;  // entry index + 1, 0 = none; top bit: src_hi
  uint32_t serial = 0;
  bool operator==(const CtHint&) const = default;
};

// Whether every packet of a flow-cache entry (full key) belongs to the same
// connection: not ICMP, whose connection is named by an id in the payload.
bool ct_hintable(const CtPacket& pkt) noexcept;

struct CtProbe {
  CtKey key;
  uint64_t hash;
  bool src_hi;  // the tuple's source is the key's hi endpoint
};

enum class CtCreateStatus : uint8_t {
  kCreated,   // a new entry for this packet
  kExisting,  // another worker created it first; the packet was applied to it
  kFull,      // refused: no free entry (or both buckets full); counted
  kInvalid,   // this packet cannot open a connection (TCP SYN+ACK or RST,
              // non-SYN with tcp_loose off, ICMP echo reply); nothing stored
};

struct CtCreate {
  CtEntry* entry = nullptr;
  CtCreateStatus status = CtCreateStatus::kInvalid;
  bool reply = false;
  bool src_hi = false;  // as CtLookup::src_hi
};

struct CtStats {
  uint64_t entries = 0;   // live (linked) entries
  uint64_t created = 0;   // entries added
  uint64_t reopened = 0;  // timed-out or closed entries re-opened in place
  uint64_t refused_full = 0;
  uint64_t refused_bucket = 0;  // subset of refused_full: both buckets full
  uint64_t invalid = 0;         // create() refused the packet (kInvalid)
  uint64_t expired = 0;
  uint64_t flushed = 0;
  uint64_t parked = 0;  // removed, waiting for a grace period before reuse
};

class Conntrack {
 public:
  explicit Conntrack(const CtConfig& cfg);  // control thread; allocates
  ~Conntrack();
  Conntrack(const Conntrack&) = delete;
  Conntrack& operator=(const Conntrack&) = delete;

  // ---- workers ------------------------------------------------------------
  // `worker` (create) indexes the per-worker counters: < CtConfig::n_workers,
  // one thread per id.
  //
  // The live entry of t's connection (not dead, not expired at now_ms). For
  // an ICMP error (kRelated) pass the embedded tuple: reply == false then
  // means the embedded packet went the original way, the error goes back to
  // the originator.
  CtLookup lookup(const CtTuple& t, uint64_t now_ms) const noexcept;
  // The same in steps for a burst: probe() every packet (key, hash,
  // prefetch of its two buckets), then lookup() each probe.
  void probe(const CtTuple& t, CtProbe* p) const noexcept;
  // Optional middle step, once the buckets are in cache: prefetch the
  // entries whose signature matches (hides the second dependent miss).
  void prefetch_entries(const CtProbe& p) const noexcept;
  CtLookup lookup(const CtProbe& p, uint64_t now_ms) const noexcept;
  // By hint: the entry it names when that is still the same life and live,
  // else nothing (probe by key then). prefetch() loads the entry ahead.
  CtLookup lookup(CtHint h, uint64_t now_ms) const noexcept;
  void prefetch(CtHint h) const noexcept;
  // The hint of a live entry the caller found or created for a tuple whose
  // source is the key's hi endpoint when src_hi; valid until its next
  // quiescent report like the pointer, and matching after that.
  CtHint hint(const CtEntry* e, bool src_hi) const noexcept;

  // Opens the connection of pkt (kind kConn) once the rules allowed it, with
  // rule generation rule_gen. An existing live entry is returned instead
  // (kExisting, pkt applied to it), an expired/closed one re-opened in place.
  CtCreate create(const CtPacket& pkt, uint32_t rule_gen, uint64_t now_ms,
                  uint16_t worker) noexcept;

  // Applies one packet (kind kConn) of e's connection and refreshes the
  // timeout. Returns the new state; kNone when e was removed or end()ed:
  // treat the packet as new. A TCP SYN on a TIME_WAIT/CLOSE entry re-opens
  // it with the SYN's sender as originator and verified generation 0, so
  // the pipeline checks the new opener against the rules (F10 path).
  CtState update(CtEntry* e, const CtPacket& pkt, uint64_t now_ms) noexcept;
  // The same for the entry of a lookup (its src_hi saves comparing endpoints).
  CtState update(const CtLookup& l, const CtPacket& pkt, uint64_t now_ms) noexcept;

  // F10: the rule generation e was last allowed at, and marking it after a
  // re-check. end() closes a connection now (its rules no longer allow it):
  // lookups stop finding it, the next expire() removes it.
  static uint32_t verified_generation(const CtEntry* e) {
    return e->verified_gen.load(std::memory_order_relaxed);
  }
  static void mark_verified(CtEntry* e, uint32_t gen) {
    e->verified_gen.store(gen, std::memory_order_relaxed);
  }
  static void end(CtEntry* e) noexcept;

  // ---- any thread, diagnostics -------------------------------------------
  static CtState state_of(const CtEntry* e) noexcept;
  static uint64_t expires_ms(const CtEntry* e) noexcept;
  // The tuple of the original direction (the opener's first packet).
  static CtTuple original_tuple(const CtEntry* e) noexcept;

  // ---- control thread -----------------------------------------------------
  // Removes entries expired at now_ms, looking at up to max_buckets buckets
  // from where the previous call stopped (0: all). Returns entries removed.
  uint32_t expire(uint64_t now_ms, uint32_t max_buckets = 0) noexcept;
  // Removes every entry of a zone (a network leaving the host).
  uint32_t flush_zone(uint16_t zone) noexcept;
  // Removes every entry of `zone` with an endpoint address in addrs (16
  // bytes each, IPv4 in the first 4 and the rest zero): a stopped instance's
  // port (fixed IPs, allowed pairs' host addresses). One walk of the table.
  uint32_t flush_addresses(uint16_t zone, std::span<const std::array<uint8_t, 16>> addrs) noexcept;
  // Deferred reuse, see the top of this file. retire_begin(): false when
  // nothing is parked or a batch already waits for its grace period.
  bool retire_begin() noexcept;
  void retire_end() noexcept;

  CtStats stats() const;  // sums the per-worker counters (racy, monotonic)
  // Live entries per state: one walk of the table.
  std::array<uint64_t, kNumCtStates> count_states(uint64_t now_ms) const;
  uint32_t capacity() const { return capacity_; }

 private:
  static constexpr uint32_t kSlots = 7;
  struct alignas(64) Bucket {
    std::atomic<uint32_t> lock{0};
    uint32_t pad = 0;
    // (signature << 32) | (entry index + 1); 0 = empty. Set under lock by
    // create(), cleared by CAS by the control thread.
    std::atomic<uint64_t> slot[kSlots];
  };
  static_assert(sizeof(Bucket) == 64, "a bucket is one cache line");
  struct alignas(64) WorkerCounters {  // written by one worker only
    std::atomic<uint64_t> created{0}, reopened{0}, refused_full{0}, refused_bucket{0}, invalid{0};
  };

  uint64_t transition(uint64_t w, bool pkt_hi, const CtPacket& pkt, uint64_t now_ms) const noexcept;
  uint64_t initial_word(const CtPacket& pkt, bool src_hi, uint64_t now_ms) const noexcept;
  CtState apply(CtEntry* e, bool pkt_hi, const CtPacket& pkt, uint64_t now_ms) noexcept;
  // The entry of k in its buckets that pred(word) accepts, its word in *w.
  template <typename Pred>
  CtEntry* find(const CtKey& k, uint64_t h, uint64_t* w, Pred pred) const noexcept;
  bool link(uint64_t h, uint32_t idx) noexcept;
  uint32_t pop_free() noexcept;
  void push_free(uint32_t first, uint32_t last) noexcept;  // index + 1, chained
  void park(uint32_t idx1) noexcept;
  void lock_buckets(uint64_t h) noexcept;
  void unlock_buckets(uint64_t h) noexcept;
  uint32_t bucket1(uint64_t h) const { return uint32_t(h) & bucket_mask_; }
  uint32_t bucket2(uint64_t h) const;
  template <typename Pred>
  uint32_t remove_if(uint32_t first, uint32_t n_buckets, Pred pred) noexcept;
  bool remove_slot(Bucket& b, uint32_t s, uint64_t v) noexcept;

  const uint32_t capacity_;
  const uint16_t n_workers_;
  const bool tcp_loose_;
  uint64_t timeout_ms_[kNumCtStates];
  HugeArray<CtEntry> entries_;
  HugeArray<Bucket> buckets_;
  uint32_t bucket_mask_ = 0;
  std::unique_ptr<WorkerCounters[]> counters_;
  // Free stack: (ABA tag << 32) | (index + 1). Workers pop, control pushes.
  alignas(64) std::atomic<uint64_t> free_head_{0};
  // Control thread only.
  alignas(64) uint32_t limbo_head_ = 0, limbo_tail_ = 0, limbo_n_ = 0;
  uint32_t waiting_head_ = 0, waiting_tail_ = 0, waiting_n_ = 0;
  uint32_t expire_cursor_ = 0;
  std::atomic<uint64_t> expired_{0}, flushed_{0}, parked_{0};
};

}  // namespace strait::dp
