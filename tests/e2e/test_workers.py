"""Two workers: rx queues split between them, one tx queue shared (net_pcap
has one), nothing lost or reordered per sender. The two worker lcores share
one CPU (EAL --lcores), so this runs on a 2-core machine."""
import os

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from conftest import Port, new_mac, read_pcap_bytes, wait_for, write_pcap

N = 1000  # frames per sender and destination


@pytest.fixture(scope="module")
def sw(straitd_factory):
    cpu = max(0, (os.cpu_count() or 1) - 1)
    sw = straitd_factory(physnets={"physnet1": "net_pcap_up1,tx_pcap={tmp}/physnet1_tx.pcap"},
                         name="workers", workers=(1, 2),
                         eal=["--lcores", f"0@0,1@{cpu},2@{cpu}", "--main-lcore", "0"])
    sw.physnet1_tx = sw.tmp / "physnet1_tx.pcap"
    return sw


def frames(src, dst, tag):
    """N UDP frames whose payload starts with TAG-000000, TAG-000001, ...
    (made as bytes from one template: scapy is slow at thousands)."""
    tmpl = bytes(Ether(src=src, dst=dst) / IP(src="10.8.0.1", dst="10.8.0.2") /
                 UDP(sport=7000, dport=8000, chksum=0) / Raw(b"\0" * 40))
    return [tmpl[:42] + (b"%s-%06d" % (tag, i)).ljust(40, b".") for i in range(N)]


def payloads(frames_, tag, offset=42):
    """The sequence numbers of the frames carrying tag, in order."""
    n = len(tag) + 7
    return [f[offset:offset + n] for f in frames_ if f[offset:offset + len(tag)] == tag]


def numbered(tag):
    return [b"%s-%06d" % (tag, i) for i in range(N)]


def test_two_workers_poll_disjoint_rx_queues(sw, lab):
    net = lab.network("local")
    for _ in range(3):
        lab.port(net, new_mac())
    show = sw.call("show")
    assert [(w["id"], w["lcore"]) for w in show["workers"]] == [(0, 1), (1, 2)]
    queues = [(q["port"], q["queue"]) for w in show["workers"] for q in w["rx_queues"]]
    assert len(queues) == len(set(queues)) == 4  # the physnet and three ports, each polled once
    assert all(w["rx_queues"] for w in show["workers"])


def test_senders_on_two_workers_lose_and_reorder_nothing(sw, lab):
    net = lab.network("vlan", "physnet1", seg=20)
    a, b, c, nobody = new_mac(), new_mac(), new_mac(), new_mac()
    pc = lab.port(net, c)
    pa = lab.port(net, a, send=frames(a, c, b"a2c") + frames(a, nobody, b"a2x"))
    pb = lab.port(net, b, send=frames(b, c, b"b2c") + frames(b, nobody, b"b2x"))
    owner = {q["port"]: w["id"] for w in sw.call("show")["workers"] for q in w["rx_queues"]}
    dp = {p.id: sw.call("port.show", {"id": p.id})["dp_port"] for p in (pa, pb)}
    assert owner[dp[pa.id]] != owner[dp[pb.id]], "the senders are polled by different workers"
    lab.sent_all(pa, 2 * N, timeout=20)
    lab.sent_all(pb, 2 * N, timeout=20)
    wait_for(lambda: pc.stats()["tx_packets"] >= 4 * N, timeout=10, what="c's frames")

    pc.unbind()
    got = read_pcap_bytes(pc.tx)
    assert pc.final_stats["tx_packets"] == len(got) == 4 * N  # unicast to c + flooded unknowns
    for tag in (b"a2c", b"b2c", b"a2x", b"b2x"):
        assert payloads(got, tag) == numbered(tag), tag
    phys = [f for f in read_pcap_bytes(sw.physnet1_tx) if f[6:12] in (mac_bytes(a), mac_bytes(b))]
    assert len(phys) == 2 * N
    assert all(f[12:16] == b"\x81\x00\x00\x14" for f in phys)  # 802.1Q, VLAN 20
    for tag in (b"a2x", b"b2x"):
        assert payloads(phys, tag, offset=46) == numbered(tag), tag
    assert sw.stats()["drops"] == {}


def mac_bytes(mac):
    return bytes.fromhex(mac.replace(":", ""))


def test_port_rebound_many_times_under_traffic(sw, lab, tmp_path):
    """Unbind/bind cycles (reboots, detach+attach) while the other port floods
    the network and both workers poll: no crash, no stray drops, the final
    binding forwards."""
    net = lab.network("vlan", "physnet1", seg=21)
    a, b = new_mac(), new_mac()
    pkt = bytes(Ether(src=a, dst=b) / IP() / UDP() / Raw(b"z" * 40))
    bcast = bytes(Ether(src=a, dst="ff:ff:ff:ff:ff:ff") / IP() / UDP() / Raw(b"z" * 40))
    write_pcap(tmp_path / "a.pcap", [pkt, bcast])
    pa = Port(sw, net, a, None)
    pa.devargs = f"{pa.vdev},rx_pcap={tmp_path}/a.pcap,infinite_rx=1,tx_pcap=/dev/null"
    lab.ports.append(pa)
    pa.bind()
    port_b = None
    for _ in range(20):
        port_b = Port(sw, net, b, None, pid=port_b.id if port_b else None)
        lab.ports.append(port_b)
        port_b.bind()
        port_b.unbind()
    port_b = Port(sw, net, b, None, pid=port_b.id)
    lab.ports.append(port_b)
    port_b.bind()
    wait_for(lambda: port_b.stats()["tx_packets"] > 1000, what="traffic to the last binding")
    pa.unbind()
    assert sw.stats()["drops"] == {}
    port_b.unbind()
    got = set(read_pcap_bytes(port_b.tx))
    assert got == {pkt, bcast}
