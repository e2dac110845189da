"""Stateful security groups, connection tracking and port security end to end
(issue 5; the API in docs/api.md, the datapath in dataplane/port_security.h).

One straitd for the module with two workers (sharing one CPU, as in
test_workers.py: the two directions of a connection may be handled by
different workers, LESSONS F9) and physnet1 on a veth pair. Every "VM" is a
port on a veth pair of its own (net_af_packet): the test plays the VM on the
far end and sends and receives at any time, so a conversation goes both ways
step by step. Each test makes its own network, groups, ports and addresses
(a /24 and a /64 of its own: the conntrack zone is the network's local VLAN,
which later networks reuse) and removes them at its end.

What a user sees is asserted: the frames each VM or the physical network
receives, byte for byte, and the per-port drop counters by reason. A drop is
counted on the port the frame came in from (the sender's, or physnet1's for
frames from outside), also when the receiver's ingress rules refuse it (a
refused copy of a flood: see test_flooded_frames_reach_only_the_vms_whose_
ingress_allows_them). Where both sides refuse a new connection, or the
contract leaves the reason open, either reason is accepted (deny_one).

Two more straitd: one restarted on its state directory (persistence), and
one with `[conntrack] capacity = 1024` and `tcp_loose = false` (a SYN flood).
"""
import ipaddress
import itertools
import json
import os
import select
import socket
import struct
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
from scapy.layers.dhcp import BOOTP, DHCP
from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.inet6 import (ICMPv6DestUnreach, ICMPv6EchoReply, ICMPv6EchoRequest,
                                ICMPv6ND_NS, ICMPv6ND_RA, ICMPv6NDOptPrefixInfo,
                                ICMPv6NDOptSrcLLAddr, ICMPv6PacketTooBig, ICMPv6Unknown, IPv6)
from scapy.layers.l2 import ARP, GRE, Ether
from scapy.packet import Raw

import conftest
from conftest import Lab, Netns, Straitd, config_text, new_mac, unique, uuid_for, wait_for, write_pcap

BCAST = "ff:ff:ff:ff:ff:ff"
PHYSNET = "physnet:physnet1"

# ---- veth pairs ----------------------------------------------------------------



class Veth(conftest.Veth):
    """conftest's raw veth, its frames as Frames."""

    def __init__(self):
        super().__init__("sg")

    def recv(self, quiet=0.1, timeout=5.0):
        return Frames(super().recv(quiet, timeout))


# ---- addresses and frames ----------------------------------------------------------


def link_local(mac):
    """The IPv6 link-local address of a MAC (fe80::/64 + modified EUI-64)."""
    b = bytes.fromhex(mac.replace(":", ""))
    eui = bytes([b[0] ^ 0x02]) + b[1:3] + b"\xff\xfe" + b[3:]
    return str(ipaddress.IPv6Address(b"\xfe\x80" + b"\0" * 6 + eui))


class Endpoint:
    """A MAC and the addresses it uses (a VM, or a host on the physnet)."""

    def __init__(self, name, mac, ip4, ip6):
        self.name, self.mac, self.ip4, self.ip6 = name, mac, ip4, ip6

    @property
    def lla(self):
        return link_local(self.mac)

    def ip(self, v6):
        return self.ip6 if v6 else self.ip4

    def __repr__(self):
        return f"<{self.name} {self.mac} {self.ip4} {self.ip6}>"


class Frames(list):
    """Frames as bytes; printed as scapy summaries (assertion messages)."""

    def __repr__(self):
        out = []
        for f in self:
            try:
                out.append(Ether(f).summary())
            except Exception:
                out.append(bytes(f).hex())
        return "Frames[" + ", ".join(f"{i}: {x}" for i, x in enumerate(out)) + "]"


def assert_frames(got, want, what=""):
    """got == want (lists of frames as bytes), or a readable difference."""
    got, want = Frames(got), Frames(want)
    if got != want:
        lines = [f"frames differ{' (' + what + ')' if what else ''}:", "  got:"]
        lines += [f"    {x}" for x in repr(got)[7:-1].split(", ") if x] or ["    (none)"]
        lines += ["  want:"] + ([f"    {x}" for x in repr(want)[7:-1].split(", ") if x] or ["    (none)"])
        extra = [f for f in got if f not in want]
        missing = [f for f in want if f not in got]
        lines += [f"  unexpected: {Frames(extra)!r}", f"  missing: {Frames(missing)!r}"]
        raise AssertionError("\n".join(lines))


def pad60(b):
    """Frames go on the wire at least 60 bytes long, as a NIC sends them: a
    veth pads nothing, and straitd forwards what it gets byte for byte."""
    b = bytes(b)
    return b + b"\0" * (60 - len(b)) if len(b) < 60 else b


def frame(src, dst, l4, v6=False, payload=b"", src_mac=None, dst_mac=None, src_ip=None,
          dst_ip=None):
    """Ethernet / IPv4 or IPv6 / l4 / payload from endpoint src to dst, as bytes."""
    eth = Ether(src=src_mac or src.mac, dst=dst_mac or dst.mac)
    if v6:
        l3 = IPv6(src=src_ip or src.ip6, dst=dst_ip or dst.ip6)
    else:
        l3 = IP(src=src_ip or src.ip4, dst=dst_ip or dst.ip4)
    p = eth / l3 / l4
    if payload:
        p = p / Raw(payload)
    return pad60(p)


def tcp(src, dst, sport, dport, flags="S", v6=False, payload=b"", seq=1000, ack=0, **kw):
    return frame(src, dst, TCP(sport=sport, dport=dport, flags=flags, seq=seq, ack=ack,
                               window=8192), v6, payload, **kw)


def udp(src, dst, sport, dport, v6=False, payload=b"udp-payload", **kw):
    return frame(src, dst, UDP(sport=sport, dport=dport), v6, payload, **kw)


def echo(src, dst, v6=False, reply=False, ident=0x77, seq=1, **kw):
    if v6:
        l4 = (ICMPv6EchoReply if reply else ICMPv6EchoRequest)(id=ident, seq=seq)
    else:
        l4 = ICMP(type=0 if reply else 8, id=ident, seq=seq)
    return frame(src, dst, l4, v6, b"ping-payload", **kw)


def icmp(src, dst, type_, code=0, v6=False, payload=b"icmp-payload", ident=0, **kw):
    """An ICMP message; ident: the identifier of IPv4 query messages
    (echo, timestamp, information, address mask)."""
    if v6:
        l4 = ICMPv6Unknown(type=type_, code=code)
    elif type_ in (0, 8, 13, 14, 15, 16, 17, 18):
        l4 = ICMP(type=type_, code=code, id=ident)
    else:
        l4 = ICMP(type=type_, code=code)
    return frame(src, dst, l4, v6, payload, **kw)


def quote(frm, v6):
    """What an ICMP error quotes of the IP packet in frame frm: the IPv4
    header and 8 bytes (RFC 792), or the whole (small) IPv6 packet."""
    if v6:
        plen = struct.unpack_from(">H", frm, 18)[0]
        return frm[14:14 + 40 + plen]
    ihl = (frm[14] & 0xf) * 4
    total = struct.unpack_from(">H", frm, 16)[0]
    return frm[14:14 + min(total, ihl + 8)]


def icmp_error(src, dst, original, kind, v6=False, src_ip=None):
    """An ICMP error from src to dst quoting the frame `original`. kind:
    "port_unreachable" or "too_big" (IPv4 fragmentation needed, IPv6 packet
    too big)."""
    if v6:
        l4 = ICMPv6DestUnreach(code=4) if kind == "port_unreachable" else ICMPv6PacketTooBig(mtu=1280)
    else:
        l4 = ICMP(type=3, code=3) if kind == "port_unreachable" else ICMP(type=3, code=4, nexthopmtu=1400)
    return frame(src, dst, l4 / Raw(quote(original, v6)), v6, src_ip=src_ip)


def arp(src, psrc=None, pdst="10.255.255.254", op=1, hwsrc=None, eth_src=None, dst=BCAST):
    return pad60(Ether(src=eth_src or src.mac, dst=dst) /
                 ARP(op=op, hwsrc=hwsrc or src.mac, psrc=src.ip4 if psrc is None else psrc,
                     pdst=pdst))


def dhcp_discover(src):
    return pad60(Ether(src=src.mac, dst=BCAST) / IP(src="0.0.0.0", dst="255.255.255.255") /
                 UDP(sport=68, dport=67) /
                 BOOTP(chaddr=bytes.fromhex(src.mac.replace(":", "")), xid=0x5ec) /
                 DHCP(options=[("message-type", "discover"), "end"]))


def dhcp_offer(server, client, server_ip=None):
    return pad60(Ether(src=server.mac, dst=BCAST) /
                 IP(src=server_ip or server.ip4, dst="255.255.255.255") /
                 UDP(sport=67, dport=68) /
                 BOOTP(op=2, yiaddr=client.ip4, chaddr=bytes.fromhex(client.mac.replace(":", "")),
                       xid=0x5ec) /
                 DHCP(options=[("message-type", "offer"), "end"]))


def router_advertisement(src):
    return pad60(Ether(src=src.mac, dst="33:33:00:00:00:01") /
                 IPv6(src=src.lla, dst="ff02::1", hlim=255) / ICMPv6ND_RA() /
                 ICMPv6NDOptSrcLLAddr(lladdr=src.mac) /
                 ICMPv6NDOptPrefixInfo(prefix="2001:db8:5::", prefixlen=64))


def neighbor_solicitation(src, target, dad=False):
    """A neighbour solicitation for target; dad: duplicate address detection
    (from ::, no source link-layer option)."""
    t = ipaddress.IPv6Address(target).packed
    nsma = "ff02::1:ff%02x:%02x%02x" % (t[13], t[14], t[15])
    p = (Ether(src=src.mac, dst="33:33:ff:%02x:%02x:%02x" % (t[13], t[14], t[15])) /
         IPv6(src="::" if dad else src.lla, dst=nsma, hlim=255) / ICMPv6ND_NS(tgt=target))
    if not dad:
        p = p / ICMPv6NDOptSrcLLAddr(lladdr=src.mac)
    return pad60(p)


class Tcp:
    """The frames of one TCP connection between endpoints a (the client)
    and b, sequence and acknowledgment numbers kept consistent."""

    def __init__(self, a, b, sport, dport, v6=False):
        self.a, self.b, self.sport, self.dport, self.v6 = a, b, sport, dport, v6
        self.next = {id(a): 1000, id(b): 70000}

    def _frame(self, frm, flags, payload=b""):
        to = self.b if frm is self.a else self.a
        sport, dport = (self.sport, self.dport) if frm is self.a else (self.dport, self.sport)
        seq = self.next[id(frm)]
        ack = self.next[id(to)] if "A" in flags else 0
        self.next[id(frm)] += len(payload) + (1 if ("S" in flags or "F" in flags) else 0)
        return tcp(frm, to, sport, dport, flags, self.v6, payload, seq=seq, ack=ack)

    def syn(self):
        return self._frame(self.a, "S", b"syn-payload")

    def synack(self):
        return self._frame(self.b, "SA")

    def ack(self):
        return self._frame(self.a, "A")

    def data(self, frm, payload):
        return self._frame(frm, "PA", payload)

    def fin(self, frm):
        return self._frame(frm, "FA")

    def final_ack(self, frm):
        return self._frame(frm, "A")


# ---- rules -----------------------------------------------------------------------


