// strait-gen: single-thread traffic generator + sink for whole-switch runs.
//
// One lcore does everything: transmit a burst on port 0 (the generator),
// then drain port 1 (the sink), in a loop.  On the 2-core bench machine the
// switch under test owns core 1 and everything else shares core 0, and two
// busy-polling processes (a separate tx and rx tool) on one core would be
// time-sliced by the scheduler in ms slices while a 1024-entry virtqueue
// fills in ~100 us: the sink would measure the scheduler, not the switch.
//
// Ports, in EAL --vdev order: port 0 = tx, port 1 = rx (the counted result:
// what arrived).  Port 0 is drained too (cheaply, every few loops), so frames
// a switch sends back towards the generator (learning frames, floods) do not
// back up.
//
//   strait-gen <EAL args> -- [options]
//     --size N        frame size incl. the 4-byte FCS (64 -> 60 bytes sent)
//     --flows N       distinct 5-tuples: IPv4 src 10.0.0.0/16 and UDP sport vary
//     --src-mac M     source MAC of generated frames (default 02:00:00:00:00:01)
//     --dst-mac M     destination MAC (default 02:00:00:00:00:02)
//     --vlan VID      add an 802.1Q tag (frame size stays --size)
//     --vxlan VNI     send the frame (--size, untagged) inside VXLAN, as a
//                     remote VTEP would: outer Ethernet (--outer-src-mac ->
//                     --outer-dst-mac) / IPv4 (--vtep-src -> --vtep-dst, DF,
//                     TTL 64) / UDP (sport 49152 + flow % 16384, dport
//                     --vxlan-port, no checksum) / VXLAN; 50 bytes more on
//                     the wire than --size. The sink counts what arrives.
//     --outer-src-mac M (default 02:00:00:00:00:fe)
//     --outer-dst-mac M (default 02:00:00:00:00:fd)
//     --vtep-src IP   (default 10.99.0.2)
//     --vtep-dst IP   (default 10.99.0.1)
//     --vxlan-port N  (default 4789)
//     --warmup S      seconds before measuring (default 2)
//     --duration S    measured seconds (default 5)
//     --learn         send --learn-pps frames/s from port 1 with src = dst-mac,
//                     dst = src-mac (ethertype 0x88b5), so learning switches
//                     know where dst-mac lives
//     --learn-pps N   (default 10)
//     --learn-macs K  every other learning frame is a broadcast from one of
//                     K other MACs in turn (02:01:00:00:00:00 + i): K > 1
//                     makes a learning switch learn new MACs at learn-pps /
//                     2 (and age them out), as a busy physnet does (default
//                     1: only dst-mac)
//     --learn-vlan VID  tag the learning frames only (the sink is a trunk:
//                     a physnet), not the generated ones
//     --burst N       tx burst (default 32, max 64)
//     --link-timeout S  wait this long for both links to come up (default 60)
//
// Two more modes, for bench/lifecycle_bench.py (timestamps are CLOCK_REALTIME
// seconds, the clock of straitd's event "ts"):
//     --connect-cycles N --vdev-path P [--hold-ms 100] [--gap-ms 20]
//                     no --vdev: hot-plugs a virtio-user device (vhost-user
//                     client; the switch serves P) N times: probe, configure,
//                     start (the guest driver's rings are live: the switch's
//                     new_device), hold, remove, pause.  One line per plug:
//                     "CONNECT n=<i> ts=<started> plug_ms=<probe+start>",
//                     then "CONNECT_RESULT cycles=.. ok=.. failed=..".
//     --serve-guests  no --vdev: one guest per line of stdin, "PATH": a
//                     virtio-user device that serves PATH (QEMU's side of a
//                     port nova plugs: vhost-user server, the switch connects
//                     as client), started once the switch is there. One line
//                     per guest: "GUEST n=<i> listen_ts=<before the socket>
//                     started_ts=<rings live> path=<PATH>", or "GUEST_FAILED
//                     n=<i> step=.. rc=..". Guests stay until stdin closes
//                     (bench/neutron_bench.py). At most RTE_MAX_ETHPORTS
//                     (32 in Debian's DPDK) a process.
//     --gap-watch MS [--interval-us 200]
//                     the two --vdev ports of the normal mode, but one frame
//                     every --interval-us (no busy polling) from port 0, and
//                     arrivals at port 1 reported: "RX_FIRST ts=.." and, after
//                     MS ms without any, "RX_RESUME ts=.. last_ts=.. gap_ms=..";
//                     runs until SIGINT/SIGTERM (the ports keep their link
//                     status interrupt, so virtio-user servers reconnect to a
//                     restarted switch).
//       --stats-ms MS also print "GAPWATCH_STATS ts=.. tx=.. txfail=.. rx=..
//                     nomem=.. last_rx_ts=.." every MS ms (last_rx_ts: the
//                     latest arrival, 0 before any): the running totals
//                     bench/soak.py follows for an hour.
//
// Output: "t=<s> rx_mpps=.. tx_mpps=.. txfail_mpps=.." once per second
// ("warmup" appended during warm-up), then one line
//   RESULT rx_mpps=.. tx_mpps=.. txfail_mpps=.. size=.. flows=.. secs=.. [extras]
// txfail_mpps > 0: the ring into the switch was full, i.e. the switch (not
// the generator) was the bottleneck.  Exit status: 0 ok, 1 usage/setup error,
// 2 links did not come up, 3 no measurement (stopped in warm-up), 4 nothing
// arrived at the sink while measuring (e.g. a virtio-user that could not share its
// memory with the backend still reports link up).
#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_udp.h>
#include <rte_version.h>
#include <rte_vxlan.h>

#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

