// libvirt domain XML: parsing what the switch needs from `virsh dumpxml`
// (live and inactive forms of a nova instance), skipping malformed
// interfaces one by one, refusing what is not a domain, never crashing on
// garbage; and matching an interface to its bound port by path, target dev
// or MAC, with every conflict refused.
#include "control/lifecycle/domain_xml.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/expect_refused.h"

#include <fstream>
#include <random>
#include <sstream>

namespace strait::ctl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

// The ports of the sample domains' two vhostuser interfaces (nova's ids).
constexpr const char* kPortA = "3a6f2c1b-7d4e-4f1a-9b2c-0d1e2f3a4b5c";
constexpr const char* kPortB = "c0ffee12-3456-4789-abcd-ef0123456789";
constexpr const char* kPathA = "/run/strait/vhu3a6f2c1b-7d";
constexpr const char* kPathB = "/run/strait/vhuc0ffee12-34";
constexpr const char* kMacA = "fa:16:3e:4c:2c:30";
constexpr const char* kMacB = "fa:16:3e:9a:71:e4";

std::string read_data(const std::string& name) {
  std::ifstream in(STRAIT_SOURCE_DIR "/tests/data/domains/" + name, std::ios::binary);
  EXPECT_TRUE(in) << name;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Mac mac(const std::string& s) {
  auto m = parse_mac(s);
  EXPECT_TRUE(m.ok()) << s;
  return m.ok() ? m.value() : Mac{};
}

// A domain whose <devices> holds `interfaces` (XML text) and nothing else.
std::string domain_with(const std::string& interfaces) {
  return "<domain type='kvm'><name>vm1</name><uuid>6f1c9f0e-2b4d-4c3a-9e8f-0a1b2c3d4e5f</uuid>"
         "<devices>" +
         interfaces + "</devices></domain>";
}

std::string vhostuser(const std::string& source, const std::string& extra = "") {
  return "<interface type='vhostuser'><mac address='fa:16:3e:00:00:01'/>" + source + extra +
         "<model type='virtio'/></interface>";
}

const std::string kGoodSource = "<source type='unix' path='/run/strait/vhu0.sock' mode='server'/>";

// Every byte a printable ASCII character: messages go into JSON replies.
bool printable_ascii(const std::string& s) {
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}


// ---- parse_domain_xml: real libvirt output ----------------------------------

TEST(ParseDomainXml, LiveNovaInstance) {
  auto r = parse_domain_xml(read_data("nova_vhostuser_live.xml"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->name, "instance-0000002a");
  EXPECT_EQ(r->uuid, "6f1c9f0e-2b4d-4c3a-9e8f-0a1b2c3d4e5f");
  EXPECT_THAT(r->skipped, IsEmpty());
  ASSERT_EQ(r->interfaces.size(), 2u);  // the bridge interface is not ours

  const VhostInterface& a = r->interfaces[0];
  EXPECT_EQ(a.path, kPathA);
  EXPECT_EQ(a.switch_mode, Attachment::Mode::kClient);  // mode='server': QEMU listens
  EXPECT_EQ(a.target_dev, "vhu3a6f2c1b-7d");
  ASSERT_TRUE(a.mac.has_value());
  EXPECT_EQ(*a.mac, mac(kMacA));
  EXPECT_EQ(a.alias, "net0");

  const VhostInterface& b = r->interfaces[1];
  EXPECT_EQ(b.path, kPathB);
  EXPECT_EQ(b.switch_mode, Attachment::Mode::kClient);
  EXPECT_EQ(b.target_dev, "vhuc0ffee12-34");
  ASSERT_TRUE(b.mac.has_value());
  EXPECT_EQ(*b.mac, mac(kMacB));
  EXPECT_EQ(b.alias, "net1");
}

TEST(ParseDomainXml, InactiveNovaInstanceHasNoAliasOrTarget) {
  auto r = parse_domain_xml(read_data("nova_vhostuser_inactive.xml"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->name, "instance-0000002a");
  EXPECT_THAT(r->skipped, IsEmpty());
  ASSERT_EQ(r->interfaces.size(), 2u);
  EXPECT_EQ(r->interfaces[0].path, kPathA);
  EXPECT_EQ(r->interfaces[0].target_dev, "");
  EXPECT_EQ(r->interfaces[0].alias, "");
  EXPECT_EQ(*r->interfaces[0].mac, mac(kMacA));
  EXPECT_EQ(r->interfaces[1].path, kPathB);
  EXPECT_EQ(r->interfaces[1].target_dev, "");
  EXPECT_EQ(r->interfaces[1].alias, "");
}

TEST(ParseDomainXml, UuidLowercasedAndTextTrimmed) {
  auto r = parse_domain_xml(
      "<?xml version='1.0'?>\n<domain>\n  <name>\n    vm-Upper\n  </name>\n"
      "  <uuid>6F1C9F0E-2B4D-4C3A-9E8F-0A1B2C3D4E5F</uuid>\n</domain>\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->name, "vm-Upper");
  EXPECT_EQ(r->uuid, "6f1c9f0e-2b4d-4c3a-9e8f-0a1b2c3d4e5f");
  EXPECT_THAT(r->interfaces, IsEmpty());
}

TEST(ParseDomainXml, ModeClientMeansWeListen) {
  auto r = parse_domain_xml(
      domain_with(vhostuser("<source type='unix' path='/run/v.sock' mode='client'/>")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->interfaces.size(), 1u);
  EXPECT_EQ(r->interfaces[0].switch_mode, Attachment::Mode::kServer);
}

TEST(ParseDomainXml, OptionalElementsAbsent) {
  auto r = parse_domain_xml(domain_with(
      "<interface type='vhostuser'><source type='unix' path='/run/v.sock' mode='server'/>"
      "</interface>"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->interfaces.size(), 1u);
  EXPECT_FALSE(r->interfaces[0].mac.has_value());
  EXPECT_EQ(r->interfaces[0].target_dev, "");
  EXPECT_EQ(r->interfaces[0].alias, "");
}

TEST(ParseDomainXml, OtherInterfaceTypesIgnored) {
  auto r = parse_domain_xml(domain_with(
      "<interface type='bridge'><source bridge='br0'/></interface>"
      "<interface type='network'><source network='default'/></interface>"
      "<interface type='ethernet'><target dev='tap0'/></interface>"
      "<interface><source type='unix' path='/run/untyped.sock' mode='server'/></interface>"
      "<interface type='direct'><source dev='eth0' mode='bridge'/></interface>"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_THAT(r->interfaces, IsEmpty());
  EXPECT_THAT(r->skipped, IsEmpty());
}

TEST(ParseDomainXml, NoDevices) {
  auto r = parse_domain_xml("<domain type='kvm'><name>vm</name></domain>");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->uuid, "");
  EXPECT_THAT(r->interfaces, IsEmpty());
}

// ---- parse_domain_xml: malformed interfaces are skipped, one by one ---------

// `bad` sits between two good interfaces, as the 2nd <interface>; the good
// ones still count and the message names position 2.
void expect_skipped(const std::string& bad, const std::string& why) {
  SCOPED_TRACE(bad);
  auto r = parse_domain_xml(domain_with(vhostuser(kGoodSource) + bad + vhostuser(kGoodSource)));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->interfaces.size(), 2u);
  ASSERT_EQ(r->skipped.size(), 1u);
  EXPECT_THAT(r->skipped[0], StartsWith("interface 2: "));
  EXPECT_THAT(r->skipped[0], HasSubstr(why));
  EXPECT_TRUE(printable_ascii(r->skipped[0])) << r->skipped[0];
}

TEST(ParseDomainXml, SkipsInterfaceWithoutSource) { expect_skipped(vhostuser(""), "no <source"); }

TEST(ParseDomainXml, SkipsInterfaceWithoutPath) {
  expect_skipped(vhostuser("<source type='unix' mode='server'/>"), "source has no path");
  expect_skipped(vhostuser("<source type='unix' path='' mode='server'/>"), "source has no path");
}

TEST(ParseDomainXml, SkipsRelativePath) {
  expect_skipped(vhostuser("<source type='unix' path='run/v.sock' mode='server'/>"),
                 "source path \"run/v.sock\" is not absolute");
}

TEST(ParseDomainXml, SkipsPathTooLongForSunPath) {
  const std::string p108 = "/" + std::string(107, 'x');
  expect_skipped(vhostuser("<source type='unix' path='" + p108 + "' mode='server'/>"),
                 "source path is 108 bytes; a Unix socket path holds at most 107");
  const std::string p107 = "/" + std::string(106, 'x');
  auto r = parse_domain_xml(
      domain_with(vhostuser("<source type='unix' path='" + p107 + "' mode='server'/>")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->interfaces.size(), 1u);
  EXPECT_EQ(r->interfaces[0].path, p107);
}

TEST(ParseDomainXml, SkipsBadMac) {
  for (const char* bad : {"fa:16:3e:00:00", "fa-16-3e-00-00-01", "zz:16:3e:00:00:01", ""}) {
    expect_skipped("<interface type='vhostuser'><mac address='" + std::string(bad) + "'/>" +
                       kGoodSource + "</interface>",
                   "mac \"" + std::string(bad) + "\" is not a MAC address");
  }
  expect_skipped("<interface type='vhostuser'><mac/>" + kGoodSource + "</interface>",
                 "<mac> has no address");
}

TEST(ParseDomainXml, SkipsUnknownOrMissingMode) {
  expect_skipped(vhostuser("<source type='unix' path='/run/v.sock' mode='both'/>"),
                 "source mode \"both\" is not one of server, client");
  expect_skipped(vhostuser("<source type='unix' path='/run/v.sock'/>"), "source has no mode");
}

TEST(ParseDomainXml, SkipsNonUnixSource) {
  expect_skipped(vhostuser("<source type='tcp' path='/run/v.sock' mode='server'/>"),
                 "source type \"tcp\" is not unix");
}

TEST(ParseDomainXml, PositionsCountEveryInterface) {
  auto r = parse_domain_xml(domain_with(
      "<interface type='bridge'><source bridge='br0'/></interface>" + vhostuser(kGoodSource) +
      vhostuser("<source type='unix' path='a' mode='server'/>") +
      "<interface type='network'><source network='default'/></interface>" +
      vhostuser("<source type='unix' path='/b' mode='listen'/>")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->interfaces.size(), 1u);
  ASSERT_EQ(r->skipped.size(), 2u);
  EXPECT_THAT(r->skipped[0], StartsWith("interface 3: "));
  EXPECT_THAT(r->skipped[1], StartsWith("interface 5: "));
}

// parse_mac quotes its input with nlohmann::json, which throws on invalid
// UTF-8: found by NoCrashOnMutatedXml.
TEST(ParseDomainXml, MacWithInvalidUtf8IsSkippedNotThrown) {
  expect_skipped("<interface type='vhostuser'><mac address='fa:16:3e:00:00:\xb6'/>" + kGoodSource +
                     "</interface>",
                 "mac \"fa:16:3e:00:00:\\xb6\" is not a MAC address");
}

TEST(ParseDomainXml, MessagesEscapeUntrustedBytes) {
  auto r = parse_domain_xml(domain_with(
      vhostuser("<source type='unix' path='rel\xff\xfe&#10;\"' mode='server'/>") +
      vhostuser("<source type='unix' path='/ok' mode='" + std::string(500, 'm') + "'/>")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->skipped.size(), 2u);
  EXPECT_THAT(r->skipped[0], HasSubstr(R"("rel\xff\xfe\x0a\"")"));
  EXPECT_THAT(r->skipped[1], HasSubstr("mmm...\""));
  EXPECT_LT(r->skipped[1].size(), 300u);
  for (const auto& s : r->skipped) EXPECT_TRUE(printable_ascii(s)) << s;
}

// ---- parse_domain_xml: not a domain ----------------------------------------

TEST(ParseDomainXml, NotXml) {
  EXPECT_REFUSED(parse_domain_xml(""), "invalid_argument", "domain XML: ");
  EXPECT_REFUSED(parse_domain_xml("{\"name\": \"vm\"}"), "invalid_argument",
                 "domain XML: No document element found at offset ");
  EXPECT_REFUSED(parse_domain_xml("<domain><name>vm</name>"), "invalid_argument", "domain XML: ");
  auto r = parse_domain_xml("<domain><name>vm</nam></domain>");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "invalid_argument");
  EXPECT_THAT(r.error().message, HasSubstr("mismatch"));      // pugixml's description
  EXPECT_THAT(r.error().message, HasSubstr("at offset 18"));  // at </nam>
}

TEST(ParseDomainXml, NotADomain) {
  EXPECT_REFUSED(parse_domain_xml("<network><name>default</name></network>"), "invalid_argument",
                 "the root element is <network>, not <domain>");
  EXPECT_REFUSED(parse_domain_xml("<!-- only a comment -->"), "invalid_argument", "domain XML: ");
}

TEST(ParseDomainXml, NoName) {
  EXPECT_REFUSED(parse_domain_xml("<domain type='kvm'><uuid>x</uuid></domain>"), "invalid_argument",
                 "<domain> has no <name>");
  EXPECT_REFUSED(parse_domain_xml("<domain><name>  </name></domain>"), "invalid_argument",
                 "<domain> has no <name>");
}

// ---- parse_domain_xml: never a crash ----------------------------------------

// Parses `xml` and, when it parses, matches every interface: either way a
// result, and messages fit a JSON reply.
void parse_and_match(const Model& model, const std::string& xml) {
  auto r = parse_domain_xml(xml);
  if (!r.ok()) {
    EXPECT_EQ(r.error().code, "invalid_argument");
    EXPECT_TRUE(printable_ascii(r.error().message)) << r.error().message;
    return;
  }
  for (const auto& s : r->skipped) EXPECT_TRUE(printable_ascii(s)) << s;
  for (const auto& itf : r->interfaces) {
    auto m = match_port(model, itf);
    if (!m.ok()) {
      EXPECT_TRUE(printable_ascii(m.error().message)) << m.error().message;
    }
  }
}

Model sample_model();

TEST(ParseDomainXml, NoCrashOnTruncatedXml) {
  const Model model = sample_model();
  const std::string xml = read_data("nova_vhostuser_live.xml");
  for (size_t n = 0; n <= xml.size(); ++n) parse_and_match(model, xml.substr(0, n));
}

TEST(ParseDomainXml, NoCrashOnMutatedXml) {
  const Model model = sample_model();
  const std::vector<std::string> bases = {
      read_data("nova_vhostuser_live.xml"),
      domain_with(
          vhostuser(kGoodSource, "<target dev='vhu3a6f2c1b-7d'/><alias name='net0'/>") +
          "<interface type='bridge'><source bridge='br0'/></interface>" +
          vhostuser("<source type='unix' path='/run/strait/vhuc0ffee12-34' mode='client'/>"))};
  const std::vector<std::string> tokens = {"<",
                                           ">",
                                           "/>",
                                           "'",
                                           "\"",
                                           "&",
                                           "&amp;",
                                           "&#0;",
                                           "&#xffffff;",
                                           "<!--",
                                           "-->",
                                           "<![CDATA[",
                                           "]]>",
                                           "<?xml version='1.0' encoding='UTF-16'?>",
                                           "<!DOCTYPE domain [<!ENTITY e 'x'>]>",
                                           "<interface type='vhostuser'>",
                                           "</interface>",
                                           "<devices>",
                                           "</domain>",
                                           "<domain>",
                                           "<name>",
                                           std::string(1, '\0'),
                                           "\xff\xfe",
                                           "\xef\xbb\xbf",
                                           "vhostuser",
                                           "mode='client'",
                                           "path='/" + std::string(120, 'p') + "'",
                                           "address='zz'"};
  std::mt19937 rng(20240311);  // fixed: a failure reproduces
  auto pick = [&rng](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  for (int round = 0; round < 6000; ++round) {
    std::string xml = bases[round % bases.size()];
    for (size_t edits = 1 + pick(4); edits > 0 && !xml.empty(); --edits) {
      const size_t at = pick(xml.size());
      switch (pick(5)) {
        case 0:  // flip a byte
          xml[at] = static_cast<char>(pick(256));
          break;
        case 1:  // delete a run
          xml.erase(at, 1 + pick(64));
          break;
        case 2:  // duplicate a run
          xml.insert(at, xml.substr(pick(xml.size()), 1 + pick(256)));
          break;
        case 3:  // insert a token
          xml.insert(at, tokens[pick(tokens.size())]);
          break;
        case 4:  // cut the end
          xml.resize(at);
          break;
      }
    }
    parse_and_match(model, xml);
  }
}

TEST(ParseDomainXml, NoCrashOnRandomBytesOrDeepNesting) {
  const Model model = sample_model();
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int round = 0; round < 2000; ++round) {
    std::string s(round % 300, '\0');
    for (char& c : s) c = static_cast<char>(byte(rng));
    parse_and_match(model, s);
    parse_and_match(model, "<domain><name>" + s + "</name></domain>");
  }
  std::string deep = "<domain><name>vm</name><devices>";
  for (int i = 0; i < 200000; ++i) deep += "<interface type='vhostuser'>";
  parse_and_match(model, deep);
  parse_and_match(model, deep + "</domain>");
}

// ---- match_port -------------------------------------------------------------

PortSpec vhost_port(const std::string& id, const std::string& network, const std::string& m,
                    const std::string& path) {
  PortSpec p;
  p.id = id;
  p.network = network;
  p.mac = mac(m);
  p.attach.kind = Attachment::Kind::kVhost;
  p.attach.path = path;
  return p;
}

PortSpec ethdev_port(const std::string& id, const std::string& network, const std::string& m,
                     const std::string& devargs) {
  PortSpec p;
  p.id = id;
  p.network = network;
  p.mac = mac(m);
  p.attach.devargs = devargs;
  return p;
}

Model empty_model() {
  Model m({});
  for (const char* id : {"net1", "net2"}) {
    NetworkSpec n;
    n.id = id;
    Status s = m.add_network(n);
    EXPECT_TRUE(s.ok()) << s.error().message;
  }
  return m;
}

void add(Model& m, const PortSpec& p) {
  Status s = m.add_port(p);
  ASSERT_TRUE(s.ok()) << s.error().message;
}

// The ports of the sample domains, bound by their socket paths.
Model sample_model() {
  Model m = empty_model();
  add(m, vhost_port(kPortA, "net1", kMacA, kPathA));
  add(m, vhost_port(kPortB, "net1", kMacB, kPathB));
  add(m, ethdev_port("0e2f6a3b-8c4d-4e5f-a6b7-c8d9e0f1a2b3", "net2", "02:00:00:00:00:09",
                     "net_ring0"));
  return m;
}

VhostInterface itf(const std::string& path, const std::string& target, const char* m,
                   const std::string& alias = "net0") {
  VhostInterface i;
  i.path = path;
  i.target_dev = target;
  if (m) i.mac = mac(m);
  i.alias = alias;
  return i;
}

std::string matched(const Result<const PortSpec*>& r) {
  if (!r.ok()) return r.error().code + ": " + r.error().message;
  return r.value()->id;
}

TEST(MatchPort, SampleDomainsByPath) {
  const Model model = sample_model();
  for (const char* file : {"nova_vhostuser_live.xml", "nova_vhostuser_inactive.xml"}) {
    auto d = parse_domain_xml(read_data(file));
    ASSERT_TRUE(d.ok()) << d.error().message;
    ASSERT_EQ(d->interfaces.size(), 2u);
    EXPECT_EQ(matched(match_port(model, d->interfaces[0])), kPortA) << file;
    EXPECT_EQ(matched(match_port(model, d->interfaces[1])), kPortB) << file;
  }
}

TEST(MatchPort, ByPathWithoutMac) {
  const Model model = sample_model();
  EXPECT_EQ(matched(match_port(model, itf(kPathB, "", nullptr))), kPortB);
}

TEST(MatchPort, PathWinsOverTarget) {
  const Model model = sample_model();
  EXPECT_EQ(matched(match_port(model, itf(kPathA, "vhuc0ffee12-34", nullptr))), kPortA);
}

TEST(MatchPort, OnlyVhostPortsMatchByPath) {
  Model model = empty_model();
  // An ethdev port with a stale path left in its attachment: not a socket.
  PortSpec e = ethdev_port(kPortA, "net1", kMacA, "net_ring0");
  e.attach.path = kPathA;
  add(model, e);
  EXPECT_REFUSED(match_port(model, itf(kPathA, "", kMacB)), "not_found", kPathA);
}

TEST(MatchPort, ByTarget) {
  Model model = empty_model();
  // Bound under another socket path than the domain's.
  add(model, vhost_port(kPortA, "net1", kMacA, "/run/strait/a.sock"));
  add(model, vhost_port(kPortB, "net1", kMacB, "/run/strait/b.sock"));
  EXPECT_EQ(matched(match_port(model, itf(kPathA, "vhu3a6f2c1b-7d", kMacA))), kPortA);
  EXPECT_EQ(matched(match_port(model, itf(kPathA, "vhuc0ffee12-34", nullptr))), kPortB);
  EXPECT_EQ(matched(match_port(model, itf("", "vhuC0FFEE12-34", kMacB))), kPortB);
}

TEST(MatchPort, TargetNotNovasFormFallsBackToMac) {
  Model model = empty_model();
  add(model, vhost_port(kPortA, "net1", kMacA, "/run/strait/a.sock"));
  add(model, vhost_port(kPortB, "net1", kMacB, "/run/strait/b.sock"));
  // "tap" names, short names and unknown prefixes do not name a port.
  for (const char* target : {"tapc0ffee12-34", "vhuc0ffee", "vnet3", "vhu00000000-00"}) {
    EXPECT_EQ(matched(match_port(model, itf("/run/other.sock", target, kMacA))), kPortA) << target;
  }
}

TEST(MatchPort, ByMac) {
  Model model = empty_model();
  add(model, vhost_port(kPortA, "net1", kMacA, "/run/strait/a.sock"));
  add(model, vhost_port(kPortB, "net1", kMacB, "/run/strait/b.sock"));
  add(model, ethdev_port("0e2f6a3b-8c4d-4e5f-a6b7-c8d9e0f1a2b3", "net2", "02:00:00:00:00:09",
                         "net_ring0"));
  auto d = parse_domain_xml(read_data("nova_vhostuser_inactive.xml"));
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(matched(match_port(model, d->interfaces[0])), kPortA);
  EXPECT_EQ(matched(match_port(model, d->interfaces[1])), kPortB);
  // By MAC any bound port matches, whatever its attachment.
  EXPECT_EQ(matched(match_port(model, itf("/run/x.sock", "", "02:00:00:00:00:09"))),
            "0e2f6a3b-8c4d-4e5f-a6b7-c8d9e0f1a2b3");
}

TEST(MatchPort, PathMatchWithOtherMacConflicts) {
  const Model model = sample_model();
  EXPECT_REFUSED(match_port(model, itf(kPathA, "", kMacB)), "conflict",
                 "interface net0 (path /run/strait/vhu3a6f2c1b-7d, mac fa:16:3e:9a:71:e4): its "
                 "socket path names port 3a6f2c1b-7d4e-4f1a-9b2c-0d1e2f3a4b5c, whose MAC is "
                 "fa:16:3e:4c:2c:30, not fa:16:3e:9a:71:e4");
}

TEST(MatchPort, TargetMatchWithOtherMacConflicts) {
  Model model = empty_model();
  add(model, vhost_port(kPortA, "net1", kMacA, "/run/strait/a.sock"));
  add(model, vhost_port(kPortB, "net1", kMacB, "/run/strait/b.sock"));
  EXPECT_REFUSED(match_port(model, itf(kPathA, "vhu3a6f2c1b-7d", kMacB)), "conflict",
                 "its target dev names port 3a6f2c1b-7d4e-4f1a-9b2c-0d1e2f3a4b5c, whose MAC is "
                 "fa:16:3e:4c:2c:30");
}

TEST(MatchPort, TargetPrefixSharedByTwoPortsConflicts) {
  Model model = empty_model();
  add(model, vhost_port(kPortA, "net1", kMacA, "/run/strait/a.sock"));
  add(model,
      vhost_port("3a6f2c1b-7dff-4000-8000-000000000000", "net2", kMacB, "/run/strait/b.sock"));
  EXPECT_REFUSED(match_port(model, itf(kPathA, "vhu3a6f2c1b-7d", kMacA)), "conflict",
                 "interface net0 (path /run/strait/vhu3a6f2c1b-7d, target vhu3a6f2c1b-7d, mac "
                 "fa:16:3e:4c:2c:30): its target names ports 3a6f2c1b-7d4e-4f1a-9b2c-0d1e2f3a4b5c "
                 "and 3a6f2c1b-7dff-4000-8000-000000000000 (their ids all start with 3a6f2c1b-7d)");
  // The path still tells them apart.
  add(model,
      vhost_port("3a6f2c1b-7d00-4000-8000-000000000000", "net1", "02:00:00:00:00:03", kPathA));
  EXPECT_EQ(matched(match_port(model, itf(kPathA, "vhu3a6f2c1b-7d", "02:00:00:00:00:03"))),
            "3a6f2c1b-7d00-4000-8000-000000000000");
}

TEST(MatchPort, SameMacOnTwoPortsConflicts) {
  Model model = empty_model();
  // One MAC in two networks: the model allows it; a MAC alone cannot choose.
  add(model, vhost_port(kPortA, "net1", kMacA, "/run/strait/a.sock"));
  add(model, vhost_port(kPortB, "net2", kMacA, "/run/strait/b.sock"));
  EXPECT_REFUSED(match_port(model, itf("/run/x.sock", "", kMacA, "")), "conflict",
                 "interface (path /run/x.sock, mac fa:16:3e:4c:2c:30): ports "
                 "3a6f2c1b-7d4e-4f1a-9b2c-0d1e2f3a4b5c and c0ffee12-3456-4789-abcd-ef0123456789 "
                 "all have MAC fa:16:3e:4c:2c:30 and nothing else tells them apart");
  // A target or a path tells them apart.
  EXPECT_EQ(matched(match_port(model, itf("/run/x.sock", "vhuc0ffee12-34", kMacA))), kPortB);
  EXPECT_EQ(matched(match_port(model, itf("/run/strait/a.sock", "", kMacA))), kPortA);
}

TEST(MatchPort, NotFound) {
  const Model model = sample_model();
  EXPECT_REFUSED(
      match_port(model, itf("/run/x.sock", "vhu99999999-99", "02:00:00:00:00:77", "net3")),
      "not_found",
      "interface net3 (path /run/x.sock, target vhu99999999-99, mac 02:00:00:00:00:77): "
      "no bound port");
  EXPECT_REFUSED(match_port(model, itf("/run/x.sock", "", nullptr)), "not_found",
                 "(path /run/x.sock)");
  EXPECT_REFUSED(match_port(empty_model(), itf(kPathA, "vhu3a6f2c1b-7d", kMacA)), "not_found",
                 "no bound port");
}

}  // namespace
}  // namespace strait::ctl
