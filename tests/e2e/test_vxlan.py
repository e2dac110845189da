"""VXLAN tenant networks between two hosts (issue 6; the API in docs/api.md,
section VXLAN).

Two straitd on this machine play two hypervisors, "host1" and "host2":
each its own EAL --file-prefix, state directory, API socket and config with
a [vtep] (10.99.0.1 and 10.99.0.2) on physnet "underlay". The underlay is
one veth pair: host1 drives one end, host2 the other (net_af_packet), so
what one host's VTEP sends the other receives, and tshark can watch the
wire on host1's end. Each host has the same vxlan network (VNI 5001) and
one VM port on a veth pair of its own: the test is the VM on the far end
and sends and receives raw frames (bytes, exactly as they crossed the wire).

The orchestrator's part (neutron's l2population) is played through the
API: each host's FDB holds the other host's VM MAC behind the other VTEP,
and its flood list names the other VTEP. The next hop of each remote VTEP
is resolved by ARP on the underlay (no next_hop_mac): the module first
sends frames until both hosts report their remote VTEP resolved.

What a user sees is asserted: frames each VM receives byte for byte,
frames on the underlay as tshark decodes them, drop counters by reason,
tunnel.show across a restart.
"""
import itertools
import os
import select
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.layers.vxlan import VXLAN
from scapy.packet import Raw

from conftest import Netns, Straitd, Veth, config_text, read_pcap_bytes, tshark_fields, uuid_for, wait_for

VTEP1, VTEP2 = "10.99.0.1", "10.99.0.2"
VNI = 5001
OTHER_VNI = 5999  # a network only host1 has
NET = "vx-tenant"
UNDERLAY = "physnet:underlay"
UNDERLAY_MTU = 1500
NET_MTU = UNDERLAY_MTU - 50
BCAST = "ff:ff:ff:ff:ff:ff"
VXLAN_OVERHEAD = 14 + 20 + 8 + 8


_seq = itertools.count(1)


# ---- veth pairs -------------------------------------------------------------------


# ---- frames -----------------------------------------------------------------------


def pad60(b):
    b = bytes(b)
    return b + b"\0" * (60 - len(b)) if len(b) < 60 else b


def udp_frame(src, dst, payload, sport=4000, dport=5000, size=None):
    """VM src -> VM dst (or a MAC), UDP; size: the whole frame's length."""
    dst_mac = dst if isinstance(dst, str) else dst.mac
    dst_ip = "192.168.77.255" if isinstance(dst, str) else dst.ip
    p = Ether(src=src.mac, dst=dst_mac) / IP(src=src.ip, dst=dst_ip, flags="DF") / \
        UDP(sport=sport, dport=dport) / Raw(payload)
    b = bytes(p)
    if size is not None:
        assert size >= len(b)
        p = Ether(src=src.mac, dst=dst_mac) / IP(src=src.ip, dst=dst_ip, flags="DF") / \
            UDP(sport=sport, dport=dport) / Raw(payload + b"x" * (size - len(b)))
        b = bytes(p)
        assert len(b) == size
    return pad60(b)


def summary(frames):
    out = []
    for f in frames:
        try:
            out.append(Ether(f).summary())
        except Exception:
            out.append(bytes(f).hex())
    return out


def drop_delta(before, after):
    return {k: after.get(k, 0) - before.get(k, 0) for k in set(before) | set(after)
            if after.get(k, 0) != before.get(k, 0)}


# ---- hosts and VMs --------------------------------------------------------------------


class Vm:
    def __init__(self, lab, host, name, mac, ip, network=NET):
        self.host, self.name, self.mac, self.ip, self.network = host, name, mac, ip, network
        self.id = uuid_for(0x7c0000 + next(_seq))
        self.veth = Veth("v")
        lab.veths.append(self.veth)  # removed at the end of the module
        self.veth.create(netns=host.netns)
        self.dev = f"net_af_packet_vx{next(_seq)}"

    def bind(self):
        self.host.sw.call("port.bind", {
            "id": self.id, "network": self.network, "mac": self.mac,
            "attach": {"type": "ethdev", "devargs": f"{self.dev},iface={self.veth.inside}"}})
        return self

    def unbind(self):
        self.host.sw.call("port.unbind", {"id": self.id})

    def stats(self):
        return self.host.sw.port_stats(self.id)

    def send(self, *frames):
        """Sends frames from the VM; returns once its host took them all."""
        before = self.stats()["rx_packets"]
        self.veth.send(frames)
        wait_for(lambda: self.stats()["rx_packets"] >= before + len(frames),
                 what=f"{len(frames)} frames from {self.name}")
        return list(frames)

    def recv(self, quiet=0.15):
        return self.veth.recv(quiet)


