// The C++ frame builder against scapy, byte for byte: the one place the
// unit tests still run scapy, so every other test can trust the builder.
#include "tests/frame_builder.h"

#include <gtest/gtest.h>

namespace strait::test {
namespace {

constexpr char kA[] = "02:00:00:00:00:0a";
constexpr char kB[] = "02:00:00:00:00:0b";

// Where scapy is cleverer than the builder, the builder is told: ND
// messages go with hop limit 255 (scapy sets it for ICMPv6ND_*), and VXLAN
// is RFC 7348's (scapy's VXLAN() with an Ethernet payload is VXLAN-GPE's).
// LLC after Ether() is scapy's EtherType 0x8870; Dot3() is 802.3's length.
TEST(FrameBuilder, MatchesScapyByteForByte) {
  const Frame inner = Eth(kA, kB).ipv4().udp();
  const std::vector<Frame> built = {
      Eth(kA, kB).ipv4().udp(),
      Eth(kA, kB).ipv4("10.0.0.1", "10.0.0.2").udp(999, 5000).fill('x', 64),
      Eth(kA, kB).vlan(100, 3).ipv4("10.0.0.9", "10.0.0.1").udp().fill('y', 30),
      Eth(kA, kB).vlan(7, 0, 0x88a8).vlan(8).ipv4().udp(),
      Eth(kA, "ff:ff:ff:ff:ff:ff").arp(1, "10.0.0.1", "10.0.0.2"),
      Eth(kA, kB).arp(2, "10.0.0.2", "10.0.0.1", kB, kA),
      Eth(kA, kB).ipv4("10.0.0.1", "10.0.0.2", 7, 32).tcp(1234, 22, 0x12, 100, 200),
      Eth(kA, kB).ipv4("10.0.0.1", "10.0.0.2").icmp(0, 0, 5, 6).fill('p', 11),
      Eth(kA, kB).ipv6("fd00::1", "fd00::2").udp(546, 547).fill('q', 3),
      Eth(kA, kB).ipv6("fe80::1", "ff02::1", 255).icmp6(135, 0, std::vector<uint8_t>(20, 0)),
      Eth(kA, kB).ipv4("10.1.0.1", "10.1.0.2").udp(50000, 4789).vxlan(5001, inner),
      Eth(kA, kB).ipv4("10.0.0.1", "10.0.0.2").fragment(6, 100).fill('x', 16),
      Eth(kA, "ff:ff:ff:ff:ff:ff").ipv4("0.0.0.0", "255.255.255.255").udp(68, 67).bootp(),
      Eth(kA, kB).type(0x8870).bytes({0xaa, 0xaa, 3, 0, 0, 0, 0, 0}),
      Eth(kA, kB).type(8).bytes({0xaa, 0xaa, 3, 0, 0, 0, 0, 0}),
  };
  const std::vector<Frame> scapy_made = scapy(
      std::string("[Ether(src='") + kA + "', dst='" + kB + "')/IP()/UDP()," +
      "Ether(src='" + kA + "', dst='" + kB +
      "')/IP(src='10.0.0.1', dst='10.0.0.2')/UDP(sport=999, dport=5000)/('x'*64)," +
      "Ether(src='" + kA + "', dst='" + kB +
      "')/Dot1Q(vlan=100, prio=3)/IP(src='10.0.0.9', dst='10.0.0.1')/UDP()/('y'*30)," +
      "Ether(src='" + kA + "', dst='" + kB + "', type=0x88a8)/Dot1Q(vlan=7)/Dot1Q(vlan=8)/IP()/UDP()," +
      "Ether(src='" + kA + "', dst='ff:ff:ff:ff:ff:ff')/ARP(hwsrc='" + kA +
      "', psrc='10.0.0.1', pdst='10.0.0.2')," +
      "Ether(src='" + kA + "', dst='" + kB + "')/ARP(op=2, hwsrc='" + kB +
      "', psrc='10.0.0.2', hwdst='" + kA + "', pdst='10.0.0.1')," +
      "Ether(src='" + kA + "', dst='" + kB +
      "')/IP(src='10.0.0.1', dst='10.0.0.2', id=7, ttl=32)/TCP(sport=1234, dport=22, flags='SA', "
      "seq=100, ack=200)," +
      "Ether(src='" + kA + "', dst='" + kB +
      "')/IP(src='10.0.0.1', dst='10.0.0.2')/ICMP(type=0, id=5, seq=6)/('p'*11)," +
      "Ether(src='" + kA + "', dst='" + kB + "')/IPv6(src='fd00::1', dst='fd00::2')/"
      "UDP(sport=546, dport=547)/('q'*3)," +
      "Ether(src='" + kA + "', dst='" + kB + "')/IPv6(src='fe80::1', dst='ff02::1')/"
      "ICMPv6ND_NS(tgt='::')," +
      "Ether(src='" + kA + "', dst='" + kB + "')/IP(src='10.1.0.1', dst='10.1.0.2')/"
      "UDP(sport=50000, dport=4789)/VXLAN(flags=0x08, vni=5001)/Ether(src='" + kA + "', dst='" + kB +
      "')/IP()/UDP()," +
      "Ether(src='" + kA + "', dst='" + kB + "')/IP(src='10.0.0.1', dst='10.0.0.2', proto=6, "
      "frag=100)/Raw(b'x'*16)," +
      "Ether(src='" + kA + "', dst='ff:ff:ff:ff:ff:ff')/IP(src='0.0.0.0', dst='255.255.255.255')/"
      "UDP(sport=68, dport=67)/BOOTP()," +
      "Ether(src='" + kA + "', dst='" + kB + "')/LLC()/SNAP()," +
      "Dot3(src='" + kA + "', dst='" + kB + "')/LLC()/SNAP()]");
  ASSERT_EQ(scapy_made.size(), built.size());
  for (size_t i = 0; i < built.size(); i++) EXPECT_EQ(built[i], scapy_made[i]) << "frame " << i;
}

TEST(FrameBuilder, RefusesWhatIsNoAddress) {
  EXPECT_THROW(Eth("02:00:00:00:00", kB), std::invalid_argument);
  EXPECT_THROW(Eth(kA, kB).ipv4("10.0.0.300"), std::invalid_argument);
  EXPECT_THROW(Eth(kA, kB).udp(), std::logic_error);
}

}  // namespace
}  // namespace strait::test