def rule(direction, protocol=None, lo=None, hi=None, eth="IPv4", prefix=None, remote_group=None):
    """A rule as security_group.create / security_group_rule.create take it."""
    r = {"direction": direction, "ethertype": eth}
    if protocol is not None:
        r["protocol"] = protocol
    if lo is not None:
        r["port_range_min"] = lo
    if hi is not None:
        r["port_range_max"] = hi
    if prefix is not None:
        r["remote_ip_prefix"] = prefix
    if remote_group is not None:
        r["remote_group_id"] = remote_group
    return r


EGRESS_ANY = [rule("egress"), rule("egress", eth="IPv6")]
INGRESS_ANY = [rule("ingress"), rule("ingress", eth="IPv6")]
ALLOW_ALL = EGRESS_ANY + INGRESS_ANY


def group_list(sw):
    """security_group.list's groups (a list, or {"security_groups": [...]})."""
    r = sw.call("security_group.list", {})
    if isinstance(r, dict):
        r = r["security_groups"]
    return sorted(r, key=lambda g: g["id"])


def pair_set(pairs):
    """Allowed address pairs as a comparable set ("10.0.0.5" and
    "10.0.0.5/32" are the same address; MACs in any case)."""
    return {(ipaddress.ip_network(p["ip_address"], strict=False), p["mac_address"].lower())
            for p in pairs}


def drop_delta(before, after):
    out = {}
    for k in set(before) | set(after):
        d = after.get(k, 0) - before.get(k, 0)
        if d:
            out[k] = d
    return out


# ---- the test environment --------------------------------------------------------

_subnet_seq = itertools.count(1)
_port_seq = itertools.count(1)


class Vm(Endpoint):
    """A port whose device is a veth pair: the test is the VM."""

    def __init__(self, env, name, network, mac, ip4, ip6):
        super().__init__(name, mac, ip4, ip6)
        self.env, self.sw, self.network = env, env.sw, network
        n = next(_port_seq)
        self.id = uuid_for(0x5e0000 + n)
        self.veth = Veth().create(netns=env.sw.netns)
        env.veths.append(self.veth)
        self.devargs = None
        self.new_device()
        self.bound = False
        self.fixed_ips = [ip for ip in (ip4, ip6) if ip]

    def new_device(self):
        """A fresh ethdev name for the next bind (a re-bind is a new device,
        as after a reboot)."""
        self.devargs = f"net_af_packet_sg{next(_port_seq)},iface={self.veth.inside}"
        return self.devargs

    def bind_params(self, groups=None, pairs=None, port_security=None, fixed_ips=None):
        p = {"id": self.id, "network": self.network, "mac": self.mac,
             "fixed_ips": self.fixed_ips if fixed_ips is None else fixed_ips,
             "attach": {"type": "ethdev", "devargs": self.devargs}}
        if groups is not None:
            p["security_groups"] = groups
        if pairs is not None:
            p["allowed_address_pairs"] = pairs
        if port_security is not None:
            p["port_security_enabled"] = port_security
        return p

    def bind(self, **kw):
        if self.bound is None:  # bound before: a new device this time
            self.new_device()
        r = self.sw.call("port.bind", self.bind_params(**kw))
        self.bound = True
        return r

    def unbind(self):
        if self.bound:
            self.sw.call("port.unbind", {"id": self.id})
            self.bound = None

    def update(self, **fields):
        return self.sw.call("port.update", {"id": self.id, **fields})

    def show(self):
        return self.sw.call("port.show", {"id": self.id})

    def stats(self):
        return self.sw.port_stats(self.id)

    def send(self, *frames):
        """Sends frames from the VM; returns once straitd has received them
        all and finished forwarding them."""
        frames = [pad60(f) for f in frames]
        before = self.stats()["rx_packets"]
        self.veth.send(frames)
        wait_for(lambda: self.stats()["rx_packets"] >= before + len(frames),
                 what=f"{len(frames)} frames from {self.name}")
        self.env.sync()
        return Frames(frames)

    def recv(self, quiet=0.1):
        return self.veth.recv(quiet)


class Env:
    """What one test creates on a straitd, removed again at its end: a
    network or two, security groups, VMs on veth pairs, hosts on physnet1,
    and a /24 and /64 of addresses no other test uses."""

    def __init__(self, sw, lab, wire=None):
        self.sw, self.lab, self.wire = sw, lab, wire
        k = next(_subnet_seq)
        self.net4 = f"10.{60 + k // 250}.{k % 250}."
        self.net6 = f"fd00:5e:{k:x}::"
        self.vms, self.groups, self.veths = [], [], []
        self._host = itertools.count(1)

    # -- objects --

    def network(self, type_="local", physnet=None):
        return self.lab.network(type_, physnet)

    def flat(self):
        """A flat network on physnet1 (untagged on the wire)."""
        if self.wire is None:
            pytest.skip("no physnet1 veth in this straitd")
        return self.lab.network("flat", "physnet1")

    def group(self, rules=(), name=None, gid=None):
        gid = gid or unique("sg")
        # Rule ids given here; test_rules_without_ids_in_security_group_create_get_ids
        # checks that straitd makes them up when a request has none.
        params = {"id": gid, "rules": [{"id": str(uuid.uuid4()), **r} for r in rules]}
        if name:
            params["name"] = name
        self.sw.call("security_group.create", params)
        self.groups.append(gid)
        return gid

    def addr(self, i):
        return f"{self.net4}{i}", f"{self.net6}{i:x}"

    def vm(self, name, network, host=None, bind=True, mac=None, **bind_kw):
        """A VM (host: its address index in the test's subnets)."""
        host = host if host is not None else len(self.vms) + 1
        ip4, ip6 = self.addr(host)
        v = Vm(self, name, network, mac or new_mac(), ip4, ip6)
        self.vms.append(v)
        if bind:
            v.bind(**bind_kw)
        return v

    def host(self, name, i=None, ip4=None, announce=True):
        """A host on physnet1 (address index 200 and up). announce: it sends
        a gratuitous ARP first, so that straitd knows its MAC and frames to
        it are not flooded to the test's other VMs (whose ingress rules would
        see them); what that ARP reached is discarded."""
        i = i if i is not None else 200 + next(self._host)
        v4, ip6 = self.addr(i)
        h = Endpoint(name, new_mac(), ip4 or v4, ip6)
        if announce:
            learned = self.sw.call("show")["learned_macs"]
            self.wire_send(arp(h, pdst=h.ip4))
            wait_for(lambda: self.sw.call("show")["learned_macs"] > learned,
                     what=f"{name}'s MAC learned")
            for v in self.vms:
                v.recv(quiet=0.05)
        return h

    # -- traffic --

    def sync(self):
        self.lab.sync()

    def wire_send(self, *frames):
        """Sends frames from the physical network; returns once straitd has
        received and forwarded them all."""
        frames = [pad60(f) for f in frames]
        before = self.sw.port_stats(PHYSNET)["rx_packets"]
        self.wire.send(frames)
        wait_for(lambda: self.sw.port_stats(PHYSNET)["rx_packets"] >= before + len(frames),
                 what=f"{len(frames)} frames from physnet1")
        self.sync()
        return Frames(frames)

    def wire_recv(self, quiet=0.1):
        return self.wire.recv(quiet)

    def drops(self):
        """Drop counters by port label (VM name, "physnet1")."""
        st = self.sw.stats()
        by_id = {p["id"]: p["drops"] for p in st["ports"]}
        out = {v.name: by_id[v.id] for v in self.vms if v.id in by_id}
        if PHYSNET in by_id:
            out["physnet1"] = by_id[PHYSNET]
        return out

    def drops_since(self, before):
        """Per port label, the drops since `before`; ports without any left out."""
        out = {}
        for label, d in self.drops().items():
            delta = drop_delta(before.get(label, {}), d)
            if delta:
                out[label] = delta
        return out

    def close(self):
        for v in self.vms:
            try:
                v.unbind()
            except Exception:
                pass
        self.lab.close()
        for g in reversed(self.groups):
            try:
                self.sw.call("security_group.delete", {"id": g})
            except Exception:
                pass
        for w in self.veths:
            w.destroy()


def deny_one(drops, label, reasons):
    """Asserts drops (from drops_since) hold exactly one drop, on `label`,
    for one of `reasons` (where the contract leaves the reason open)."""
    assert list(drops) == [label], drops
    assert sum(drops[label].values()) == 1 and set(drops[label]) <= set(reasons), drops


# ---- fixtures --------------------------------------------------------------------


@pytest.fixture(scope="module")
def _wire():
    w = Veth()
    try:
        w.create()
    except Exception as e:  # no CAP_NET_ADMIN / no veth: the whole module skips
        w.destroy()
        yield e
        return
    yield w
    w.destroy()


@pytest.fixture(scope="module")
def sw(straitd_factory, _wire):
    if isinstance(_wire, Exception):
        pytest.skip(f"cannot create veth pairs (VM ports and physnet1 need them): {_wire}")
    cpu = max(0, (os.cpu_count() or 1) - 1)
    return straitd_factory(physnets={"physnet1": f"net_af_packet_sgup,iface={_wire.inside}"},
                           name="secgroups", workers=(1, 2),
                           eal=["--lcores", f"0@0,1@{cpu},2@{cpu}", "--main-lcore", "0"])


@pytest.fixture
def env(sw, lab, _wire):
    _wire.recv(quiet=0.01)
    e = Env(sw, lab, _wire)
    yield e
    e.close()


# ---- rule kinds ---------------------------------------------------------------------


def test_tcp_and_udp_port_ranges_ipv4_and_ipv6(env):
    net = env.network()
    egress = env.group(EGRESS_ANY)
    server = env.group([rule("ingress", "tcp", 8000, 8010), rule("ingress", "udp", 53, 53),
                        rule("ingress", "tcp", 22, 22, eth="IPv6"),
                        rule("ingress", "udp", 5000, 5999, eth="IPv6")])
    b = env.vm("b", net, groups=[server])
    a = env.vm("a", net, groups=[egress])
    before = env.drops()
    cases = [  # (frame, passes)
        (tcp(a, b, 40001, 8000), True), (tcp(a, b, 40002, 7999), False),
        (tcp(a, b, 40003, 8010), True), (tcp(a, b, 40004, 8011), False),
        (udp(a, b, 40005, 53), True), (udp(a, b, 40006, 52), False), (udp(a, b, 40007, 54), False),
        (udp(a, b, 40008, 8005), False),           # udp to the tcp range
        (tcp(a, b, 40009, 53), False),             # tcp to the udp port
        (tcp(a, b, 40010, 22), False),             # the tcp/22 rule is IPv6 only
        (tcp(a, b, 40011, 22, v6=True), True), (tcp(a, b, 40012, 23, v6=True), False),
        (udp(a, b, 40013, 5000, v6=True), True), (udp(a, b, 40014, 5999, v6=True), True),
        (udp(a, b, 40015, 6000, v6=True), False), (udp(a, b, 40016, 4999, v6=True), False),
        (tcp(a, b, 40017, 8005, v6=True), False),  # the tcp range is IPv4 only
    ]
    a.send(*[f for f, _ in cases])
    assert_frames(b.recv(), Frames(f for f, ok in cases if ok))
    assert_frames(a.recv(), [])
    assert env.drops_since(before) == {"a": {"sg_ingress_denied": sum(not ok for _, ok in cases)}}


