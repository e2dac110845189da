#include "dataplane/worker.h"

#include <cstring>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>
#include <rte_vhost.h>

#include "dataplane/capture.h"
#include "dataplane/parse.h"
#include "dataplane/pipeline.h"
#include "dataplane/qos.h"
#include "dataplane/sg_stage.h"
#include "dataplane/vxlan.h"

namespace strait::dp {

DataplaneShared::DataplaneShared() : qos(std::make_unique<QosPortState[]>(kMaxPorts)) {
  for (auto& port : txq_lock)
    for (auto& l : port) rte_spinlock_init(&l);
  for (auto& port : vhost_txq_lock)
    for (auto& l : port) rte_spinlock_init(&l);
}

Worker::Worker(uint16_t id, unsigned lcore, DataplaneShared* shared, uint32_t cache_entries,
               uint32_t idle_sleep_us)
    : id_(id),
      lcore_(lcore),
      shared_(shared),
      idle_sleep_us_(idle_sleep_us),
      tsc_per_ms_(rte_get_tsc_hz() / 1000),
      cache_(cache_entries),
      stats_(std::make_unique<WorkerStats>()),
      tx_(std::make_unique<TxBuffer[]>(kMaxPorts)),
      tx_dirty_(std::make_unique<uint16_t[]>(kMaxPorts)),
      learn_seen_(std::make_unique<std::atomic<uint32_t>[]>(kMaxLearned)),
      arp_asked_(std::make_unique<uint32_t[]>(kMaxVteps)) {}

Worker::~Worker() = default;

int Worker::lcore_main(void* arg) { return static_cast<Worker*>(arg)->run(); }

int Worker::run() noexcept {
  rte_rcu_qsbr_thread_register(shared_->qsbr, id_);
  rte_rcu_qsbr_thread_online(shared_->qsbr, id_);
  uint32_t last_gen = 0;
  uint64_t prev = rte_rdtsc();
  uint64_t max_iteration = 0;  // this loop's copy of stats_->max_iteration_cycles
  while (!shared_->stop.load(std::memory_order_relaxed)) {
    const Snapshot* s = shared_->snapshot.load(std::memory_order_acquire);
    // ct_now_ms() without another rdtsc, and divided once a millisecond,
    // not once an iteration (a 64-bit divide is tens of cycles).
    if (prev >= next_ms_tsc_) {
      now_ms_ = prev / tsc_per_ms_;
      next_ms_tsc_ = (now_ms_ + 1) * tsc_per_ms_;
    }
    uint32_t moved = 0;
    if (s) {
      // Generations only grow; a smaller one means the counter wrapped and
      // old entries could look current again.
      if (s->cache_generation != last_gen) {
        if (s->cache_generation < last_gen) cache_.clear();
        last_gen = s->cache_generation;
        cache_gen_.store(last_gen, std::memory_order_relaxed);
      }
      uint64_t t = prev;  // one rdtsc per poll, chained from poll to poll
      for (const RxQueue& q : s->rx_by_worker[id_]) moved += poll(*s, q, &t);
      stats_->generation.store(s->generation, std::memory_order_relaxed);
    }
    dump_.serve(cache_, last_gen);  // between bursts, and before any nap
    // Nothing of `s` is used past this point.
    rte_rcu_qsbr_quiescent(shared_->qsbr, id_);
    bump(stats_->iterations);
    uint64_t now = rte_rdtsc();
    const uint64_t took = now - prev;
    bump(moved ? stats_->busy_cycles : stats_->idle_cycles, took);
    // Two compares per iteration; the stores are rare.
    if (took > max_iteration) {
      max_iteration = took;
      stats_->max_iteration_cycles.store(took, std::memory_order_relaxed);
    }
    if (took > tsc_per_ms_) bump(stats_->iterations_over_1ms);
    prev = now;
    if (moved == 0 && idle_sleep_us_) {
      // Offline while asleep, so a grace period never waits for the nap.
      rte_rcu_qsbr_thread_offline(shared_->qsbr, id_);
      rte_delay_us_sleep(idle_sleep_us_);
      rte_rcu_qsbr_thread_online(shared_->qsbr, id_);
      prev = rte_rdtsc();
    }
  }
  rte_rcu_qsbr_thread_offline(shared_->qsbr, id_);
  rte_rcu_qsbr_thread_unregister(shared_->qsbr, id_);
  return 0;
}

uint16_t Worker::poll(const Snapshot& s, const RxQueue& q, uint64_t* tsc) noexcept {
  const PortEntry* p = s.port(q.port);
  if (!p) return 0;
  rte_mbuf* pkts[kBurst];
  // A vhost device is in the snapshot only between new_device and
  // destroy_device, so its guest memory is mapped while we read it.
  uint16_t n = p->kind == PortKind::kVhost
                   ? rte_vhost_dequeue_burst(p->vid, 2 * q.queue + 1, shared_->pool, pkts, kBurst)
                   : rte_eth_rx_burst(p->ethdev, q.queue, pkts, kBurst);
  // A vhost port being captured: dpdk-dumpcap's callbacks on its stand-in.
  if (p->capture != kNoCapture) [[unlikely]]
    n = capture_rx(p->capture, q.queue, pkts, n, kBurst);
  const uint64_t t_rx = rte_rdtsc();
  if (n == 0) {
    *tsc = t_rx;  // an empty poll is idle time, nobody's load
    return 0;
  }
  bump(stats_->stage_cycles[unsigned(Stage::kRx)], t_rx - *tsc);
  const uint64_t t_act = process(s, *p, q.port, pkts, n, t_rx);
  // What this queue's frames left in tx buffers goes now: its cycles are
  // the queue's (and the next queue's frames do not wait behind them).
  flush_all(s);
  const uint64_t t_tx = rte_rdtsc();
  bump(stats_->stage_cycles[unsigned(Stage::kTx)], t_tx - t_act);
  PortCounters& pc = stats_->ports[q.port];
  bump(pc.rxq_cycles[q.queue], t_tx - *tsc);
  bump(pc.rxq_packets[q.queue], n);
  *tsc = t_tx;
  return n;
}

// The L4 header and the bytes of it in the first segment (conntrack reads
// ICMP ids and embedded headers there); null when the frame has none.
static const uint8_t* l4_of(const rte_mbuf* m, const PacketMeta& meta, uint32_t* len) noexcept {
  if (meta.l4_ofs == 0 || meta.l4_ofs >= rte_pktmbuf_data_len(m)) {
    *len = 0;
    return nullptr;
  }
  *len = rte_pktmbuf_data_len(m) - meta.l4_ofs;
  return rte_pktmbuf_mtod_offset(m, const uint8_t*, meta.l4_ofs);
}

uint64_t Worker::process(const Snapshot& s, const PortEntry& in, uint16_t in_idx,
                         rte_mbuf** pkts, uint16_t n, uint64_t tsc) noexcept {
  FlowKey keys[kBurst];
  PacketMeta meta[kBurst];
  uint32_t hashes[kBurst];
  bool ok[kBurst];
  // The underlay NIC decodes VXLAN to our port; its decisions depend on the
  // tunnel fields and on ARP addresses, so its frames are keyed in full.
  // ARP frames from anywhere are too: the ARP responder answers by address.
  const bool underlay = s.vtep.enabled && in_idx == s.vtep.uplink;
  const ParseOptions opts{underlay ? s.vtep.udp_port : uint16_t(0)};
  const uint32_t port_key_bytes = underlay ? kFullKeyBytes : in.key_bytes;
  burst_tsc_ = tsc;
  uint32_t key_bytes[kBurst];
  PortCounters& pc = stats_->ports[in_idx];
  uint64_t bytes = 0;
  uint16_t n_own = n;  // frames of the port itself, not of its subports
  for (uint16_t i = 0; i < n; i++) {
    if (i + 1 < n) rte_prefetch0(rte_pktmbuf_mtod(pkts[i + 1], void*));
    rte_mbuf* m = pkts[i];
    uint16_t idx = in_idx;
    uint32_t kb = port_key_bytes;
    if (in.trunk) [[unlikely]] {
      // A trunk's parent: a frame tagged with a subport's VLAN is the
      // subport's, untagged from here on.
      const uint16_t sub = trunk_subport(in, rte_pktmbuf_mtod(m, const uint8_t*),
                                         rte_pktmbuf_data_len(m));
      if (sub != kNoPort && rte_vlan_strip(m) == 0) {
        idx = sub;
        kb = s.ports[sub].key_bytes;
        PortCounters& sc = stats_->ports[sub];
        bump(sc.rx_packets);
        bump(sc.rx_bytes, rte_pktmbuf_pkt_len(m));
        n_own--;
      }
    }
    if (idx == in_idx) bytes += rte_pktmbuf_pkt_len(m);
    const PortQos* qos = s.ports[idx].qos;
    DropReason r = DropReason::kNone;
    if (qos && qos->polices(QosDir::kEgress)) [[unlikely]]
      r = qos_drop(qos_police(*qos, shared_->qos[idx], QosDir::kEgress, rte_pktmbuf_pkt_len(m),
                              burst_tsc_));
    // Headers from the first segment; lengths against the whole (chained:
    // a jumbo frame in 2 KB mbufs).
    if (r == DropReason::kNone)
      r = parse_frame(rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m),
                      rte_pktmbuf_pkt_len(m), idx, opts, &keys[i], &meta[i]);
    ok[i] = r == DropReason::kNone;
    if (!ok[i]) {
      drop(m, idx, r);
      continue;
    }
    if (qos && qos->dscp >= 0 && meta[i].l3_ofs) [[unlikely]]
      mark_dscp(m, keys[i], meta[i], uint8_t(qos->dscp));
    key_bytes[i] = keys[i].dl_type == kEthTypeArp ? kFullKeyBytes : kb;
  }
  // Hashed once the whole burst is parsed: the hash reads the key back in
  // 8-byte words, which cannot be forwarded from the parser's narrower
  // stores while they are still in flight (~15 cycles a frame when hashed
  // right after its parse).
  for (uint16_t i = 0; i < n; i++) {
    if (!ok[i]) continue;
    hashes[i] = FlowCache::hash(keys[i], key_bytes[i]);
    cache_.prefetch(hashes[i]);
  }
  bump(pc.rx_packets, n_own);
  bump(pc.rx_bytes, bytes);
  bump(stats_->packets, n);
  const uint64_t t_parsed = rte_rdtsc();