class Host:
    def __init__(self, name, tmp, local_ip, underlay_dev, netns=None):
        self.name, self.local_ip, self.netns = name, local_ip, netns
        extra = "\n".join([
            "[vtep]",
            f'local_ip = "{local_ip}"',
            'physnet = "underlay"',
            f"underlay_mtu = {UNDERLAY_MTU}",
        ])
        self.sw = Straitd(tmp, config=config_text(
            tmp, {"underlay": f"net_af_packet_ul{name[-1]},iface={underlay_dev}"}, extra=extra),
            netns=netns)

    def call(self, method, params=None):
        return self.sw.call(method, params)

    def show(self, network=None):
        return self.call("tunnel.show", {"network": network} if network else {})

    def remote(self, ip):
        for r in self.show()["remote_vteps"]:
            if r["ip"] == ip:
                return r
        return None

    def drops(self):
        return self.sw.stats()["drops"]

    def port_drops(self, port_id):
        return self.sw.port_stats(port_id)["drops"]


class Lab:
    """Two hosts, the underlay between them, a VM on each."""

    def __init__(self, tmp_factory):
        self.tmp_factory = tmp_factory
        self.veths, self.hosts = [], []
        self.netns2 = None

    def setup(self):
        # host2 in a network namespace of its own, as a second hypervisor is
        # (and so that the two straitd's net_af_packet fanout groups cannot
        # collide, see conftest.Netns): the underlay's inner end is its NIC.
        self.netns2 = Netns("vx")
        self.underlay = Veth("u")
        self.veths.append(self.underlay)
        self.underlay.create(sock=False, netns=self.netns2)
        self.host1 = Host("host1", self.tmp_factory.mktemp("host1"), VTEP1, self.underlay.outside)
        self.host2 = Host("host2", self.tmp_factory.mktemp("host2"), VTEP2, self.underlay.inside,
                          netns=self.netns2)
        for h in (self.host1, self.host2):
            self.hosts.append(h)
            h.sw.start()
        for h in self.hosts:
            h.call("network.create", {"id": NET, "type": "vxlan", "segmentation_id": VNI})
        self.vm1 = Vm(self, self.host1, "vm1", "02:7c:00:00:00:01", "192.168.77.1")
        self.vm2 = Vm(self, self.host2, "vm2", "02:7c:00:00:00:02", "192.168.77.2")
        self.vm1.bind()
        self.vm2.bind()
        # l2population: each host learns where the other's VM is.
        for h, other, vm in ((self.host1, VTEP2, self.vm2), (self.host2, VTEP1, self.vm1)):
            h.call("tunnel.fdb.add", {"network": NET, "entries": [{"mac": vm.mac, "vtep": other}]})
            h.call("tunnel.flood.set", {"network": NET, "vteps": [other]})
        return self

    def resolve(self, src, dst, timeout=10.0):
        """Sends frames src -> dst until src's host reports dst's VTEP
        resolved (the first ones may be dropped vtep_unresolved while the
        ARP for the next hop is out); discards what reached dst."""
        remote_ip = dst.host.local_ip
        deadline = time.monotonic() + timeout
        i = 0
        while True:
            r = src.host.remote(remote_ip)
            if r is not None and r["resolved"]:
                break
            assert time.monotonic() < deadline, \
                f"{src.host.name}: {remote_ip} not resolved after {timeout}s: {src.host.show()}"
            src.send(udp_frame(src, dst, b"resolve-%d" % i))
            i += 1
            time.sleep(0.2)
        time.sleep(0.1)
        dst.recv(quiet=0.1)
        src.recv(quiet=0.05)
        return r

    def close(self):
        problems = []
        for h in self.hosts:
            if h.sw.proc is None:
                continue
            try:
                died = h.sw.proc.poll()
                rc = h.sw.stop()
                if died is not None or rc != 0:
                    problems.append(f"{h.name}: exited {died} before the end; stop -> {rc}\n"
                                    + "\n".join(h.sw.log.read_text().splitlines()[-20:]))
            except Exception as e:
                problems.append(f"{h.name}: {e}")
            finally:
                h.sw.kill()
        for v in self.veths:
            v.destroy()
        if self.netns2 is not None:
            self.netns2.delete()
        return problems


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    probe = Veth("p")
    try:
        probe.create(sock=False)
    except Exception as e:
        pytest.skip(f"cannot create veth pairs (the underlay and the VMs need them): {e}")
    finally:
        probe.destroy()
    lab = Lab(tmp_path_factory)
    try:
        lab.setup()
        lab.resolve(lab.vm1, lab.vm2)
        lab.resolve(lab.vm2, lab.vm1)
        lab.drops_after_resolve = {h.name: h.drops() for h in lab.hosts}
        yield lab
    finally:
        problems = lab.close()
    assert not problems, "\n".join(problems)


