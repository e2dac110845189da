#pragma once
// The slow path: decides what happens to a frame of a given key, from the
// snapshot and the learned MACs (neutron's br-int + br-phys semantics). Runs
// in the worker on a flow-cache miss; the result is cached per flow, so it
// must depend on nothing but the key's scope (PortEntry::key_bytes), the
// snapshot, and the learned FDB entries of the key's two MACs (the flow's
// stamp, learned_fdb.h, follows those).
#include "dataplane/action.h"
#include "dataplane/flow_key.h"
#include "dataplane/learned_fdb.h"
#include "dataplane/snapshot.h"

namespace strait::dp {

// Everything decided, the security-group rules of new connections included.
// `learned`: the learned FDB to consult where the snapshot's FDB has no
// entry (null: the snapshot's alone); its `used` says whether it was.
Action pipeline_decide(const Snapshot& snap, const FlowKey& key,
                       LearnedLookup* learned = nullptr) noexcept;

// The same decision with the rules left for later (kActRulesPending): what
// the worker caches. resolve_rules(snap, key, pipeline_decide_deferred(snap,
// key)) == pipeline_decide(snap, key).
Action pipeline_decide_deferred(const Snapshot& snap, const FlowKey& key,
                                LearnedLookup* learned = nullptr) noexcept;
// Applies the rules a deferred action left out: kActNewOk and reason as
// pipeline_decide sets them; kActRulesPending cleared.
Action resolve_rules(const Snapshot& snap, const FlowKey& key, Action a) noexcept;

}  // namespace strait::dp