  // Decide every frame, then prepare the tracked ones' conntrack probes
  // (their bucket misses overlap), then act on each in order. The ways the
  // lookups (and inserts) will touch are loaded for the whole burst first.
  uint64_t hits = 0, misses = 0, evictions = 0, stale = 0, pipeline_cycles = 0;
  Action* const acts = acts_;
  SgPrepared* const ct = ct_;
  CachedFlow** const flows = flows_;
  const uint32_t gen = s.cache_generation;
  const LearnedState& learned = shared_->learned;
  for (uint16_t i = 0; i < n; i++)
    if (ok[i]) cache_.prefetch_way(hashes[i], key_bytes[i], gen);
  // The learned MACs' stamp of the last key that needed one: a burst's
  // frames mostly share their two MACs (read earlier is as good: the stamp
  // is taken before the learned FDB is read either way).
  int stamped = -1;
  uint32_t last_stamp = 0;
  auto stamp_of = [&](uint16_t i) {
    if (stamped < 0 || !same_macs(keys[i], keys[stamped])) {
      last_stamp = learned.stamp(keys[i]);
      stamped = i;
    }
    return last_stamp;
  };
  for (uint16_t i = 0; i < n; i++) {
    if (!ok[i]) continue;
    Action& a = acts[i];
    uint32_t stamp;
    CachedFlow* f = cache_.lookup(keys[i], hashes[i], key_bytes[i], gen, &stamp);
    // Decided by a learned MAC that was learned, moved or aged since.
    if (f && stamp != 0 && stamp != stamp_of(i)) [[unlikely]] {
      f = nullptr;
      stale++;
    }
    if (f) {
      a = f->action;  // copied: a later insert in this burst may reuse the entry
      hits++;
    } else {
      const uint64_t t_miss = rte_rdtsc();
      // The stamp before the learned FDB is read (learned_fdb.h).
      const uint32_t now_stamp = stamp_of(i);
      LearnedLookup lk{learned.fdb.load(std::memory_order_acquire)};
      a = pipeline_decide_deferred(s, keys[i], &lk);  // sg_track applies the rules when needed
      bool evicted;
      f = cache_.insert(keys[i], hashes[i], key_bytes[i], gen, lk.used ? now_stamp : 0, a,
                        &evicted);
      if (evicted) {
        evictions++;
        for (uint16_t j = 0; j < i; j++)  // their entry is this key's now
          if (flows[j] == f) flows[j] = nullptr;
      }
      misses++;
      if (a.flags & kActLearn) learn(s, keys[i], a);
      pipeline_cycles += rte_rdtsc() - t_miss;
    }
    // Conntrack hints only for flows keyed in full (the key names the tuple).
    flows[i] = key_bytes[i] == kFullKeyBytes ? f : nullptr;
  }
  const uint64_t t_decided = rte_rdtsc();
  for (uint16_t i = 0; i < n; i++) {
    const Action& a = acts[i];
    if (ok[i] && (a.flags & kActTrack) && a.kind != ActionKind::kDrop) {
      uint32_t l4_len;
      // Offsets of the frame as received: a VXLAN frame's inner L4 header
      // stays where it is when execute() strips the outer headers.
      const uint8_t* l4 = l4_of(pkts[i], meta[i], &l4_len);
      sg_prepare(shared_->ct, a, keys[i], l4, l4_len, flows[i] ? flows[i]->ct : CtHint{},
                 &ct[i]);
    }
  }
  for (uint16_t i = 0; i < n; i++)
    if (ok[i]) execute(s, pkts[i], keys[i], meta[i], acts[i], &ct[i], flows[i]);
  const uint64_t t_done = rte_rdtsc();
  bump(stats_->cache_hits, hits);
  bump(stats_->cache_misses, misses);
  bump(stats_->cache_evictions, evictions);
  bump(stats_->cache_stale, stale);
  Counter* st = stats_->stage_cycles;
  bump(st[unsigned(Stage::kParse)], t_parsed - tsc);
  bump(st[unsigned(Stage::kLookup)], t_decided - t_parsed - pipeline_cycles);
  bump(st[unsigned(Stage::kPipeline)], pipeline_cycles);
  bump(st[unsigned(Stage::kActions)], t_done - t_decided);
  return t_done;
}