def test_icmp_type_and_code(env):
    net = env.network()
    egress = env.group(EGRESS_ANY)
    server = env.group([rule("ingress", "icmp", 8),          # echo request, any code
                        rule("ingress", "icmp", 13, 0),      # timestamp request, code 0 only
                        rule("ingress", "ipv6-icmp", 128, 0, eth="IPv6"),
                        rule("ingress", "icmpv6", 139, eth="IPv6")])  # node information query
    b = env.vm("b", net, groups=[server])
    a = env.vm("a", net, groups=[egress])
    before = env.drops()
    cases = [  # each request its own identifier: its own connection
        (echo(a, b, ident=1), True),
        (icmp(a, b, 13, 0, ident=11), True), (icmp(a, b, 13, 1, ident=12), False),
        (icmp(a, b, 15, 0, ident=13), False), (icmp(a, b, 17, 0, ident=14), False),
        (echo(a, b, v6=True, ident=2), True),
        (icmp(a, b, 128, 1, v6=True), False),
        (icmp(a, b, 139, 0, v6=True), True), (icmp(a, b, 139, 1, v6=True), True),
        (icmp(a, b, 200, 0, v6=True), False),
        (tcp(a, b, 40020, 8), False), (udp(a, b, 40021, 13), False),  # not ICMP
    ]
    a.send(*[f for f, _ in cases])
    assert_frames(b.recv(), Frames(f for f, ok in cases if ok))
    assert env.drops_since(before) == {"a": {"sg_ingress_denied": sum(not ok for _, ok in cases)}}


def _ping_allowed_one_way(env, v6):
    """a may ping b (b's ingress allows echo requests only); returns (a, b)
    after one echo request and its reply went through."""
    eth, proto = ("IPv6", "ipv6-icmp") if v6 else ("IPv4", "icmp")
    net = env.network()
    client = env.group([rule("egress", proto, eth=eth)])
    server = env.group([rule("ingress", proto, 128 if v6 else 8, 0, eth=eth)])
    b = env.vm("b", net, groups=[server])
    a = env.vm("a", net, groups=[client])
    before = env.drops()
    for sender, f in [(a, echo(a, b, v6, ident=0x55, seq=1)),
                      (b, echo(b, a, v6, reply=True, ident=0x55, seq=1))]:
        sender.send(f)
        assert_frames((b if sender is a else a).recv(), [f])
    assert env.drops_since(before) == {}
    return a, b


@pytest.mark.parametrize("v6", [False, True], ids=["ipv4", "ipv6"])
def test_an_echo_request_from_the_pinged_side_is_no_reply(env, v6):
    """An allowed ping lets its echo replies back, not an echo request from
    the other side with the same identifier (Linux conntrack's ICMP tuple
    holds type, code and identifier): neither b's egress nor a's ingress
    allows it."""
    a, b = _ping_allowed_one_way(env, v6)
    before = env.drops()
    b.send(echo(b, a, v6, ident=0x55, seq=2))
    assert_frames(a.recv(), [])
    deny_one(env.drops_since(before), "b", {"sg_egress_denied", "sg_ingress_denied"})


def test_other_icmp_queries_with_a_pings_identifier_are_not_part_of_it(env):
    """Timestamp and address mask requests reusing an allowed ping's
    identifier are new connections, for b's ingress rules (echo only)."""
    a, b = _ping_allowed_one_way(env, False)
    before = env.drops()
    sent = a.send(echo(a, b, ident=0x55, seq=2), icmp(a, b, 13, 0, ident=0x55),
                  icmp(a, b, 17, 0, ident=0x55))
    assert_frames(b.recv(), sent[:1])  # the ping goes on, the others are refused
    assert env.drops_since(before) == {"a": {"sg_ingress_denied": 2}}


def test_protocol_any_and_protocol_number(env):
    net = env.network()
    egress = env.group(EGRESS_ANY)
    gre_only = env.group([rule("ingress", 47), rule("ingress", 47, eth="IPv6"),  # by number
                          rule("ingress", 6, 8080, 8080)])  # tcp by its number, with ports
    any_v4 = env.group([rule("ingress")])  # any protocol, IPv4 only
    b = env.vm("b", net, groups=[gre_only])
    c = env.vm("c", net, groups=[any_v4])
    a = env.vm("a", net, groups=[egress])
    before = env.drops()

    def gre(dst, v6=False):
        return frame(a, dst, GRE(proto=0x0800), v6, b"gre-payload-" + dst.name.encode())

    def esp(dst, v6=False):
        l3 = IPv6(src=a.ip6, dst=dst.ip6, nh=50) if v6 else IP(src=a.ip4, dst=dst.ip4, proto=50)
        return pad60(Ether(src=a.mac, dst=dst.mac) / l3 / Raw(b"\0\0\0\1\0\0\0\1esp-payload"))

    to_b = [(gre(b), True), (gre(b, v6=True), True), (esp(b), False), (tcp(a, b, 40030, 80), False),
            (tcp(a, b, 40035, 8080), True), (udp(a, b, 40036, 8080), False),
            (udp(a, b, 40031, 80), False), (echo(a, b), False)]
    to_c = [(gre(c), True), (esp(c), True), (tcp(a, c, 40032, 80), True), (udp(a, c, 40033, 9), True),
            (echo(a, c), True), (icmp(a, c, 13), True),
            (udp(a, c, 40034, 9, v6=True), False), (gre(c, v6=True), False)]  # IPv6: no rule
    a.send(*[f for f, _ in to_b + to_c])
    assert_frames(b.recv(), Frames(f for f, ok in to_b if ok))
    assert_frames(c.recv(), Frames(f for f, ok in to_c if ok))
    denied = sum(not ok for _, ok in to_b + to_c)
    assert env.drops_since(before) == {"a": {"sg_ingress_denied": denied}}


def test_remote_ip_prefix_ipv4_and_ipv6(env):
    net = env.flat()
    egress = env.group(EGRESS_ANY)
    server = env.group([rule("ingress", "tcp", 22, 22, prefix=f"{env.net4}0/28"),
                        rule("ingress", "tcp", 22, 22, eth="IPv6", prefix=f"{env.net6}0/124"),
                        rule("ingress", "udp", 53, 53, prefix="192.0.2.0/24")])
    b = env.vm("b", net, host=2, groups=[server])
    a = env.vm("a", net, host=1, groups=[egress])     # inside the /28 and the /124
    c = env.vm("c", net, host=20, groups=[egress])    # outside both
    inside = env.host("inside", ip4="192.0.2.7")
    outside = env.host("outside", ip4="198.51.100.7")
    before = env.drops()
    from_a = a.send(tcp(a, b, 40040, 22), tcp(a, b, 40041, 22, v6=True), udp(a, b, 40042, 53))
    c.send(tcp(c, b, 40043, 22), tcp(c, b, 40044, 22, v6=True))
    from_wire = env.wire_send(udp(inside, b, 40045, 53), udp(outside, b, 40046, 53))
    assert_frames(b.recv(), from_a[:2] + from_wire[:1])
    assert env.drops_since(before) == {"a": {"sg_ingress_denied": 1}, "c": {"sg_ingress_denied": 2},
                                       "physnet1": {"sg_ingress_denied": 1}}


def test_remote_group_ipv4_ipv6_self_reference_and_address_pairs(env):
    net = env.network()
    clients = env.group(EGRESS_ANY)
    other = env.group(EGRESS_ANY)
    sid = unique("sg")
    # neutron's default group: ingress from the same group (a rule naming its
    # own group while it is being created) and egress anywhere.
    server = env.group([rule("ingress", "tcp", 22, 22, remote_group=clients),
                        rule("ingress", "tcp", 22, 22, eth="IPv6", remote_group=clients),
                        rule("ingress", "udp", remote_group=sid)] + EGRESS_ANY, gid=sid)
    b = env.vm("b", net, groups=[server])
    b2 = env.vm("b2", net, groups=[server])
    a = env.vm("a", net, groups=[clients])
    c = env.vm("c", net, groups=[other])
    # a member through an allowed address pair (a CIDR)
    p = env.vm("p", net, groups=[clients], pairs=[{"ip_address": f"{env.net4}128/26"}])
    shown = env.sw.call("security_group.show", {"id": clients})
    assert sorted(shown["ports"]) == sorted([a.id, p.id])
    before = env.drops()
    ok_a = a.send(tcp(a, b, 40050, 22), tcp(a, b, 40051, 22, v6=True))
    a.send(udp(a, b, 40052, 9))                        # a is not in b's group
    c.send(tcp(c, b, 40053, 22), tcp(c, b, 40054, 22, v6=True))
    ok_b2 = b2.send(udp(b2, b, 40055, 9))
    ok_p = p.send(tcp(p, b, 40056, 22, src_ip=f"{env.net4}130"))
    assert_frames(b.recv(), ok_a + ok_b2 + ok_p)
    assert env.drops_since(before) == {"a": {"sg_ingress_denied": 1}, "c": {"sg_ingress_denied": 2}}


def test_no_rule_allowing_ingress_or_egress_drops_new_connections(env):
    net = env.network()
    tcp_in = [rule("ingress", "tcp", 1, 65535), rule("ingress", "tcp", 1, 65535, eth="IPv6")]
    open_ = env.group(ALLOW_ALL)
    c = env.vm("c", net, groups=[open_])                      # takes and opens anything
    a = env.vm("a", net, groups=[env.group(tcp_in)])          # may receive, may not open
    b = env.vm("b", net, groups=[env.group(EGRESS_ANY)])      # may open, may not receive
    e = env.vm("e", net, groups=[env.group([])])              # a group without rules: nothing
    before = env.drops()
    a.send(tcp(a, c, 40060, 22), tcp(a, c, 40061, 22, v6=True), udp(a, c, 40062, 53))
    assert env.drops_since(before) == {"a": {"sg_egress_denied": 3}}
    before = env.drops()
    c.send(udp(c, b, 40063, 53), tcp(c, b, 40064, 22, v6=True), echo(c, b))
    assert env.drops_since(before) == {"c": {"sg_ingress_denied": 3}}
    before = env.drops()
    e.send(tcp(e, c, 40065, 22), udp(e, c, 40066, 53, v6=True))
    c.send(tcp(c, e, 40067, 22), echo(c, e, v6=True))
    assert env.drops_since(before) == {"e": {"sg_egress_denied": 2}, "c": {"sg_ingress_denied": 2}}
    assert a.recv() == [] and b.recv() == [] and c.recv() == [] and e.recv() == []
    # What the rules allow passes: b -> c anything, c -> a tcp.
    ok_c = b.send(udp(b, c, 40068, 53), echo(b, c, v6=True))
    ok_a = c.send(tcp(c, a, 40069, 22), tcp(c, a, 40070, 443, v6=True))
    assert_frames(c.recv(), ok_c)
    assert_frames(a.recv(), ok_a)


def test_port_security_without_groups_allows_only_arp_dhcp_and_neighbour_discovery(env):
    net = env.flat()
    a = env.vm("a", net, port_security=True)
    host = env.host("host")
    port = a.show()
    assert port["port_security_enabled"] is True and port["security_groups"] == []
    before = env.drops()
    always = a.send(arp(a, pdst=host.ip4), dhcp_discover(a), neighbor_solicitation(a, host.ip6))
    a.send(tcp(a, host, 40070, 22), udp(a, host, 40071, 53, v6=True), echo(a, host))
    assert_frames(env.wire_recv(), always)
    assert env.drops_since(before) == {"a": {"sg_egress_denied": 3}}
    # From outside: ARP and DHCP replies reach it, a connection does not.
    before = env.drops()
    inbound = env.wire_send(arp(host, pdst=a.ip4, op=2, dst=a.mac), dhcp_offer(host, a),
                            tcp(host, a, 40072, 22))
    assert_frames(a.recv(), inbound[:2])
    assert env.drops_since(before) == {"physnet1": {"sg_ingress_denied": 1}}


