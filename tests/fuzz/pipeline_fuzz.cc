// The parser, the pipeline and trace on any frame, against one fixed
// snapshot (tests/sg_fixture.h: a flat network with secured and unsecured
// VM ports and an uplink). Checks that trace's explanation agrees with the
// verdict (TraceResult::consistent) and that the rules the worker defers
// decide as the whole pipeline does (pipeline.h).
//
// Input: one byte picks the ingress port (of 0-7: 1-5 exist), the rest is
// the frame.
#include <rte_eal.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/parse.h"
#include "dataplane/pipeline.h"
#include "dataplane/trace.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/sg_fixture.h"

namespace {

const strait::dp::Snapshot* snapshot;

bool same_action(const strait::dp::Action& a, const strait::dp::Action& b) {
  return a.kind == b.kind && a.reason == b.reason && a.flags == b.flags &&
         a.out_port == b.out_port && a.egress_vid == b.egress_vid && a.lvlan == b.lvlan &&
         a.mtu == b.mtu && a.learn_slot == b.learn_slot;
}

}  // namespace

// The classifiers are rte_acl tables: an EAL without hugepages, as the tests.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::string prefix = "--file-prefix=strait-fuzz-" + std::to_string(getpid());
  std::vector<std::string> args = {"strait-fuzz",
                                   "--no-huge",
                                   "-m",
                                   "256",
                                   "--no-pci",
                                   "--no-shconf",
                                   "--log-level=lib.eal:error",
                                   prefix};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  if (rte_eal_init(static_cast<int>(argv.size()), argv.data()) < 0) std::abort();
  snapshot = strait::test::sg_snapshot().release();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace strait::dp;
  if (size < 1 || size > 16384) return 0;
  const uint16_t in_port = data[0] & 7;
  const std::vector<uint8_t> frame(data + 1, data + size);
  const auto len = static_cast<uint32_t>(frame.size());
  TraceResult t = trace_frame(*snapshot, frame.data(), len, in_port);
  STRAIT_FUZZ_CHECK(t.consistent);
  FlowKey key;
  PacketMeta meta;
  if (parse_frame(frame.data(), len, in_port, ParseOptions{}, &key, &meta) != DropReason::kNone)
    return 0;
  const Action whole = pipeline_decide(*snapshot, key);
  const Action deferred = pipeline_decide_deferred(*snapshot, key);
  STRAIT_FUZZ_CHECK(same_action(resolve_rules(*snapshot, key, deferred), whole));
  return 0;
}