// Rewrites the frame's outer tag for the egress port: the ingress frame is
// tagged with the network's tag (kActIngressTagged) or untagged.
static bool set_vlan(rte_mbuf*& m, bool ingress_tagged, uint16_t egress_vid) noexcept {
  if (ingress_tagged && egress_vid == 0) return rte_vlan_strip(m) == 0;
  if (!ingress_tagged && egress_vid != 0) {
    m->vlan_tci = egress_vid;
    return rte_vlan_insert(&m) == 0;
  }
  if (ingress_tagged && egress_vid != 0) {
    auto* vh = rte_pktmbuf_mtod_offset(m, rte_vlan_hdr*, sizeof(rte_ether_hdr));
    uint16_t tci = rte_be_to_cpu_16(vh->vlan_tci);
    vh->vlan_tci = rte_cpu_to_be_16((tci & 0xf000) | egress_vid);
  }
  return true;
}

// The meta of a decapsulated frame once its outer headers are gone.
static PacketMeta inner_meta(const PacketMeta& outer) noexcept {
  PacketMeta m = outer;
  if (m.l3_ofs) m.l3_ofs -= outer.inner_ofs;
  if (m.l4_ofs) m.l4_ofs -= outer.inner_ofs;
  m.inner_ofs = 0;
  return m;
}

