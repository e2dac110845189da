#pragma once
// Compiled security groups: one immutable classifier per SET of security
// groups, shared by every port with that set (issue 5). The control thread
// builds it off the datapath (rte_acl_build takes milliseconds), publishes it
// inside a Snapshot, and frees it after an RCU grace period; workers only call
// the const, noexcept lookups below, from any number of threads at once.
//
// Rules are allow rules (neutron has no deny): a packet passes when any rule
// of its direction and address family matches. A rule matches the IP
// protocol, the REMOTE address (the source for ingress, the destination for
// egress: directions are the VM's point of view), a range of FlowKey::tp_src
// and of FlowKey::tp_dst (TCP/UDP ports, or ICMP type and code, where the
// parser puts them), and either a remote prefix or a remote address set.
//
// Remote groups are address sets, never expanded into rules (F8). Per family,
// an address index maps the remote address to a bitmask of the sets that
// contain it (one hash probe per distinct member prefix length, usually one),
// the mask goes into the key, and a rule naming set s matches it with an
// rte_acl BITMASK field (value = mask = bit of s). Cost grows with members +
// rules, never with their product; a membership change re-indexes addresses
// only (with_address_sets) and keeps the compiled rte_acl tries.
#include <array>
#include <compare>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dataplane/flow_key.h"

struct rte_acl_ctx;

namespace strait::dp {

enum class SgDirection : uint8_t { kIngress = 0, kEgress = 1 };  // VM's point of view
enum class SgFamily : uint8_t { kIpv4 = 0, kIpv6 = 1 };

inline constexpr uint8_t sg_max_len(SgFamily f) { return f == SgFamily::kIpv4 ? 32 : 128; }

// A CIDR prefix. addr is in network order, IPv4 in the first 4 bytes; bits
// past len are ignored.
struct SgPrefix {
  SgFamily family = SgFamily::kIpv4;
  uint8_t len = 0;
  std::array<uint8_t, 16> addr{};
  auto operator<=>(const SgPrefix&) const = default;
};

inline constexpr uint16_t kSgNoSet = 0xffff;

// One normalised rule: the compiler's input (control/model/secgroup.h makes these
// from neutron rules).
struct SgRule {
  SgDirection direction = SgDirection::kIngress;
  SgFamily family = SgFamily::kIpv4;
  bool any_proto = true;
  uint8_t proto = 0;                           // when !any_proto
  uint16_t tp_src_lo = 0, tp_src_hi = 0xffff;  // FlowKey::tp_src (ICMP type)
  uint16_t tp_dst_lo = 0, tp_dst_hi = 0xffff;  // FlowKey::tp_dst (port, ICMP code)
  SgPrefix remote;                 // remote address within it (len 0: any); unused with a set
  uint16_t remote_set = kSgNoSet;  // else: remote address in address set #remote_set
  auto operator<=>(const SgRule&) const = default;
};

// A remote group's member addresses (fixed IPs as host prefixes, allowed
// address pairs as given), both families mixed: each family's rules see the
// members of their family.
using SgAddressSet = std::vector<SgPrefix>;

// The rte_acl search key of one packet (fill_key). Multi-byte fields are in
// network order, as rte_acl reads them. rte_acl wants a 1-byte first field
// and the rest in 4-byte groups: hence the padding.
struct alignas(8) SgKey {
  uint8_t proto;
  uint8_t pad[3];
  uint8_t remote[16];  // IPv4: first 4 bytes
  uint16_t tp_src_be;
  uint16_t tp_dst_be;
  uint32_t groups_be[2];  // bit s%32 of word s/32: remote address in set with bit s
};
static_assert(sizeof(SgKey) == 32, "SgKey layout is the rte_acl field layout");

// Remote address -> bitmask of the address sets containing it, for one family.
// Immutable after build; lookups are lock-free reads.
class SgAddressIndex {
 public:
  struct Member {
    SgPrefix prefix;
    uint64_t bits;  // the bits of every set the prefix belongs to
  };
  SgAddressIndex() = default;
  // Members of other families are ignored; lengths must be valid.
  SgAddressIndex(SgFamily family, std::span<const Member> members);