# ---- stateful ------------------------------------------------------------------------


@pytest.mark.parametrize("v6", [False, True], ids=["ipv4", "ipv6"])
def test_tcp_replies_pass_both_ways_without_rules_for_them(env, v6):
    eth = "IPv6" if v6 else "IPv4"
    net = env.network()
    client = env.group([rule("egress", "tcp", 1, 65535, eth=eth)])  # no ingress rule at all
    server = env.group([rule("ingress", "tcp", 22, 22, eth=eth)])     # no egress rule at all
    b = env.vm("b", net, groups=[server])
    a = env.vm("a", net, groups=[client])
    ct_before = env.sw.stats()["conntrack"]
    before = env.drops()
    c = Tcp(a, b, 40100, 22, v6)
    steps = [(a, c.syn()), (b, c.synack()), (a, c.ack()), (a, c.data(a, b"request " * 10)),
             (b, c.data(b, b"response " * 20)), (b, c.data(b, b"more")), (a, c.data(a, b"thanks")),
             (b, c.fin(b)), (a, c.fin(a)), (b, c.final_ack(b))]
    for sender, f in steps:
        receiver = b if sender is a else a
        sender.send(f)
        assert_frames(receiver.recv(), [f], f"{sender.name} -> {receiver.name}: {Ether(f).summary()}")
    assert env.drops_since(before) == {}
    ct = env.sw.stats()["conntrack"]
    assert ct["created"] >= ct_before["created"] + 1
    assert set(ct) >= {"capacity", "entries", "created", "refused_full", "invalid", "expired",
                       "flushed"}
    # Still no rule for anything else: b opening a connection, a to port 23.
    b.send(tcp(b, a, 40101, 22, v6=v6))
    a.send(tcp(a, b, 40102, 23, v6=v6))
    assert a.recv() == [] and b.recv() == []
    after = env.drops_since(before)
    assert after.pop("a") == {"sg_ingress_denied": 1}  # a's egress allows, b's ingress does not
    deny_one(after, "b", {"sg_egress_denied", "sg_ingress_denied"})  # neither side allows it


def test_a_closed_connection_can_be_opened_again(env):
    """The same addresses and ports after FIN, and after RST: a new SYN opens
    a new connection, whose replies pass."""
    net = env.network()
    a = env.vm("a", net, groups=[env.group([rule("egress", "tcp", 1, 65535)])])
    b = env.vm("b", net, groups=[env.group([rule("ingress", "tcp", 22, 22)])])
    before = env.drops()
    for end in ("fin", "rst"):
        c = Tcp(a, b, 40130, 22)
        c.next = {id(a): 3000 if end == "fin" else 9000, id(b): 50000 if end == "fin" else 90000}
        steps = [(a, c.syn()), (b, c.synack()), (a, c.ack()), (b, c.data(b, b"hi " + end.encode()))]
        if end == "fin":
            steps += [(a, c.fin(a)), (b, c.fin(b)), (a, c.final_ack(a))]
        else:
            steps += [(b, c._frame(b, "R"))]
        for sender, f in steps:
            sender.send(f)
            assert_frames((b if sender is a else a).recv(), [f], f"{end}: {Ether(f).summary()}")
    assert env.drops_since(before) == {}


def test_syn_ack_without_syn_is_invalid_and_a_mid_stream_ack_is_picked_up(env):
    net = env.network()
    allow = env.group(ALLOW_ALL)
    a = env.vm("a", net, groups=[allow])
    b = env.vm("b", net, groups=[allow])
    inv_before = env.sw.stats()["conntrack"]["invalid"]
    before = env.drops()
    b.send(tcp(b, a, 22, 40110, "SA", seq=9000, ack=1001))
    assert_frames(a.recv(), [])
    assert env.drops_since(before) == {"b": {"ct_invalid": 1}}
    assert env.sw.stats()["conntrack"]["invalid"] >= inv_before + 1
    # [conntrack] tcp_loose (the default): an ACK mid-stream opens the
    # connection when the rules allow it, and its replies pass.
    mid = b.send(tcp(b, a, 23, 40111, "PA", payload=b"mid-stream", seq=9000, ack=1001))
    assert_frames(a.recv(), mid)
    reply = a.send(tcp(a, b, 40111, 23, "A", seq=1001, ack=9010))
    assert_frames(b.recv(), reply)
    assert env.drops_since(before) == {"b": {"ct_invalid": 1}}


@pytest.mark.parametrize("v6", [False, True], ids=["ipv4", "ipv6"])
def test_udp_and_icmp_echo_replies_pass(env, v6):
    eth = "IPv6" if v6 else "IPv4"
    icmp_proto = "ipv6-icmp" if v6 else "icmp"
    echo_type = 128 if v6 else 8
    net = env.network()
    client = env.group([rule("egress", "udp", 1, 65535, eth=eth), rule("egress", icmp_proto, eth=eth)])
    server = env.group([rule("ingress", "udp", 5353, 5353, eth=eth),
                        rule("ingress", icmp_proto, echo_type, 0, eth=eth)])
    b = env.vm("b", net, groups=[server])
    a = env.vm("a", net, groups=[client])
    before = env.drops()
    for sender, f in [(a, udp(a, b, 40120, 5353, v6, b"query")),
                      (b, udp(b, a, 5353, 40120, v6, b"answer")),
                      (a, udp(a, b, 40120, 5353, v6, b"query again")),
                      (b, udp(b, a, 5353, 40120, v6, b"answer again")),
                      (a, echo(a, b, v6, ident=0x77, seq=1)),
                      (b, echo(b, a, v6, reply=True, ident=0x77, seq=1)),
                      (a, echo(a, b, v6, ident=0x77, seq=2)),
                      (b, echo(b, a, v6, reply=True, ident=0x77, seq=2))]:
        receiver = b if sender is a else a
        sender.send(f)
        assert_frames(receiver.recv(), [f], f"{sender.name} -> {receiver.name}: {Ether(f).summary()}")
    assert env.drops_since(before) == {}
    # Not replies: another port, an echo request from b.
    # (b's egress and a's ingress both refuse them: either reason.)
    b.send(udp(b, a, 5353, 40121, v6), echo(b, a, v6, ident=0x78))
    assert_frames(a.recv(), [])
    after = env.drops_since(before)
    assert list(after) == ["b"] and sum(after["b"].values()) == 2, after
    assert set(after["b"]) <= {"sg_egress_denied", "sg_ingress_denied"}, after


@pytest.mark.parametrize("v6", [False, True], ids=["ipv4", "ipv6"])
def test_related_icmp_errors_pass_back_unrelated_ones_are_dropped(env, v6):
    eth = "IPv6" if v6 else "IPv4"
    net = env.flat()
    client = env.group([rule("egress", "udp", 1, 65535, eth=eth), rule("egress", "tcp", 1, 65535, eth=eth)])
    server = env.group([rule("ingress", "udp", 7000, 7000, eth=eth),
                        rule("ingress", "tcp", 22, 22, eth=eth)])  # no ICMP rule anywhere
    b = env.vm("b", net, groups=[server])
    a = env.vm("a", net, groups=[client])
    host, router = env.host("host"), env.host("router")
    before = env.drops()

    u = a.send(udp(a, b, 41000, 7000, v6))[0]
    assert_frames(b.recv(), [u])
    err = b.send(icmp_error(b, a, u, "port_unreachable", v6))
    assert_frames(a.recv(), err)

    syn = a.send(tcp(a, b, 41001, 22, v6=v6))[0]
    assert_frames(b.recv(), [syn])
    err = b.send(icmp_error(b, a, syn, "too_big", v6))
    assert_frames(a.recv(), err)

    # To the outside: a router on the way answers "too big" from its own address.
    out = a.send(udp(a, host, 41002, 53, v6, b"x" * 200))[0]
    assert_frames(env.wire_recv(), [out])
    err = env.wire_send(icmp_error(router, a, out, "too_big", v6))
    assert_frames(a.recv(), err)
    assert env.drops_since(before) == {}

    # Errors about packets that were never sent.
    never = udp(a, b, 41000, 7001, v6)
    b.send(icmp_error(b, a, never, "port_unreachable", v6))
    assert_frames(a.recv(), [])
    deny_one(env.drops_since(before), "b", {"ct_invalid", "sg_egress_denied", "sg_ingress_denied"})
    before = env.drops()
    env.wire_send(icmp_error(router, a, udp(a, host, 41003, 53, v6), "too_big", v6))
    assert_frames(a.recv(), [])
    deny_one(env.drops_since(before), "physnet1", {"ct_invalid", "sg_ingress_denied"})


def test_connections_of_one_network_are_nothing_to_another_f9(env):
    """One conntrack zone per network (F9): the same addresses and ports in
    two networks are two connections."""
    x, y = env.network(), env.network()
    client = env.group([rule("egress", "tcp", 1, 65535)])
    server = env.group([rule("ingress", "tcp", 22, 22)])
    b = env.vm("b", x, host=2, groups=[server])
    a = env.vm("a", x, host=1, groups=[client])
    b2 = env.vm("b2", y, host=2, groups=[server])  # the same addresses, in y
    a2 = env.vm("a2", y, host=1, groups=[client])
    c, c2 = Tcp(a, b, 40950, 22), Tcp(a2, b2, 40950, 22)
    syn = a.send(c.syn())
    assert_frames(b.recv(), syn)
    c2.syn()  # never sent: in y nobody opened anything
    before = env.drops()
    b2.send(c2.synack())
    assert_frames(a2.recv(), [])
    deny_one(env.drops_since(before), "b2", {"sg_egress_denied", "sg_ingress_denied", "ct_invalid"})
    synack = b.send(c.synack())  # in x it is the reply it looks like
    assert_frames(a.recv(), synack)
    assert_frames(b2.recv(), [])


def test_a_network_reusing_a_local_vlan_starts_with_no_connections_f4(env):
    """The conntrack zone is the local VLAN, which the next network on the
    host reuses (F4): the connections of a network end with it."""
    x = env.network()
    client = env.group([rule("egress", "tcp", 1, 65535)])
    server = env.group([rule("ingress", "tcp", 22, 22)])
    b = env.vm("b", x, host=2, groups=[server])
    a = env.vm("a", x, host=1, groups=[client])
    vlan = a.show()["local_vlan"]
    c = _established(a, b, 40990, 22)
    a.unbind()
    b.unbind()
    env.sw.call("network.delete", {"id": x})
    env.lab.networks.remove(x)
    y = env.network()
    b2 = env.vm("b2", y, host=2, groups=[server])  # the same addresses
    a2 = env.vm("a2", y, host=1, groups=[client])
    assert a2.show()["local_vlan"] == vlan, "test premise: y reuses x's local VLAN"
    before = env.drops()
    b2.send(tcp(b2, a2, 22, 40990, "PA", payload=b"a reply of x's connection",
                seq=c.next[id(b)], ack=c.next[id(a)]))
    assert_frames(a2.recv(), [])
    deny_one(env.drops_since(before), "b2", {"sg_egress_denied", "sg_ingress_denied"})


# ---- port security -----------------------------------------------------------------