void Worker::execute(const Snapshot& s, rte_mbuf* m, const FlowKey& key,
                     const PacketMeta& rx_meta, const Action& a, const SgPrepared* ct,
                     CachedFlow* flow) noexcept {
  // A learned source is seen, whatever becomes of its frame (keep_learning).
  if (a.learn_slot != kNoSlot)
    learn_seen_[a.learn_slot].store(shared_->now_sec.load(std::memory_order_relaxed),
                                    std::memory_order_relaxed);
  if (a.kind == ActionKind::kDrop) return drop(m, key.in_port, a.reason);
  if (a.kind == ActionKind::kVtepArp) return vtep_arp(s, m, key);
  if (a.kind == ActionKind::kArpReply) return arp_reply(s, m, key, a);
  PacketMeta meta = rx_meta;
  if (a.flags & kActDecap) {
    // The parser read the outer headers from the first segment: they are there.
    if (!rte_pktmbuf_adj(m, rx_meta.inner_ofs))
      return drop(m, key.in_port, DropReason::kVxlanMalformed);
    meta = inner_meta(rx_meta);
  }
  if (a.mtu && rte_pktmbuf_pkt_len(m) - meta.l2_len > a.mtu)
    return drop(m, key.in_port, DropReason::kMtuExceeded);
  int in_conn = -1;
  if (a.flags & kActTrack) {
    const SgVerdict v =
        sg_track(s, shared_->ct, a, key, *ct, now_ms_, id_, flow ? &flow->ct : nullptr);
    if (v.drop != DropReason::kNone) return drop(m, key.in_port, v.drop);
    in_conn = v.in_connection;
  }
  if (a.kind == ActionKind::kFlood) return flood(s, m, key, meta, a, in_conn);
  if (a.kind == ActionKind::kEncap) return encap(s, m, a.out_port, key, a);
  if (!set_vlan(m, a.flags & kActIngressTagged, a.egress_vid))
    return drop(m, key.in_port, DropReason::kNoMbuf);
  enqueue(s, a.out_port, m);
}

