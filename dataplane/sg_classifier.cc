#include "dataplane/sg_classifier.h"

#include <rte_acl.h>
#include <rte_byteorder.h>
#include <rte_errno.h>
#include <rte_memory.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

namespace strait::dp {
namespace {

constexpr int kDirs = 2;
constexpr int kFamilies = 2;

int idx(SgDirection d) { return static_cast<int>(d); }
int idx(SgFamily f) { return static_cast<int>(f); }
const char* name(SgDirection d) { return d == SgDirection::kIngress ? "ingress" : "egress"; }
const char* name(SgFamily f) { return f == SgFamily::kIpv4 ? "IPv4" : "IPv6"; }

// ---- addresses as two big-endian 64-bit halves ------------------------------

struct Addr128 {
  uint64_t hi, lo;
};

uint64_t load_be64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return rte_be_to_cpu_64(v);
}

uint32_t load_be32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return rte_be_to_cpu_32(v);
}

// IPv4 reads only the first 4 bytes, whatever follows them.
Addr128 load_addr(SgFamily f, const uint8_t* a) {
  if (f == SgFamily::kIpv4) return {uint64_t{load_be32(a)} << 32, 0};
  return {load_be64(a), load_be64(a + 8)};
}

Addr128 prefix_mask(uint8_t len) {
  uint64_t hi = len == 0 ? 0 : len >= 64 ? ~0ull : ~0ull << (64 - len);
  uint64_t lo = len <= 64 ? 0 : len >= 128 ? ~0ull : ~0ull << (128 - len);
  return {hi, lo};
}

uint64_t mix(uint64_t hi, uint64_t lo) {
  uint64_t h = hi * 0x9e3779b97f4a7c15ull ^ (lo + 0x632be59bd9b4e019ull) * 0xc2b2ae3d27d4eb4full;
  h ^= h >> 32;
  h *= 0xd6e8feb86659fd93ull;
  return h ^ (h >> 32);
}

// ---- rte_acl field layout ------------------------------------------------------
// Fields, in field_index order: proto, remote address words (1 for IPv4, 4 for
// IPv6), tp_src, tp_dst (one 4-byte input group), remote-group words (0..2:
// only as many as the family's rules need, so a policy without remote groups
// pays nothing for them).

struct Layout {
  uint32_t remote_words;
  uint32_t group_words;
  uint32_t n_fields() const { return 1 + remote_words + 2 + group_words; }
};

Layout layout_of(SgFamily f, uint32_t n_bits) {
  return {f == SgFamily::kIpv4 ? 1u : 4u, (n_bits + 31) / 32};
}

rte_acl_config acl_config(const Layout& l) {
  rte_acl_config cfg{};
  cfg.num_categories = 1;
  uint8_t field = 0, input = 0;
  auto add = [&](uint8_t type, uint8_t size, uint32_t offset, bool new_input) {
    if (new_input && field > 0) input++;
    cfg.defs[field] = {type, size, field, input, offset};
    field++;
  };
  add(RTE_ACL_FIELD_TYPE_BITMASK, 1, offsetof(SgKey, proto), true);
  for (uint32_t w = 0; w < l.remote_words; w++)
    add(RTE_ACL_FIELD_TYPE_MASK, 4, offsetof(SgKey, remote) + 4 * w, true);
  add(RTE_ACL_FIELD_TYPE_RANGE, 2, offsetof(SgKey, tp_src_be), true);
  add(RTE_ACL_FIELD_TYPE_RANGE, 2, offsetof(SgKey, tp_dst_be), false);
  for (uint32_t w = 0; w < l.group_words; w++)
    add(RTE_ACL_FIELD_TYPE_BITMASK, 4, offsetof(SgKey, groups_be) + 4 * w, true);
  cfg.num_fields = field;
  cfg.max_size = 0;  // no limit: rte_acl splits into more tries when one grows too big
  return cfg;
}

// Writes rule r (index i in build order, key bit `bit` or -1) as an rte_acl rule.
// rte_acl takes rule values in host order.
void write_rule(const SgRule& r, uint32_t i, int bit, const Layout& l, rte_acl_rule* out) {
  out->data.category_mask = 1;
  out->data.priority = static_cast<int32_t>(RTE_ACL_MAX_PRIORITY - i);  // first rule wins
  out->data.userdata = i + 1;                                           // 0 = no match
  rte_acl_field* f = out->field;
  std::memset(f, 0, sizeof(rte_acl_field) * l.n_fields());
  if (!r.any_proto) {
    f[0].value.u8 = r.proto;
    f[0].mask_range.u8 = 0xff;
  }
  const bool by_prefix = r.remote_set == kSgNoSet;
  for (uint32_t w = 0; w < l.remote_words; w++) {
    int len = by_prefix ? std::clamp(int(r.remote.len) - 32 * int(w), 0, 32) : 0;
    uint32_t mask = len == 0 ? 0 : ~0u << (32 - len);
    f[1 + w].value.u32 = load_be32(r.remote.addr.data() + 4 * w) & mask;
    f[1 + w].mask_range.u32 = static_cast<uint32_t>(len);
  }
  rte_acl_field* ports = f + 1 + l.remote_words;
  ports[0].value.u16 = r.tp_src_lo;
  ports[0].mask_range.u16 = r.tp_src_hi;
  ports[1].value.u16 = r.tp_dst_lo;
  ports[1].mask_range.u16 = r.tp_dst_hi;
  if (bit >= 0) {
    rte_acl_field& g = ports[2 + bit / 32];
    g.value.u32 = g.mask_range.u32 = 1u << (bit % 32);
  }
}

