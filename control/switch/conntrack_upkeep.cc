#include "control/switch/conntrack_upkeep.h"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace strait::ctl {
namespace {

// The addresses conntrack knows a port by: fixed IPs, host-address pairs,
// its IPv6 link-local address.
std::vector<std::array<uint8_t, 16>> ct_addresses(const PortSpec& p, const std::vector<IpAddr>* only) {
  std::vector<std::array<uint8_t, 16>> out;
  auto want = [&](const IpAddr& a) {
    return !only || std::find(only->begin(), only->end(), a) != only->end();
  };
  for (const IpAddr& a : p.fixed_ips)
    if (want(a)) out.push_back(a.bytes);
  for (const AddressPair& ap : p.allowed_address_pairs)
    if (ap.ip_address.len == (ap.ip_address.addr.family == 4 ? 32 : 128) && want(ap.ip_address.addr))
      out.push_back(ap.ip_address.addr.bytes);
  if (!only) out.push_back(ipv6_link_local(p.mac).bytes);
  return out;
}

}  // namespace

ConntrackUpkeep::ConntrackUpkeep(const dp::CtConfig& cfg, Publisher& publisher)
    : ct_(std::make_unique<dp::Conntrack>(cfg)), publisher_(publisher) {}

void ConntrackUpkeep::poll() {
  // Addresses whose flush passed its grace period this tick (a libvirt
  // listing can stop hundreds of ports at once): one table walk per network.
  for (auto& [zone, addrs] : flush_ready_) {
    const uint32_t n = ct_->flush_addresses(zone, addrs);
    if (n) spdlog::info("{} connection(s) of {} address(es) flushed in local VLAN {}", n, addrs.size(), zone);
  }
  flush_ready_.clear();
  const uint64_t now = dp::ct_now_ms();  // the workers' clock
  if (now - rate_ms_ >= 1000) {
    const dp::CtStats s = ct_->stats();
    const uint64_t opened = s.created + s.reopened;
    if (rate_ms_)
      new_per_s_ = double(opened - rate_opened_) * 1000.0 / double(now - rate_ms_);
    rate_ms_ = now;
    rate_opened_ = opened;
  }
  if (now - last_expire_ms_ < 100) return;
  last_expire_ms_ = now;
  // A slice of the table every 100 ms: all of it every ~5 s, never a long
  // pause of the control loop.
  ct_->expire(now, std::max<uint32_t>(1024, ct_->capacity() / 7 / 50));
  if (!retiring_ && ct_->retire_begin()) {
    retiring_ = true;
    publisher_.after_grace([this] {
      ct_->retire_end();
      retiring_ = false;
    });
  }
}

void ConntrackUpkeep::flush_port_after_grace(const PortSpec& p, uint16_t lvlan,
                                             std::vector<IpAddr> only) {
  if (lvlan == 0) return;
  auto addrs = ct_addresses(p, only.empty() ? nullptr : &only);
  // After the snapshot that stopped the port is live: no worker can open a
  // connection for it again behind the flush (done by poll).
  publisher_.after_grace([this, lvlan, addrs = std::move(addrs)] {
    auto& ready = flush_ready_[lvlan];
    ready.insert(ready.end(), addrs.begin(), addrs.end());
  });
}

nlohmann::json ConntrackUpkeep::json() const {
  const dp::CtStats s = ct_->stats();
  return {{"capacity", ct_->capacity()}, {"entries", s.entries},  {"created", s.created},
          {"reopened", s.reopened},      {"refused_full", s.refused_full},
          {"invalid", s.invalid},        {"expired", s.expired},  {"flushed", s.flushed},
          {"new_per_s", new_per_s_}};
}

void ConntrackUpkeep::flush_zone_after_grace(uint16_t lvlan) {
  publisher_.after_grace([this, lvlan] { ct_->flush_zone(lvlan); });
}

}  // namespace strait::ctl
