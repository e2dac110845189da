// port.capture: a vhost port's stand-in ethdev for dpdk-dumpcap
// (control/devices/capture_dev.h), made on request only: DPDK has RTE_MAX_ETHPORTS
// ethdev ids in all, physnet NICs and ethdev ports included.
#include <spdlog/spdlog.h>

#include "control/api/api_reply.h"
#include "control/api/json_fields.h"
#include "control/switch/switch.h"

namespace strait::ctl {

using nlohmann::json;

json Switch::capture_json(const PortRuntime& p) const {
  if (!p.capture) return nullptr;
  return {{"ethdev", p.capture->name}, {"ethdev_id", p.capture->port_id}};
}

void Switch::port_capture(const json& params, Done done) {
  auto id = id_param(params);
  if (!id) return done(error_reply(id.error()));
  if (Status st = check_known_keys(params, {"id", "enabled"}, ""); !st)
    return done(error_reply(st.error()));
  const json* en = find_field(params, "enabled");
  if (!en) return done(error_reply(invalid("enabled: required boolean")));
  auto enabled = get_bool(*en, "enabled");
  if (!enabled) return done(error_reply(enabled.error()));
  const PortSpec* spec = model_.port(*id);
  PortRuntime* found = spec ? ports_.find(spec->id) : nullptr;
  if (!found) return done(error_reply(not_found("port " + *id + " is not bound")));
  PortRuntime& p = *found;
  const std::string port_id = spec->id;
  if (p.dp.kind != dp::PortKind::kVhost) {
    const std::string how =
        p.has_device ? " (dpdk-dumpcap -i " + std::to_string(p.dev.port_id) + ")" : "";
    return done(error_reply(
        invalid("port " + port_id + " is not a vhost-user port: capture its ethdev directly" + how)));
  }
  if (*enabled == p.capture.has_value())
    return done(error_reply(conflict("port " + port_id + ": capture is already " +
                                     (*enabled ? "on, on " + p.capture->name : "off"))));
  if (*enabled) {
    auto dev = open_capture_dev(port_id, dp::kMaxVhostQueues, pool_);
    if (!dev) return done(error_reply(dev.error()));
    p.capture = *dev;
    p.dp.capture = dev->port_id;
    republish();
    // Answered once every worker runs the stand-in's callbacks: a dumpcap
    // started after this sees every frame.
    publisher_.after_grace([this, port_id, done = std::move(done)] {
      const PortRuntime* p = ports_.find(port_id);
      done(!p ? error_reply(not_found("port " + port_id + " was unbound"))
              : ok_reply({{"id", port_id}, {"capture", capture_json(*p)}}));
    });
    return;
  }
  const CaptureDev dev = *p.capture;
  p.capture.reset();
  p.dp.capture = dp::kNoCapture;
  republish();
  // Removed once no worker can run its callbacks; answered then, so the
  // name is free for the next request.
  publisher_.after_grace([dev, port_id, done = std::move(done)] {
    close_capture_dev(dev);
    done(ok_reply({{"id", port_id}, {"capture", nullptr}}));
  });
}

}  // namespace strait::ctl
