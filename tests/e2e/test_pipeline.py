"""Pipeline semantics end to end (docs/design.md, "Pipeline semantics").

One straitd for the module, three physical networks:
  physnet1  a veth pair (net_af_packet): the test sends and receives on the
            other end, both directions, at any time;
  physnet2  net_pcap, tx only: what leaves for the physical network, decoded
            by tshark and scapy;
  physnet3  net_pcap whose rx_pcap is replayed once at start-up, before any
            network exists.
Every test makes its own networks and ports (the `lab` fixture) and removes
them at its end; MACs are never reused across tests (learned entries live on).
"""
import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, Dot1AD, Dot1Q, Ether
from scapy.packet import Raw

from conftest import Port, Wire, new_mac, read_pcap, tshark_fields, wait_for, write_pcap

BCAST = "ff:ff:ff:ff:ff:ff"

# ---- fixtures ----------------------------------------------------------------


@pytest.fixture(scope="module")
def _wire():
    w = Wire()
    try:
        w.create()
    except Exception as e:  # no CAP_NET_ADMIN / no veth: the wire tests skip
        w.destroy()
        yield e
        return
    yield w
    w.destroy()


@pytest.fixture
def wire(_wire):
    if isinstance(_wire, Exception):
        pytest.skip(f"cannot create a veth pair for physnet1: {_wire}")
    _wire.drain(quiet=0.01)
    return _wire


# Frames physnet3 delivers at start-up, when straitd has no network yet.
STARTUP_FRAMES = [
    # VLAN 3001: no network
    Ether(src="02:e3:00:00:00:01", dst=BCAST) / Dot1Q(vlan=3001) / ARP(psrc="10.3.0.1", pdst="10.3.0.2"),
    # 802.1ad S-tag: never a provider network of ours
    Ether(src="02:e3:00:00:00:01", dst="02:e3:00:00:00:02") / Dot1AD(vlan=3002) /
    IP(src="10.3.0.1", dst="10.3.0.2") / UDP() / Raw(b"s-tag" * 8),
    # untagged, and physnet3 has no flat network
    Ether(src="02:e3:00:00:00:01", dst="02:e3:00:00:00:02") /
    IP(src="10.3.0.1", dst="10.3.0.2") / UDP() / Raw(b"untagged" * 5),
]