// Whether flood target `port` takes the frame: ports with port security
// check their ingress side per packet (pipeline_decide cannot: one cached
// action for every target).
bool Worker::flood_admits(const Snapshot& s, uint16_t port, const FlowKey& key,
                          const PacketMeta& meta, rte_mbuf* m, uint16_t lvlan,
                          int* in_conn) noexcept {
  const PortSecurity* sec = s.ports[port].security;
  if (sec == nullptr) return true;
  DropReason r = sg_flood_target(*sec, key, *in_conn > 0);
  if (r == DropReason::kSgIngressDenied && *in_conn < 0) {
    // The sender is not tracked: look the connection up, once per frame,
    // only when the rules alone refuse it.
    uint32_t l4_len;
    const uint8_t* l4 = l4_of(m, meta, &l4_len);
    *in_conn = sg_in_connection(shared_->ct, key, lvlan, l4, l4_len, now_ms_);
    if (*in_conn) r = DropReason::kNone;
  }
  if (r == DropReason::kNone) return true;
  count_drop(port, r);
  return false;
}

void Worker::flood(const Snapshot& s, rte_mbuf* m, const FlowKey& key, const PacketMeta& meta,
                   const Action& a, int in_conn) noexcept {
  const std::vector<FloodTarget>& targets = s.networks[a.lvlan].flood;
  const bool tagged = a.flags & kActIngressTagged;
  // Each target is sent to once the next one taking the frame is known: the
  // last gets the original, the others copies (their tags may differ, so no
  // shared buffers), and the original stays untouched while copies are made.
  const FloodTarget* pending = nullptr;
  // Some target took or refused the frame (and counted it): the original
  // is no flood_no_target drop. Copies for remote VTEPs go first, while the
  // original is untouched; never for a frame that came out of a tunnel
  // (split horizon).
  bool accounted = !(a.flags & kActDecap) && s.networks[a.lvlan].type == NetType::kVxlan &&
                   s.vtep.enabled && flood_vteps(s, m, key, a) != 0;
  auto send = [&](const FloodTarget& t, rte_mbuf* out) {
    if (!out || !set_vlan(out, tagged, t.egress_vid)) {
      if (out) rte_pktmbuf_free(out);
      count_drop(t.port, DropReason::kNoMbuf);
      return;
    }
    enqueue(s, t.port, out);
  };
  for (const FloodTarget& t : targets) {
    if (t.port == key.in_port) continue;
    if (!flood_admits(s, t.port, key, meta, m, a.lvlan, &in_conn)) {
      accounted = true;  // counted against the target
      continue;
    }
    if (pending) send(*pending, rte_pktmbuf_copy(m, shared_->pool, 0, UINT32_MAX));
    pending = &t;
  }
  if (pending)
    send(*pending, m);
  else if (accounted)
    rte_pktmbuf_free(m);
  else
    drop(m, key.in_port, DropReason::kFloodNoTarget);
}