std::string check_rule(const SgRule& r, size_t i, size_t n_sets) {
  std::string at = "rule " + std::to_string(i) + ": ";
  if (r.tp_src_lo > r.tp_src_hi)
    return at + "empty tp_src range " + std::to_string(r.tp_src_lo) + ".." +
           std::to_string(r.tp_src_hi);
  if (r.tp_dst_lo > r.tp_dst_hi)
    return at + "empty tp_dst range " + std::to_string(r.tp_dst_lo) + ".." +
           std::to_string(r.tp_dst_hi);
  if (r.remote_set != kSgNoSet) {
    if (r.remote_set >= n_sets)
      return at + "remote_set " + std::to_string(r.remote_set) + " but there are " +
             std::to_string(n_sets) + " address sets";
    return "";
  }
  if (r.remote.len > 0 && r.remote.family != r.family)
    return at + name(r.remote.family) + " remote prefix in an " + name(r.family) + " rule";
  if (r.remote.len > sg_max_len(r.family))
    return at + "remote prefix length " + std::to_string(r.remote.len) + " is too long for " +
           name(r.family);
  return "";
}

// rte_acl_create returns the existing context when the name is taken: every
// context gets a name no other (live or past) build used.
std::string unique_ctx_name(SgDirection d, SgFamily f) {
  static std::atomic<uint64_t> seq{0};
  return "sg" + std::to_string(seq.fetch_add(1, std::memory_order_relaxed)) + "_" +
         (d == SgDirection::kIngress ? "in" : "eg") + (f == SgFamily::kIpv4 ? "4" : "6");
}

}  // namespace

// ---- SgAddressIndex ---------------------------------------------------------------

SgAddressIndex::SgAddressIndex(SgFamily family, std::span<const Member> members) : family_(family) {
  // (len, masked address) -> bits, duplicates merged.
  std::map<std::tuple<uint8_t, uint64_t, uint64_t>, uint64_t> merged;
  std::set<uint8_t> lengths;
  for (const Member& m : members) {
    if (m.prefix.family != family || m.bits == 0) continue;
    assert(m.prefix.len <= sg_max_len(family) && "validated by the caller");
    Addr128 a = load_addr(family, m.prefix.addr.data());
    Addr128 mask = prefix_mask(m.prefix.len);
    merged[{m.prefix.len, a.hi & mask.hi, a.lo & mask.lo}] |= m.bits;
    lengths.insert(m.prefix.len);
  }
  // The longest match must answer alone: fold into every prefix the bits of
  // the shorter members that cover it. Members x distinct lengths, not members^2.
  auto folded = merged;
  for (auto& [key, bits] : folded) {
    auto [len, hi, lo] = key;
    for (uint8_t shorter : lengths) {
      if (shorter >= len) break;
      Addr128 mask = prefix_mask(shorter);
      auto it = merged.find({shorter, hi & mask.hi, lo & mask.lo});
      if (it != merged.end()) bits |= it->second;
    }
  }
  for (auto l = lengths.rbegin(); l != lengths.rend(); ++l) {
    Stage s;
    s.len = *l;
    Addr128 mask = prefix_mask(*l);
    s.mask_hi = mask.hi;
    s.mask_lo = mask.lo;
    auto first = folded.lower_bound({*l, 0, 0});
    auto last = folded.upper_bound({*l, ~0ull, ~0ull});
    size_t n = std::distance(first, last), cap = 2;
    while (cap < 2 * n) cap *= 2;
    s.slots.resize(cap);
    s.slot_mask = cap - 1;
    for (auto it = first; it != last; ++it) {
      auto [len, hi, lo] = it->first;
      uint64_t i = mix(hi, lo) & s.slot_mask;
      while (s.slots[i].bits != 0) i = (i + 1) & s.slot_mask;
      s.slots[i] = {hi, lo, it->second};
    }
    size_ += n;
    stages_.push_back(std::move(s));
  }
}