namespace {

constexpr unsigned kMaxBurst = 64;
constexpr uint16_t kRingSize = 1024;
constexpr uint16_t kTxPort = 0;
constexpr uint16_t kRxPort = 1;
constexpr uint16_t kLearnEtherType = 0x88b5;  // IEEE local experimental
constexpr unsigned kMaxFrame = 1518;          // incl. FCS

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

struct Options {
  unsigned size = 64;
  unsigned flows = 1;
  unsigned burst = 32;
  int vlan = -1;
  double warmup = 2;
  double duration = 5;
  bool learn = false;
  unsigned learn_pps = 10;
  unsigned learn_macs = 1;
  int learn_vlan = -1;
  double link_timeout = 60;
  // --connect-cycles / --gap-watch modes (0: off)
  unsigned connect_cycles = 0;
  std::string vdev_path;
  unsigned hold_ms = 100;
  unsigned gap_ms = 20;
  unsigned watch_gap_ms = 0;
  unsigned interval_us = 200;
  unsigned stats_ms = 0;  // --gap-watch: GAPWATCH_STATS period (0: none)
  bool serve_guests = false;
  rte_ether_addr src{{0x02, 0, 0, 0, 0, 0x01}};
  rte_ether_addr dst{{0x02, 0, 0, 0, 0, 0x02}};
  // --vxlan (-1: off)
  long vxlan_vni = -1;
  rte_ether_addr outer_src{{0x02, 0, 0, 0, 0, 0xfe}};
  rte_ether_addr outer_dst{{0x02, 0, 0, 0, 0, 0xfd}};
  uint32_t vtep_src = RTE_IPV4(10, 99, 0, 2);  // host order
  uint32_t vtep_dst = RTE_IPV4(10, 99, 0, 1);
  unsigned vxlan_port = 4789;
};

bool parse_ipv4(const char* s, uint32_t* out) {
  in_addr a{};
  if (inet_pton(AF_INET, s, &a) != 1) return false;
  *out = rte_be_to_cpu_32(a.s_addr);
  return true;
}

bool parse_mac(const char* s, rte_ether_addr* a) {
  unsigned b[6];
  char tail;
  if (std::sscanf(s, "%x:%x:%x:%x:%x:%x%c", &b[0], &b[1], &b[2], &b[3], &b[4],
                  &b[5], &tail) != 6)
    return false;
  for (int i = 0; i < 6; i++) {
    if (b[i] > 0xff) return false;
    a->addr_bytes[i] = static_cast<uint8_t>(b[i]);
  }
  return true;
}

bool parse_uint(const char* s, unsigned long max, unsigned* out) {
  char* end = nullptr;
  errno = 0;
  unsigned long v = std::strtoul(s, &end, 10);
  if (errno || end == s || *end || v > max) return false;
  *out = static_cast<unsigned>(v);
  return true;
}

bool parse_secs(const char* s, double* out) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end == s || *end || v < 0 || v > 86400) return false;
  *out = v;
  return true;
}

void usage() {
  std::fprintf(stderr,
               "usage: strait-gen <EAL args> -- [--size N] [--flows N] "
               "[--src-mac M] [--dst-mac M] [--vlan VID] [--warmup S] "
               "[--duration S] [--learn] [--learn-pps N] [--learn-macs K] [--learn-vlan VID] [--burst N] "
               "[--link-timeout S] [--vxlan VNI [--outer-src-mac M] [--outer-dst-mac M] "
               "[--vtep-src IP] [--vtep-dst IP] [--vxlan-port N]]\n"
               "       strait-gen <EAL args> -- --connect-cycles N --vdev-path P "
               "[--hold-ms MS] [--gap-ms MS]\n"
               "       strait-gen <EAL args> -- --gap-watch MS [--interval-us US] "
               "[--stats-ms MS] [--src-mac M] [--dst-mac M] [--size N]\n"
               "       strait-gen <EAL args> -- --serve-guests   (socket paths on stdin)\n");
}