DropReason Worker::qos_drop(QosVerdict v) noexcept {
  return v == QosVerdict::kPass         ? DropReason::kNone
         : v == QosVerdict::kPacketRate ? DropReason::kQosPacketRate
                                        : DropReason::kQosBandwidth;
}

// DSCP marking of what a VM sends: IPv4 and IPv6 (not inside an ARP, or a
// frame whose IP header is past the first segment).
void Worker::mark_dscp(rte_mbuf* m, const FlowKey& key, const PacketMeta& meta,
                       uint8_t dscp) noexcept {
  const bool v6 = key.dl_type == kEthTypeIpv6;
  if ((!v6 && key.dl_type != kEthTypeIpv4) || meta.l3_ofs + 20u > rte_pktmbuf_data_len(m)) return;
  qos_mark_dscp(rte_pktmbuf_mtod_offset(m, uint8_t*, meta.l3_ofs), v6, dscp);
}

void Worker::enqueue(const Snapshot& s, uint16_t port, rte_mbuf* m) noexcept {
  // What reaches a VM: its ingress limits.
  if (const PortQos* q = s.ports[port].qos; q && q->polices(QosDir::kIngress)) [[unlikely]] {
    // At the burst's time: its frames are microseconds apart, a read of
    // the TSC per frame costs more than that says.
    const DropReason r = qos_drop(qos_police(*q, shared_->qos[port], QosDir::kIngress,
                                             rte_pktmbuf_pkt_len(m), burst_tsc_));
    if (r != DropReason::kNone) return drop(m, port, r);
  }
  TxBuffer& b = tx_[port];
  if (!b.queued) {
    b.queued = true;
    tx_dirty_[n_dirty_++] = port;
  }
  b.pkts[b.n++] = m;
  if (b.n == kBurst) flush(s, port);
}

