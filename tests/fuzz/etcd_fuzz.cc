// etcd's documents (control/etcd/intake.h): what neutron's driver writes
// under PREFIX/nodes/HOST/ports/, PREFIX/global/secgroups/ and
// PREFIX/global/remote_group/, read as the intake reads them (parse_*_doc),
// then by the switch's own parsers, and applied to a Model (control/model/
// model.h) as the intake's requests apply them: a port's network first, a
// changed port bound again, a changed group through security_group.update,
// a member through security_group.remote_member. Checks, besides no crash:
//  - every refusal, of a document or of the change it asks for, has a known
//    code and a message that can be sent and logged;
//  - a refused change leaves the model as it was;
//  - an accepted port document keeps the key's id, and its vhostuser_mode
//    (QEMU's side) becomes the switch's opposite side;
//  - what the model holds comes back the same after a restart.
//
// Input: one document per '\n' (at most 64): `port ID JSON`, `group ID JSON`,
// `member GROUP_ID/PORT_ID JSON`, or `-port ID`, `-group ID`, `-member KEY`
// for a deleted key. STRAIT_FUZZ_VERBOSE=1 prints what became of each.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "control/api/json_fields.h"
#include "control/etcd/intake.h"
#include "control/model/model.h"
#include "control/model/secgroup.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/model_fuzz.h"
#include "tests/model_dump.h"

namespace {

using namespace strait;
using namespace strait::ctl;
using nlohmann::json;
using strait::fuzz::change;
using strait::fuzz::check_error;
using strait::fuzz::fresh_model;
using strait::fuzz::restarted;
using strait::test::dump;

Status put_port(Model& m, const std::string& id, const std::string& text) {
  auto doc = parse_port_doc(id, text);
  if (!doc) return doc.error();
  auto spec = parse_port(doc->port);
  if (!spec) return spec.error();
  auto net = parse_network(doc->network);
  if (!net) return net.error();
  STRAIT_FUZZ_CHECK(spec->id == canonical_uuid(id));
  STRAIT_FUZZ_CHECK(spec->network == net->id);
  const json attach = to_json(*spec)["attach"];
  const json raw = json::parse(text, nullptr, false);
  const bool qemu_client = raw.is_object() && raw.value("vhostuser_mode", json()) == "client";
  STRAIT_FUZZ_CHECK(attach["mode"] == (qemu_client ? "server" : "client"));
  const PortSpec* have = m.port(spec->id);
  if (have) {
    STRAIT_FUZZ_CHECK(have->id == spec->id);
    const std::string old = have->id;
    if (Status st = change(m, [&] { return m.remove_port(old); }); !st) return st;
  }
  if (!m.network(net->id))
    if (Status st = change(m, [&] { return m.add_network(*net); }); !st) return st;
  return change(m, [&] { return m.add_port(*spec); });
}

Status put_group(Model& m, const std::string& id, const std::string& text) {
  auto params = parse_group_doc(id, text);
  if (!params) return params.error();
  auto g = parse_security_group(*params);
  if (!g) return g.error();
  return m.security_group(g->id) ? change(m, [&] { return m.update_security_group(*g); })
                                 : change(m, [&] { return m.add_security_group(*g); });
}

Status put_member(Model& m, const std::string& key, const std::string* text) {
  auto params = parse_member_doc(key, text);
  if (!params) return params.error();
  auto rm = parse_remote_member(*params);
  if (!rm) return rm.error();
  return change(m, [&] { return m.set_remote_member(*rm); });
}

Status apply(Model& m, std::string_view line) {
  const size_t sp1 = line.find(' ');
  const std::string kind(line.substr(0, sp1));
  const std::string_view rest = sp1 == std::string_view::npos ? "" : line.substr(sp1 + 1);
  const size_t sp2 = rest.find(' ');
  const std::string key(rest.substr(0, sp2));
  const std::string text(sp2 == std::string_view::npos ? "" : rest.substr(sp2 + 1));
  if (kind == "port") return put_port(m, key, text);
  if (kind == "group") return put_group(m, key, text);
  if (kind == "member") return put_member(m, key, &text);
  if (kind == "-member") return put_member(m, key, nullptr);
  if (kind == "-port") {
    const PortSpec* p = m.port(key);
    if (!p) return ok();
    const std::string id = p->id;
    return change(m, [&] { return m.remove_port(id); });
  }
  if (kind == "-group")
    return m.security_group(key) ? change(m, [&] { return m.remove_security_group(key); }) : ok();
  return ok();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool verbose = std::getenv("STRAIT_FUZZ_VERBOSE") != nullptr;
  Model model = fresh_model();
  for (std::string_view line : strait::fuzz::input_lines(data, size)) {
    Status st = apply(model, line);
    if (!st) check_error(st.error());
    if (verbose)
      std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(std::min<size_t>(line.size(), 40)),
                   line.data(), st ? "ok" : (st.error().code + ": " + st.error().message).c_str());
  }
  STRAIT_FUZZ_CHECK(dump(restarted(model)) == dump(model));
  return 0;
}