int parse_args(int argc, char** argv, Options* o) {
  enum { kSize = 256, kFlows, kSrc, kDst, kVlan, kWarm, kDur, kLearn, kLearnPps, kLearnMacs, kLearnVlan,
         kBurst, kLinkTo, kCycles, kVdevPath, kHold, kGap, kWatch, kInterval, kStats, kVxlan,
         kOuterSrc, kOuterDst, kVtepSrc, kVtepDst, kVxlanPort, kServeGuests, kHelp };
  static const option opts[] = {
      {"size", required_argument, nullptr, kSize},
      {"flows", required_argument, nullptr, kFlows},
      {"src-mac", required_argument, nullptr, kSrc},
      {"dst-mac", required_argument, nullptr, kDst},
      {"vlan", required_argument, nullptr, kVlan},
      {"warmup", required_argument, nullptr, kWarm},
      {"duration", required_argument, nullptr, kDur},
      {"learn", no_argument, nullptr, kLearn},
      {"learn-pps", required_argument, nullptr, kLearnPps},
      {"learn-macs", required_argument, nullptr, kLearnMacs},
      {"learn-vlan", required_argument, nullptr, kLearnVlan},
      {"burst", required_argument, nullptr, kBurst},
      {"link-timeout", required_argument, nullptr, kLinkTo},
      {"connect-cycles", required_argument, nullptr, kCycles},
      {"vdev-path", required_argument, nullptr, kVdevPath},
      {"hold-ms", required_argument, nullptr, kHold},
      {"gap-ms", required_argument, nullptr, kGap},
      {"gap-watch", required_argument, nullptr, kWatch},
      {"interval-us", required_argument, nullptr, kInterval},
      {"stats-ms", required_argument, nullptr, kStats},
      {"vxlan", required_argument, nullptr, kVxlan},
      {"outer-src-mac", required_argument, nullptr, kOuterSrc},
      {"outer-dst-mac", required_argument, nullptr, kOuterDst},
      {"vtep-src", required_argument, nullptr, kVtepSrc},
      {"vtep-dst", required_argument, nullptr, kVtepDst},
      {"vxlan-port", required_argument, nullptr, kVxlanPort},
      {"serve-guests", no_argument, nullptr, kServeGuests},
      {"help", no_argument, nullptr, kHelp},
      {nullptr, 0, nullptr, 0}};
  optind = 1;
  int c;
  unsigned u;
  while ((c = getopt_long(argc, argv, "", opts, nullptr)) != -1) {
    bool ok = true;
    switch (c) {
      case kSize: ok = parse_uint(optarg, kMaxFrame, &o->size) && o->size >= 64; break;
      case kFlows: ok = parse_uint(optarg, 1u << 24, &o->flows) && o->flows >= 1; break;
      case kSrc: ok = parse_mac(optarg, &o->src); break;
      case kDst: ok = parse_mac(optarg, &o->dst); break;
      case kVlan: ok = parse_uint(optarg, 4095, &u); o->vlan = static_cast<int>(u); break;
      case kWarm: ok = parse_secs(optarg, &o->warmup); break;
      case kDur: ok = parse_secs(optarg, &o->duration) && o->duration > 0; break;
      case kLearn: o->learn = true; break;
      case kLearnPps: ok = parse_uint(optarg, 100000, &o->learn_pps) && o->learn_pps > 0; break;
      case kLearnMacs: ok = parse_uint(optarg, 1u << 24, &o->learn_macs) && o->learn_macs > 0; break;
      case kLearnVlan: ok = parse_uint(optarg, 4095, &u); o->learn_vlan = static_cast<int>(u); break;
      case kBurst: ok = parse_uint(optarg, kMaxBurst, &o->burst) && o->burst >= 1; break;
      case kLinkTo: ok = parse_secs(optarg, &o->link_timeout); break;
      case kCycles: ok = parse_uint(optarg, 1000000, &o->connect_cycles) && o->connect_cycles;
        break;
      case kVdevPath: o->vdev_path = optarg; ok = !o->vdev_path.empty(); break;
      case kHold: ok = parse_uint(optarg, 60000, &o->hold_ms); break;
      case kGap: ok = parse_uint(optarg, 60000, &o->gap_ms); break;
      case kWatch: ok = parse_uint(optarg, 60000, &o->watch_gap_ms) && o->watch_gap_ms; break;
      case kInterval: ok = parse_uint(optarg, 1000000, &o->interval_us) && o->interval_us; break;
      case kStats: ok = parse_uint(optarg, 3600000, &o->stats_ms) && o->stats_ms; break;
      case kVxlan: ok = parse_uint(optarg, (1u << 24) - 1, &u); o->vxlan_vni = u; break;
      case kOuterSrc: ok = parse_mac(optarg, &o->outer_src); break;
      case kOuterDst: ok = parse_mac(optarg, &o->outer_dst); break;
      case kVtepSrc: ok = parse_ipv4(optarg, &o->vtep_src); break;
      case kVtepDst: ok = parse_ipv4(optarg, &o->vtep_dst); break;
      case kVxlanPort: ok = parse_uint(optarg, 65535, &o->vxlan_port) && o->vxlan_port; break;
      case kServeGuests: o->serve_guests = true; break;
      case kHelp: usage(); std::exit(0);
      default: ok = false;
    }
    if (!ok) {
      if (c >= kSize && c < kHelp)
        std::fprintf(stderr, "strait-gen: bad value for --%s: %s\n",
                     opts[c - kSize].name, optarg ? optarg : "");
      usage();
      return -1;
    }
  }
  if (optind < argc) {
    std::fprintf(stderr, "strait-gen: unexpected argument %s\n", argv[optind]);
    usage();
    return -1;
  }
  if (o->connect_cycles && o->vdev_path.empty()) {
    std::fprintf(stderr, "strait-gen: --connect-cycles needs --vdev-path\n");
    return -1;
  }
  if (o->vxlan_vni >= 0 && o->vlan >= 0) {
    std::fprintf(stderr, "strait-gen: --vxlan carries untagged frames: no --vlan with it\n");
    return -1;
  }
  const unsigned min_size = o->vlan >= 0 ? 68 : 64;  // room for Eth(+tag)/IPv4/UDP
  if (o->size < min_size) {
    std::fprintf(stderr, "strait-gen: --size must be >= %u\n", min_size);
    return -1;
  }
  return 0;
}

// Frame layout, fixed for the whole run.
struct Layout {
  uint16_t len;        // bytes handed to the port (size - FCS, + 50 with --vxlan)
  uint16_t l3;         // offset of the (inner) IPv4 header
  uint16_t hdr_len;    // [outer Eth/IPv4/UDP/VXLAN/]Eth[/VLAN]/IPv4/UDP
  uint16_t outer_udp;  // offset of the outer UDP header (--vxlan), else 0
  uint8_t hdr[128];    // header template (checksum field = 0)
  uint32_t cksum0;     // raw 16-bit sum of the IPv4 header with src = 0, cksum = 0
};

constexpr uint16_t kVxlanOverhead = sizeof(rte_ether_hdr) + sizeof(rte_ipv4_hdr) +
                                    sizeof(rte_udp_hdr) + sizeof(rte_vxlan_hdr);  // 50