void Worker::flush(const Snapshot& s, uint16_t port) noexcept {
  TxBuffer& b = tx_[port];
  if (b.n == 0) return;
  const PortEntry* p = s.port(port);
  uint16_t sent = 0;
  uint64_t bytes = 0;
  if (p && p->enabled) {
    for (uint16_t i = 0; i < b.n; i++) bytes += rte_pktmbuf_pkt_len(b.pkts[i]);
    const TxQueue& q = p->txq[id_];
    // A subport sends on its parent's device, under the parent's locks.
    rte_spinlock_t* lock =
        !q.shared                     ? nullptr
        : p->kind == PortKind::kVhost ? &shared_->vhost_txq_lock[p->device_port(port)][q.queue]
                                      : &shared_->txq_lock[p->ethdev][q.queue];
    if (lock) rte_spinlock_lock(lock);
    if (p->kind == PortKind::kVhost) {
      // The guest's rx ring gets copies: every mbuf is ours to free.
      const uint16_t n =
          p->capture == kNoCapture ? b.n : capture_tx(p->capture, q.queue, b.pkts, b.n);
      sent = rte_vhost_enqueue_burst(p->vid, 2 * q.queue, b.pkts, n);
    } else {
      sent = rte_eth_tx_burst(p->ethdev, q.queue, b.pkts, b.n);
    }
    if (lock) rte_spinlock_unlock(lock);
    for (uint16_t i = sent; i < b.n; i++) bytes -= rte_pktmbuf_pkt_len(b.pkts[i]);
    if (p->kind == PortKind::kVhost && sent) rte_pktmbuf_free_bulk(b.pkts, sent);
  }
  PortCounters& pc = stats_->ports[port];
  bump(pc.tx_packets, sent);
  bump(pc.tx_bytes, bytes);
  if (sent < b.n) {
    const DropReason r = p && p->enabled ? DropReason::kTxFull : DropReason::kPortDown;
    rte_pktmbuf_free_bulk(b.pkts + sent, b.n - sent);
    count_drop(port, r, b.n - sent);
  }
  b.n = 0;
}

void Worker::flush_all(const Snapshot& s) noexcept {
  for (uint16_t i = 0; i < n_dirty_; i++) {
    flush(s, tx_dirty_[i]);
    tx_[tx_dirty_[i]].queued = false;
  }
  n_dirty_ = 0;
}

void Worker::drop(rte_mbuf* m, uint16_t port, DropReason r) noexcept {
  rte_pktmbuf_free(m);
  count_drop(port, r);
}

void Worker::count_drop(uint16_t port, DropReason r, uint64_t n) noexcept {
  bump(stats_->drops[static_cast<unsigned>(r)], n);
  if (port < kMaxPorts) bump(stats_->ports[port].drops[static_cast<unsigned>(r)], n);
}

void Worker::learn(const Snapshot& s, const FlowKey& key, const Action& a) noexcept {
  uint16_t port = key.in_port;
  if (a.flags & kActDecap) {
    // Behind the remote VTEP that sent it (the pipeline checked there is one).
    const uint16_t v = vtep_index_of(s, key.tun_src);
    if (v == kNoPort) return;
    port = kVtepPortBase + v;
  }
  LearnEvent ev{a.lvlan, port, {}};
  std::memcpy(ev.mac, key.dl_src, 6);
  if (!learn_q_.push(ev)) bump(stats_->learn_events_lost);
}

// ---- VXLAN (issue 6) -------------------------------------------------------

const RemoteVtep* Worker::resolve(const Snapshot& s, uint16_t vport, uint16_t in_port) noexcept {
  const RemoteVtep* r = s.vtep_of(vport);
  if (!r) {
    count_drop(in_port, DropReason::kUnknownPort);
    return nullptr;
  }
  if (r->resolved) return r;
  count_drop(in_port, DropReason::kVtepUnresolved);
  ask_arp(s, vport - kVtepPortBase, *r);
  return nullptr;
}

void Worker::encap(const Snapshot& s, rte_mbuf* m, uint16_t vport, const FlowKey& key,
                   const Action& a) noexcept {
  const RemoteVtep* r = resolve(s, vport, key.in_port);
  if (!r) return rte_pktmbuf_free(m);  // counted
  rte_mbuf* out = vxlan_encap(m, shared_->pool, *r, s.networks[a.lvlan].vni,
                              vxlan_flow_hash(key));
  if (!out) return drop(m, key.in_port, DropReason::kNoMbuf);
  enqueue(s, s.vtep.uplink, out);
}

