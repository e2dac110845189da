#include "control/switch/snapshot_builder.h"

#include <algorithm>
#include <set>

#include "dataplane/vxlan.h"

namespace strait::ctl {
namespace {

// Port entry e sends on device p (a subport: its parent's, not polled for it).
void add_device(dp::Snapshot& s, const DpPort& p, uint16_t n_workers, dp::PortEntry& e,
                bool poll = true) {
  e.present = true;
  e.enabled = p.live;
  e.kind = p.kind;
  e.ethdev = p.ethdev;
  e.vid = p.vid;
  e.capture = p.capture;
  for (uint16_t w = 0; w < n_workers; w++) e.txq[w] = tx_queue_for(w, n_workers, p.n_txq);
  // A port that is down is not polled: its device may be on its way out
  // (a guest stopped, an interface detached) once this snapshot is live.
  if (!p.live || !poll) return;
  for (uint16_t q = 0; q < p.rxq_worker.size(); q++)
    if (!(p.rxq_paused & (1u << q))) s.rx_by_worker[p.rxq_worker[q]].push_back({p.dp, q});
}

// A vxlan network: its VNI and the VTEPs that get its flooded frames. Its
// uplink is the VTEP's, not the network's: flood holds local ports only.
void add_vxlan_network(dp::Snapshot& s, const BuildInput& in, const NetworkSpec& spec,
                       uint16_t lvlan) {
  dp::Network& n = s.networks[lvlan];
  n.vni = spec.seg_id;
  s.vni_to_lvlan.emplace_back(spec.seg_id, lvlan);
  if (!in.vtep) return;
  const TunnelSpec* t = in.model->tunnel(spec.id);
  if (!t) return;
  for (const IpAddr& ip : t->flood)
    if (auto it = in.vtep->index.find(ipv4_be32(ip)); it != in.vtep->index.end())
      n.flood_vteps.push_back(it->second);
  if (!spec.arp_responder) return;
  for (const auto& [mac, ip] : t->ips) {
    dp::ArpEntry e{ipv4_be32(ip), {}};
    std::copy(mac.begin(), mac.end(), e.mac);
    n.arp.push_back(e);
  }
  std::sort(n.arp.begin(), n.arp.end(),
            [](const dp::ArpEntry& a, const dp::ArpEntry& b) { return a.ip < b.ip; });
}

// The remote MACs of vxlan networks with a port here, behind their VTEPs.
void add_remote_macs(const BuildInput& in, std::vector<dp::FdbEntry>& fdb) {
  for (const auto& [net, t] : in.model->tunnels()) {
    const uint16_t lvlan = in.model->local_vlan(net);
    if (lvlan == 0) continue;
    for (const auto& [mac, ip] : t.fdb)
      if (auto it = in.vtep->index.find(ipv4_be32(ip)); it != in.vtep->index.end())
        fdb.push_back({dp::Fdb::make_key(lvlan, mac.data()),
                       static_cast<uint16_t>(dp::kVtepPortBase + it->second), dp::kNoSlot});
  }
}

void add_vtep(dp::Snapshot& s, const BuildInput& in) {
  s.vtep = in.vtep->config;
  s.vteps = in.vtep->remotes;
  for (dp::RemoteVtep& r : s.vteps)
    if (r.resolved) dp::vxlan_outer_template(s.vtep, &r);
  auto up = in.uplinks.find(in.vtep->physnet);
  if (up == in.uplinks.end()) {  // no underlay NIC: nothing to tunnel through
    s.vtep.enabled = false;
    return;
  }
  s.vtep.enabled = true;
  s.vtep.uplink = up->second.dp;
  s.ports[up->second.dp].key_bytes = dp::kFullKeyBytes;
}

}  // namespace

std::vector<dp::AllowedSource> allowed_sources(const PortSpec& p) {
  std::vector<dp::AllowedSource> out;
  const uint64_t mac = dp::mac_to_u64(p.mac.data());
  for (const IpAddr& ip : p.fixed_ips) out.push_back({mac, to_dp(host_prefix(ip))});
  out.push_back({mac, to_dp(host_prefix(ipv6_link_local(p.mac)))});
  for (const AddressPair& ap : p.allowed_address_pairs) {
    const uint64_t pm = dp::mac_to_u64(ap.mac_address.data());
    out.push_back({pm, to_dp(ap.ip_address)});
    if (pm != mac) out.push_back({pm, to_dp(host_prefix(ipv6_link_local(ap.mac_address)))});
  }
  return out;
}

dp::PortQos compile_qos(const std::vector<QosRule>& rules, uint64_t tsc_hz) {
  dp::PortQos q;
  for (const QosRule& r : rules) {
    if (r.type == QosRule::Type::kDscpMarking) {
      q.dscp = r.dscp;
      continue;
    }
    if (tsc_hz == 0 || r.max == 0) continue;  // 0: no limit
    const bool bw = r.type == QosRule::Type::kBandwidthLimit;
    // Units per second: bytes (1 kbit/s = 125 B/s) or frames.
    const uint64_t per_s = uint64_t(r.max) * (bw ? 125 : 1000);
    dp::QosMeter& m = (bw ? q.bytes : q.packets)[unsigned(r.direction)];
    m.cost = std::max<uint64_t>(1, (tsc_hz << dp::kQosShift) / per_s);
    // `burst` (in the unit of max) worth of time at the rate; none given:
    // 80 % of the rate, what neutron's OVS agent takes.
    m.tau = r.burst ? tsc_hz * r.burst / r.max : tsc_hz * 4 / 5;
  }
  return q;
}

dp::TxQueue tx_queue_for(uint16_t worker, uint16_t n_workers, uint16_t n_txq) {
  const uint16_t q = worker % n_txq;
  // Workers q, q+n_txq, q+2*n_txq, ... share queue q.
  return {q, q + n_txq < n_workers};
}

std::unique_ptr<dp::Snapshot> build_snapshot(const BuildInput& in) {
  auto s = std::make_unique<dp::Snapshot>();
  s->n_workers = in.n_workers;
  s->rx_by_worker.resize(in.n_workers);
  const Model& model = *in.model;

  std::map<std::string, uint16_t> uplink_map;  // physnet -> Snapshot::uplinks index
  for (const auto& [physnet, up] : in.uplinks) {
    dp::PortEntry& e = s->ports[up.dp];
    add_device(*s, up, in.n_workers, e);
    e.role = dp::PortRole::kUplink;
    e.uplink_map = static_cast<uint16_t>(s->uplinks.size());
    uplink_map[physnet] = e.uplink_map;
    s->uplinks.emplace_back();
  }

  for (const auto& [id, spec] : model.networks()) {
    const uint16_t lvlan = model.local_vlan(id);
    if (lvlan == 0) continue;  // no port of it here
    dp::Network& n = s->networks[lvlan];
    n.present = true;
    n.type = spec.type;
    n.mtu = spec.mtu;
    if (spec.type == dp::NetType::kVxlan) {
      add_vxlan_network(*s, in, spec, lvlan);
      continue;
    }
    if (spec.type == dp::NetType::kVlan) n.seg_id = static_cast<uint16_t>(spec.seg_id);
    if (spec.type == dp::NetType::kLocal) continue;
    auto up = in.uplinks.find(spec.physnet);
    if (up == in.uplinks.end()) continue;  // physnet NIC absent: local ports only
    n.uplink = up->second.dp;
    dp::UplinkMap& map = s->uplinks[uplink_map[spec.physnet]];
    if (spec.type == dp::NetType::kVlan) {
      map.vid_to_lvlan[spec.seg_id] = lvlan;
    } else {
      map.flat_lvlan = lvlan;
    }
    if (up->second.live) n.flood.push_back({n.uplink, n.seg_id});
  }
  std::sort(s->vni_to_lvlan.begin(), s->vni_to_lvlan.end());
  if (in.vtep) add_vtep(*s, in);

  // Remote MACs behind VTEPs first: a bound port's static entry for the
  // same MAC wins (a later entry replaces). Learned MACs are not here
  // (build_learned_fdb): the pipeline consults them after these.
  std::vector<dp::FdbEntry> fdb;
  std::set<uint16_t> secured_vlans;  // networks with a port-security port
  std::map<uint16_t, dp::TrunkMap*> trunk_maps;  // by parent: Snapshot::trunks
  if (in.vtep) add_remote_macs(in, fdb);
  for (const auto& [id, p] : in.ports) {
    const PortSpec* spec = model.port(id);
    if (!spec) continue;
    const uint16_t lvlan = model.local_vlan(spec->network);
    dp::PortEntry& e = s->ports[p.dp];
    uint16_t vid = 0;  // on the wire: a subport's VLAN, else untagged
    if (spec->attach.kind == Attachment::Kind::kSubport) {
      auto parent = in.ports.find(spec->attach.parent);
      if (parent == in.ports.end()) continue;  // the model keeps a subport's parent bound
      vid = spec->attach.vid;
      add_device(*s, parent->second, in.n_workers, e, /*poll=*/false);
      e.parent = parent->second.dp;
      e.trunk_vid = vid;
      dp::TrunkMap*& map = trunk_maps[e.parent];
      if (!map) {
        s->trunks.push_back(std::make_unique<dp::TrunkMap>());
        map = s->trunks.back().get();
        map->fill(dp::kNoPort);
        s->ports[e.parent].trunk = map;
      }
      (*map)[vid] = p.dp;
    } else {
      add_device(*s, p, in.n_workers, e);
    }
    e.role = dp::PortRole::kAccess;
    e.lvlan = lvlan;
    std::copy(spec->mac.begin(), spec->mac.end(), e.mac);
    if (e.enabled) s->networks[lvlan].flood.push_back({p.dp, vid});
    fdb.push_back({dp::Fdb::make_key(lvlan, spec->mac.data()), p.dp, dp::kNoSlot});
    if (spec->port_security_enabled) {
      auto sec = std::make_unique<dp::PortSecurity>();
      if (auto c = in.classifiers.find(canonical_group_set(spec->security_groups));
          c != in.classifiers.end() && c->second) {
        sec->sg = c->second.get();
        if (std::find(s->classifiers.begin(), s->classifiers.end(), c->second) ==
            s->classifiers.end())
          s->classifiers.push_back(c->second);
      }
      sec->sources = allowed_sources(*spec);
      for (const dp::AllowedSource& a : sec->sources)
        if (std::find(sec->macs.begin(), sec->macs.end(), a.mac) == sec->macs.end())
          sec->macs.push_back(a.mac);
      e.security = sec.get();
      s->security.push_back(std::move(sec));
      secured_vlans.insert(lvlan);
    }
    if (!spec->qos.empty()) {
      s->qos.push_back(std::make_unique<dp::PortQos>(compile_qos(spec->qos, in.tsc_hz)));
      e.qos = s->qos.back().get();
    }
  }
  s->fdb = dp::Fdb(fdb);
  // The rules look at L3/L4: every port whose frames can reach or come from
  // a port with port security caches flows by the full key.
  if (!secured_vlans.empty()) {
    for (const auto& [id, p] : in.ports)
      if (s->ports[p.dp].present && secured_vlans.count(s->ports[p.dp].lvlan))
        s->ports[p.dp].key_bytes = dp::kFullKeyBytes;
    for (uint16_t v : secured_vlans)
      if (s->networks[v].uplink != dp::kNoPort) s->ports[s->networks[v].uplink].key_bytes = dp::kFullKeyBytes;
  }
  return s;
}

std::unique_ptr<dp::Fdb> build_learned_fdb(const std::vector<LearnedMac>& learned) {
  std::vector<dp::FdbEntry> fdb;
  fdb.reserve(learned.size());
  for (const LearnedMac& l : learned)
    fdb.push_back({dp::Fdb::make_key(l.lvlan, l.mac.data()), l.port, l.slot});
  return std::make_unique<dp::Fdb>(fdb);
}

}  // namespace strait::ctl
