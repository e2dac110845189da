#include "control/lifecycle/domain_xml.h"

#include <algorithm>
#include <cstdio>
#include <pugixml.hpp>
#include <utility>

namespace strait::ctl {
namespace {

// sizeof(sockaddr_un::sun_path), the terminating NUL included.
constexpr size_t kSunPathSize = 108;
// nova names a vhost-user interface ("vhu" + port_id)[:14]: the prefix then
// the port UUID's first 11 characters (nova/network/model.py, NIC_NAME_LEN).
constexpr std::string_view kNovaVhostPrefix = "vhu";
constexpr size_t kNovaIdChars = 11;
// Values shown in messages come from untrusted XML, and messages end up in
// JSON replies, which must be UTF-8: shown ASCII-escaped, cut short.
constexpr size_t kShownMax = 120;

std::string escaped(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < kShownMax; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > kShownMax) out += "...";
  return out;
}

std::string quoted(std::string_view s) { return "\"" + escaped(s) + "\""; }

bool is_xml_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Element text without the indentation a pretty-printer may put around it.
std::string trimmed_text(const pugi::xml_node& node) {
  std::string_view s = node.text().get();
  while (!s.empty() && is_xml_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_xml_space(s.back())) s.remove_suffix(1);
  return std::string(s);
}

std::string lowercase(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

// <source type='unix' path='...' mode='server|client'/>: fills path and mode.
Status parse_source(const pugi::xml_node& itf, VhostInterface& out) {
  const pugi::xml_node source = itf.child("source");
  if (!source) return invalid("no <source type='unix' path='...'/>");
  const pugi::xml_attribute type = source.attribute("type");
  if (type && std::string_view(type.value()) != "unix")
    return invalid("source type " + quoted(type.value()) + " is not unix");
  const pugi::xml_attribute path = source.attribute("path");
  if (!path || !*path.value()) return invalid("source has no path");
  const std::string_view p = path.value();
  if (p.front() != '/') return invalid("source path " + quoted(p) + " is not absolute");
  if (p.size() >= kSunPathSize) {
    return invalid("source path is " + std::to_string(p.size()) +
                   " bytes; a Unix socket path holds at most " + std::to_string(kSunPathSize - 1));
  }
  out.path = std::string(p);
  // libvirt names its own (QEMU's) side; ours is the other one.
  const pugi::xml_attribute mode = source.attribute("mode");
  if (!mode) return invalid("source has no mode (server or client)");
  const std::string_view m = mode.value();
  if (m == "server") {
    out.switch_mode = Attachment::Mode::kClient;
  } else if (m == "client") {
    out.switch_mode = Attachment::Mode::kServer;
  } else {
    return invalid("source mode " + quoted(m) + " is not one of server, client");
  }
  return ok();
}

Result<VhostInterface> parse_interface(const pugi::xml_node& itf) {
  VhostInterface out;
  if (Status s = parse_source(itf, out); !s) return s.error();
  if (const pugi::xml_node mac = itf.child("mac")) {
    const pugi::xml_attribute addr = mac.attribute("address");
    if (!addr) return invalid("<mac> has no address");
    const std::string_view a = addr.value();
    auto m = parse_mac(std::string(a));
    if (!m) return invalid("mac " + quoted(a) + " is not a MAC address (aa:bb:cc:dd:ee:ff)");
    out.mac = m.value();
  }
  out.target_dev = itf.child("target").attribute("dev").value();
  out.alias = itf.child("alias").attribute("name").value();
  return out;
}

// "interface net0 (path /run/x.sock, target vhu3a6f2c1b-7d, mac fa:16:3e:00:00:01)"
std::string describe(const VhostInterface& itf) {
  std::string keys;
  auto add = [&keys](const std::string& k) { keys += (keys.empty() ? "" : ", ") + k; };
  if (!itf.path.empty()) add("path " + escaped(itf.path));
  if (!itf.target_dev.empty()) add("target " + escaped(itf.target_dev));
  if (itf.mac) add("mac " + mac_to_string(*itf.mac));
  std::string s = "interface";
  if (!itf.alias.empty()) s += " " + escaped(itf.alias);
  return keys.empty() ? s : s + " (" + keys + ")";
}

// The port UUID prefix nova put in the target dev, "" when it is not nova's
// form.
std::string nova_port_prefix(const std::string& target_dev) {
  if (target_dev.size() < kNovaVhostPrefix.size() + kNovaIdChars ||
      target_dev.compare(0, kNovaVhostPrefix.size(), kNovaVhostPrefix) != 0) {
    return "";
  }
  return lowercase(target_dev.substr(kNovaVhostPrefix.size(), kNovaIdChars));
}

std::string join_ids(const std::vector<const PortSpec*>& ports) {
  std::string s;
  for (size_t i = 0; i < ports.size(); ++i) {
    s += (i == 0 ? "" : i + 1 == ports.size() ? " and " : ", ") + ports[i]->id;
  }
  return s;
}

// A match by path or target is trusted only if the MAC agrees.
Result<const PortSpec*> checked_mac(const VhostInterface& itf, const PortSpec& port,
                                    const char* by) {
  if (itf.mac && *itf.mac != port.mac) {
    return conflict(describe(itf) + ": its " + by + " names port " + port.id + ", whose MAC is " +
                    mac_to_string(port.mac) + ", not " + mac_to_string(*itf.mac));
  }
  return &port;
}

}  // namespace

Result<DomainXml> parse_domain_xml(std::string_view xml) {
  pugi::xml_document doc;
  const pugi::xml_parse_result parsed =
      doc.load_buffer(xml.data(), xml.size(), pugi::parse_default, pugi::encoding_utf8);
  if (!parsed) {
    return invalid("domain XML: " + std::string(parsed.description()) + " at offset " +
                   std::to_string(parsed.offset));
  }
  const pugi::xml_node root = doc.document_element();
  if (std::string_view(root.name()) != "domain")
    return invalid("domain XML: the root element is <" + escaped(root.name()) + ">, not <domain>");
  DomainXml out;
  out.name = trimmed_text(root.child("name"));
  if (out.name.empty()) return invalid("domain XML: <domain> has no <name>");
  out.uuid = lowercase(trimmed_text(root.child("uuid")));

  // Positions count every <interface>, whatever its type, as a reader of the
  // XML would.
  size_t position = 0;
  for (const pugi::xml_node itf : root.child("devices").children("interface")) {
    ++position;
    if (std::string_view(itf.attribute("type").value()) != "vhostuser") continue;
    auto parsed_itf = parse_interface(itf);
    if (parsed_itf) {
      out.interfaces.push_back(std::move(parsed_itf.value()));
    } else {
      out.skipped.push_back("interface " + std::to_string(position) + ": " +
                            parsed_itf.error().message);
    }
  }
  return out;
}

Result<const PortSpec*> match_port(const Model& model, const VhostInterface& itf) {
  if (!itf.path.empty()) {
    // Bindings keep one spelling of a path (normal_socket_path).
    const std::string path = itf.path[0] == '/' ? normal_socket_path(itf.path) : itf.path;
    for (const auto& [id, port] : model.ports()) {
      if (port.attach.kind == Attachment::Kind::kVhost && port.attach.path == path)
        return checked_mac(itf, port, "socket path");
    }
  }

  if (const std::string prefix = nova_port_prefix(itf.target_dev); !prefix.empty()) {
    std::vector<const PortSpec*> found;
    // Ports are keyed by id, so those sharing the prefix are adjacent.
    for (auto it = model.ports().lower_bound(prefix);
         it != model.ports().end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
      found.push_back(&it->second);
    }
    if (found.size() > 1) {
      return conflict(describe(itf) + ": its target names ports " + join_ids(found) +
                      " (their ids all start with " + escaped(prefix) + ")");
    }
    if (found.size() == 1) return checked_mac(itf, *found[0], "target dev");
  }

  if (itf.mac) {
    std::vector<const PortSpec*> found;
    for (const auto& [id, port] : model.ports()) {
      if (port.mac == *itf.mac) found.push_back(&port);
    }
    if (found.size() > 1) {
      return conflict(describe(itf) + ": ports " + join_ids(found) + " all have MAC " +
                      mac_to_string(*itf.mac) + " and nothing else tells them apart");
    }
    if (found.size() == 1) return found[0];
  }

  return not_found(describe(itf) + ": no bound port has its socket path, the port id its target " +
                   "names, or its MAC");
}

}  // namespace strait::ctl