// The outer headers of --vxlan at the start of l.hdr, for an inner frame of
// `inner_len` bytes (without FCS).
void build_vxlan_outer(const Options& o, uint16_t inner_len, Layout* l) {
  uint8_t* p = l->hdr;
  auto* eth = reinterpret_cast<rte_ether_hdr*>(p);
  rte_ether_addr_copy(&o.outer_dst, &eth->dst_addr);
  rte_ether_addr_copy(&o.outer_src, &eth->src_addr);
  eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(eth + 1);
  const uint16_t ip_len = static_cast<uint16_t>(kVxlanOverhead - sizeof(rte_ether_hdr) + inner_len);
  ip->version_ihl = RTE_IPV4_VHL_DEF;
  ip->total_length = rte_cpu_to_be_16(ip_len);
  ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
  ip->time_to_live = 64;
  ip->next_proto_id = IPPROTO_UDP;
  ip->src_addr = rte_cpu_to_be_32(o.vtep_src);
  ip->dst_addr = rte_cpu_to_be_32(o.vtep_dst);
  ip->hdr_checksum = rte_ipv4_cksum(ip);  // constant: the outer sport is not in it
  auto* udp = reinterpret_cast<rte_udp_hdr*>(ip + 1);
  udp->src_port = rte_cpu_to_be_16(49152);
  udp->dst_port = rte_cpu_to_be_16(static_cast<uint16_t>(o.vxlan_port));
  udp->dgram_len = rte_cpu_to_be_16(static_cast<uint16_t>(ip_len - sizeof(rte_ipv4_hdr)));
  udp->dgram_cksum = 0;
  auto* vx = reinterpret_cast<rte_vxlan_hdr*>(udp + 1);
  vx->vx_flags = rte_cpu_to_be_32(0x08000000);  // I flag
  vx->vx_vni = rte_cpu_to_be_32(static_cast<uint32_t>(o.vxlan_vni) << 8);
  l->outer_udp = static_cast<uint16_t>(reinterpret_cast<uint8_t*>(udp) - p);
}

Layout build_layout(const Options& o) {
  Layout l{};
  const uint16_t inner_len = static_cast<uint16_t>(o.size - RTE_ETHER_CRC_LEN);
  l.len = inner_len;
  uint8_t* p = l.hdr;
  if (o.vxlan_vni >= 0) {
    build_vxlan_outer(o, inner_len, &l);
    l.len = static_cast<uint16_t>(inner_len + kVxlanOverhead);
    p += kVxlanOverhead;
  }
  const uint16_t base = static_cast<uint16_t>(p - l.hdr);  // start of the (inner) frame
  auto* eth = reinterpret_cast<rte_ether_hdr*>(p);
  rte_ether_addr_copy(&o.dst, &eth->dst_addr);
  rte_ether_addr_copy(&o.src, &eth->src_addr);
  uint16_t off = sizeof(rte_ether_hdr);
  if (o.vlan >= 0) {
    eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_VLAN);
    auto* vh = reinterpret_cast<rte_vlan_hdr*>(p + off);
    vh->vlan_tci = rte_cpu_to_be_16(static_cast<uint16_t>(o.vlan));
    vh->eth_proto = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
    off += sizeof(rte_vlan_hdr);
  } else {
    eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
  }
  l.l3 = static_cast<uint16_t>(base + off);
  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(p + off);
  const uint16_t ip_len = static_cast<uint16_t>(inner_len - off);
  ip->version_ihl = RTE_IPV4_VHL_DEF;
  ip->type_of_service = 0;
  ip->total_length = rte_cpu_to_be_16(ip_len);
  ip->packet_id = 0;
  ip->fragment_offset = 0;
  ip->time_to_live = 64;
  ip->next_proto_id = IPPROTO_UDP;
  ip->hdr_checksum = 0;
  ip->src_addr = 0;
  ip->dst_addr = rte_cpu_to_be_32(RTE_IPV4(10, 1, 0, 1));
  l.cksum0 = rte_raw_cksum(ip, sizeof(*ip));
  off += sizeof(rte_ipv4_hdr);
  auto* udp = reinterpret_cast<rte_udp_hdr*>(p + off);
  udp->src_port = rte_cpu_to_be_16(1024);
  udp->dst_port = rte_cpu_to_be_16(5001);
  udp->dgram_len = rte_cpu_to_be_16(static_cast<uint16_t>(ip_len - sizeof(rte_ipv4_hdr)));
  udp->dgram_cksum = 0;  // optional in IPv4
  off += sizeof(rte_udp_hdr);
  l.hdr_len = static_cast<uint16_t>(base + off);
  return l;
}

// Flow f (0-based): IPv4 src 10.0.x.y = 10.0.0.0 + ((f + 1) & 0xffff),
// UDP sport 1024 + ((f + 1) >> 16).  Flow 0 is 10.0.0.1:1024.  With
// --vxlan, the outer UDP sport is 49152 + ((f + 1) % 16384) (entropy, as a
// VTEP hashes the inner flow).
inline void write_headers(uint8_t* d, const Layout& l, uint32_t f) {
  std::memcpy(d, l.hdr, l.hdr_len);
  if (l.outer_udp) {
    auto* oudp = reinterpret_cast<rte_udp_hdr*>(d + l.outer_udp);
    oudp->src_port = rte_cpu_to_be_16(static_cast<uint16_t>(49152 + ((f + 1) & 0x3fff)));
  }
  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(d + l.l3);
  const uint32_t n = f + 1;
  const rte_be32_t src = rte_cpu_to_be_32(RTE_IPV4(10, 0, 0, 0) + (n & 0xffff));
  ip->src_addr = src;
  if (n >> 16) {
    auto* udp = reinterpret_cast<rte_udp_hdr*>(ip + 1);
    udp->src_port = rte_cpu_to_be_16(static_cast<uint16_t>(1024 + (n >> 16)));
  }
  // Incremental checksum: the template's sum plus the two 16-bit words of src.
  uint16_t w[2];
  std::memcpy(w, &src, sizeof(w));
  uint32_t s = l.cksum0 + w[0] + w[1];
  s = (s & 0xffff) + (s >> 16);
  s = (s & 0xffff) + (s >> 16);
  ip->hdr_checksum = static_cast<uint16_t>(~s);
}