# ---- tests ------------------------------------------------------------------------


def test_tunnel_show_reports_vtep_fdb_flood_and_resolved_next_hops(lab):
    for h, other, remote_vm in ((lab.host1, lab.host2, lab.vm2), (lab.host2, lab.host1, lab.vm1)):
        t = h.show()
        assert t["vtep"]["local_ip"] == h.local_ip
        assert t["vtep"]["physnet"] == "underlay"
        assert t["vtep"]["udp_port"] == 4789
        [net] = [n for n in t["networks"] if n["id"] == NET]
        assert net["vni"] == VNI
        assert [(e["mac"].lower(), e["vtep"]) for e in net["fdb"]] == \
            [(remote_vm.mac, other.local_ip)]
        assert net["flood"] == [other.local_ip]
        r = h.remote(other.local_ip)
        assert r["resolved"] is True
        # On-link (no next_hop): the next hop is the VTEP, its MAC the other
        # host's underlay NIC.
        assert r["mac"].lower() == other.show()["vtep"]["mac"].lower()
        assert h.show(NET)["networks"] == [net]


def test_frames_before_resolution_were_counted_vtep_unresolved(lab):
    """The module resolved host1 -> host2 first: host1 dropped the first
    frame(s) as vtep_unresolved while its ARP was out; host2 may have
    learned host1's MAC from that ARP request already. Nothing else."""
    d1, d2 = lab.drops_after_resolve["host1"], lab.drops_after_resolve["host2"]
    assert set(d1) == {"vtep_unresolved"} and d1["vtep_unresolved"] >= 1, d1
    assert set(d2) <= {"vtep_unresolved"}, d2


def test_unicast_between_vms_on_two_hosts_both_ways(lab):
    vm1, vm2 = lab.vm1, lab.vm2
    there = [udp_frame(vm1, vm2, b"to-vm2-%d" % i, sport=4000 + i) for i in range(5)]
    vm1.send(*there)
    got = vm2.recv()
    assert got == there, summary(got)
    assert vm1.recv(quiet=0.05) == []

    back = [udp_frame(vm2, vm1, b"to-vm1-%d" % i, sport=6000 + i) for i in range(5)]
    vm2.send(*back)
    got = vm1.recv()
    assert got == back, summary(got)
    assert vm2.recv(quiet=0.05) == []
    # Counted as the hosts' underlay traffic: encapsulated out, decapsulated in.
    assert lab.host1.sw.port_stats(UNDERLAY)["tx_packets"] >= 5
    assert lab.host2.sw.port_stats(UNDERLAY)["rx_packets"] >= 5


def test_arp_broadcast_reaches_the_other_host_once_and_the_reply_comes_back(lab):
    vm1, vm2 = lab.vm1, lab.vm2
    req = pad60(Ether(src=vm1.mac, dst=BCAST) /
                ARP(op=1, hwsrc=vm1.mac, psrc=vm1.ip, pdst=vm2.ip))
    vm1.send(req)
    got = vm2.recv(quiet=0.3)
    assert got == [req], summary(got)
    # Not back into the tunnel on host2, not back to its sender.
    assert vm1.recv(quiet=0.1) == []

    reply = pad60(Ether(src=vm2.mac, dst=vm1.mac) /
                  ARP(op=2, hwsrc=vm2.mac, psrc=vm2.ip, hwdst=vm1.mac, pdst=vm1.ip))
    vm2.send(reply)
    assert vm1.recv() == [reply]

    udp_bcast = udp_frame(vm2, BCAST, b"bcast-from-vm2")
    vm2.send(udp_bcast)
    got = vm1.recv(quiet=0.3)
    assert got == [udp_bcast], summary(got)
    assert vm2.recv(quiet=0.1) == []


