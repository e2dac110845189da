#pragma once
// The slow path: decides what happens to a frame of a given key, from the
// snapshot alone (neutron's br-int + br-phys semantics). Runs in the worker
// on a flow-cache miss; the result is cached per flow, so it must depend on
// nothing but the key's scope (PortEntry::key_bytes) and the snapshot.
#include "dataplane/action.h"
#include "dataplane/flow_key.h"
#include "dataplane/snapshot.h"

namespace strait::dp {

Action pipeline_decide(const Snapshot& snap, const FlowKey& key) noexcept;

}  // namespace strait::dp