// Mempool object initialiser: every mbuf starts life holding a complete
// frame (headers of flow 0 + payload pattern), so the payload is never
// rewritten on the fast path; only the headers are, per packet.
struct PoolInit {
  const Layout* layout;
};
void init_mbuf_frame(rte_mempool* mp, void* arg, void* obj, unsigned) {
  rte_pktmbuf_init(mp, nullptr, obj, 0);
  auto* m = static_cast<rte_mbuf*>(obj);
  const Layout& l = *static_cast<PoolInit*>(arg)->layout;
  uint8_t* d = rte_pktmbuf_mtod(m, uint8_t*);
  for (unsigned i = l.hdr_len; i < l.len; i++) d[i] = static_cast<uint8_t>(i);
  write_headers(d, l, 0);
}

std::string port_name(uint16_t port) {
  char name[RTE_ETH_NAME_MAX_LEN] = "?";
  rte_eth_dev_get_name_by_port(port, name);
  return name;
}

bool links_up() {
  for (uint16_t p : {kTxPort, kRxPort}) {
    rte_eth_link link{};
    if (rte_eth_link_get_nowait(p, &link) < 0 || link.link_status != RTE_ETH_LINK_UP)
      return false;
  }
  return true;
}

// ---- --connect-cycles and --gap-watch (bench/lifecycle_bench.py) ----------

double realtime_s() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

void sleep_us(unsigned us) {
  timespec ts{static_cast<time_t>(us / 1000000), static_cast<long>(us % 1000000) * 1000};
  nanosleep(&ts, nullptr);
}

// One queue pair, started; the link status interrupt on where the driver has
// one (a virtio-user server reconnects to a restarted switch from it).
int start_port_lsc(uint16_t port, rte_mempool* mp, uint16_t ring) {
  rte_eth_dev_info info{};
  int rc = rte_eth_dev_info_get(port, &info);
  if (rc < 0) return rc;
  rte_eth_conf conf{};
  if (*info.dev_flags & RTE_ETH_DEV_INTR_LSC) conf.intr_conf.lsc = 1;
  if ((rc = rte_eth_dev_configure(port, 1, 1, &conf)) < 0) return rc;
  const int sock = rte_eth_dev_socket_id(port);
  const unsigned s = sock < 0 ? 0 : static_cast<unsigned>(sock);
  if ((rc = rte_eth_rx_queue_setup(port, 0, ring, s, nullptr, mp)) < 0) return rc;
  if ((rc = rte_eth_tx_queue_setup(port, 0, ring, s, nullptr)) < 0) return rc;
  return rte_eth_dev_start(port);
}

// The generator's ports: like every mode's, with the link status interrupt,
// so a "VM" whose switch side unbinds and binds again reconnects.
int port_setup(uint16_t port, rte_mempool* mp) {
  const int rc = start_port_lsc(port, mp, kRingSize);
  if (rc == 0) rte_eth_promiscuous_enable(port);  // unsupported on some vdevs: ignore
  return rc;
}

// A guest plugged and unplugged N times on a socket the switch serves. The
// device counts as plugged once started: its rings are set up, which is
// when the vhost side sees new_device.
int run_connect_cycles(const Options& o) {
  constexpr const char* kName = "virtio_user_cc0";
  constexpr uint16_t kRing = 256;
  rte_mempool* mp = rte_pktmbuf_pool_create("strait_gen_cc", 2047, 0, 0,
                                            RTE_MBUF_DEFAULT_BUF_SIZE, rte_socket_id());
  if (!mp) {
    std::fprintf(stderr, "strait-gen: mempool: %s (more memory: -m)\n", rte_strerror(rte_errno));
    return 1;
  }
  const std::string args = "path=" + o.vdev_path + ",queues=1,queue_size=" +
                           std::to_string(kRing);
  unsigned ok = 0, failed = 0, failed_in_a_row = 0;
  rte_mbuf* rxb[kMaxBurst];
  for (unsigned i = 0; i < o.connect_cycles && !g_stop; i++) {
    const double t0 = realtime_s();
    uint16_t port = RTE_MAX_ETHPORTS;
    const char* step = "probe";  // e.g. nobody serves the socket
    int rc = rte_eal_hotplug_add("vdev", kName, args.c_str());
    if (rc == 0 && (rc = rte_eth_dev_get_port_by_name(kName, &port)) != 0) step = "port";
    if (rc == 0 && (rc = start_port_lsc(port, mp, kRing)) != 0) step = "start";
    const double t1 = realtime_s();
    if (rc == 0) {
      std::printf("CONNECT n=%u ts=%.6f plug_ms=%.3f\n", i, t1, (t1 - t0) * 1e3);
      ok++;
      failed_in_a_row = 0;
    } else {
      std::printf("CONNECT_FAILED n=%u step=%s rc=%d\n", i, step, rc);
      failed++;
      failed_in_a_row++;
    }
    std::fflush(stdout);
    sleep_us(o.hold_ms * 1000);
    if (port < RTE_MAX_ETHPORTS) {
      while (rte_eth_rx_burst(port, 0, rxb, kMaxBurst) > 0) {}  // whatever a switch flooded
      rte_eth_dev_stop(port);
    }
    rte_eal_hotplug_remove("vdev", kName);  // closes the port, disconnects
    if (failed_in_a_row == 10) break;
    sleep_us(o.gap_ms * 1000);
  }
  std::printf("CONNECT_RESULT cycles=%u ok=%u failed=%u%s\n", ok + failed, ok, failed,
              g_stop ? " interrupted" : "");
  std::fflush(stdout);
  rte_mempool_free(mp);
  return failed ? 5 : 0;
}