def test_spoofed_sources_are_dropped_with_their_reason(env):
    net = env.flat()
    allow = env.group(ALLOW_ALL)
    a = env.vm("a", net, groups=[allow])
    host = env.host("host")
    other_mac = new_mac()
    before = env.drops()
    good = [udp(a, host, 40200, 53), udp(a, host, 40201, 53, v6=True),
            udp(a, host, 40202, 53, v6=True, src_ip=a.lla, dst_ip=host.lla),  # link-local from the MAC
            arp(a, pdst=host.ip4), arp(a, psrc="0.0.0.0", pdst=a.ip4),         # ARP probe
            dhcp_discover(a), neighbor_solicitation(a, host.ip6),
            neighbor_solicitation(a, a.ip6, dad=True)]
    spoofed = {
        "spoofed_mac": [udp(a, host, 40203, 53, src_mac=other_mac)],
        "spoofed_ip": [udp(a, host, 40204, 53, src_ip=f"{env.net4}99"),
                       udp(a, host, 40205, 53, v6=True, src_ip=f"{env.net6}99"),
                       udp(a, host, 40206, 53, v6=True, src_ip="fe80::1", dst_ip=host.lla),
                       udp(a, host, 1000, 2000, src_ip="0.0.0.0", dst_ip="255.255.255.255",
                           dst_mac=BCAST)],  # 0.0.0.0 is for DHCP only
        "spoofed_arp": [arp(a, psrc=f"{env.net4}99", pdst=host.ip4),
                        arp(a, hwsrc=other_mac, pdst=host.ip4),
                        arp(a, psrc=f"{env.net4}99", pdst=host.ip4, op=2, dst=host.mac)],
    }
    bad = [f for fs in spoofed.values() for f in fs]
    sent = a.send(*[f for pair in itertools.zip_longest(good, bad) for f in pair if f is not None])
    assert_frames(env.wire_recv(), [f for f in sent if f in good])
    assert env.drops_since(before) == {"a": {k: len(v) for k, v in spoofed.items()}}


def test_dhcp_server_ra_and_other_ethertypes_from_a_vm_are_dropped(env):
    net = env.flat()
    egress = env.group(EGRESS_ANY)  # no ingress rule: DHCP replies and RAs still reach it
    a = env.vm("a", net, groups=[egress])
    host = env.host("server")
    before = env.drops()
    dhcp6_reply = udp(a, host, 547, 546, v6=True, src_ip=a.lla, dst_ip=host.lla, payload=b"\x07dhcp6")
    a.send(dhcp_offer(a, host), dhcp6_reply, router_advertisement(a),
           pad60(Ether(src=a.mac, dst=host.mac, type=0x88b5) / Raw(b"local experimental")))
    assert_frames(env.wire_recv(), [])
    assert env.drops_since(before) == {"a": {"dhcp_server_from_vm": 2, "ra_from_vm": 1,
                                             "ethertype_denied": 1}}
    # The same from outside, to the VM: DHCP and RA pass, the odd ethertype does not.
    before = env.drops()
    inbound = env.wire_send(dhcp_offer(host, a), router_advertisement(host),
                            udp(host, a, 547, 546, v6=True, src_ip=host.lla, dst_ip=a.lla,
                                payload=b"\x07dhcp6"),
                            pad60(Ether(src=host.mac, dst=a.mac, type=0x88b5) / Raw(b"experimental")))
    assert_frames(a.recv(), inbound[:3])
    assert env.drops_since(before) == {"physnet1": {"ethertype_denied": 1}}


def test_allowed_address_pairs(env):
    net = env.flat()
    allow = env.group(ALLOW_ALL)
    mac2, mac3 = new_mac(), new_mac()
    vrrp = Endpoint("vrrp", mac2, f"{env.net4}50", f"{env.net6}50")
    a = env.vm("a", net, groups=[allow],
               pairs=[{"ip_address": f"{env.net4}128/25"},
                      {"ip_address": f"{env.net4}50", "mac_address": mac2},
                      {"ip_address": f"{env.net6}100"}])
    assert pair_set(a.show()["allowed_address_pairs"]) == pair_set([
        {"ip_address": f"{env.net4}128/25", "mac_address": a.mac},
        {"ip_address": f"{env.net4}50", "mac_address": mac2},
        {"ip_address": f"{env.net6}100", "mac_address": a.mac}])
    host = env.host("host")
    before = env.drops()
    good = [udp(a, host, 40300, 53, src_ip=f"{env.net4}200"),          # in the /25
            udp(a, host, 40301, 53, src_ip=f"{env.net4}129"),
            udp(vrrp, host, 40302, 53),                                  # the pair's MAC and IP
            arp(vrrp, pdst=host.ip4),
            udp(a, host, 40303, 53, v6=True, src_ip=f"{env.net6}100"),
            udp(vrrp, host, 40304, 53, v6=True, src_ip=vrrp.lla, dst_ip=host.lla),  # its link-local
            udp(a, host, 40305, 53)]                                     # the fixed IP still
    bad = {"spoofed_ip": [udp(a, host, 40306, 53, src_ip=f"{env.net4}127"),   # below the /25
                          udp(vrrp, host, 40307, 53, src_ip=a.ip4),          # pair MAC, fixed IP
                          udp(a, host, 40308, 53, src_ip=vrrp.ip4),          # port MAC, pair IP
                          udp(vrrp, host, 40309, 53, src_ip=f"{env.net4}51"),
                          udp(a, host, 40310, 53, v6=True, src_ip=f"{env.net6}101")],
           "spoofed_mac": [udp(vrrp, host, 40311, 53, src_mac=mac3)],
           "spoofed_arp": [arp(vrrp, psrc=f"{env.net4}200", pdst=host.ip4)]}
    sent = a.send(*good, *[f for fs in bad.values() for f in fs])
    assert_frames(env.wire_recv(), sent[:len(good)])
    assert env.drops_since(before) == {"a": {k: len(v) for k, v in bad.items()}}
    # Traffic to the pair's MAC and address comes in through the port.
    before = env.drops()
    inbound = env.wire_send(udp(host, vrrp, 53, 40302, payload=b"to the pair"))
    assert_frames(a.recv(), inbound)
    assert env.drops_since(before) == {}


def test_allowed_address_pairs_change_on_a_live_port(env):
    net = env.flat()
    a = env.vm("a", net, groups=[env.group(EGRESS_ANY)])
    host = env.host("host")
    mac2 = new_mac()
    pair_ip = f"{env.net4}60"
    frames = [udp(a, host, 41500, 53, src_ip=pair_ip), udp(a, host, 41501, 53, src_ip=pair_ip, src_mac=mac2)]
    before = env.drops()
    a.send(*frames)
    assert_frames(env.wire_recv(), [])
    assert env.drops_since(before) == {"a": {"spoofed_ip": 1, "spoofed_mac": 1}}
    port = a.update(allowed_address_pairs=[{"ip_address": pair_ip}, {"ip_address": pair_ip, "mac_address": mac2}])
    assert pair_set(port["allowed_address_pairs"]) == pair_set(
        [{"ip_address": pair_ip, "mac_address": a.mac}, {"ip_address": pair_ip, "mac_address": mac2}])
    assert port["port_security_enabled"] is True
    before = env.drops()
    a.send(*frames)
    assert_frames(env.wire_recv(), frames)
    port = a.update(allowed_address_pairs=[])
    assert port["allowed_address_pairs"] == []
    a.send(*frames)
    assert_frames(env.wire_recv(), [])
    assert env.drops_since(before) == {"a": {"spoofed_ip": 1, "spoofed_mac": 1}}


def test_port_security_disabled_lets_everything_through(env):
    net = env.flat()
    a = env.vm("a", net)                                # no port security fields: off
    b = env.vm("b", net, port_security=False)
    for v in (a, b):
        port = v.show()
        assert port["port_security_enabled"] is False
        assert port["security_groups"] == [] and port["allowed_address_pairs"] == []
    host = env.host("host")
    before = env.drops()
    anything = [udp(a, host, 40400, 53, src_mac=new_mac()), udp(a, host, 40401, 53, src_ip="192.0.2.99"),
                arp(a, psrc="192.0.2.99", pdst=host.ip4), dhcp_offer(a, host), router_advertisement(a),
                pad60(Ether(src=a.mac, dst=host.mac, type=0x88b5) / Raw(b"local experimental")),
                tcp(a, host, 22, 40402, "SA", seq=5, ack=6), tcp(a, host, 40403, 23)]
    a.send(*anything)
    assert_frames(env.wire_recv(), anything)
    assert_frames(b.recv(), [anything[i] for i in (2, 3, 4)])  # the broadcasts, flooded to b too
    inbound = env.wire_send(tcp(host, b, 40404, 23), udp(host, b, 40405, 9, v6=True),
                            echo(host, b), pad60(Ether(src=host.mac, dst=b.mac, type=0x88b5) / Raw(b"x" * 50)))
    assert_frames(b.recv(), inbound)
    assert env.drops_since(before) == {}


def test_port_security_switched_on_and_off_on_a_live_port(env):
    net = env.flat()
    allow = env.group(ALLOW_ALL)
    a = env.vm("a", net, groups=[allow])
    host = env.host("host")
    spoof = udp(a, host, 40410, 53, src_ip="192.0.2.98")
    before = env.drops()
    a.send(spoof)
    assert_frames(env.wire_recv(), [])
    assert env.drops_since(before) == {"a": {"spoofed_ip": 1}}
    # Off: the groups must go in the same request.
    port = a.update(security_groups=[], port_security_enabled=False)
    assert port["port_security_enabled"] is False and port["security_groups"] == []
    a.send(spoof)
    assert_frames(env.wire_recv(), [spoof])
    port = a.update(security_groups=[allow], port_security_enabled=True)
    assert port["port_security_enabled"] is True and port["security_groups"] == [allow]
    before = env.drops()
    a.send(spoof)
    assert_frames(env.wire_recv(), [])
    assert env.drops_since(before) == {"a": {"spoofed_ip": 1}}


# ---- changes on live ports and groups ------------------------------------------------


def test_remote_group_membership_change_takes_effect(env):
    net = env.network()
    egress = env.group(EGRESS_ANY)
    members = env.group([])
    server = env.group([rule("ingress", "tcp", 22, 22, remote_group=members),
                        rule("ingress", "tcp", 22, 22, eth="IPv6", remote_group=members)])
    b = env.vm("b", net, groups=[server])
    a = env.vm("a", net, groups=[egress])
    c = env.vm("c", net, groups=[egress])
    before = env.drops()
    refused = a.send(tcp(a, b, 40500, 22), tcp(a, b, 40501, 22, v6=True))
    assert_frames(b.recv(), [])
    assert env.drops_since(before) == {"a": {"sg_ingress_denied": 2}}

    # port.update adds a to the group: its next connections pass, the very
    # frames refused before too (nothing cached stands in the way).
    port = a.update(security_groups=[egress, members])
    assert port["security_groups"] == [egress, members]
    assert env.sw.call("security_group.show", {"id": members})["ports"] == [a.id]
    ok = a.send(*refused, tcp(a, b, 40502, 22), tcp(a, b, 40503, 22, v6=True))
    assert_frames(b.recv(), ok)
    conn = _established(a, b, 40510, 22)

    # c bound again, into the group: its first packet passes.
    before = env.drops()
    c.send(tcp(c, b, 40504, 22))
    assert_frames(b.recv(), [])
    assert env.drops_since(before) == {"c": {"sg_ingress_denied": 1}}
    c.unbind()
    c.bind(groups=[egress, members])
    ok = c.send(tcp(c, b, 40505, 22), tcp(c, b, 40506, 22, v6=True))
    assert_frames(b.recv(), ok)

    # a leaves the group: new connections from it are refused again, and its
    # established one ends (as when the rule goes: no rule allows it now).
    a.update(security_groups=[egress])
    assert env.sw.call("security_group.show", {"id": members})["ports"] == [c.id]
    before = env.drops()
    a.send(tcp(a, b, 40507, 22), tcp(a, b, 40508, 22, v6=True), conn.data(a, b"still a member?"))
    ok = c.send(tcp(c, b, 40509, 22))
    assert_frames(b.recv(), ok)
    assert env.drops_since(before) == {"a": {"sg_ingress_denied": 2, "ct_revoked": 1}}

    # An unbound port is a member no more.
    c.unbind()
    assert env.sw.call("security_group.show", {"id": members})["ports"] == []