def test_arp_responder_answers_for_the_remote_vm_on_this_host(lab):
    """l2population with the remote port's address (neutron's arp_responder,
    on by default): host1 answers vm1's ARP request for vm2's address itself,
    as vm2 would; nothing crosses the underlay and vm2 sees no request. An
    address no entry carries still goes to the other host."""
    vm1, vm2, h1 = lab.vm1, lab.vm2, lab.host1
    h1.sw.ctl("tunnel", "fdb", "add", NET, vm2.mac, VTEP2, "--ip", vm2.ip)
    try:
        [net] = h1.show(NET)["networks"]
        assert net["arp_responder"] is True
        assert [(e["mac"].lower(), e["ip"]) for e in net["fdb"]] == [(vm2.mac, vm2.ip)]
        assert vm2.ip in h1.sw.ctl("tunnel", "show", NET).stdout

        def replies():
            return sum(w["arp_responder_replies"] for w in h1.sw.stats()["workers"])

        before, tx_before = replies(), h1.sw.port_stats(UNDERLAY)["tx_packets"]
        req = pad60(Ether(src=vm1.mac, dst=BCAST) /
                    ARP(op=1, hwsrc=vm1.mac, psrc=vm1.ip, pdst=vm2.ip))
        vm1.send(req)
        got = vm1.recv()
        assert len(got) == 1, summary(got)
        r = Ether(got[0])
        assert (r.src.lower(), r.dst.lower()) == (vm2.mac, vm1.mac), r.summary()
        assert r[ARP].op == 2, r.summary()
        assert (r[ARP].hwsrc.lower(), r[ARP].psrc) == (vm2.mac, vm2.ip), r.summary()
        assert (r[ARP].hwdst.lower(), r[ARP].pdst) == (vm1.mac, vm1.ip), r.summary()
        assert got[0] == pad60(Ether(src=vm2.mac, dst=vm1.mac) /
                               ARP(op=2, hwsrc=vm2.mac, psrc=vm2.ip, hwdst=vm1.mac, pdst=vm1.ip))
        assert vm2.recv(quiet=0.3) == []
        assert h1.sw.port_stats(UNDERLAY)["tx_packets"] == tx_before
        assert replies() == before + 1

        unknown = pad60(Ether(src=vm1.mac, dst=BCAST) /
                        ARP(op=1, hwsrc=vm1.mac, psrc=vm1.ip, pdst="192.168.77.99"))
        vm1.send(unknown)
        assert vm2.recv(quiet=0.3) == [unknown]
        assert vm1.recv(quiet=0.05) == []
        assert replies() == before + 1
    finally:
        h1.call("tunnel.fdb.add", {"network": NET, "entries": [{"mac": vm2.mac, "vtep": VTEP2}]})


