#pragma once
// libvirt domain XML, as far as the switch cares: the domain's identity and
// its vhost-user interfaces, and which bound port each interface is.
// Parsed with pugixml; anything malformed is an error, never a crash.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "control/model/model.h"
#include "dataplane/result.h"

namespace strait::ctl {

// One <interface type='vhostuser'>.
struct VhostInterface {
  std::string path;        // <source type='unix' path='...'/>
  // <source mode='...'>: libvirt's side. 'server' (QEMU listens) means our
  // side is the client, the mode nova uses.
  Attachment::Mode switch_mode = Attachment::Mode::kClient;
  std::string target_dev;  // <target dev='...'/>, "" when absent
  std::optional<Mac> mac;  // <mac address='...'/>
  std::string alias;       // <alias name='...'/> ("net0"), "" when absent: DEVICE_REMOVED names it
};

struct DomainXml {
  std::string name;  // <name>
  std::string uuid;  // <uuid>, lowercase
  std::vector<VhostInterface> interfaces;  // vhostuser ones only, in document order
  // Interfaces skipped as malformed (no source path, bad MAC...): one
  // message each, naming the interface's position; the rest still count.
  // Positions count every <interface> of <devices>, whatever its type, from 1.
  std::vector<std::string> skipped;
};

// invalid_argument when the text is not XML or not a <domain> with a name.
Result<DomainXml> parse_domain_xml(std::string_view xml);

// The bound port an interface is: the port whose vhost socket path is the
// interface's; else the port whose id starts with the 11 characters after
// "vhu" in the target dev (nova's naming); else the one port with the
// interface's MAC. A match by path or target whose MAC differs from the
// interface's is refused (conflict); two ports with the interface's MAC
// and nothing else to tell them apart is refused (conflict); no match is
// not_found. Errors name the domain's interface and why.
Result<const PortSpec*> match_port(const Model& model, const VhostInterface& itf);

}  // namespace strait::ctl