uint64_t SgAddressIndex::lookup(const uint8_t* addr) const noexcept {
  Addr128 a = load_addr(family_, addr);
  for (const Stage& s : stages_) {
    uint64_t hi = a.hi & s.mask_hi, lo = a.lo & s.mask_lo;
    for (uint64_t i = mix(hi, lo) & s.slot_mask;; i = (i + 1) & s.slot_mask) {
      const Slot& e = s.slots[i];
      if (e.bits == 0) break;  // load <= 1/2: an empty slot always ends the probe
      if (e.hi == hi && e.lo == lo) return e.bits;
    }
  }
  return 0;
}

// ---- SgClassifier -----------------------------------------------------------------

struct SgClassifier::Tries {
  rte_acl_ctx* ctx[kDirs][kFamilies] = {};
  std::vector<int> set_bit[kFamilies];  // [family][set] -> key bit, -1 = not named
  size_t n_sets = 0;
  size_t n_rules = 0;

  Tries() = default;
  Tries(const Tries&) = delete;
  Tries& operator=(const Tries&) = delete;
  ~Tries() {
    for (auto& per_dir : ctx)
      for (rte_acl_ctx* c : per_dir) rte_acl_free(c);
  }
};

namespace {

// Creates and builds the context of one direction x family from the rules
// listed in `which` (indexes into rules). Empty `which`: no context.
std::string build_ctx(SgDirection d, SgFamily f, std::span<const SgRule> rules,
                      const std::vector<uint32_t>& which, const std::vector<int>& set_bit,
                      const Layout& l, rte_acl_ctx** out) {
  if (which.empty()) return "";
  const std::string ctx_name = unique_ctx_name(d, f);
  const size_t stride = RTE_ACL_RULE_SZ(l.n_fields());
  rte_acl_param param{};
  param.name = ctx_name.c_str();
  param.socket_id = SOCKET_ID_ANY;
  param.rule_size = static_cast<uint32_t>(stride);
  param.max_rule_num = static_cast<uint32_t>(which.size());
  rte_acl_ctx* ctx = rte_acl_create(&param);
  std::string where =
      std::string(name(d)) + " " + name(f) + " (" + std::to_string(which.size()) + " rules): ";
  if (!ctx) return where + "rte_acl_create: " + rte_strerror(rte_errno);
  *out = ctx;  // freed by Tries on every path

  std::vector<uint64_t> buf((stride * which.size() + 7) / 8);  // 8-aligned rule array
  auto* base = reinterpret_cast<uint8_t*>(buf.data());
  for (size_t k = 0; k < which.size(); k++) {
    const SgRule& r = rules[which[k]];
    int bit = r.remote_set == kSgNoSet ? -1 : set_bit[r.remote_set];
    write_rule(r, which[k], bit, l, reinterpret_cast<rte_acl_rule*>(base + k * stride));
  }
  int rc = rte_acl_add_rules(ctx, reinterpret_cast<const rte_acl_rule*>(base),
                             static_cast<uint32_t>(which.size()));
  if (rc != 0) return where + "rte_acl_add_rules: " + rte_strerror(-rc);
  rte_acl_config cfg = acl_config(l);
  rc = rte_acl_build(ctx, &cfg);
  if (rc != 0) return where + "rte_acl_build: " + rte_strerror(-rc);
  return "";
}

}  // namespace

SgBuildResult SgClassifier::build(std::span<const SgRule> rules,
                                  std::span<const SgAddressSet> sets) {
  auto tries = std::make_shared<Tries>();
  tries->n_sets = sets.size();
  tries->n_rules = rules.size();
  std::vector<uint32_t> which[kDirs][kFamilies];
  for (auto& bits : tries->set_bit) bits.assign(sets.size(), -1);
  for (size_t i = 0; i < rules.size(); i++) {
    const SgRule& r = rules[i];
    if (std::string e = check_rule(r, i, sets.size()); !e.empty()) return {nullptr, e};
    which[idx(r.direction)][idx(r.family)].push_back(static_cast<uint32_t>(i));
    if (r.remote_set != kSgNoSet) tries->set_bit[idx(r.family)][r.remote_set] = 0;  // named
  }
  // Key bits in set order, so the layout does not depend on the rule order.
  int n_bits[kFamilies] = {0, 0};
  for (int f = 0; f < kFamilies; f++) {
    for (int& b : tries->set_bit[f])
      if (b >= 0) b = n_bits[f]++;
    if (n_bits[f] > int(kMaxRemoteSets))
      return {nullptr, std::string(name(SgFamily(f))) + " rules name " + std::to_string(n_bits[f]) +
                           " remote groups; a classifier holds at most " +
                           std::to_string(kMaxRemoteSets) + " per address family"};
  }
  for (int d = 0; d < kDirs; d++) {
    for (int f = 0; f < kFamilies; f++) {
      Layout l = layout_of(SgFamily(f), n_bits[f]);
      std::string e = build_ctx(SgDirection(d), SgFamily(f), rules, which[d][f], tries->set_bit[f],
                                l, &tries->ctx[d][f]);
      if (!e.empty()) return {nullptr, e};
    }
  }
  std::unique_ptr<SgClassifier> c(new SgClassifier());
  if (std::string e = index_sets(*tries, sets, c.get()); !e.empty()) return {nullptr, e};
  c->tries_ = std::move(tries);
  return {std::move(c), ""};
}