  // OR of the bits of every member prefix containing addr (16 bytes, IPv4 in
  // the first 4).
  uint64_t lookup(const uint8_t* addr) const noexcept;
  bool empty() const { return stages_.empty(); }
  size_t size() const { return size_; }  // distinct member prefixes

 private:
  struct Slot {
    uint64_t hi = 0, lo = 0;  // masked address, big-endian halves
    uint64_t bits = 0;        // 0 = empty slot
  };
  struct Stage {  // all members of one prefix length: open addressing, load <= 1/2
    uint8_t len = 0;
    uint64_t mask_hi = 0, mask_lo = 0;
    uint64_t slot_mask = 0;
    std::vector<Slot> slots;
  };
  std::vector<Stage> stages_;  // longest prefix first; each slot's bits include
                               // those of every shorter member covering it
  SgFamily family_ = SgFamily::kIpv4;
  size_t size_ = 0;
};

class SgClassifier;

// build() / with_address_sets(): a classifier, or why there is none.
struct SgBuildResult {
  std::unique_ptr<SgClassifier> classifier;  // null on error
  std::string error;                         // names the rule, set or rte_acl call
};

class SgClassifier {
 public:
  // Distinct address sets the rules of one family may name (two 32-bit
  // BITMASK words in the key); more is a build error.
  static constexpr uint32_t kMaxRemoteSets = 64;

  // Compiles `rules` (whose remote_set index `sets`) into rte_acl tries, one
  // per direction x family. Control thread; needs the EAL (rte_acl memory).
  // No rules for a direction x family: nothing of it is allowed.
  static SgBuildResult build(std::span<const SgRule> rules, std::span<const SgAddressSet> sets);

  // The same rules with new members (sets.size() unchanged): re-indexes the
  // addresses, shares this classifier's tries (F8: no rule recompilation).
  SgBuildResult with_address_sets(std::span<const SgAddressSet> sets) const;

  ~SgClassifier();
  SgClassifier(const SgClassifier&) = delete;
  SgClassifier& operator=(const SgClassifier&) = delete;

  // The key of an IP packet in direction dir; false (key untouched) when the
  // packet is neither IPv4 nor IPv6.
  bool fill_key(SgDirection dir, const FlowKey& pkt, SgKey* key, SgFamily* family) const noexcept;

  // One packet: the index + 1 of the first rule (in build order) that allows
  // it, 0 when none does or it is not IP.
  uint32_t match(SgDirection dir, const FlowKey& pkt) const noexcept;
  bool allows(SgDirection dir, const FlowKey& pkt) const noexcept { return match(dir, pkt) != 0; }

  // A burst of keys of one direction and family (fill_key): results[i] as
  // match() returns it. The worker's path: one rte_acl_classify per burst.
  void classify(SgDirection dir, SgFamily family, const uint8_t** keys, uint32_t n,
                uint32_t* results) const noexcept;

  size_t rule_count() const { return n_rules_; }
  size_t set_count() const;
  // Key bit of address set s for rules of family f, -1 when no rule of f names s.
  int set_bit(SgFamily f, uint16_t s) const;
  // Same compiled tries (with_address_sets() of one another).
  bool shares_tries_with(const SgClassifier& o) const { return tries_ == o.tries_; }

 private:
  struct Tries;  // rte_acl contexts and the set -> bit layout, shared
  SgClassifier() = default;
  static std::string index_sets(const Tries& t, std::span<const SgAddressSet> sets,
                                SgClassifier* c);

  std::shared_ptr<const Tries> tries_;
  const rte_acl_ctx* ctx_[2][2] = {};  // [direction][family], null = no rules: deny
  bool uses_sets_[2] = {};             // [family]: some rule names a set, look the address up
  SgAddressIndex index_[2];            // [family]
  size_t n_rules_ = 0;
};

}  // namespace strait::dp