uint32_t Worker::flood_vteps(const Snapshot& s, rte_mbuf* m, const FlowKey& key,
                             const Action& a) noexcept {
  const Network& net = s.networks[a.lvlan];
  const uint32_t hash = vxlan_flow_hash(key);
  for (uint16_t v : net.flood_vteps) {
    const RemoteVtep* r = resolve(s, kVtepPortBase + v, key.in_port);
    if (!r) continue;  // counted
    rte_mbuf* copy = rte_pktmbuf_copy(m, shared_->pool, 0, UINT32_MAX);
    rte_mbuf* out = copy ? vxlan_encap(copy, shared_->pool, *r, net.vni, hash) : nullptr;
    if (!out) {
      if (copy) rte_pktmbuf_free(copy);
      count_drop(key.in_port, DropReason::kNoMbuf);
      continue;
    }
    enqueue(s, s.vtep.uplink, out);
  }
  return uint32_t(net.flood_vteps.size());
}

void Worker::ask_arp(const Snapshot& s, uint16_t vtep_idx, const RemoteVtep& r) noexcept {
  const uint32_t stamp = shared_->now_sec.load(std::memory_order_relaxed) + 1;
  if (arp_asked_[vtep_idx] == stamp) return;  // once a second per VTEP
  arp_asked_[vtep_idx] = stamp;
  static constexpr uint8_t kUnknownMac[6] = {};
  rte_mbuf* m = rte_pktmbuf_alloc(shared_->pool);
  if (!m) return count_drop(s.vtep.uplink, DropReason::kNoMbuf);
  if (!arp_build(m, kArpOpRequest, s.vtep.mac, s.vtep.local_ip, kUnknownMac, r.arp_ip))
    return drop(m, s.vtep.uplink, DropReason::kNoMbuf);
  enqueue(s, s.vtep.uplink, m);
}

// ARP on the underlay for our VTEP: whoever it names is reported to the
// control thread (it resolves remote VTEPs' next hops); a request for our
// address is answered out of the same mbuf.
void Worker::vtep_arp(const Snapshot& s, rte_mbuf* m, const FlowKey& key) noexcept {
  const uint32_t sender_ip = arp_sender_ip(key);
  if (sender_ip != 0) {  // 0: an ARP probe, nobody's address yet
    ArpEvent ev{sender_ip, {}};
    std::memcpy(ev.mac, arp_sender_mac(key), sizeof ev.mac);
    if (!arp_q_.push(ev)) bump(stats_->learn_events_lost);
  }
  if (key.nw_proto != kArpOpRequest || arp_target_ip(key) != s.vtep.local_ip)
    return rte_pktmbuf_free(m);
  // The key is a copy outside m: m may be rewritten from it.
  if (!arp_build(m, kArpOpReply, s.vtep.mac, s.vtep.local_ip, arp_sender_mac(key), sender_ip))
    return drop(m, key.in_port, DropReason::kNoMbuf);
  enqueue(s, s.vtep.uplink, m);
}

// The ARP responder: a local VM's request for a remote port's address,
// answered as that port would (from its MAC) to the VM alone; the request
// goes no further (no flood, no tunnel). The pipeline chose the entry.
void Worker::arp_reply(const Snapshot& s, rte_mbuf* m, const FlowKey& key,
                       const Action& a) noexcept {
  const ArpEntry& e = s.networks[a.lvlan].arp[a.out_port];
  // The key is a copy outside m: m may be rewritten from it.
  if (!arp_build(m, kArpOpReply, e.mac, e.ip, arp_sender_mac(key), arp_sender_ip(key)))
    return drop(m, key.in_port, DropReason::kNoMbuf);
  bump(stats_->arp_responder_replies);
  enqueue(s, key.in_port, m);
}

}  // namespace strait::dp