SgBuildResult SgClassifier::with_address_sets(std::span<const SgAddressSet> sets) const {
  if (sets.size() != tries_->n_sets)
    return {nullptr, "the rules name " + std::to_string(tries_->n_sets) + " address sets, got " +
                         std::to_string(sets.size())};
  std::unique_ptr<SgClassifier> c(new SgClassifier());
  if (std::string e = index_sets(*tries_, sets, c.get()); !e.empty()) return {nullptr, e};
  c->tries_ = tries_;
  return {std::move(c), ""};
}

// Fills c's contexts and address indexes from t and the members of `sets`.
std::string SgClassifier::index_sets(const Tries& t, std::span<const SgAddressSet> sets,
                                     SgClassifier* c) {
  for (int d = 0; d < kDirs; d++)
    for (int f = 0; f < kFamilies; f++) c->ctx_[d][f] = t.ctx[d][f];
  c->n_rules_ = t.n_rules;
  for (int f = 0; f < kFamilies; f++) {
    const SgFamily fam = SgFamily(f);
    std::vector<SgAddressIndex::Member> members;
    for (size_t s = 0; s < sets.size(); s++) {
      const int bit = t.set_bit[f][s];
      if (bit < 0) continue;
      c->uses_sets_[f] = true;
      for (const SgPrefix& p : sets[s]) {
        if (p.family != fam) continue;
        if (p.len > sg_max_len(fam))
          return "address set " + std::to_string(s) + ": member prefix length " +
                 std::to_string(p.len) + " is too long for " + name(fam);
        members.push_back({p, uint64_t{1} << bit});
      }
    }
    c->index_[f] = SgAddressIndex(fam, members);
  }
  return "";
}

SgClassifier::~SgClassifier() = default;

size_t SgClassifier::set_count() const { return tries_->n_sets; }

int SgClassifier::set_bit(SgFamily f, uint16_t s) const {
  return s < tries_->n_sets ? tries_->set_bit[idx(f)][s] : -1;
}

bool SgClassifier::fill_key(SgDirection dir, const FlowKey& pkt, SgKey* key,
                            SgFamily* family) const noexcept {
  SgFamily f;
  if (pkt.dl_type == kEthTypeIpv4)
    f = SgFamily::kIpv4;
  else if (pkt.dl_type == kEthTypeIpv6)
    f = SgFamily::kIpv6;
  else
    return false;
  const uint8_t* remote = dir == SgDirection::kIngress ? pkt.nw_src : pkt.nw_dst;
  key->proto = pkt.nw_proto;
  std::memset(key->pad, 0, sizeof key->pad);
  std::memcpy(key->remote, remote, sizeof key->remote);
  key->tp_src_be = rte_cpu_to_be_16(pkt.tp_src);
  key->tp_dst_be = rte_cpu_to_be_16(pkt.tp_dst);
  const uint64_t bits = uses_sets_[idx(f)] ? index_[idx(f)].lookup(remote) : 0;
  key->groups_be[0] = rte_cpu_to_be_32(static_cast<uint32_t>(bits));
  key->groups_be[1] = rte_cpu_to_be_32(static_cast<uint32_t>(bits >> 32));
  *family = f;
  return true;
}

uint32_t SgClassifier::match(SgDirection dir, const FlowKey& pkt) const noexcept {
  SgKey key;
  SgFamily f;
  if (!fill_key(dir, pkt, &key, &f)) return 0;
  const uint8_t* keys[1] = {reinterpret_cast<const uint8_t*>(&key)};
  uint32_t result = 0;
  classify(dir, f, keys, 1, &result);
  return result;
}

void SgClassifier::classify(SgDirection dir, SgFamily family, const uint8_t** keys, uint32_t n,
                            uint32_t* results) const noexcept {
  const rte_acl_ctx* ctx = ctx_[idx(dir)][idx(family)];
  if (n == 0) return;
  if (ctx == nullptr) {
    std::fill(results, results + n, 0u);
    return;
  }
  [[maybe_unused]] int rc = rte_acl_classify(ctx, keys, results, n, 1);
  assert(rc == 0 && "rte_acl_classify: one category, valid context");
}

}  // namespace strait::dp
