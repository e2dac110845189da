// The frame parser on any bytes (dataplane/parse.h). Beyond what ASan and
// UBSan catch (a read past the segment, a misaligned store), it checks that
// the fast path for untagged IPv4 and the general parser decide alike, and
// that the offsets of a parsed frame lie inside the segment.
//
// Input: flags byte (bit 0: decode VXLAN on port 4789; bits 1-7: bytes the
// frame has beyond this segment), segment-length byte (255: all the rest),
// then the frame's bytes.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

#include "dataplane/parse.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using strait::dp::DropReason;
using strait::dp::FlowKey;
using strait::dp::PacketMeta;

bool same_meta(const PacketMeta& a, const PacketMeta& b) {
  return a.l2_len == b.l2_len && a.l3_ofs == b.l3_ofs && a.l4_ofs == b.l4_ofs &&
         a.inner_ofs == b.inner_ofs;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2 || size > 65535) return 0;
  const uint8_t flags = data[0];
  const uint8_t seg = data[1];
  data += 2, size -= 2;
  const auto len = static_cast<uint32_t>(seg == 255 ? size : std::min<size_t>(size, seg));
  const auto frame_len = static_cast<uint32_t>(size + (flags >> 1));
  strait::dp::ParseOptions opts;
  opts.vxlan_port = (flags & 1) ? 4789 : 0;
  // Exactly the segment's bytes on the heap, so a read past it is an ASan
  // report; the keys at 8 mod 16, as FlowKey's alignment allows.
  const std::vector<uint8_t> frame(data, data + len);
  alignas(16) unsigned char store[2][sizeof(FlowKey) + 8];
  FlowKey* fast = new (store[0] + 8) FlowKey;
  FlowKey* general = new (store[1] + 8) FlowKey;
  PacketMeta mf{}, mg{};
  const DropReason rf = strait::dp::parse_frame(frame.data(), len, frame_len, 7, opts, fast, &mf);
  const DropReason rg =
      strait::dp::detail::parse_frame_general(frame.data(), len, frame_len, 7, opts, general, &mg);
  STRAIT_FUZZ_CHECK(rf == rg);
  if (rf != DropReason::kNone) return 0;
  STRAIT_FUZZ_CHECK(std::memcmp(fast, general, sizeof(FlowKey)) == 0);
  STRAIT_FUZZ_CHECK(same_meta(mf, mg));
  STRAIT_FUZZ_CHECK(fast->in_port == 7);
  STRAIT_FUZZ_CHECK(mf.l2_len <= len && mf.l3_ofs <= len && mf.l4_ofs <= len &&
                    mf.inner_ofs <= len);
  if (len == frame_len) {
    // One segment: the same bytes through the one-segment entry point.
    FlowKey one;
    PacketMeta mo{};
    STRAIT_FUZZ_CHECK(strait::dp::parse_frame(frame.data(), len, 7, opts, &one, &mo) ==
                      DropReason::kNone);
    STRAIT_FUZZ_CHECK(std::memcmp(&one, fast, sizeof(FlowKey)) == 0 && same_meta(mo, mf));
  }
  return 0;
}