def test_port_update_of_fixed_ips_moves_anti_spoofing_and_group_membership(env):
    net = env.flat()
    clients = env.group(EGRESS_ANY)
    server = env.group([rule("ingress", "tcp", 22, 22, remote_group=clients)])
    b = env.vm("b", net, groups=[server])
    a = env.vm("a", net, groups=[clients])
    old_ip, new_ip = a.ip4, f"{env.net4}9"
    ok = a.send(tcp(a, b, 41100, 22))
    assert_frames(b.recv(), ok)
    flushed = env.sw.stats()["conntrack"]["flushed"]
    port = a.update(fixed_ips=[new_ip, a.ip6])
    assert port["fixed_ips"] == [new_ip, a.ip6] and port["security_groups"] == [clients]
    # The connection of the address it gave up is gone with it.
    wait_for(lambda: env.sw.stats()["conntrack"]["flushed"] > flushed, what="its connection flushed")
    before = env.drops()
    a.send(tcp(a, b, 41101, 22))                      # its old address: not its own any more
    ok = a.send(tcp(a, b, 41102, 22, src_ip=new_ip))  # its new one: a member's address
    assert_frames(b.recv(), ok)
    assert env.drops_since(before) == {"a": {"spoofed_ip": 1}}
    # The group's address set moved too: seen from outside, the old address
    # is nobody's, the new one a member's.
    before = env.drops()
    stranger = env.host("stranger", ip4=old_ip)
    env.wire_send(tcp(stranger, b, 41103, 22))
    assert_frames(b.recv(), [])
    assert env.drops_since(before) == {"physnet1": {"sg_ingress_denied": 1}}


def test_flooded_frames_reach_only_the_vms_whose_ingress_allows_them(env):
    net = env.flat()
    a = env.vm("a", net, groups=[env.group([rule("ingress", "udp", 5000, 5000)])])
    b = env.vm("b", net, groups=[env.group([rule("ingress", "tcp", 22, 22)])])
    c = env.vm("c", net, groups=[env.group(EGRESS_ANY)])
    host = env.host("host")
    before = env.drops()
    floods = c.send(udp(c, c, 41200, 5000, dst_mac=BCAST, dst_ip=f"{env.net4}255"),   # broadcast
                    udp(c, c, 41201, 5000, dst_mac=new_mac(), dst_ip=f"{env.net4}99"))  # unknown unicast
    assert_frames(a.recv(), floods)
    assert_frames(env.wire_recv(), floods)   # the physical network has no rules
    inbound = env.wire_send(udp(host, host, 41202, 5000, dst_mac=BCAST, dst_ip=f"{env.net4}255"))
    assert_frames(a.recv(), inbound)
    assert_frames(b.recv(), [])
    assert_frames(c.recv(), [])
    # Each copy refused is counted once, as sg_ingress_denied: c's two to b,
    # the host's one to b and one to c. (Which port counts a flood copy the
    # contract leaves open: straitd counts it on the target, where a unicast
    # refused by the receiver's ingress rules is counted on the sender.)
    drops = env.drops_since(before)
    assert all(set(d) == {"sg_ingress_denied"} for d in drops.values()), drops
    assert sum(d["sg_ingress_denied"] for d in drops.values()) == 4, drops


def test_first_frames_of_a_port_are_filtered_from_its_bind_on_f1(env):
    """A port gets its rules before its first frame (F1): a net_pcap port
    whose frames straitd reads the moment it is bound."""
    sw = env.sw
    net = env.network()
    b = env.vm("b", net, groups=[env.group([rule("ingress", "tcp", 22, 22)])])
    p = Endpoint("p", new_mac(), *env.addr(50))
    frames = [pad60(f) for f in (udp(p, b, 41400, 22, src_ip=f"{env.net4}51"), tcp(p, b, 41401, 23),
                                 tcp(p, b, 41402, 22), udp(p, b, 41403, 22, v6=True))]
    n = next(_port_seq)
    rx, tx = sw.tmp / f"sgfirst{n}_rx.pcap", sw.tmp / f"sgfirst{n}_tx.pcap"
    write_pcap(rx, frames)
    pid = uuid_for(0x5f0000 + n)
    sw.call("port.bind", {"id": pid, "network": net, "mac": p.mac, "fixed_ips": [p.ip4, p.ip6],
                          "security_groups": [env.group(EGRESS_ANY)],
                          "attach": {"type": "ethdev",
                                     "devargs": f"net_pcap_sgf{n},rx_pcap={rx},tx_pcap={tx}"}})
    try:
        wait_for(lambda: sw.port_stats(pid)["rx_packets"] >= len(frames), what="the pcap's frames")
        env.sync()
        assert_frames(b.recv(), [frames[2]])
        assert sw.port_stats(pid)["drops"] == {"spoofed_ip": 1, "sg_ingress_denied": 2}
    finally:
        sw.call("port.unbind", {"id": pid})


def _established(a, b, sport, dport, v6=False):
    """Opens a TCP connection a -> b and exchanges data; returns it."""
    c = Tcp(a, b, sport, dport, v6)
    for sender, f in [(a, c.syn()), (b, c.synack()), (a, c.ack()),
                      (a, c.data(a, b"hello")), (b, c.data(b, b"hello yourself"))]:
        receiver = b if sender is a else a
        sender.send(f)
        assert_frames(receiver.recv(), [f], f"{sender.name} -> {receiver.name}: {Ether(f).summary()}")
    return c


def test_rule_removal_ends_established_tcp_and_readding_resumes_it_f10(env):
    net = env.network()
    egress = env.group(EGRESS_ANY)
    server = env.group([])
    r = env.sw.call("security_group_rule.create",
                    {"security_group_id": server, **rule("ingress", "tcp", 22, 22)})
    assert r["security_group_id"] == server and r["id"]
    b = env.vm("b", net, groups=[server])
    a = env.vm("a", net, groups=[egress])
    c = _established(a, b, 40600, 22)
    before = env.drops()

    assert env.sw.call("security_group_rule.delete", {"id": r["id"]}) == {}
    assert env.sw.call("security_group.show", {"id": server})["rules"] == []
    a.send(c.data(a, b"after the rule went"))
    assert_frames(b.recv(), [])
    assert env.drops_since(before) == {"a": {"ct_revoked": 1}}
    a.send(c.data(a, b"and again"))
    b.send(c.data(b, b"b has no egress rule"))
    assert b.recv() == [] and a.recv() == []
    after = env.drops_since(before)
    assert after.pop("a") == {"ct_revoked": 1, "sg_ingress_denied": 1}
    deny_one(after, "b", {"sg_egress_denied", "sg_ingress_denied"})  # b: no egress, a: no ingress

    # The rule is back: the connection goes on (TCP loose pickup), both ways.
    env.sw.call("security_group_rule.create", {"security_group_id": server, **rule("ingress", "tcp", 22, 22)})
    before = env.drops()
    for sender, f in [(a, c.data(a, b"the rule is back")), (b, c.data(b, b"welcome back")),
                      (a, c.data(a, b"bye"))]:
        receiver = b if sender is a else a
        sender.send(f)
        assert_frames(receiver.recv(), [f])
    assert env.drops_since(before) == {}


def test_egress_rule_removal_ends_the_connection_seen_first_from_its_reply_side(env):
    net = env.network()
    client = env.group([])
    r = env.sw.call("security_group_rule.create",
                    {"security_group_id": client, **rule("egress", "tcp", 22, 22)})
    server = env.group([rule("ingress", "tcp", 22, 22)])
    b = env.vm("b", net, groups=[server])
    a = env.vm("a", net, groups=[client])
    c = _established(a, b, 40620, 22)
    before = env.drops()
    env.sw.call("security_group_rule.delete", {"id": r["id"]})
    b.send(c.data(b, b"a reply of a connection no rule allows now"))
    assert_frames(a.recv(), [])
    assert env.drops_since(before) == {"b": {"ct_revoked": 1}}
    a.send(c.data(a, b"a has no egress rule now"))
    assert_frames(b.recv(), [])
    assert env.drops_since(before) == {"b": {"ct_revoked": 1}, "a": {"sg_egress_denied": 1}}
    env.sw.call("security_group_rule.create", {"security_group_id": client, **rule("egress", "tcp", 22, 22)})
    before = env.drops()
    for sender, f in [(a, c.data(a, b"back again")), (b, c.data(b, b"welcome back"))]:
        sender.send(f)
        assert_frames((b if sender is a else a).recv(), [f])
    assert env.drops_since(before) == {}


def test_connections_with_the_outside_replies_pass_new_ones_from_outside_do_not(env):
    net = env.flat()
    a = env.vm("a", net, groups=[env.group([rule("egress", "tcp", 1, 65535)])])  # client, no ingress
    b = env.vm("b", net, groups=[env.group([rule("ingress", "tcp", 22, 22)])])   # server, no egress
    host = env.host("host")
    before = env.drops()
    out, inc = Tcp(a, host, 41300, 443), Tcp(host, b, 41301, 22)
    for sender, f in [(a, out.syn()), (host, out.synack()), (a, out.ack()), (host, out.data(host, b"page")),
                      (host, inc.syn()), (b, inc.synack()), (host, inc.ack()), (b, inc.data(b, b"banner"))]:
        if sender is host:
            env.wire_send(f)
        else:
            sender.send(f)
        got = env.wire_recv() if sender is not host else (a.recv() + b.recv())
        assert_frames(got, [f], f"{sender.name}: {Ether(f).summary()}")
    assert env.drops_since(before) == {}
    env.wire_send(tcp(host, a, 41302, 22), tcp(host, b, 41303, 23))
    b.send(tcp(b, host, 41304, 80))
    assert_frames(a.recv() + b.recv() + env.wire_recv(), [])
    assert env.drops_since(before) == {"physnet1": {"sg_ingress_denied": 2}, "b": {"sg_egress_denied": 1}}


def test_rule_removal_keeps_connections_another_rule_allows(env):
    net = env.network()
    egress = env.group(EGRESS_ANY)
    b = env.vm("b", net, bind=False)
    a = env.vm("a", net, groups=[egress])
    server = env.group([rule("ingress", "tcp", 22, 22)])
    env.sw.call("security_group_rule.create",
                {"security_group_id": server, **rule("ingress", "tcp", prefix=f"{a.ip4}/32")})
    narrow = env.sw.call("security_group.show", {"id": server})["rules"]
    port22 = next(r for r in narrow if r.get("port_range_min") == 22)
    b.bind(groups=[server])
    c = _established(a, b, 40610, 22)
    env.sw.call("security_group_rule.delete", {"id": port22["id"]})
    before = env.drops()
    for sender, f in [(a, c.data(a, b"still allowed")), (b, c.data(b, b"by the other rule"))]:
        receiver = b if sender is a else a
        sender.send(f)
        assert_frames(receiver.recv(), [f])
    assert env.drops_since(before) == {}


