#pragma once
// The one parser: turns a frame into a FlowKey. Nothing else in Strait does
// header arithmetic on received frames. Every read is length-checked.
#include <cstdint>

#include "dataplane/drop_reasons.h"
#include "dataplane/flow_key.h"

namespace strait::dp {

struct ParseOptions {
  // UDP destination port whose payload is decoded as VXLAN; 0 = never
  // decode (VM ports: a VM's own VXLAN is just UDP to the switch).
  uint16_t vxlan_port = 0;
};

// Parses `len` contiguous bytes at `data` (the first mbuf segment). Fills
// *key (zeroing what the frame lacks) and *meta. Returns kNone for a
// well-formed frame, else the reason to drop it; *key is then unspecified.
// Ethernet padding past the IP total length is ignored. When VXLAN is decoded
// the key describes the inner frame and tun_* the outer headers.
DropReason parse_frame(const uint8_t* data, uint32_t len, uint16_t in_port,
                       const ParseOptions& opts, FlowKey* key, PacketMeta* meta) noexcept;
// The same for a chained mbuf: `len` contiguous bytes of a `frame_len`-byte
// frame. Headers must lie in the first `len` bytes (else the frame is
// dropped as truncated); IP and TCP lengths are checked against frame_len.
DropReason parse_frame(const uint8_t* data, uint32_t len, uint32_t frame_len, uint16_t in_port,
                       const ParseOptions& opts, FlowKey* key, PacketMeta* meta) noexcept;

namespace detail {
// parse_frame without its fast path for untagged IPv4 TCP/UDP frames: every
// frame through the general parser. For the test that both decide alike.
DropReason parse_frame_general(const uint8_t* data, uint32_t len, uint32_t frame_len,
                               uint16_t in_port, const ParseOptions& opts, FlowKey* key,
                               PacketMeta* meta) noexcept;
}  // namespace detail

}  // namespace strait::dp