def test_underlay_frames_decode_as_vxlan_in_tshark(lab, tmp_path):
    """tshark on the underlay while the VMs talk both ways. Each end of the
    underlay veth is captured for what arrives on it: net_af_packet sends
    past the qdisc, where a capture on the sending end does not see it."""
    vm1, vm2 = lab.vm1, lab.vm2
    # Frames host1 sent arrive on host2's end, and the other way round.
    caps = {(VTEP1, VTEP2): tmp_path / "to_host2.pcap", (VTEP2, VTEP1): tmp_path / "to_host1.pcap"}
    procs = []
    for host, pcap in ((lab.host2, caps[(VTEP1, VTEP2)]), (lab.host1, caps[(VTEP2, VTEP1)])):
        iface = lab.underlay.inside if host.netns else lab.underlay.outside
        argv = ["tshark", "-q", "-i", iface, "-f", "udp", "-F", "pcap", "-w", str(pcap)]
        procs.append(subprocess.Popen(host.netns.cmd(*argv) if host.netns else argv,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        # dumpcap writes the file header once it captures.
        for pcap in caps.values():
            wait_for(lambda: pcap.exists() and pcap.stat().st_size >= 24, timeout=15,
                     what=f"tshark capturing into {pcap.name}")
        time.sleep(0.3)
        sent1 = [udp_frame(vm1, vm2, b"tshark-1-%d" % i, sport=7000 + i) for i in range(4)]
        sent2 = [udp_frame(vm2, vm1, b"tshark-2-%d" % i, sport=8000 + i) for i in range(4)]
        vm1.send(*sent1)
        assert vm2.recv() == sent1
        vm2.send(*sent2)
        assert vm1.recv() == sent2
        time.sleep(0.5)  # dumpcap writes what it has when it stops
    finally:
        for ts in procs:
            ts.send_signal(signal.SIGINT)
        for ts in procs:
            try:
                ts.wait(10)
            except subprocess.TimeoutExpired:
                ts.kill()
                ts.wait()

    mac1 = lab.host1.show()["vtep"]["mac"].lower()
    mac2 = lab.host2.show()["vtep"]["mac"].lower()
    dirs = {(VTEP1, VTEP2): (mac1, mac2, sent1), (VTEP2, VTEP1): (mac2, mac1, sent2)}
    for (src_ip, dst_ip), pcap in caps.items():
        smac, dmac, sent = dirs[(src_ip, dst_ip)]
        rows = tshark_fields(pcap, ["vxlan.vni", "ip.src", "ip.dst", "ip.flags.df", "ip.ttl",
                                    "udp.srcport", "udp.dstport", "udp.checksum", "eth.src",
                                    "eth.dst", "ip.checksum.status", "vxlan.flags"],
                             display_filter="vxlan")
        frames = read_pcap_bytes(pcap)
        # The capture holds only these VXLAN frames (nothing else in UDP).
        assert len(rows) == len(frames) == len(sent), (pcap.name, rows, len(frames))
        for row, raw, want in zip(rows, frames, sent):
            # occurrence=a: outer value first, then the inner frame's
            vni, src, dst, df, ttl, sport, dport, csum, esrc, edst, ipck, _flags = \
                [v.split(",")[0] for v in row]
            assert int(vni) == VNI, row
            assert (src, dst) == (src_ip, dst_ip), row
            assert (esrc.lower(), edst.lower()) == (smac, dmac), row
            assert df in ("1", "True"), row
            assert int(ttl) == 64, row
            assert int(dport) == 4789, row
            assert 49152 <= int(sport) <= 65535, row
            assert int(csum, 0) == 0, row  # no UDP checksum
            assert ipck in ("2", "Good", ""), row  # when tshark checks it: good
            # Bytes: 50 bytes of outer headers, then what the VM sent.
            outer = Ether(raw)
            assert outer[IP].flags.DF and outer[IP].frag == 0
            assert outer[UDP].dport == 4789 and outer[VXLAN].vni == VNI
            assert outer[VXLAN].flags == 0x08
            chk = IP(bytes(outer[IP])[:20])
            del chk.chksum
            assert IP(bytes(chk)).chksum == outer[IP].chksum, "outer IPv4 checksum"
            assert raw[VXLAN_OVERHEAD:] == want, summary([raw[VXLAN_OVERHEAD:], want])
        # Entropy: the four inner flows (their own UDP source ports) do not
        # all share one outer source port.
        assert len({r[5].split(",")[0] for r in rows}) > 1, rows


def test_unknown_vni_is_dropped_by_the_receiving_host(lab):
    """A network only host1 has (VNI 5999) floods to host2: host2 has no
    network with that VNI and drops it as unknown_vni; VM2 gets nothing."""
    h1, h2 = lab.host1, lab.host2
    other = "vx-only-host1"
    h1.call("network.create", {"id": other, "type": "vxlan", "segmentation_id": OTHER_VNI})
    vm3 = Vm(lab, h1, "vm3", "02:7c:00:00:00:03", "192.168.78.3", network=other)
    vm3.bind()
    try:
        h1.call("tunnel.flood.set", {"network": other, "vteps": [VTEP2]})
        before = h2.drops()
        before_ul = h2.port_drops(UNDERLAY)
        rx_before = h2.sw.port_stats(UNDERLAY)["rx_packets"]
        frames = [udp_frame(vm3, BCAST, b"unknown-vni-%d" % i) for i in range(3)]
        vm3.send(*frames)
        wait_for(lambda: h2.sw.port_stats(UNDERLAY)["rx_packets"] >= rx_before + 3,
                 what="host2 receiving the VNI 5999 frames")
        wait_for(lambda: drop_delta(before, h2.drops()).get("unknown_vni", 0) >= 3,
                 what="host2 counting unknown_vni")
        assert drop_delta(before, h2.drops()) == {"unknown_vni": 3}
        assert drop_delta(before_ul, h2.port_drops(UNDERLAY)) == {"unknown_vni": 3}
        assert lab.vm2.recv(quiet=0.2) == []
        assert lab.vm1.recv(quiet=0.05) == []
    finally:
        vm3.unbind()
        h1.call("network.delete", {"id": other})


def test_inner_frames_above_the_network_mtu_are_dropped(lab):
    vm1, vm2 = lab.vm1, lab.vm2
    for h in lab.hosts:
        [n] = [n for n in h.call("network.list")["networks"] if n["id"] == NET]
        assert n["mtu"] == NET_MTU
    # The MTU is the IP packet's: a 14-byte Ethernet header on top.
    at_mtu = udp_frame(vm1, vm2, b"at-mtu", size=NET_MTU + 14)
    above = udp_frame(vm1, vm2, b"above-mtu", size=NET_MTU + 15)
    before = vm1.stats()["drops"]
    vm1.send(above)
    vm1.send(at_mtu)
    got = vm2.recv(quiet=0.3)
    assert got == [at_mtu], summary(got)
    assert drop_delta(before, vm1.stats()["drops"]) == {"mtu_exceeded": 1}
    # An encapsulated frame at the MTU fills the underlay's 1500 exactly.
    back_at = udp_frame(vm2, vm1, b"back-at-mtu", size=NET_MTU + 14)
    back_above = udp_frame(vm2, vm1, b"back-above", size=NET_MTU + 15)
    before = vm2.stats()["drops"]
    vm2.send(back_above, back_at)
    got = vm1.recv(quiet=0.3)
    assert got == [back_at], summary(got)
    assert drop_delta(before, vm2.stats()["drops"]) == {"mtu_exceeded": 1}


def test_vxlan_network_mtu_above_underlay_minus_50_is_refused(lab):
    r = lab.host1.sw.request("network.create", {"id": "vx-too-big", "type": "vxlan",
                                                "segmentation_id": 4242, "mtu": NET_MTU + 1})
    assert not r["ok"] and r["error"]["code"] == "invalid_argument", r
    r = lab.host1.sw.request("network.create", {"id": "vx-same-vni", "type": "vxlan",
                                                "segmentation_id": VNI})
    assert not r["ok"] and r["error"]["code"] == "conflict", r
    names = [n["id"] for n in lab.host1.call("network.list")["networks"]]
    assert "vx-too-big" not in names and "vx-same-vni" not in names


def test_straitctl_tunnel_show_and_fdb_round_trip(lab):
    h = lab.host1
    mac = "02:7c:00:00:00:99"
    h.sw.ctl("tunnel", "fdb", "add", NET, mac, VTEP2)
    out = h.sw.ctl("tunnel", "show", NET, json_out=True).stdout
    assert mac in out
    h.sw.ctl("tunnel", "fdb", "delete", NET, mac)
    [net] = h.show(NET)["networks"]
    assert mac not in [e["mac"].lower() for e in net["fdb"]]
    p = h.sw.ctl("tunnel", "fdb", "delete", NET, mac, check=False)
    assert p.returncode != 0


def test_restart_of_host2_restores_tunnel_state_and_traffic(lab):
    """Last in the module: host2 stops and starts on its state directory."""
    h2 = lab.host2

    def state(t):
        return {"vtep": t["vtep"], "networks": t["networks"],
                "remote_vteps": [(r["ip"], r["next_hop"]) for r in t["remote_vteps"]]}

    before = h2.show()
    assert h2.sw.stop() == 0
    h2.sw.start()
    after = h2.show()
    assert state(after) == state(before)
    assert [p["id"] for p in h2.call("port.list")["ports"]] == [lab.vm2.id]

    # host2 resolves host1 again; host1 still knows host2's underlay MAC.
    lab.resolve(lab.vm2, lab.vm1)
    lab.resolve(lab.vm1, lab.vm2)
    there = [udp_frame(lab.vm1, lab.vm2, b"after-restart-%d" % i) for i in range(3)]
    lab.vm1.send(*there)
    assert lab.vm2.recv() == there
    back = [udp_frame(lab.vm2, lab.vm1, b"after-restart-back-%d" % i) for i in range(3)]
    lab.vm2.send(*back)
    assert lab.vm1.recv() == back
    assert state(h2.show()) == state(before)