// Guests plugged one after another as the lines of stdin name their sockets,
// each serving its socket as QEMU does for a port nova plugs; hot-plugging
// one returns once the switch has connected (virtio-user's server accepts).
int run_serve_guests() {
  constexpr uint16_t kRing = 64;  // no traffic: small rings, many guests
  rte_mempool* mp = rte_pktmbuf_pool_create("strait_gen_sg", 8191, 256, 0,
                                            RTE_MBUF_DEFAULT_BUF_SIZE, rte_socket_id());
  if (!mp) {
    std::fprintf(stderr, "strait-gen: mempool: %s (more memory: -m)\n", rte_strerror(rte_errno));
    return 1;
  }
  char line[4096];
  unsigned n = 0, failed = 0;
  while (!g_stop && std::fgets(line, sizeof line, stdin)) {
    std::string path(line);
    while (!path.empty() && (path.back() == '\n' || path.back() == '\r')) path.pop_back();
    if (path.empty()) continue;
    const std::string name = "virtio_user_sg" + std::to_string(n);
    const std::string args = "path=" + path + ",server=1,queues=1,queue_size=" + std::to_string(kRing);
    const double listen = realtime_s();
    uint16_t port = RTE_MAX_ETHPORTS;
    const char* step = "probe";
    int rc = rte_eal_hotplug_add("vdev", name.c_str(), args.c_str());
    if (rc == 0 && (rc = rte_eth_dev_get_port_by_name(name.c_str(), &port)) != 0) step = "port";
    if (rc == 0 && (rc = start_port_lsc(port, mp, kRing)) != 0) step = "start";
    if (rc == 0) {
      std::printf("GUEST n=%u listen_ts=%.6f started_ts=%.6f path=%s\n", n, listen, realtime_s(),
                  path.c_str());
    } else {
      std::printf("GUEST_FAILED n=%u step=%s rc=%d path=%s\n", n, step, rc, path.c_str());
      failed++;
    }
    std::fflush(stdout);
    n++;
  }
  std::printf("GUESTS_RESULT guests=%u failed=%u\n", n, failed);
  std::fflush(stdout);
  return failed ? 5 : 0;  // the process's exit closes the devices
}

