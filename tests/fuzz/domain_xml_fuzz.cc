// libvirt domain XML (control/lifecycle/domain_xml.h) from any text, and each
// vhost-user interface it finds matched against a model with a few bound
// ports: a result or an error, never a crash or an exception.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "control/lifecycle/domain_xml.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using namespace strait::ctl;

// Two vhost ports (one by socket, one by nova's tap name) and two with one
// MAC, which only a socket or a name tells apart.
const Model& model() {
  static const Model* m = [] {
    auto* model = new Model(std::map<std::string, std::string>{{"physnet1", "net_ring0"}});
    auto net = parse_network(
        {{"id", "net1"}, {"type", "vlan"}, {"physnet", "physnet1"}, {"segmentation_id", 100}});
    if (!net || !model->add_network(*net)) std::abort();
    const char* ports[][3] = {
        {"0a000000-0000-4000-8000-000000000001", "02:00:00:00:00:01", "/run/strait/vhu1.sock"},
        {"0b000000-0000-4000-8000-000000000002", "02:00:00:00:00:02", "/run/strait/vhu2.sock"},
        {"0c000000-0000-4000-8000-000000000003", "02:00:00:00:00:03", "/run/strait/vhu3.sock"},
    };
    for (auto& p : ports) {
      auto spec = parse_port({{"id", p[0]},
                              {"network", "net1"},
                              {"mac", p[1]},
                              {"attach", {{"type", "vhost"}, {"path", p[2]}, {"mode", "client"}}}});
      if (!spec || !model->add_port(*spec)) std::abort();
    }
    return model;
  }();
  return *m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65536) return 0;
  const std::string_view xml(reinterpret_cast<const char*>(data), size);
  auto dom = parse_domain_xml(xml);
  if (!dom) {
    strait::fuzz::check_error(dom.error());
    return 0;
  }
  STRAIT_FUZZ_CHECK(!dom->name.empty());
  for (const std::string& s : dom->skipped) STRAIT_FUZZ_CHECK(strait::fuzz::valid_utf8(s));
  for (const VhostInterface& itf : dom->interfaces) {
    STRAIT_FUZZ_CHECK(!itf.path.empty());
    auto port = match_port(model(), itf);
    if (!port) {
      strait::fuzz::check_error(port.error());
      continue;
    }
    STRAIT_FUZZ_CHECK(*port != nullptr && (*port)->attach.kind == Attachment::Kind::kVhost);
    STRAIT_FUZZ_CHECK(!itf.mac || *itf.mac == (*port)->mac);
  }
  return 0;
}