def test_two_vms_talk_through_both_ingress_and_egress_policies(env):
    net = env.network()
    client_id = unique("sg")
    b = env.vm("b", net, bind=False)
    a = env.vm("a", net, bind=False)
    client = env.group([rule("egress", "tcp", 22, 22, prefix=f"{b.ip4}/32"),
                        rule("egress", "tcp", 80, 80, prefix=f"{b.ip4}/32")], gid=client_id)
    server = env.group([rule("ingress", "tcp", 22, 22, remote_group=client_id),
                        rule("ingress", "tcp", 2222, 2222, remote_group=client_id)])
    b.bind(groups=[server])
    a.bind(groups=[client])
    show = env.sw.call("show")
    workers = {q["port"]: w["id"] for w in show["workers"] for q in w["rx_queues"]}
    print(f"a on worker {workers.get(a.show()['dp_port'])}, b on worker {workers.get(b.show()['dp_port'])}")
    before = env.drops()
    c = Tcp(a, b, 40700, 22)
    for sender, f in [(a, c.syn()), (b, c.synack()), (a, c.ack()), (a, c.data(a, b"ls\n")),
                      (b, c.data(b, b"bin etc usr\n" * 8)), (a, c.data(a, b"exit\n")),
                      (b, c.fin(b)), (a, c.fin(a)), (b, c.final_ack(b))]:
        receiver = b if sender is a else a
        sender.send(f)
        assert_frames(receiver.recv(), [f], f"{sender.name} -> {receiver.name}: {Ether(f).summary()}")
    assert env.drops_since(before) == {}
    a.send(tcp(a, b, 40701, 2222))  # b would take it, a's egress does not allow it
    a.send(tcp(a, b, 40702, 80))    # a's egress allows it, b's ingress does not
    b.send(tcp(b, a, 40703, 22))    # neither b's egress nor a's ingress
    assert a.recv() == [] and b.recv() == []
    after = env.drops_since(before)
    assert after.pop("a") == {"sg_egress_denied": 1, "sg_ingress_denied": 1}
    deny_one(after, "b", {"sg_egress_denied", "sg_ingress_denied"})


def test_port_update_changes_groups_of_a_live_port_without_losing_a_frame_f7(env):
    net = env.network()
    egress = env.group(EGRESS_ANY)
    ssh = env.group([rule("ingress", "tcp", 22, 22)])
    web = env.group([rule("ingress", "tcp", 80, 80)])
    b = env.vm("b", net, groups=[ssh])
    a = env.vm("a", net, groups=[egress])
    c = _established(a, b, 40800, 22)
    before = env.drops()
    web_syn = a.send(tcp(a, b, 40801, 80))
    assert_frames(b.recv(), [])
    assert env.drops_since(before) == {"a": {"sg_ingress_denied": 1}}

    # Frames of the ssh connection keep flowing while b's groups change twice.
    stream = [c.data(a, b"stream-%04d" % i) for i in range(300)]
    rx_before = a.stats()["rx_packets"]

    def pump():
        for f in stream:
            a.veth.sock.send(f)
            time.sleep(0.001)

    t = threading.Thread(target=pump)
    t.start()
    try:
        time.sleep(0.05)
        port = b.update(security_groups=[ssh, web])
        assert port["security_groups"] == [ssh, web]
        time.sleep(0.05)
        port = b.update(security_groups=[web, ssh])
        assert port["security_groups"] == [web, ssh]
    finally:
        t.join()
    wait_for(lambda: a.stats()["rx_packets"] >= rx_before + len(stream), what="the stream")
    env.sync()
    got = b.recv()
    assert len(got) == len(stream) and got == stream
    assert env.drops_since(before) == {"a": {"sg_ingress_denied": 1}}
    # The new rule applies to the next new connection, without a re-bind:
    # the very SYN refused before passes now.
    ok = a.send(*web_syn, tcp(a, b, 40802, 80))
    assert_frames(b.recv(), ok)
    assert b.show()["security_groups"] == [web, ssh]


# ---- the API ---------------------------------------------------------------------


def _state(sw):
    show = sw.call("show")
    return {"groups": group_list(sw), "ports": sorted(sw.call("port.list")["ports"], key=lambda p: p["id"]),
            "generation": show["generation"]}


def _refused(sw, method, params, codes):
    r = sw.request(method, params)
    assert r["ok"] is False, (method, params, r)
    assert r["error"]["code"] in codes, (method, params, r)
    return r["error"]


def test_refused_requests_change_nothing(env):
    sw = env.sw
    net = env.network()
    egress = env.group(EGRESS_ANY, name="egress")
    target = env.group([])
    env.group([rule("ingress", "tcp", 22, 22, remote_group=target)])  # names target
    a = env.vm("a", net, groups=[egress])
    x = env.vm("x", net, bind=False)
    before = _state(sw)

    missing = unique("nosuchgroup")
    _refused(sw, "port.bind", x.bind_params(groups=[egress, missing]), {"not_found"})
    _refused(sw, "port.show", {"id": x.id}, {"not_found"})
    _refused(sw, "port.bind", x.bind_params(groups=[egress], port_security=False), {"invalid_argument"})
    _refused(sw, "port.bind", x.bind_params(pairs=[{"ip_address": f"{env.net4}9"}], port_security=False),
             {"invalid_argument"})
    _refused(sw, "security_group.delete", {"id": egress}, {"conflict"})     # a uses it
    _refused(sw, "security_group.delete", {"id": target}, {"conflict"})     # referrer's rule names it
    _refused(sw, "security_group.delete", {"id": missing}, {"not_found"})
    _refused(sw, "security_group.create", {"id": egress}, {"conflict"})
    _refused(sw, "security_group.create", {"id": "-bad id"}, {"invalid_argument"})
    _refused(sw, "security_group.create",
             {"id": unique("sg"), "rules": [rule("ingress", remote_group=missing)]},
             {"not_found", "invalid_argument"})
    _refused(sw, "security_group_rule.create", {"security_group_id": egress, **rule("egress")}, {"conflict"})
    _refused(sw, "security_group_rule.create",
             {"security_group_id": egress, **rule("ingress", "tcp", 22, 22, remote_group=missing)},
             {"not_found", "invalid_argument"})
    _refused(sw, "security_group_rule.create", {"security_group_id": missing, **rule("egress")},
             {"not_found"})
    _refused(sw, "security_group_rule.create",
             {"security_group_id": egress, **rule("ingress", "tcp", 30, 20)}, {"invalid_argument"})
    _refused(sw, "security_group_rule.create",
             {"security_group_id": egress, **rule("ingress", "tcp", 22, 22, prefix="10.0.0.0/8",
                                                  remote_group=target)}, {"invalid_argument"})
    _refused(sw, "security_group_rule.create",
             {"security_group_id": egress, **rule("ingress", "tcp", 22, 22, eth="IPv4",
                                                  prefix="fd00::/8")}, {"invalid_argument"})
    _refused(sw, "security_group_rule.delete", {"id": unique("norule")}, {"not_found"})
    _refused(sw, "port.update", {"id": a.id, "security_groups": [missing]}, {"not_found"})
    _refused(sw, "port.update", {"id": a.id, "port_security_enabled": False}, {"invalid_argument"})
    _refused(sw, "port.update", {"id": x.id, "security_groups": [egress]}, {"not_found"})
    assert _state(sw) == before

    # Nothing of the refused binds stayed behind: the same device binds now.
    port = x.bind(groups=[egress])
    assert port["security_groups"] == [egress] and port["port_security_enabled"] is True


def test_rules_without_ids_in_security_group_create_get_ids(env):
    gid = unique("sg")
    g = env.sw.call("security_group.create", {"id": gid, "rules": [rule("ingress", "tcp", 80, 80),
                                                                   rule("egress")]})
    env.groups.append(gid)
    ids = [r["id"] for r in g["rules"]]
    assert len(ids) == 2 and all(ids) and ids[0] != ids[1]
    assert all(r["security_group_id"] == gid for r in g["rules"])
    assert [r["id"] for r in env.sw.call("security_group.show", {"id": gid})["rules"]] == ids


def test_security_group_json_and_membership(env):
    sw = env.sw
    net = env.network()
    gid = unique("sg")
    rid1 = str(uuid.uuid4())
    g = sw.call("security_group.create", {"id": gid, "name": "web servers",
                                          "rules": [{"id": rid1, **rule("ingress", "tcp", 80, 80,
                                                                        prefix="0.0.0.0/0")}]})
    env.groups.append(gid)
    assert g["id"] == gid and g["name"] == "web servers" and g["ports"] == []
    [r] = g["rules"]
    assert r["security_group_id"] == gid and r["id"] == rid1
    assert (r["direction"], r["ethertype"], r["protocol"], r["port_range_min"], r["port_range_max"],
            r["remote_ip_prefix"]) == ("ingress", "IPv4", "tcp", 80, 80, "0.0.0.0/0")
    rid = "3c3f2c55-8f1e-4f0a-9d2e-" + f"{os.getpid():012x}"
    r2 = sw.call("security_group_rule.create", {"security_group_id": gid, "id": rid, "protocol": None,
                                                "direction": "egress", "ethertype": "IPv6"})
    assert r2["id"] == rid and r2["security_group_id"] == gid and r2.get("protocol") is None
    a = env.vm("a", net, groups=[gid])
    shown = sw.call("security_group.show", {"id": gid})
    assert shown["ports"] == [a.id]
    assert sorted(r["id"] for r in shown["rules"]) == sorted([r["id"], rid])
    assert gid in [g["id"] for g in group_list(sw)]
    port = sw.call("port.show", {"id": a.id})
    assert port["security_groups"] == [gid] and port["port_security_enabled"] is True
    assert port["allowed_address_pairs"] == []
    listed = next(p for p in sw.call("port.list")["ports"] if p["id"] == a.id)
    assert listed["security_groups"] == [gid]
    a.unbind()
    assert sw.call("security_group.show", {"id": gid})["ports"] == []
    assert sw.call("security_group.delete", {"id": gid}) == {}
    env.groups.remove(gid)
    _refused(sw, "security_group.show", {"id": gid}, {"not_found"})