@pytest.fixture(scope="module")
def sw(straitd_factory, _wire, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("phys3")
    write_pcap(tmp / "rx.pcap", STARTUP_FRAMES)
    physnets = {
        "physnet2": "net_pcap_up2,tx_pcap={tmp}/physnet2_tx.pcap",
        "physnet3": f"net_pcap_up3,rx_pcap={tmp}/rx.pcap,tx_pcap={tmp}/tx.pcap",
    }
    if not isinstance(_wire, Exception):
        physnets["physnet1"] = f"net_af_packet_up1,iface={_wire.inside}"
    sw = straitd_factory(physnets=physnets, name="pipeline")
    sw.physnet2_tx = sw.tmp / "physnet2_tx.pcap"
    return sw


# ---- helpers -----------------------------------------------------------------


def udp(src, dst, payload=b"", ip_len=None, vlan=None, prio=0):
    """An Ethernet/IPv4/UDP frame; ip_len: the IP packet's exact size."""
    if ip_len is not None:
        payload = payload + b"." * (ip_len - 28 - len(payload))
    elif len(payload) < 40:
        payload = payload + b"." * (40 - len(payload))  # no Ethernet padding anywhere
    l2 = Ether(src=src, dst=dst)
    if vlan is not None:
        l2 = l2 / Dot1Q(vlan=vlan, prio=prio)
    return l2 / IP(src="10.9.0.1", dst="10.9.0.2") / UDP(sport=4000, dport=5000) / Raw(payload)


def untag(frame):
    """The frame with its outer 802.1Q tag removed, as bytes."""
    b = bytes(frame)
    return b[:12] + b[16:]


def arp_request(src, psrc="10.9.0.1", pdst="10.9.0.99"):
    return Ether(src=src, dst=BCAST) / ARP(hwsrc=src, psrc=psrc, pdst=pdst)


def physnet_counters(sw, name):
    return sw.port_stats(f"physnet:{name}")


def wire_send(lab, wire, frames, physnet="physnet1"):
    """Sends frames from the physical network; returns once straitd has
    received and forwarded them all."""
    before = physnet_counters(lab.sw, physnet)["rx_packets"]
    wire.send(frames)
    wait_for(lambda: physnet_counters(lab.sw, physnet)["rx_packets"] >= before + len(frames),
             what=f"{len(frames)} frames from {physnet}")
    lab.sync()


def drop_delta(before, after):
    """Per-reason difference of two drop maps, non-zero entries only."""
    out = {}
    for k in set(before) | set(after):
        d = after.get(k, 0) - before.get(k, 0)
        if d:
            out[k] = d
    return out


def from_src(frames, mac):
    return [f for f in frames if f[Ether].src == mac]


# ---- VLAN and flat networks on the physical network -------------------------


def test_vm_to_physnet_vlan_frames_leave_tagged_with_segmentation_id(sw, lab):
    net = lab.network("vlan", "physnet2", seg=101)
    a, unknown = new_mac(), new_mac()
    frames = [udp(a, unknown, b"vlan-egress-unicast"), arp_request(a, "10.9.0.1", "10.9.0.77")]
    pa = lab.port(net, a, send=frames)
    lab.sent_all(pa, 2)

    # tshark's view of what the switch wrote to the physnet NIC, field by field.
    rows = tshark_fields(sw.physnet2_tx,
                         ["eth.src", "eth.dst", "eth.type", "vlan.id", "vlan.priority",
                          "vlan.etype", "ip.src", "ip.dst", "arp.src.proto_ipv4",
                          "arp.dst.proto_ipv4", "frame.len"],
                         display_filter=f"eth.src == {a}")
    assert rows == [
        (a, unknown, "0x8100", "101", "0", "0x0800", "10.9.0.1", "10.9.0.2", "", "",
         str(len(frames[0]) + 4)),
        (a, BCAST, "0x8100", "101", "0", "0x0806", "", "", "10.9.0.1", "10.9.0.77",
         str(len(frames[1]) + 4)),
    ]
    # scapy's: the tag is the only change, the rest is byte for byte the same.
    out = from_src(read_pcap(sw.physnet2_tx), a)
    assert [f[Dot1Q].vlan for f in out] == [101, 101]
    assert [untag(f) for f in out] == [bytes(f) for f in frames]
    assert pa.stats()["drops"] == {}


def test_physnet_vlan_frames_reach_vm_untagged(sw, lab, wire):
    net = lab.network("vlan", "physnet1", seg=102)
    b, host = new_mac(), new_mac()
    pb = lab.port(net, b)
    frames = [udp(host, b, b"phys-to-vm-unicast", vlan=102),
              udp(host, b, b"phys-to-vm-prio5", vlan=102, prio=5),
              Ether(src=host, dst=BCAST) / Dot1Q(vlan=102) / ARP(hwsrc=host, psrc="10.9.0.50",
                                                                 pdst="10.9.0.2")]
    wire_send(lab, wire, frames)
    got = pb.received()
    assert [bytes(f) for f in got] == [untag(f) for f in frames]
    assert all(Dot1Q not in f for f in got)
    assert pb.final_stats["tx_packets"] == 3


def test_flat_network_is_untagged_both_ways(sw, lab, wire):
    net = lab.network("flat", "physnet1")
    a, b, host = new_mac(), new_mac(), new_mac()
    pb = lab.port(net, b)
    inbound = udp(host, b, b"flat-inbound")
    wire_send(lab, wire, [inbound])
    outbound = udp(a, host, b"flat-outbound")
    pa = lab.port(net, a, send=[outbound])
    lab.sent_all(pa, 1)

    on_wire = from_src(wire.drain(), a)
    assert [bytes(f) for f in on_wire] == [bytes(outbound)]
    assert Dot1Q not in on_wire[0]
    # The host's MAC was learned from its frame: the reply is not flooded to b.
    assert [bytes(f) for f in pb.received()] == [bytes(inbound)]
    assert pa.received() == []


def test_frames_of_no_network_from_physnet_are_dropped_at_startup(sw):
    # physnet3 replayed STARTUP_FRAMES before any network existed.
    c = wait_for(lambda: (lambda p: p if p["rx_packets"] >= 3 else None)(
        physnet_counters(sw, "physnet3")), what="physnet3 start-up frames")
    assert c["rx_packets"] == 3
    assert c["tx_packets"] == 0
    assert c["drops"] == {"unknown_vlan": 2, "no_flat_network": 1}


def test_unknown_vlan_from_physnet_is_dropped(sw, lab, wire):
    net = lab.network("vlan", "physnet1", seg=103)
    b, host = new_mac(), new_mac()
    pb = lab.port(net, b)
    before = physnet_counters(sw, "physnet1")["drops"]
    good = udp(host, b, b"vlan-103", vlan=103)
    # 0x9100 (old QinQ) with VLAN 103: a tag, but not an 802.1Q one
    tpid_9100 = Ether(src=host, dst=b, type=0x9100) / Dot1Q(vlan=103) / IP() / UDP() / Raw(b"9" * 40)
    wire_send(lab, wire, [udp(host, b, b"vlan-3999", vlan=3999),
                          udp(host, BCAST, b"vlan-3998-bcast", vlan=3998),
                          tpid_9100,
                          good])
    after = physnet_counters(sw, "physnet1")["drops"]
    assert drop_delta(before, after) == {"unknown_vlan": 3}
    assert [bytes(f) for f in pb.received()] == [untag(good)]


def test_double_tagged_frame_from_physnet_is_dropped(sw, lab, wire):
    net = lab.network("vlan", "physnet1", seg=104)
    b, host = new_mac(), new_mac()
    pb = lab.port(net, b)
    before = physnet_counters(sw, "physnet1")["drops"]
    qinq = (Ether(src=host, dst=b) / Dot1Q(vlan=104) / Dot1Q(vlan=5) /
            IP(src="10.9.0.1", dst="10.9.0.2") / UDP() / Raw(b"nested" * 8))
    wire_send(lab, wire, [qinq])
    assert drop_delta(before, physnet_counters(sw, "physnet1")["drops"]) == {"nested_vlan": 1}
    assert pb.received() == []


def test_tagged_frame_from_vm_is_dropped(sw, lab):
    net = lab.network("vlan", "physnet2", seg=105)
    a, b = new_mac(), new_mac()
    pb = lab.port(net, b)
    frames = [udp(a, b, b"own-seg-id", vlan=105),       # its own network's tag
              udp(a, BCAST, b"other-vlan", vlan=7),     # another VLAN
              udp(a, b, b"priority-tag", vlan=0, prio=3)]  # 802.1p priority tag
    pa = lab.port(net, a, send=frames)
    lab.sent_all(pa, 3)
    assert pa.stats()["drops"] == {"tagged_on_access_port": 3}
    assert pb.received() == []
    assert from_src(read_pcap(sw.physnet2_tx), a) == []


# ---- flooding, unicast, isolation ----------------------------------------------


def test_broadcast_from_vm_floods_to_its_own_network_only(sw, lab):
    net_a, net_b = lab.network("local"), lab.network("local")
    a1, a2, a3, b1 = new_mac(), new_mac(), new_mac(), new_mac()
    pa2, pa3, pb1 = lab.port(net_a, a2), lab.port(net_a, a3), lab.port(net_b, b1)
    frames = [arp_request(a1), udp(a1, new_mac(), b"unknown-unicast"),
              udp(a1, "01:00:5e:00:00:fb", b"multicast")]
    pa1 = lab.port(net_a, a1, send=frames)
    lab.sent_all(pa1, 3)
    want = [bytes(f) for f in frames]
    assert [bytes(f) for f in pa2.received()] == want
    assert [bytes(f) for f in pa3.received()] == want
    assert pb1.received() == []
    assert pa1.received() == []  # never echoed to the sender


def test_physnet_broadcast_reaches_vms_of_its_vlan_only(sw, lab, wire):
    net_x, net_y = lab.network("vlan", "physnet1", seg=110), lab.network("vlan", "physnet1", seg=111)
    x1, x2, y1, host = new_mac(), new_mac(), new_mac(), new_mac()
    px1, px2, py1 = lab.port(net_x, x1), lab.port(net_x, x2), lab.port(net_y, y1)
    bcast = Ether(src=host, dst=BCAST) / Dot1Q(vlan=110) / ARP(hwsrc=host, psrc="10.9.0.5",
                                                              pdst="10.9.0.6")
    wire_send(lab, wire, [bcast])
    assert [bytes(f) for f in px1.received()] == [untag(bcast)]
    assert [bytes(f) for f in px2.received()] == [untag(bcast)]
    assert py1.received() == []


def test_same_macs_in_two_networks_stay_in_their_network(sw, lab):
    net_a, net_b = lab.network("local"), lab.network("local")
    m1, m2 = new_mac(), new_mac()
    a2, b2 = lab.port(net_a, m2), lab.port(net_b, m2)
    from_a = [udp(m1, m2, b"from-network-a"), arp_request(m1, "10.9.0.1", "10.9.0.2")]
    from_b = [udp(m1, m2, b"from-network-b"), arp_request(m1, "10.9.0.3", "10.9.0.4")]
    a1 = lab.port(net_a, m1, send=from_a)
    lab.sent_all(a1, 2)
    b1 = lab.port(net_b, m1, send=from_b)
    lab.sent_all(b1, 2)
    assert [bytes(f) for f in a2.received()] == [bytes(f) for f in from_a]
    assert [bytes(f) for f in b2.received()] == [bytes(f) for f in from_b]
    assert a1.received() == [] and b1.received() == []


def test_same_macs_in_two_vlan_networks_stay_in_their_vlan(sw, lab, wire):
    net_x, net_y = lab.network("vlan", "physnet1", seg=106), lab.network("vlan", "physnet1", seg=107)
    m, host = new_mac(), new_mac()
    px, py = lab.port(net_x, m), lab.port(net_y, m)
    to_x, to_y = udp(host, m, b"to-vlan-106", vlan=106), udp(host, m, b"to-vlan-107", vlan=107)
    wire_send(lab, wire, [to_x, to_y])
    assert [bytes(f) for f in px.received()] == [untag(to_x)]
    assert [bytes(f) for f in py.received()] == [untag(to_y)]


def test_unicast_to_bound_port_mac_goes_only_to_that_port(sw, lab, wire):
    net = lab.network("vlan", "physnet1", seg=108)
    a, b, c = new_mac(), new_mac(), new_mac()
    pb, pc = lab.port(net, b), lab.port(net, c)
    phys_tx = physnet_counters(sw, "physnet1")["tx_packets"]
    frames = [udp(a, b, b"to-b-%d" % i) for i in range(3)]
    pa = lab.port(net, a, send=frames)
    lab.sent_all(pa, 3)
    assert [bytes(f) for f in pb.received()] == [bytes(f) for f in frames]
    assert pc.received() == []
    assert from_src(wire.drain(quiet=0.1), a) == []
    assert physnet_counters(sw, "physnet1")["tx_packets"] == phys_tx


def test_unicast_to_mac_learned_on_physnet_goes_to_physnet_only(sw, lab, wire):
    net = lab.network("vlan", "physnet1", seg=112)
    a, b, host, nobody = new_mac(), new_mac(), new_mac(), new_mac()
    pb = lab.port(net, b)
    learned_before = sw.call("show")["learned_macs"]
    hello = Ether(src=host, dst=BCAST) / Dot1Q(vlan=112) / ARP(hwsrc=host, psrc="10.9.0.8",
                                                              pdst="10.9.0.9")
    wire_send(lab, wire, [hello])
    wait_for(lambda: sw.call("show")["learned_macs"] > learned_before, what="the host MAC learned")
    to_host, to_nobody = udp(a, host, b"to-learned-host"), udp(a, nobody, b"to-unknown-mac")
    pa = lab.port(net, a, send=[to_host, to_nobody])
    lab.sent_all(pa, 2)
    on_wire = from_src(wire.drain(), a)
    assert [f[Dot1Q].vlan for f in on_wire] == [112, 112]
    assert [untag(f) for f in on_wire] == [bytes(to_host), bytes(to_nobody)]
    # b saw the host's broadcast and the unknown unicast (flooded), not the
    # frame to the learned host.
    assert [bytes(f) for f in pb.received()] == [untag(hello), bytes(to_nobody)]


def test_frame_between_two_hosts_on_the_physnet_is_not_sent_to_vms(sw, lab, wire):
    net = lab.network("vlan", "physnet1", seg=115)
    b, host_x, host_y = new_mac(), new_mac(), new_mac()
    pb = lab.port(net, b)
    hello = Ether(src=host_x, dst=BCAST) / Dot1Q(vlan=115) / ARP(hwsrc=host_x, psrc="10.9.0.8",
                                                                pdst="10.9.0.9")
    learned = sw.call("show")["learned_macs"]
    wire_send(lab, wire, [hello])
    wait_for(lambda: sw.call("show")["learned_macs"] > learned, what="host x learned")
    before = physnet_counters(sw, "physnet1")["drops"]
    wire_send(lab, wire, [udp(host_y, host_x, b"y-to-x", vlan=115)])
    assert drop_delta(before, physnet_counters(sw, "physnet1")["drops"]) == {"same_port": 1}
    assert [bytes(f) for f in pb.received()] == [untag(hello)]
    assert from_src(wire.drain(quiet=0.1), host_y) == []


def test_learned_mac_does_not_leak_into_network_reusing_its_local_vlan(sw, lab, wire):
    net_old = lab.network("vlan", "physnet1", seg=113)
    host, a, b = new_mac(), new_mac(), new_mac()
    p_old = lab.port(net_old, new_mac())
    lvlan = sw.call("port.show", {"id": p_old.id})["local_vlan"]
    hello = Ether(src=host, dst=BCAST) / Dot1Q(vlan=113) / ARP(hwsrc=host, psrc="10.9.0.8",
                                                              pdst="10.9.0.9")
    wire_send(lab, wire, [hello])
    wait_for(lambda: p_old.stats()["tx_packets"] >= 1, what="the broadcast")
    p_old.unbind()  # net_old leaves the host: its local VLAN is free again

    net_new = lab.network("local")
    pb = lab.port(net_new, b)
    assert sw.call("port.show", {"id": pb.id})["local_vlan"] == lvlan, "test premise"
    to_host = udp(a, host, b"local-network-frame")
    pa = lab.port(net_new, a, send=[to_host])
    lab.sent_all(pa, 1)
    # A local network never reaches a physnet; an unknown MAC floods to b.
    assert from_src(wire.drain(), a) == []
    assert [bytes(f) for f in pb.received()] == [bytes(to_host)]


# ---- MTU and malformed frames ------------------------------------------------


def test_frames_above_network_mtu_are_dropped(sw, lab):
    net = lab.network("local", mtu=1000)
    a, b = new_mac(), new_mac()
    pb = lab.port(net, b)
    at_mtu, above = udp(a, b, b"ip-1000", ip_len=1000), udp(a, b, b"ip-1001", ip_len=1001)
    small = udp(a, b, b"small")
    pa = lab.port(net, a, send=[at_mtu, above, small])
    lab.sent_all(pa, 3)
    assert len(at_mtu[IP]) == 1000 and len(above[IP]) == 1001
    assert pa.stats()["drops"] == {"mtu_exceeded": 1}
    assert [bytes(f) for f in pb.received()] == [bytes(at_mtu), bytes(small)]


def test_tagged_frames_at_network_mtu_pass_both_ways(sw, lab, wire):
    # The 802.1Q tag is not part of the MTU, on the way in or out.
    net = lab.network("vlan", "physnet1", seg=109, mtu=1000)
    a, b, host = new_mac(), new_mac(), new_mac()
    pb = lab.port(net, b)
    before = physnet_counters(sw, "physnet1")["drops"]
    at_mtu = udp(host, b, b"in-1000", ip_len=1000, vlan=109)
    above = udp(host, b, b"in-1001", ip_len=1001, vlan=109)
    wire_send(lab, wire, [at_mtu, above])
    assert drop_delta(before, physnet_counters(sw, "physnet1")["drops"]) == {"mtu_exceeded": 1}
    assert [bytes(f) for f in pb.received()] == [untag(at_mtu)]

    out_at, out_above = udp(a, host, b"out-1000", ip_len=1000), udp(a, host, b"out-1001", ip_len=1001)
    pa = lab.port(net, a, send=[out_at, out_above])
    lab.sent_all(pa, 2)
    on_wire = from_src(wire.drain(), a)
    assert [untag(f) for f in on_wire] == [bytes(out_at)]
    assert len(on_wire[0]) == 1000 + 14 + 4
    assert pa.stats()["drops"] == {"mtu_exceeded": 1}


def _arp_bad_hardware(src):
    arp = bytearray(bytes(ARP(hwsrc=src, psrc="10.9.0.1", pdst="10.9.0.2")))
    arp[0:2] = b"\x00\x06"  # hardware type IEEE 802, not Ethernet
    return Ether(src=src, dst=BCAST, type=0x0806) / Raw(bytes(arp))


MALFORMED = {
    "runt_frame": lambda s, d: Raw(bytes.fromhex(d.replace(":", "")) + b"\x02\xe2\x00\x00"),
    "too_many_vlan_tags": lambda s, d: Ether(src=s, dst=d) / Dot1Q(vlan=1) / Dot1Q(vlan=2) /
    Dot1Q(vlan=3) / IP() / UDP() / Raw(b"x" * 30),
    "vlan_truncated": lambda s, d: Ether(src=s, dst=d, type=0x8100) / Raw(b"\x00\x05"),
    "arp_malformed": lambda s, d: _arp_bad_hardware(s),
    "ipv4_truncated": lambda s, d: Ether(src=s, dst=d) / IP(len=400) / UDP() / Raw(b"x" * 30),
    "ipv4_bad_version": lambda s, d: Ether(src=s, dst=d, type=0x0800) / IP(version=5) / UDP() /
    Raw(b"x" * 30),
    "ipv4_bad_ihl": lambda s, d: Ether(src=s, dst=d) / IP(ihl=4) / UDP() / Raw(b"x" * 30),
    "ipv4_bad_total_length": lambda s, d: Ether(src=s, dst=d) / IP(len=12) / UDP() / Raw(b"x" * 30),
    "ipv6_bad_version": lambda s, d: Ether(src=s, dst=d, type=0x86dd) / IPv6(version=4) / UDP() /
    Raw(b"x" * 30),
    "l4_truncated": lambda s, d: Ether(src=s, dst=d) / IP(proto=17) / Raw(b"abc"),
    "tcp_bad_offset": lambda s, d: Ether(src=s, dst=d) / IP() / TCP(dataofs=2) / Raw(b"x" * 30),
}


def test_malformed_frames_are_dropped_with_their_reason(sw, lab):
    net = lab.network("local")
    a, b = new_mac(), new_mac()
    pb = lab.port(net, b)
    bad = [make(a, b) for make in MALFORMED.values()]
    good = udp(a, b, b"well-formed")
    pa = lab.port(net, a, send=bad + [good])
    lab.sent_all(pa, len(bad) + 1)
    assert pa.stats()["drops"] == {reason: 1 for reason in MALFORMED}
    assert [bytes(f) for f in pb.received()] == [bytes(good)]


def test_multicast_or_zero_source_mac_is_dropped(sw, lab):
    net = lab.network("local")
    a, b = new_mac(), new_mac()
    pb = lab.port(net, b)
    pa = lab.port(net, a, send=[udp("01:00:5e:00:00:01", b, b"mcast-src"),
                                udp("00:00:00:00:00:00", b, b"zero-src"),
                                udp(a, b, b"good")])
    lab.sent_all(pa, 3)
    assert pa.stats()["drops"] == {"invalid_src_mac": 2}
    assert len(pb.received()) == 1


def test_drop_counters_add_up_across_ports_and_workers(sw, lab):
    """The switch-wide drop map is the sum of the per-port ones."""
    st = sw.stats()
    total = {}
    for p in st["ports"]:
        for k, v in p["drops"].items():
            total[k] = total.get(k, 0) + v
    # Ports unbound earlier in this module took their counters with them, so
    # the switch-wide totals may be larger, never smaller.
    for k, v in total.items():
        assert st["drops"].get(k, 0) >= v, k
    workers = {}
    for w in st["workers"]:
        for k, v in w["drops"].items():
            workers[k] = workers.get(k, 0) + v
    assert workers == st["drops"]


# ---- ports that come and go ----------------------------------------------------


def test_rebound_port_receives_on_its_new_device_f1(sw, lab, wire):
    """A reboot is an unbind and a bind of the same port id and MAC on a new
    device (F1, docs/design.md): the same flow must reach the new device, and only it."""
    net = lab.network("vlan", "physnet1", seg=114)
    m, host = new_mac(), new_mac()
    first = lab.port(net, m)
    port_id = first.id
    frame = udp(host, m, b"same-flow", vlan=114)
    wire_send(lab, wire, [frame])
    assert [bytes(f) for f in first.received()] == [untag(frame)]  # unbinds it

    second = Port(sw, net, m, None, pid=port_id)
    lab.ports.append(second)
    second.bind()
    wire_send(lab, wire, [frame, frame])
    assert [bytes(f) for f in second.received()] == [untag(frame)] * 2
    assert [bytes(f) for f in read_pcap(first.tx)] == [untag(frame)]


def test_port_on_a_reused_datapath_index_starts_from_zero(sw, lab):
    net = lab.network("local")
    a, b = new_mac(), new_mac()
    pb = lab.port(net, b)
    pa = lab.port(net, a, send=[udp(a, b, b"count-me")] * 4 + [udp(a, b, b"x", vlan=3)])
    lab.sent_all(pa, 5)
    old_dp = sw.call("port.show", {"id": pa.id})["dp_port"]
    pa.unbind()
    pc = lab.port(net, new_mac())
    assert sw.call("port.show", {"id": pc.id})["dp_port"] == old_dp, "test premise"
    c = pc.stats()
    assert (c["rx_packets"], c["rx_bytes"], c["tx_packets"], c["tx_bytes"], c["drops"]) == \
        (0, 0, 0, 0, {})
    assert pb.stats()["tx_packets"] == 4
