#include "control/ops/cache_dumps.h"

#include <rte_cycles.h>

#include <string>

#include "control/api/api_reply.h"
#include "control/api/frame_spec.h"

namespace strait::ctl {

using nlohmann::json;

namespace {

constexpr double kDumpTimeoutS = 2.0;  // a running worker answers within one iteration

}  // namespace

json drop_reason_json(dp::DropReason r) {
  return r == dp::DropReason::kNone ? json(nullptr) : json(std::string(dp::drop_reason_name(r)));
}

const char* action_kind_name(dp::ActionKind k) {
  switch (k) {
    case dp::ActionKind::kDrop: return "drop";
    case dp::ActionKind::kOutput: return "output";
    case dp::ActionKind::kFlood: return "flood";
    case dp::ActionKind::kEncap: return "encap";
    case dp::ActionKind::kVtepArp: return "vtep_arp";
    case dp::ActionKind::kArpReply: return "arp_reply";
  }
  return "?";
}

json vlan_json(uint16_t vid) { return vid ? json(vid) : json(nullptr); }

void CacheDumps::request(std::vector<uint16_t> workers, Done done) {
  Pending d;
  d.workers = std::move(workers);
  d.state.assign(d.workers.size(), 0);
  d.out = json::array();
  for (size_t i = 0; i < d.workers.size(); i++) d.out.push_back(nullptr);
  d.deadline_tsc = rte_rdtsc() + static_cast<uint64_t>(kDumpTimeoutS * rte_get_tsc_hz());
  d.done = std::move(done);
  pending_.push_back(std::move(d));
}

void CacheDumps::poll(const std::vector<std::unique_ptr<dp::Worker>>& workers, bool running,
                      const PortRef& port_ref) {
  while (!pending_.empty()) {
    Pending& d = pending_.front();
    bool all = true;
    for (size_t i = 0; i < d.workers.size(); i++) {
      dp::Worker& w = *workers[d.workers[i]];
      dp::CacheDumpSlot& slot = w.cache_dump();
      if (d.state[i] == 0 && slot.request()) d.state[i] = 1;
      // Stopped workers serve nothing: their cache is the control thread's to read.
      if (d.state[i] == 1 && !running)
        while (!slot.ready())
          slot.serve(w.cache(), w.cache_generation());
      if (d.state[i] == 1 && slot.ready()) {
        json entries = json::array();
        for (uint32_t e = 0; e < slot.size(); e++) {
          const dp::CacheDumpEntry& c = slot.entries()[e];
          const dp::Action& a = c.action;
          json act = {{"kind", action_kind_name(a.kind)}};
          if (a.kind == dp::ActionKind::kDrop) act["drop_reason"] = drop_reason_json(a.reason);
          if (a.kind == dp::ActionKind::kOutput) {
            act["port"] = port_ref(a.out_port);
            act["vlan"] = vlan_json(a.egress_vid);
          }
          if (a.kind != dp::ActionKind::kDrop) act["local_vlan"] = a.lvlan;
          if (a.flags & dp::kActLearn) act["learn"] = true;
          entries.push_back({{"key", flow_key_json(c.key)},
                             {"scope", c.key_bytes == dp::kL2KeyBytes ? "l2" : "full"},
                             {"in_port", port_ref(c.key.in_port)},
                             {"action", act},
                             {"generation", c.generation}});
        }
        d.out[i] = {{"worker", w.id()}, {"generation", slot.generation()},
                    {"capacity", w.cache().capacity()}, {"live", slot.live()},
                    {"truncated", slot.live() > slot.size()}, {"entries", entries}};
        d.state[i] = 2;
      }
      all = all && d.state[i] == 2;
    }
    if (!all && rte_rdtsc() < d.deadline_tsc) return;
    Done done = std::move(d.done);
    json reply;
    if (all) {
      reply = ok_reply({{"workers", std::move(d.out)}});
    } else {
      std::string late;
      for (size_t i = 0; i < d.workers.size(); i++)
        if (d.state[i] != 2) late += (late.empty() ? "" : ", ") + std::to_string(d.workers[i]);
      reply = error_reply({"internal", "worker(s) " + late + " did not answer within " +
                                           std::to_string(static_cast<int>(kDumpTimeoutS)) + " s"});
    }
    pending_.pop_front();
    done(std::move(reply));
  }
}

}  // namespace strait::ctl
