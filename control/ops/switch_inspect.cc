// Looking inside the datapath without disturbing it: `trace` (a frame's way
// through the pipeline of the live snapshot, sent nowhere) and `cache.dump`
// (a worker's flow-cache entries, copied by the worker itself between bursts).
#include "control/api/api_reply.h"
#include "control/api/frame_spec.h"
#include "control/ops/cache_dumps.h"
#include "control/switch/switch.h"
#include "dataplane/trace.h"

namespace strait::ctl {
namespace {

using nlohmann::json;

}  // namespace

json Switch::dp_port_ref(uint16_t dp) const {
  const std::string name = ports_.name_of(dp);
  return {{"dp_port", dp}, {"name", name.empty() ? json(nullptr) : json(name)}};
}

// params: {"port": UUID | "physnet:NAME", "frame": hex string | {header fields}}.
void Switch::trace(const json& params, Done done) {
  if (!params.is_object() || !params.contains("port") || !params["port"].is_string())
    return done(error_reply(invalid("port: required string (a port UUID or physnet:NAME)")));
  if (!params.contains("frame"))
    return done(error_reply(invalid("frame: required (hex bytes or an object of header fields)")));
  const std::string name = params["port"].get<std::string>();
  uint16_t in = dp::kNoPort;
  std::optional<Mac> port_mac;
  if (name.rfind("physnet:", 0) == 0) {
    const Uplink* u = ports_.uplink(name.substr(8));
    if (!u) return done(error_reply(not_found("port: no physnet " + name.substr(8))));
    in = u->dp.dp;
  } else {
    const PortSpec* spec = model_.port(name);
    const PortRuntime* p = spec ? ports_.find(spec->id) : nullptr;
    if (!p) return done(error_reply(not_found("port: " + name + " is not bound")));
    in = p->dp.dp;
    port_mac = spec->mac;
  }
  auto frame = frame_from_params(params["frame"], port_mac);
  if (!frame) return done(error_reply(frame.error()));

  const dp::Snapshot& snap = *publisher_.current();
  const dp::TraceResult r =
      dp::trace_frame(snap, frame->data(), frame->size(), in, publisher_.learned());
  json steps = json::array();
  for (const dp::TraceStep& s : r.steps) {
    json j = {{"step", dp::trace_stage_name(s.stage)}, {"detail", s.detail}};
    if (s.drop != dp::DropReason::kNone) j["drop_reason"] = drop_reason_json(s.drop);
    if (s.port != dp::kNoPort) j["port"] = dp_port_ref(s.port);
    if (s.vid) j["vlan"] = s.vid;
    if (s.lvlan) j["local_vlan"] = s.lvlan;
    if (s.stage == dp::TraceStage::kFdb || s.stage == dp::TraceStage::kLearn) {
      j["known"] = s.hit;
      if (s.hit) j["learned"] = s.learned;
    }
    if (s.stage == dp::TraceStage::kParse && r.parse == dp::DropReason::kNone)
      j["key"] = flow_key_json(r.key);
    steps.push_back(std::move(j));
  }
  json actions = json::array();
  for (const dp::TraceOutput& o : r.outputs) {
    json a = dp_port_ref(o.port);
    a["vlan"] = vlan_json(o.vid);
    a["up"] = o.enabled;
    if (const dp::RemoteVtep* v = o.vtep == dp::kNoPort ? nullptr : snap.vtep_of(o.vtep))
      a["vtep"] = ip_to_string(ipv4_from_be32(v->ip));
    actions.push_back(std::move(a));
  }
  // A flood step lists where the copies go.
  if (r.action.kind == dp::ActionKind::kFlood)
    for (json& s : steps)
      if (s["step"] == "flood" && !s.contains("drop_reason")) s["targets"] = actions;
  const bool dropped = r.drop != dp::DropReason::kNone;
  done(ok_reply({{"generation", r.generation},
                 {"in_port", dp_port_ref(in)},
                 {"frame", {{"length", frame->size()}, {"hex", to_hex(*frame)}}},
                 {"steps", steps},
                 {"verdict", dropped ? "drop" : action_kind_name(r.action.kind)},
                 {"drop_reason", drop_reason_json(r.drop)},
                 {"drop_help", dropped ? json(std::string(dp::drop_reason_help(r.drop))) : json()},
                 {"actions", actions},
                 {"learn", r.learn},
                 {"tracked", r.tracked},
                 {"consistent", r.consistent}}));
}

// params: {"worker": N} (optional: every worker).
void Switch::cache_dump(const json& params, Done done) {
  std::vector<uint16_t> which;
  if (params.is_object() && params.contains("worker")) {
    const json& w = params["worker"];
    if (!w.is_number_integer() || w.get<int64_t>() < 0 ||
        w.get<int64_t>() >= static_cast<int64_t>(workers_.size()))
      return done(error_reply(invalid("worker: expected a worker id, 0.." +
                                      std::to_string(workers_.size() - 1))));
    which.push_back(w.get<uint16_t>());
  } else {
    for (const auto& w : workers_) which.push_back(w->id());
  }
  dumps_.request(std::move(which), std::move(done));
  poll_cache_dumps();  // asks the workers now (answers at once if they are stopped)
}

void Switch::poll_cache_dumps() {
  dumps_.poll(workers_, running_, [this](uint16_t dp) { return dp_port_ref(dp); });
}

}  // namespace strait::ctl
