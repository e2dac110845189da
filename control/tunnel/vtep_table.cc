#include "control/tunnel/vtep_table.h"

#include <arpa/inet.h>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "control/model/model.h"

namespace strait::ctl {
namespace {

std::string be32_to_string(uint32_t ip) { return ip_to_string(ipv4_from_be32(ip)); }

}  // namespace

VtepTable::VtepTable(std::optional<uint32_t> next_hop, std::optional<Mac> next_hop_mac)
    : next_hop_(next_hop), next_hop_mac_(next_hop_mac), used_(dp::kMaxVteps, false) {}

Status VtepTable::check_capacity(const std::set<uint32_t>& vteps) const {
  size_t fresh = 0;
  for (uint32_t ip : vteps) fresh += !vteps_.count(ip);
  if (vteps_.size() + fresh > dp::kMaxVteps)
    return exhausted("remote VTEPs: all " + std::to_string(dp::kMaxVteps) +
                     " VTEP indexes are in use (some free up shortly after VTEPs are removed)");
  return ok();
}

std::vector<std::pair<uint32_t, uint64_t>> VtepTable::sync(const std::set<uint32_t>& want) {
  std::vector<std::pair<uint32_t, uint64_t>> unwanted;
  for (auto& [ip, v] : vteps_) {
    if (want.count(ip)) {
      v.referenced = true;
      v.release_token = 0;
    } else if (v.referenced) {
      v.referenced = false;
      v.release_token = ++tokens_;
      unwanted.emplace_back(ip, v.release_token);
    }
  }
  for (uint32_t ip : want) {
    if (vteps_.count(ip)) continue;
    auto slot = std::find(used_.begin(), used_.end(), false);
    if (slot == used_.end()) {  // check_capacity keeps this from happening
      spdlog::error("remote VTEP {}: no free VTEP index", be32_to_string(ip));
      continue;
    }
    *slot = true;
    vteps_[ip].index = static_cast<uint16_t>(slot - used_.begin());
  }
  return unwanted;
}

void VtepTable::release(uint32_t ip, uint64_t token) {
  auto it = vteps_.find(ip);
  if (it == vteps_.end() || it->second.referenced || it->second.release_token != token) return;
  used_[it->second.index] = false;
  vteps_.erase(it);
  const uint32_t hop = arp_ip(ip);
  if (std::none_of(vteps_.begin(), vteps_.end(), [&](const auto& kv) { return arp_ip(kv.first) == hop; }))
    arp_.erase(hop);
}

bool VtepTable::on_arp(uint32_t ip, const Mac& mac) {
  if (next_hop_mac_) return false;  // static next hop: no ARP
  const bool wanted = std::any_of(vteps_.begin(), vteps_.end(), [&](const auto& kv) {
    return kv.second.referenced && arp_ip(kv.first) == ip;
  });
  if (!wanted) return false;
  auto [it, fresh] = arp_.try_emplace(ip, mac);
  if (!fresh && it->second == mac) return false;
  spdlog::info("VTEP next hop {} {} {}", be32_to_string(ip), fresh ? "is at" : "moved to",
               mac_to_string(mac));
  it->second = mac;
  return true;
}

std::vector<VtepTable::Remote> VtepTable::live() const {
  std::vector<Remote> out;
  for (const auto& [ip, v] : vteps_)
    if (v.referenced) out.push_back({ip, v.index});
  std::sort(out.begin(), out.end(),
            [](const Remote& a, const Remote& b) { return ntohl(a.ip) < ntohl(b.ip); });
  return out;
}

std::optional<uint32_t> VtepTable::ip_of(uint16_t index) const {
  for (const auto& [ip, v] : vteps_)
    if (v.index == index) return ip;
  return std::nullopt;
}

void VtepTable::fill(VtepInput& in) const {
  for (const auto& [ip, v] : vteps_) {
    if (!v.referenced) continue;  // no longer in the datapath; its index is not yet free
    if (in.remotes.size() <= v.index) in.remotes.resize(v.index + 1);
    dp::RemoteVtep& r = in.remotes[v.index];
    r.present = true;
    r.ip = ip;
    r.arp_ip = arp_ip(ip);
    if (next_hop_mac_) {
      r.resolved = true;
      std::copy(next_hop_mac_->begin(), next_hop_mac_->end(), r.next_hop_mac);
    } else if (auto a = arp_.find(r.arp_ip); a != arp_.end()) {
      r.resolved = true;
      std::copy(a->second.begin(), a->second.end(), r.next_hop_mac);
    }
    in.index.emplace(ip, v.index);
  }
}

}  // namespace strait::ctl
