// The pipeline as the worker runs it: pipeline_impl.h without tracing.
#include "dataplane/pipeline.h"

#include "dataplane/pipeline_impl.h"
#include "dataplane/port_security.h"

namespace strait::dp {

Action resolve_rules(const Snapshot& snap, const FlowKey& key, Action a) noexcept {
  if (!(a.flags & kActRulesPending)) return a;
  // The sender's egress rules first, then the receiver's ingress rules: the
  // reason names the first side that refuses.
  if ((a.flags & kActEgressRules) && (a.flags & kActNewOk) &&
      !rules_allow(*snap.ports[key.in_port].security, SgDirection::kEgress, key)) {
    a.flags &= ~kActNewOk;
    a.reason = DropReason::kSgEgressDenied;
  }
  if ((a.flags & kActIngressRules) && (a.flags & kActNewOk) &&
      !rules_allow(*snap.ports[a.out_port].security, SgDirection::kIngress, key)) {
    a.flags &= ~kActNewOk;
    a.reason = DropReason::kSgIngressDenied;
  }
  a.flags &= ~kActRulesPending;
  return a;
}

Action pipeline_decide(const Snapshot& snap, const FlowKey& key, LearnedLookup* learned) noexcept {
  return resolve_rules(snap, key, pipeline_decide_deferred(snap, key, learned));
}

Action pipeline_decide_deferred(const Snapshot& snap, const FlowKey& key,
                                LearnedLookup* learned) noexcept {
  pipeline_impl::NoTrace none;
  return pipeline_impl::decide_deferred(snap, learned, key, none);
}

}  // namespace strait::dp