// Frames at a low, steady rate from port 0 to port 1, and the moments
// delivery starts and resumes: how long a switch restart interrupts
// forwarding between two running guests.
int run_gap_watch(const Options& o, rte_mempool* mp, const Layout& layout) {
  for (uint16_t p : {kTxPort, kRxPort}) {
    if (const int rc = start_port_lsc(p, mp, kRingSize); rc < 0) {
      std::fprintf(stderr, "strait-gen: port %u (%s) setup failed: %s\n", p,
                   port_name(p).c_str(), rte_strerror(-rc));
      return 1;
    }
  }
  const double gap = o.watch_gap_ms / 1e3;
  std::printf("GAPWATCH interval_us=%u gap_ms=%u started=%.6f\n", o.interval_us,
              o.watch_gap_ms, realtime_s());
  std::fflush(stdout);
  uint64_t tx = 0, txfail = 0, rx = 0, gaps = 0, nomem = 0;
  double last_rx = 0;
  const double stats_every = o.stats_ms / 1e3;
  double next_stats = realtime_s() + stats_every;
  rte_mbuf* rxb[kMaxBurst];
  for (unsigned loop = 0; !g_stop; loop++) {
    rte_mbuf* m = rte_pktmbuf_alloc(mp);
    if (m) {
      write_headers(rte_pktmbuf_mtod(m, uint8_t*), layout, 0);
      m->data_len = m->pkt_len = layout.len;
      if (rte_eth_tx_burst(kTxPort, 0, &m, 1) == 1) {
        tx++;
      } else {
        txfail++;
        rte_pktmbuf_free(m);
      }
    } else {
      nomem++;
    }
    const uint16_t n = rte_eth_rx_burst(kRxPort, 0, rxb, kMaxBurst);
    if (n) {
      const double now = realtime_s();
      if (rx == 0) {
        std::printf("RX_FIRST ts=%.6f\n", now);
      } else if (now - last_rx >= gap) {
        std::printf("RX_RESUME ts=%.6f last_ts=%.6f gap_ms=%.1f\n", now, last_rx,
                    (now - last_rx) * 1e3);
        gaps++;
      }
      std::fflush(stdout);
      rx += n;
      last_rx = now;
      rte_pktmbuf_free_bulk(rxb, n);
    }
    if ((loop & 15) == 0) {  // floods back towards the sender
      const uint16_t k = rte_eth_rx_burst(kTxPort, 0, rxb, kMaxBurst);
      if (k) rte_pktmbuf_free_bulk(rxb, k);
    }
    if (const double now = realtime_s(); o.stats_ms && now >= next_stats) {
      std::printf("GAPWATCH_STATS ts=%.6f tx=%lu txfail=%lu rx=%lu nomem=%lu last_rx_ts=%.6f\n",
                  now, static_cast<unsigned long>(tx), static_cast<unsigned long>(txfail),
                  static_cast<unsigned long>(rx), static_cast<unsigned long>(nomem), last_rx);
      std::fflush(stdout);
      next_stats = now + stats_every;  // no burst of lines after a stall
    }
    sleep_us(o.interval_us);
  }
  std::printf("GAPWATCH_RESULT tx=%lu txfail=%lu rx=%lu gaps=%lu nomem=%lu\n",
              static_cast<unsigned long>(tx), static_cast<unsigned long>(txfail),
              static_cast<unsigned long>(rx), static_cast<unsigned long>(gaps),
              static_cast<unsigned long>(nomem));
  std::fflush(stdout);
  for (uint16_t p : {kTxPort, kRxPort}) {
    rte_eth_dev_stop(p);
    rte_eth_dev_close(p);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // As straitd: the vhost-user peer closing its socket (a straitd restart)
  // must not kill the generator, which counts on through the reconnect.
  std::signal(SIGPIPE, SIG_IGN);
  const int eal = rte_eal_init(argc, argv);
  if (eal < 0) {
    std::fprintf(stderr, "strait-gen: EAL init failed: %s\n", rte_strerror(rte_errno));
    return 1;
  }
  argv[eal] = argv[0];  // getopt wants a program name first
  Options o;
  if (parse_args(argc - eal, argv + eal, &o) < 0) {
    rte_eal_cleanup();
    return 1;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  if (o.serve_guests) {
    const int rc = run_serve_guests();
    rte_eal_cleanup();
    return rc;
  }
  if (o.connect_cycles) {
    const int rc = run_connect_cycles(o);
    rte_eal_cleanup();
    return rc;
  }
  if (rte_eth_dev_count_avail() < 2) {
    std::fprintf(stderr, "strait-gen: need 2 ports (port 0 = tx, port 1 = rx), have %u\n",
                 rte_eth_dev_count_avail());
    rte_eal_cleanup();
    return 1;
  }

  const Layout layout = build_layout(o);
  PoolInit pinit{&layout};
  // 16k mbufs: 3 rings of 1024 + per-lcore cache + bursts in flight, with
  // plenty of slack (about 40 MB, fits -m 128 with or without hugepages).
  constexpr unsigned kMbufs = 16383;
  rte_mempool* mp = rte_mempool_create("strait_gen", kMbufs,
                                       sizeof(rte_mbuf) + RTE_MBUF_DEFAULT_BUF_SIZE,
                                       256, sizeof(rte_pktmbuf_pool_private),
                                       rte_pktmbuf_pool_init, nullptr,
                                       init_mbuf_frame, &pinit, rte_socket_id(), 0);
  if (!mp) {
    std::fprintf(stderr, "strait-gen: mempool: %s (more memory: -m)\n",
                 rte_strerror(rte_errno));
    rte_eal_cleanup();
    return 1;
  }
  if (o.watch_gap_ms) {
    const int rc = run_gap_watch(o, mp, layout);
    rte_eal_cleanup();
    return rc;
  }
  for (uint16_t p : {kTxPort, kRxPort}) {
    const int rc = port_setup(p, mp);
    if (rc < 0) {
      std::fprintf(stderr, "strait-gen: port %u (%s) setup failed: %s\n", p,
                   port_name(p).c_str(), rte_strerror(-rc));
      rte_eal_cleanup();
      return 1;
    }
  }
  std::printf("strait-gen: %s; lcore %u; tx port 0 = %s, rx port 1 = %s; size=%u "
              "(%u on the wire w/o FCS) flows=%u burst=%u vlan=%d learn=%s vxlan=%ld\n",
              rte_version(), rte_lcore_id(), port_name(kTxPort).c_str(),
              port_name(kRxPort).c_str(), o.size, layout.len, o.flows, o.burst,
              o.vlan, o.learn ? "yes" : "no", o.vxlan_vni);
  std::fflush(stdout);

  const uint64_t hz = rte_get_tsc_hz();
  {
    const uint64_t t_end = rte_get_tsc_cycles() + static_cast<uint64_t>(o.link_timeout * hz);
    while (!links_up()) {
      if (g_stop || rte_get_tsc_cycles() > t_end) {
        std::fprintf(stderr, "strait-gen: links not up after %.0f s (port0 %s, port1 %s)\n",
                     o.link_timeout, port_name(kTxPort).c_str(), port_name(kRxPort).c_str());
        for (uint16_t p : {kTxPort, kRxPort}) rte_eth_dev_stop(p);
        rte_eal_cleanup();
        return 2;
      }
      rte_delay_ms(10);
    }
  }

  // Learning frame template (port 1 -> switch -> port 0).
  uint8_t learn_frame[RTE_ETHER_MIN_LEN - RTE_ETHER_CRC_LEN] = {};
  {
    auto* eth = reinterpret_cast<rte_ether_hdr*>(learn_frame);
    rte_ether_addr_copy(&o.src, &eth->dst_addr);
    rte_ether_addr_copy(&o.dst, &eth->src_addr);
    const int vlan = o.learn_vlan >= 0 ? o.learn_vlan : o.vlan;
    if (vlan >= 0) {
      eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_VLAN);
      auto* vh = reinterpret_cast<rte_vlan_hdr*>(eth + 1);
      vh->vlan_tci = rte_cpu_to_be_16(static_cast<uint16_t>(vlan));
      vh->eth_proto = rte_cpu_to_be_16(kLearnEtherType);
    } else {
      eth->ether_type = rte_cpu_to_be_16(kLearnEtherType);
    }
  }

  uint64_t rx = 0, tx = 0, txfail = 0, rx_bytes = 0, rx_other = 0, rx0 = 0,
           learn_sent = 0, nomem = 0, learn_turn = 0;
  uint64_t m_rx = 0, m_tx = 0, m_txfail = 0, m_rx_bytes = 0;  // at measure start
  uint64_t p_rx = 0, p_tx = 0, p_txfail = 0;                  // at last print
  const uint64_t t0 = rte_get_tsc_cycles();
  uint64_t now = t0;
  const uint64_t t_meas = t0 + static_cast<uint64_t>(o.warmup * hz);
  const uint64_t t_end = t_meas + static_cast<uint64_t>(o.duration * hz);
  const uint64_t learn_gap = hz / o.learn_pps;
  uint64_t next_learn = now, next_print = now + hz, last_print = now;
  bool measuring = o.warmup <= 0;
  uint32_t flow = 0;
  const uint32_t flows = o.flows;
  const unsigned burst = o.burst;
  const uint16_t len = layout.len;
  // What the sink expects: the frame as sent, or its inner frame (--vxlan:
  // the switch decapsulates). rx_other counts the others.
  const uint16_t rx_len = static_cast<uint16_t>(o.vxlan_vni >= 0 ? len - kVxlanOverhead : len);
  unsigned loop = 0;
  rte_mbuf* txb[kMaxBurst];
  rte_mbuf* rxb[kMaxBurst];

  while (!g_stop) {
    // Generate one burst.
    if (likely(rte_pktmbuf_alloc_bulk(mp, txb, burst) == 0)) {
      for (unsigned i = 0; i < burst; i++) {
        rte_mbuf* m = txb[i];
        write_headers(rte_pktmbuf_mtod(m, uint8_t*), layout, flow);
        if (++flow == flows) flow = 0;
        m->data_len = len;
        m->pkt_len = len;
      }
      const uint16_t n = rte_eth_tx_burst(kTxPort, 0, txb, static_cast<uint16_t>(burst));
      tx += n;
      if (n < burst) {
        txfail += burst - n;
        rte_pktmbuf_free_bulk(&txb[n], burst - n);
        // The next burst sends the flows this one could not: flows go out
        // in order, each once per round (a vlan_sg_new frame is a new
        // connection until the counter wraps).
        flow = (flow + flows - (burst - n) % flows) % flows;
      }
    } else {
      nomem++;
    }
    // Sink: drain port 1 (bounded, so tx keeps going).
    for (int k = 0; k < 8; k++) {
      const uint16_t n = rte_eth_rx_burst(kRxPort, 0, rxb, kMaxBurst);
      if (n == 0) break;
      rx += n;
      for (uint16_t i = 0; i < n; i++) {
        rx_bytes += rxb[i]->pkt_len;
        rx_other += rxb[i]->pkt_len != rx_len;
      }
      rte_pktmbuf_free_bulk(rxb, n);
      if (n < kMaxBurst) break;
    }
    // Whatever comes back on the tx port (learning frames, floods).
    if ((++loop & 15) == 0) {
      const uint16_t n = rte_eth_rx_burst(kTxPort, 0, rxb, kMaxBurst);
      if (n) {
        rx0 += n;
        rte_pktmbuf_free_bulk(rxb, n);
      }
    }
    now = rte_get_tsc_cycles();
    if (o.learn && now >= next_learn) {
      rte_mbuf* m = rte_pktmbuf_alloc(mp);
      if (m) {
        auto* d = rte_pktmbuf_mtod(m, uint8_t*);
        std::memcpy(d, learn_frame, sizeof(learn_frame));
        if (o.learn_macs > 1 && (learn_turn & 1)) {  // one of the churning MACs
          const uint64_t k = (learn_turn / 2) % o.learn_macs;
          const uint8_t churn[6] = {0x02, 0x01, 0, static_cast<uint8_t>(k >> 16),
                                    static_cast<uint8_t>(k >> 8), static_cast<uint8_t>(k)};
          std::memcpy(d + 6, churn, 6);
          std::memset(d, 0xff, 6);  // a new host's broadcast, as an ARP request would be
        }
        learn_turn++;
        m->data_len = m->pkt_len = sizeof(learn_frame);
        if (rte_eth_tx_burst(kRxPort, 0, &m, 1) == 1)
          learn_sent++;
        else
          rte_pktmbuf_free(m);
      }
      next_learn = now + learn_gap;
    }
    if (!measuring && now >= t_meas) {
      measuring = true;
      m_rx = rx;
      m_tx = tx;
      m_txfail = txfail;
      m_rx_bytes = rx_bytes;
    }
    if (now >= next_print) {
      const double dt = static_cast<double>(now - last_print) / hz;
      std::printf("t=%.0f rx_mpps=%.3f tx_mpps=%.3f txfail_mpps=%.3f%s\n",
                  static_cast<double>(now - t0) / hz, (rx - p_rx) / dt / 1e6,
                  (tx - p_tx) / dt / 1e6, (txfail - p_txfail) / dt / 1e6,
                  last_print < t_meas ? " warmup" : "");
      std::fflush(stdout);
      p_rx = rx;
      p_tx = tx;
      p_txfail = txfail;
      last_print = now;
      next_print += hz;
    }
    if (now >= t_end) break;
  }

  int status = 0;
  const double secs = measuring ? static_cast<double>(now - t_meas) / hz : 0;
  if (secs > 0) {
    const double mpps = (rx - m_rx) / secs / 1e6;
    std::printf("RESULT rx_mpps=%.3f tx_mpps=%.3f txfail_mpps=%.3f size=%u flows=%u "
                "secs=%.2f rx_gbps_l1=%.3f rx_other=%lu rx_port0=%lu learn_sent=%lu "
                "nomem=%lu%s\n",
                mpps, (tx - m_tx) / secs / 1e6, (txfail - m_txfail) / secs / 1e6, o.size,
                o.flows, secs,
                ((rx_bytes - m_rx_bytes) + (rx - m_rx) * (RTE_ETHER_CRC_LEN + 20.0)) * 8 /
                    secs / 1e9,
                static_cast<unsigned long>(rx_other), static_cast<unsigned long>(rx0),
                static_cast<unsigned long>(learn_sent), static_cast<unsigned long>(nomem),
                g_stop ? " interrupted" : "");
    if (rx == m_rx) {
      std::fprintf(stderr, "strait-gen: nothing arrived at the sink (port 1) while measuring\n");
      status = 4;
    }
  } else {
    std::printf("RESULT none (stopped during warm-up)\n");
    status = 3;
  }
  for (uint16_t p : {kTxPort, kRxPort}) {
    rte_eth_stats st{};
    if (rte_eth_stats_get(p, &st) == 0)
      std::printf("PORTSTATS port=%u ipackets=%lu opackets=%lu imissed=%lu ierrors=%lu "
                  "oerrors=%lu rx_nombuf=%lu\n",
                  p, static_cast<unsigned long>(st.ipackets),
                  static_cast<unsigned long>(st.opackets), static_cast<unsigned long>(st.imissed),
                  static_cast<unsigned long>(st.ierrors), static_cast<unsigned long>(st.oerrors),
                  static_cast<unsigned long>(st.rx_nombuf));
  }
  std::fflush(stdout);
  for (uint16_t p : {kTxPort, kRxPort}) {
    rte_eth_dev_stop(p);
    rte_eth_dev_close(p);
  }
  rte_eal_cleanup();
  return status;
}