def test_straitctl_security_group_commands(env):
    sw = env.sw
    net = env.network()
    gid = unique("sgcli")
    sw.ctl("security-group", "create", gid, "--name", "cli")
    env.groups.append(gid)
    g = json.loads(sw.ctl("security-group", "show", gid, json_out=True).stdout)
    assert (g["id"], g["name"], g["rules"]) == (gid, "cli", [])
    r = json.loads(sw.ctl("security-group", "rule", "create", gid, "--direction", "ingress",
                          "--protocol", "tcp", "--port-range-min", 443, "--port-range-max", 443,
                          "--remote-ip-prefix", "192.0.2.0/24", json_out=True).stdout)
    assert (r["security_group_id"], r["direction"], r["ethertype"], r["protocol"], r["port_range_min"],
            r["port_range_max"], r["remote_ip_prefix"]) == (gid, "ingress", "IPv4", "tcp", 443, 443,
                                                           "192.0.2.0/24")
    rid = "5c1e0000-0000-4000-8000-" + f"{os.getpid():012x}"
    sw.ctl("security-group", "rule", "create", gid, "--direction", "egress", "--ethertype", "IPv6",
           "--remote-group-id", gid, "--id", rid)
    dup = sw.ctl("security-group", "rule", "create", gid, "--direction", "egress", "--ethertype", "IPv6",
                 "--remote-group-id", gid, check=False)
    assert dup.returncode == 1 and dup.stderr.strip() and dup.stdout == ""
    listed = json.loads(sw.ctl("security-group", "list", json_out=True).stdout)
    groups = listed["security_groups"] if isinstance(listed, dict) else listed
    assert sorted(r["id"] for r in next(g for g in groups if g["id"] == gid)["rules"]) == sorted([r["id"], rid])
    assert gid in sw.ctl("security-group", "list").stdout

    vm = env.vm("a", net, bind=False)
    mac2 = new_mac()
    port = json.loads(sw.ctl("port", "bind", vm.id, "--network", net, "--mac", vm.mac, "--ip", vm.ip4,
                             "--ethdev", vm.devargs, "--security-group", gid,
                             "--allowed-address-pair", f"{env.net4}128/25",
                             "--allowed-address-pair", f"{env.net4}50,{mac2}", json_out=True).stdout)
    vm.bound = True
    assert port["security_groups"] == [gid] and port["port_security_enabled"] is True
    assert pair_set(port["allowed_address_pairs"]) == pair_set([
        {"ip_address": f"{env.net4}128/25", "mac_address": vm.mac},
        {"ip_address": f"{env.net4}50", "mac_address": mac2}])
    in_use = sw.ctl("security-group", "delete", gid, check=False)
    assert in_use.returncode == 1 and in_use.stderr.strip()
    port = json.loads(sw.ctl("port", "update", vm.id, "--no-security-groups", "--no-allowed-address-pairs",
                             "--no-port-security", json_out=True).stdout)
    assert (port["security_groups"], port["allowed_address_pairs"], port["port_security_enabled"]) == \
        ([], [], False)
    port = json.loads(sw.ctl("port", "update", vm.id, "--security-group", gid, "--port-security",
                             json_out=True).stdout)
    assert port["security_groups"] == [gid] and port["port_security_enabled"] is True
    assert json.loads(sw.ctl("port", "show", vm.id, json_out=True).stdout)["security_groups"] == [gid]
    vm.unbind()
    sw.ctl("security-group", "rule", "delete", rid)
    assert [x["id"] for x in sw.call("security_group.show", {"id": gid})["rules"]] == [r["id"]]
    sw.ctl("security-group", "delete", gid)
    env.groups.remove(gid)
    gone = sw.ctl("security-group", "show", gid, check=False)
    assert gone.returncode == 1
    # straitctl stats -o json: drop reasons and the conntrack object
    st = json.loads(sw.ctl("stats", json_out=True).stdout)
    assert {"capacity", "entries", "created", "new_per_s"} <= set(st["conntrack"])
    table = sw.ctl("stats").stdout
    assert "Conntrack\nENTRIES  CAPACITY" in table and "NEW/S" in table


# ---- persistence -------------------------------------------------------------------


def test_groups_rules_and_port_security_survive_a_restart_f11(straitd_factory, sw):
    # A second straitd beside `sw`: a network namespace of its own for it and
    # its ports (see conftest.Netns).
    rsw = straitd_factory(name="sgrestart", netns=Netns("sgr"))
    lab = Lab(rsw)
    env = Env(rsw, lab)
    try:
        net = env.network()
        cid = unique("sg")  # names itself (neutron's default group) and is named by server
        clients = env.group(EGRESS_ANY + [rule("ingress", "udp", remote_group=cid)], name="clients", gid=cid)
        server = env.group([rule("ingress", "tcp", 22, 22, remote_group=clients),
                            rule("ingress", "udp", 53, 53, prefix="0.0.0.0/0")], name="server")
        b = env.vm("b", net, groups=[server])
        a = env.vm("a", net, groups=[clients], pairs=[{"ip_address": f"{env.net4}128/25"}])
        off = env.vm("off", net, port_security=False)
        c = _established(a, b, 40900, 22)
        groups = group_list(rsw)
        ports = {p["id"]: {k: p[k] for k in ("security_groups", "allowed_address_pairs",
                                             "port_security_enabled", "fixed_ips", "mac")}
                 for p in rsw.call("port.list")["ports"]}

        assert rsw.stop() == 0
        rsw.start()
        wait_for(lambda: all(p["state"] == "up" for p in rsw.call("port.list")["ports"]),
                 timeout=10, what="the restored ports up")
        assert group_list(rsw) == groups
        assert {p["id"]: {k: p[k] for k in ports[p["id"]]} for p in rsw.call("port.list")["ports"]} == ports

        before = env.drops()
        # The established connection goes on (an empty table: loose pickup).
        for sender, f in [(a, c.data(a, b"after the restart")), (b, c.data(b, b"still here"))]:
            receiver = b if sender is a else a
            sender.send(f)
            assert_frames(receiver.recv(), [f])
        ok = a.send(tcp(a, b, 40901, 22), tcp(a, b, 40902, 22, src_ip=f"{env.net4}200"))
        ok += off.send(udp(off, b, 40903, 53))
        assert_frames(b.recv(), ok)
        a.send(tcp(a, b, 40904, 23), udp(a, b, 40905, 53, src_ip="192.0.2.1"))
        off.send(tcp(off, b, 40906, 22))  # off is in no group: not a client
        assert_frames(b.recv(), [])
        assert env.drops_since(before) == {"a": {"sg_ingress_denied": 1, "spoofed_ip": 1},
                                           "off": {"sg_ingress_denied": 1}}

        # Killed (-9) and started again: the same, and the rules still apply.
        rsw.kill()
        rsw.start()
        wait_for(lambda: all(p["state"] == "up" for p in rsw.call("port.list")["ports"]),
                 timeout=10, what="the restored ports up")
        assert group_list(rsw) == groups
        before = env.drops()
        ok = a.send(tcp(a, b, 40907, 22))
        a.send(tcp(a, b, 40908, 23))
        assert_frames(b.recv(), ok)
        assert env.drops_since(before) == {"a": {"sg_ingress_denied": 1}}
    finally:
        env.close()


# ---- conntrack full ------------------------------------------------------------------

CT_CAPACITY = 1024
FLOOD = 5000


@pytest.fixture(scope="module")
def ct_sw(tmp_path_factory, sw):
    tmp = tmp_path_factory.mktemp("ctfull")
    # Beside `sw`: a network namespace of its own (see conftest.Netns).
    s = Straitd(tmp, config=config_text(tmp, {}, extra=f"[conntrack]\ncapacity = {CT_CAPACITY}\n"
                                                      "tcp_loose = false"), netns=Netns("ct"))
    s.start()
    yield s
    died = s.proc.poll()
    try:
        rc = s.stop()
    finally:
        s.kill()
    assert died is None and rc == 0, s.log.read_text()[-3000:]


def test_tcp_loose_off_refuses_a_connection_seen_mid_stream(ct_sw):
    """[conntrack] tcp_loose = false: only a SYN opens a TCP connection.
    (Runs before the flood below fills this straitd's table.)"""
    env = Env(ct_sw, Lab(ct_sw))
    try:
        net = env.network()
        allow = env.group(ALLOW_ALL)
        a = env.vm("a", net, groups=[allow])
        b = env.vm("b", net, groups=[allow])
        before = env.drops()
        a.send(tcp(a, b, 41600, 22, "PA", payload=b"mid-stream", seq=5000, ack=6000))
        assert_frames(b.recv(), [])
        assert env.drops_since(before) == {"a": {"ct_invalid": 1}}
        c = _established(a, b, 41601, 22)  # a handshake still opens one
        ok = a.send(c.data(a, b"fine"))
        assert_frames(b.recv(), ok)
    finally:
        env.close()


def _checksum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


def syn_flood(src, dst, dport, n, first_sport=10000):
    """n TCP SYNs src -> dst:dport from distinct source ports, as bytes (made
    from one template: scapy is slow at thousands)."""
    tmpl = bytearray(tcp(src, dst, 0, dport, "S", payload=b"flood-syn!", seq=777))
    ip = bytes(tmpl[14:34])
    seg_len = len(tmpl) - 34
    pseudo = ip[12:20] + struct.pack("!BBH", 0, 6, seg_len)
    out = []
    for i in range(n):
        f = bytearray(tmpl)
        struct.pack_into("!H", f, 34, first_sport + i)
        struct.pack_into("!H", f, 50, 0)
        struct.pack_into("!H", f, 50, _checksum(pseudo + bytes(f[34:34 + seg_len])))
        out.append(bytes(f))
    return out


def test_syn_flood_fills_conntrack_established_connection_survives(ct_sw):
    lab = Lab(ct_sw)
    env = Env(ct_sw, lab)
    try:
        net = env.network()
        egress = env.group(EGRESS_ANY)
        server = env.group([rule("ingress", "tcp", 22, 22), rule("ingress", "tcp", 80, 80)])
        b = env.vm("b", net, groups=[server])
        a = env.vm("a", net, groups=[egress])
        attacker = env.vm("attacker", net, groups=[egress])
        c = _established(a, b, 41000, 22)
        assert ct_sw.stats()["conntrack"]["capacity"] == CT_CAPACITY

        flood = syn_flood(attacker, b, 80, FLOOD)
        before = env.drops()
        b_tx = b.stats()["tx_packets"]
        rx0 = attacker.stats()["rx_packets"]
        t0 = time.monotonic()
        for i in range(0, FLOOD, 250):  # in bursts the af_packet ring (512 frames) holds
            attacker.veth.send(flood[i:i + 250])
            wait_for(lambda: attacker.stats()["rx_packets"] >= rx0 + min(i + 250, FLOOD) - 100,
                     timeout=5, what="the flood taken in")
        last = [-1]

        def settled():  # every frame in, or none for 0.3 s (a kernel ring overflowed)
            n = attacker.stats()["rx_packets"]
            done = n >= rx0 + FLOOD or n == last[0]
            last[0] = n
            return done
        wait_for(settled, timeout=10, interval=0.3, what="the flood taken in")
        env.sync()
        took = time.monotonic() - t0
        assert ct_sw.proc.poll() is None, "straitd died under the flood"
        rx = attacker.stats()["rx_packets"] - rx0
        passed = b.stats()["tx_packets"] - b_tx
        drops = env.drops_since(before)
        st = ct_sw.stats()["conntrack"]
        print(f"flood: {rx} SYNs in {took:.2f}s, {passed} passed, drops {drops}, conntrack {st}")
        assert set(drops) == {"attacker"} and set(drops["attacker"]) == {"ct_full"}, drops
        assert drops["attacker"]["ct_full"] > 0
        assert passed + drops["attacker"]["ct_full"] == rx
        assert rx >= FLOOD * 0.9, f"only {rx} of {FLOOD} SYNs reached straitd"
        assert passed <= CT_CAPACITY
        assert st["entries"] <= st["capacity"] == CT_CAPACITY
        assert st["refused_full"] >= drops["attacker"]["ct_full"]
        show_ct = ct_sw.call("show")["conntrack"]
        assert show_ct["capacity"] == CT_CAPACITY and show_ct["entries"] <= CT_CAPACITY
        b.recv(quiet=0.2)  # the flood's SYNs that passed

        # The established connection keeps going, both ways.
        before = env.drops()
        for sender, f in [(a, c.data(a, b"during the flood")), (b, c.data(b, b"still answering")),
                          (a, c.data(a, b"good"))]:
            receiver = b if sender is a else a
            sender.send(f)
            assert_frames(receiver.recv(), [f])
        assert env.drops_since(before) == {}
        # A new connection is refused while the table is full, and counted.
        a.send(tcp(a, b, 41001, 22))
        assert_frames(b.recv(), [])
        assert env.drops_since(before) == {"a": {"ct_full": 1}}
        assert ct_sw.call("show")["conntrack"]["entries"] <= CT_CAPACITY
    finally:
        env.close()
