"""vhost-user ports end to end (LESSONS.md F1, F6, F13, F14, F15).

The "VMs" are DPDK's virtio-user frontend in dpdk-testpmd (tests/e2e/vm.py):
each bridges a veth pair to its virtio NIC, so a test sends any frame out
of a VM at any time and reads what the switch delivered to it. straitd is
the vhost-user client by default (the VM is the server, libvirt
mode='server') and reconnects by itself; "mode": "server" makes straitd
create the socket.

One straitd serves the module (physnet1: a net_pcap that only transmits,
physnet2: a veth pair the test drives); the restart test has its own. Each
test makes its own networks, ports and VMs and removes them at its end.
Two cores serve straitd and every VM: nothing here measures throughput;
the tests assert delivery, events and counters.
"""
import grp
import json
import os
import pwd
import select
import signal
import socket
import stat
import struct
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, Dot1Q, Ether
from scapy.packet import Raw

import conftest
from conftest import (SANITIZED, STRAITCTL, ApiError, Straitd, Wire, config_text, create_network,
                      new_mac, read_pcap_bytes, veth_available, wait_for)
from vm import (VM, Blaster, Events, bind_vhost, port_show, port_state, rss_kib, straitd_fds,
                have_testpmd, wait_state)

BCAST = "ff:ff:ff:ff:ff:ff"

if not have_testpmd():
    pytest.skip("dpdk-testpmd is not installed: no virtio-user VM to test vhost ports with",
                allow_module_level=True)
if not veth_available():
    pytest.skip("cannot create veth pairs (needs CAP_NET_ADMIN): the test VMs' NICs are veths",
                allow_module_level=True)


# ---- frames ----------------------------------------------------------------------


def udp(src, dst, payload, size=None, vlan=None):
    l2 = Ether(src=src, dst=dst)
    if vlan is not None:
        l2 = l2 / Dot1Q(vlan=vlan)
    f = l2 / IP(src="10.7.0.1", dst="10.7.0.2", ttl=17, id=4242) / UDP(sport=4000, dport=5000)
    f = f / Raw(payload)
    if size is not None and len(f) < size:
        f = f / Raw(b"\xa5" * (size - len(f)))
    return bytes(f)


def tagged(frame: bytes, vid: int) -> bytes:
    return frame[:12] + struct.pack("!HH", 0x8100, vid) + frame[12:]


MARK = b"STRAITSEQ"


def seq_frame(src, dst, n):
    return udp(src, dst, MARK + struct.pack("!I", n) + b"\x00" * 18)


def seq_of(frame: bytes):
    i = frame.find(MARK)
    return struct.unpack_from("!I", frame, i + len(MARK))[0] if i >= 0 else None


class Traffic:
    """Frames from one VM to a MAC, ~`pps` per second, with sequence numbers,
    until stopped (a raw socket on the VM's wire: thread-safe, and fast)."""

    def __init__(self, vm, src, dst, pps=500):
        self.vm, self.src, self.dst, self.pps = vm, src, dst, pps
        self.sent = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        s.bind((self.vm.wire.outside, 0))
        try:
            while not self._stop.is_set():
                for _ in range(5):
                    s.send(seq_frame(self.src, self.dst, self.sent))
                    self.sent += 1
                time.sleep(5 / self.pps)
        finally:
            s.close()

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(5)


# ---- fixtures --------------------------------------------------------------------


@pytest.fixture(scope="module")
def physnet2():
    w = Wire().create()
    yield w
    w.destroy()


@pytest.fixture(scope="module")
def sw(straitd_factory, physnet2):
    sw = straitd_factory(physnets={
        "physnet1": "net_pcap_vh1,tx_pcap={tmp}/physnet1_tx.pcap",
        "physnet2": f"net_af_packet_vh2,iface={physnet2.inside}",
    }, name="vhost")
    sw.physnet1_tx = sw.tmp / "physnet1_tx.pcap"
    return sw


@pytest.fixture(scope="module")
def events(sw):
    """One subscriber for the whole module: every test checks the whole
    event history of its ports (port ids are never reused)."""
    ev = Events(sw)
    yield ev
    ev.close()


class Guest:
    """A bound vhost port and the VM behind it."""

    def __init__(self, env, network, mode, name, path=None, **vm_options):
        self.env = env
        self.sw = env.sw
        self.id = str(uuid.uuid4())
        self.mac = new_mac()
        self.network = network
        self.mode = mode
        self.path = path or env.dir / f"{name}.sock"
        self.vm = VM(env.dir, self.path, server=(mode != "server"), name=name, **vm_options)
        self.bound = False

    def bind(self):
        r = bind_vhost(self.sw, self.id, self.network, self.mac, self.path, self.mode)
        self.bound = True
        return r

    def unbind(self):
        self.sw.call("port.unbind", {"id": self.id})
        self.bound = False

    def state(self):
        return port_state(self.sw, self.id)

    def wait_up(self, timeout=20.0):
        wait_state(self.sw, self.id, "up", timeout)
        self.vm.wait_forwarding()
        return self

    def stats(self):
        return self.sw.port_stats(self.id)


class Env:
    """What one test makes on a straitd; `vm_options` go to every VM (e.g.
    huge_dir: guest memory on hugepages)."""

    def __init__(self, sw, tmp, **vm_options):
        self.sw = sw
        self.dir = tmp
        self.guests = []
        self.networks = []
        self.vm_options = vm_options

    def network(self, type_="local", physnet=None, seg=None, mtu=None):
        nid = create_network(self.sw, "vnet", type_, physnet, seg, mtu)
        self.networks.append(nid)
        return nid

    def guest(self, network, mode=None, bind=True, start=True, path=None, **vm_options):
        vm_options = {**self.vm_options, **vm_options}
        g = Guest(self, network, mode, f"vm{len(self.guests) + 1}", path, **vm_options)
        self.guests.append(g)
        if bind:
            g.bind()
        if start:
            g.vm.start()
        return g

    def close(self):
        for g in self.guests:
            if g.bound:
                try:
                    g.unbind()
                except Exception:
                    pass
        for g in self.guests:
            g.vm.begin_stop()
        for g in self.guests:
            g.vm.close()
        for n in self.networks:
            try:
                self.sw.call("network.delete", {"id": n})
            except Exception:
                pass


@pytest.fixture
def env(sw, tmp_path_factory):
    e = Env(sw, tmp_path_factory.mktemp("vh"))
    yield e
    e.close()


def deliver(a, b, tag, timeout=20.0):
    """A frame from guest a to guest b's MAC arrives at b unchanged."""
    f = udp(a.mac, b.mac, tag.encode())
    a.vm.send([f])
    b.vm.receive_until(lambda got: f in got, timeout)


def both_ways(a, b, tag):
    deliver(a, b, tag + "-ab")
    deliver(b, a, tag + "-ba")


# ---- 1. VM to VM ----------------------------------------------------------------


def test_vm_to_vm_frames_arrive_unchanged_broadcast_floods_and_other_network_gets_nothing(env):
    check_vm_to_vm(env)


def check_vm_to_vm(env):
    """The core forwarding check, on whatever memory env's straitd and VMs use."""
    net_a, net_b = env.network(), env.network()
    g1, g2, g3 = env.guest(net_a), env.guest(net_a), env.guest(net_b)
    for g in (g1, g2, g3):
        g.wait_up()

    unicast = [
        udp(g1.mac, g2.mac, b"vm1-to-vm2 udp"),
        udp(g1.mac, g2.mac, b"full-size", size=1514),
        bytes(Ether(src=g1.mac, dst=g2.mac) / IP(src="10.7.0.1", dst="10.7.0.2", tos=0x28) /
              TCP(sport=33000, dport=22, flags="S", seq=12345, options=[("MSS", 1460)])),
        bytes(Ether(src=g1.mac, dst=g2.mac) / IPv6(src="fd00::1", dst="fd00::2", hlim=9) /
              UDP(sport=1, dport=2) / Raw(b"v6" * 20)),
        bytes(Ether(src=g1.mac, dst=g2.mac, type=0x88b5) / Raw(b"\x01\x02\x03" * 20)),
    ]
    bcast = bytes(Ether(src=g1.mac, dst=BCAST) /
                  ARP(hwsrc=g1.mac, psrc="10.7.0.1", pdst="10.7.0.2"))
    g1.vm.send(unicast + [bcast])
    got2 = g2.vm.receive_until(lambda got: len(got) >= len(unicast) + 1)
    got2 += g2.vm.received(quiet=0.3)

    # Field by field: every byte as VM1 sent it, in order, nothing else.
    assert [Ether(f).summary() for f in got2] == [Ether(f).summary() for f in unicast + [bcast]]
    assert got2 == unicast + [bcast]
    assert g3.vm.received(quiet=0.3) == []  # isolation: another network hears nothing
    assert g1.vm.received(quiet=0.05) == []  # nothing comes back to the sender

    # And the other way round: VM3 can reach neither, even by MAC.
    g3.vm.send([udp(g3.mac, g2.mac, b"cross-network unicast"),
                bytes(Ether(src=g3.mac, dst=BCAST) / ARP(hwsrc=g3.mac, psrc="10.7.0.3"))])
    assert g1.vm.received(quiet=0.3) == [] and g2.vm.received(quiet=0.05) == []

    s1, s2, s3 = g1.stats(), g2.stats(), g3.stats()
    assert s1["rx_packets"] == len(unicast) + 1
    assert s2["tx_packets"] == len(unicast) + 1
    assert s2["tx_bytes"] == sum(map(len, unicast + [bcast]))
    assert s3["rx_packets"] == 2 and s3["tx_packets"] == 0
    assert s1["drops"] == {} and s2["drops"] == {}


# ---- 2. VM to physnet and back --------------------------------------------------


def test_vm_to_physnet_leaves_tagged_with_segmentation_id_and_physnet_to_vm_arrives_untagged(
        env, sw, physnet2):
    net1 = env.network("vlan", "physnet1", seg=301)  # pcap: exact bytes out
    net2 = env.network("vlan", "physnet2", seg=302)  # veth: both directions
    g1, g2 = env.guest(net1), env.guest(net2)
    g1.wait_up()
    g2.wait_up()
    host = new_mac()

    out1 = [udp(g1.mac, host, b"vm-to-physnet1"),
            bytes(Ether(src=g1.mac, dst=BCAST) / ARP(hwsrc=g1.mac, psrc="10.7.1.1",
                                                    pdst="10.7.1.254"))]
    g1.vm.send(out1)

    src = bytes.fromhex(g1.mac.replace(":", ""))

    def on_physnet1():
        return [f for f in read_pcap_bytes(sw.physnet1_tx) if f[6:12] == src]
    got = wait_for(lambda: len(on_physnet1()) >= 2 and on_physnet1(), 10,
                   what="frames of VM1 on physnet1")
    assert got == [tagged(f, 301) for f in out1]

    physnet2.drain(quiet=0.01)
    out2 = udp(g2.mac, host, b"vm-to-physnet2")
    g2.vm.send([out2])
    got = [bytes(p) for p in physnet2.drain(quiet=0.3)]
    assert got == [tagged(out2, 302)]

    # physnet -> VM: the frame arrives without its tag, nothing else changed.
    untagged_in = udp(host, g2.mac, b"physnet2-to-vm")
    physnet2.send([Ether(tagged(untagged_in, 302))])
    g2.vm.receive_until(lambda got: untagged_in in got)
    assert g2.vm.received(quiet=0.2) == []
    assert g1.vm.received(quiet=0.05) == []  # another network, another physnet
    assert g1.stats()["drops"] == {} and g2.stats()["drops"] == {}


# ---- 3. events --------------------------------------------------------------------


def test_events_port_up_and_vif_plugged_only_once_the_vm_is_ready_then_down_and_unbound_f15(
        env, sw, events):
    ev = events
    net = env.network()
    # Bound, no VM yet: down, and no event.
    g = env.guest(net, start=False)
    assert g.state() == "down"
    ev.quiet(g.id, [], settle=0.5)
    assert g.state() == "down" and port_show(sw, g.id)["vhost"]["vid"] == -1

    # The VM boots: port-up, then vif-plugged, with timestamps; then "up".
    t_start = time.time()
    g.vm.start()
    up, plugged = ev.expect(g.id, ["port-up", "vif-plugged"])
    assert isinstance(up["ts"], float) and isinstance(plugged["ts"], float)
    assert t_start - 1 <= up["ts"] <= plugged["ts"] <= time.time() + 1
    show = port_show(sw, g.id)
    assert show["state"] == "up" and show["vhost"]["vid"] >= 0 and show["vhost"]["queues"] == 1

    # The VM shuts down: port-down, state down.
    g.vm.stop()
    down = ev.expect(g.id, ["port-up", "vif-plugged", "port-down"])[-1]
    assert down["ts"] >= plugged["ts"]
    show = port_show(sw, g.id)
    assert show["state"] == "down" and show["vhost"]["vid"] == -1

    # Unbound while down: port-unbound only.
    g.unbind()
    ev.expect(g.id, ["port-up", "vif-plugged", "port-down", "port-unbound"])

    # Unbound while up: port-down, then port-unbound.
    h = env.guest(net)
    ev.expect(h.id, ["port-up", "vif-plugged"])
    h.unbind()
    ev.expect(h.id, ["port-up", "vif-plugged", "port-down", "port-unbound"])
    ev.quiet(g.id, ["port-up", "vif-plugged", "port-down", "port-unbound"])
    ev.quiet(h.id, ["port-up", "vif-plugged", "port-down", "port-unbound"], settle=0)


def test_port_state_is_up_only_once_port_up_is_announced(env, sw, events):
    """Replies and events share the event connection, in the order straitd
    wrote them: with port.show requests always queued there while the VM
    boots, a reply saying "up" must never come before the port-up line."""
    ev = events
    net = env.network()
    g = env.guest(net, start=False)
    mark = len(ev.lines)
    req = (json.dumps({"id": "st", "method": "port.show", "params": {"id": g.id}}) + "\n").encode()
    stop = threading.Event()

    def flood():
        while not stop.is_set():
            ev.s.sendall(req * 4)
            time.sleep(0.0005)
    t = threading.Thread(target=flood, daemon=True)
    g.vm.start()
    t.start()
    try:
        ev.expect(g.id, ["port-up", "vif-plugged"])
        time.sleep(0.05)
    finally:
        stop.set()
        t.join(5)
    ev.pump(0.3)
    order = []
    for line in ev.lines[mark:]:
        if line.get("port") == g.id:
            order.append(line["event"])
        elif line.get("id") == "st":
            order.append("state:" + line["result"]["state"])
    assert "port-up" in order and "state:up" in order, order[-5:]
    first_up = order.index("state:up")
    assert order.index("port-up") < first_up, \
        f"state was up before port-up was announced: {order[max(0, first_up - 3):first_up + 3]}"


def test_event_subscriber_that_disconnects_does_not_kill_straitd(tmp_path):
    sw = Straitd(tmp_path / "sw").start()
    try:
        ev = Events(sw)
        ev.close()  # a client that subscribed and went away (e.g. restarted)
        time.sleep(0.2)
        sw.call("network.create", {"id": "n", "type": "local"})
        pid = str(uuid.uuid4())
        bind_vhost(sw, pid, "n", new_mac(), tmp_path / "novm.sock")
        try:
            sw.call("port.unbind", {"id": pid})  # emits port-unbound
            time.sleep(0.3)
            assert sw.call("port.list")["ports"] == []
        except ConnectionError:
            pass
        assert sw.proc.poll() is None, f"straitd died ({sw.proc.returncode}) emitting an " \
                                       "event to a subscriber that had disconnected"
        assert sw.stop() == 0
    finally:
        sw.kill()


def test_straitctl_binds_a_vhost_port_shows_it_and_follows_its_events(env, sw):
    net = env.network()
    g = env.guest(net, bind=False, start=False)
    follow = subprocess.Popen([str(STRAITCTL), "-s", str(sw.sock), "-o", "json", "events"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)  # subscribed
        out = sw.ctl("port", "bind", g.id, "--network", net, "--mac", g.mac,
                     "--vhost", g.path, json_out=True)
        g.bound = True
        bound = json.loads(out.stdout)
        assert bound["state"] == "down" and bound["attach"] == {
            "type": "vhost", "path": str(g.path), "mode": "client"}
        g.vm.start()
        g.wait_up()
        shown = json.loads(sw.ctl("port", "show", g.id, json_out=True).stdout)
        assert shown["state"] == "up" and shown["vhost"]["queues"] == 1 and shown["vhost"]["vid"] >= 0
        assert g.id in sw.ctl("port", "list").stdout
        g.vm.stop()
        wait_state(sw, g.id, "down", 10)
        sw.ctl("port", "unbind", g.id)
        g.bound = False
        buf = b""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and b"port-unbound" not in buf:
            r, _, _ = select.select([follow.stdout], [], [], 0.5)
            if r:
                buf += os.read(follow.stdout.fileno(), 65536)
        lines = buf.decode().splitlines()
        got = [json.loads(ln) for ln in lines if ln.strip()]
        assert [e["event"] for e in got if e.get("port") == g.id] == [
            "port-up", "vif-plugged", "port-down", "port-unbound"], lines
    finally:
        follow.terminate()
        follow.wait(5)
    assert sw.proc.poll() is None


# ---- 4. reconnect (F13) ------------------------------------------------------------


def test_reconnect_vm_killed_and_restarted_and_straitd_restarted_vms_kept_f2_f13(
        straitd_factory, tmp_path_factory):
    rsw = straitd_factory(name="vhrestart")
    e = Env(rsw, tmp_path_factory.mktemp("vhr"))
    try:
        net = e.network()
        g1, g2 = e.guest(net), e.guest(net)
        g1.wait_up()
        g2.wait_up()
        both_ways(g1, g2, "before")

        # The VM side dies (SIGKILL) and comes back on the same socket: the
        # port comes back by itself, no API call.
        g2.vm.kill()
        wait_state(rsw, g2.id, "down", 10)
        g2.vm.start()
        g2.wait_up(20)
        both_ways(g1, g2, "vm-restarted")

        # straitd restarts (SIGTERM, then SIGKILL: a crash); the VMs keep
        # running and are never restarted. The bindings are applied again
        # (an already existing binding, should straitd persist them, is fine).
        pids = (g1.vm.proc.pid, g2.vm.proc.pid)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            rc = rsw.stop(sig)
            assert rc == (0 if sig == signal.SIGTERM else -signal.SIGKILL), rsw.log.read_text()[-2000:]
            (rsw.tmp / f"straitd.before-{sig.name}.log").write_text(rsw.log.read_text())
            time.sleep(0.5)  # the VMs notice the switch is gone
            assert g1.vm.running() and g2.vm.running()
            rsw.start()
            try:
                rsw.call("network.create", {"id": net, "type": "local"})
            except ApiError as err:
                assert err.code == "already_exists", err
            for g in (g1, g2):
                try:
                    g.bind()
                except ApiError as err:
                    assert err.code == "already_exists", err
            for g in (g1, g2):
                wait_state(rsw, g.id, "up", 20)
            both_ways(g1, g2, f"after-{sig.name}")
            assert (g1.vm.proc.pid, g2.vm.proc.pid) == pids
            assert g1.vm.starts == 1 and g2.vm.starts == 2
    finally:
        e.close()


def binding(port):
    """What a port's binding is, without its run-time state."""
    return {k: v for k, v in port.items()
            if k in ("id", "network", "mac", "fixed_ips", "attach", "security_groups",
                     "allowed_address_pairs", "port_security_enabled")}


def bindings_and_groups(sw):
    return {"networks": sw.call("network.list")["networks"],
            "ports": sorted((binding(p) for p in sw.call("port.list")["ports"]),
                            key=lambda p: p["id"]),
            "groups": sw.call("security_group.list")}


def test_sigterm_takes_ports_down_removes_its_sockets_and_a_restart_brings_all_back(
        straitd_factory, tmp_path_factory):
    """Issue 7: a clean shutdown on SIGTERM. An event subscriber sees
    port-down for every up port before the stream closes; the sockets straitd
    created (server mode) are gone, those of the VMs stay; after a restart the
    networks, bindings and groups are all back and the ports come up again."""
    tsw = straitd_factory(name="vhterm")
    e = Env(tsw, tmp_path_factory.mktemp("vht"))
    ev = None
    try:
        net, other = e.network(), e.network()
        gid = f"sg-{uuid.uuid4()}"
        tsw.call("security_group.create", {"id": gid, "rules": [
            {"direction": "ingress", "ethertype": "IPv4", "protocol": "udp",
             "port_range_min": 53, "port_range_max": 53}]})
        g1, g2 = e.guest(net), e.guest(net, mode="server")
        g3 = e.guest(other, bind=False)
        bind = {"id": g3.id, "network": other, "mac": g3.mac, "fixed_ips": ["10.9.0.3"],
                "security_groups": [gid], "attach": {"type": "vhost", "path": str(g3.path)}}
        tsw.call("port.bind", bind)
        g3.bound = True
        for g in (g1, g2, g3):
            g.wait_up()
        before = bindings_and_groups(tsw)
        assert len(before["ports"]) == 3 and len(before["networks"]) == 2
        ev = Events(tsw)
        assert g2.path.exists() and g1.path.exists()

        assert tsw.stop(signal.SIGTERM) == 0, tsw.log.read_text()[-2000:]
        with pytest.raises(ConnectionError):
            ev.pump(10.0)  # every line straitd wrote, then the end of the stream
        for g in (g1, g2, g3):
            assert ev.of(g.id) == ["port-down"], (g.id, ev.seen)
        assert not g2.path.exists(), "straitd's own (server-mode) socket left behind"
        assert g1.path.exists() and g3.path.exists()  # the VMs' sockets are theirs
        assert not tsw.sock.exists()
        assert g1.vm.running() and g3.vm.running()

        tsw.start()
        assert bindings_and_groups(tsw) == before
        assert stat.S_ISSOCK(g2.path.stat().st_mode)  # listening again for its VM
        for g in (g1, g3):  # straitd is the client: it reconnects by itself
            wait_state(tsw, g.id, "up", 20)
    finally:
        if ev is not None:
            ev.close()
        e.close()


# ---- 5. detach / attach (F14) ----------------------------------------------------


def test_detach_attach_50_times_comes_back_up_forwards_and_leaks_no_fd_or_memory_f14(
        env, sw, events):
    net = env.network()
    g1, g2 = env.guest(net), env.guest(net)
    g1.wait_up()
    g2.wait_up()
    both_ways(g1, g2, "first")
    pid = sw.proc.pid
    base_fds, base_rss = straitd_fds(pid), rss_kib(pid)

    ev = events
    history = ["port-up", "vif-plugged"]
    ev.expect(g2.id, history)
    dp_ports = set()
    for i in range(50):
        g2.unbind()
        history += ["port-down", "port-unbound"]
        ev.expect(g2.id, history)
        # Every other time another port takes the freed datapath index, so
        # the VM's port comes back on a new one (F1: state follows the UUID).
        scratch = str(uuid.uuid4())
        if i % 2:
            bind_vhost(sw, scratch, net, new_mac(), env.dir / "nobody.sock")
        g2.bind()
        if i % 2:
            sw.call("port.unbind", {"id": scratch})
        history += ["port-up", "vif-plugged"]
        ev.expect(g2.id, history)
        show = port_show(sw, g2.id)
        assert show["state"] == "up", i
        dp_ports.add(show["dp_port"])
        both_ways(g1, g2, f"cycle{i}")
        assert g2.vm.running()
    ev.quiet(g2.id, history)
    assert len(dp_ports) > 1

    assert g2.vm.starts == 1  # the VM ran all along
    # The API connections of the loop are closed by straitd a moment later.
    try:
        wait_for(lambda: len(straitd_fds(pid)) <= len(base_fds), 3, what="fds back")
    except AssertionError:
        pass
    now = straitd_fds(pid)
    new = {fd: t for fd, t in now.items() if base_fds.get(fd) != t}
    assert len(now) <= len(base_fds), f"{len(now) - len(base_fds)} more fds; new: {new}"
    grown = rss_kib(pid) - base_rss
    if not SANITIZED:  # ASan keeps freed memory in quarantine; LSan checks leaks at exit
        assert grown < 4096, f"RSS grew by {grown} KiB over 50 detach/attach cycles"
    assert g1.stats()["drops"] == {}


def test_rebind_to_another_network_with_the_vm_running_moves_it_there_f1(env, sw, events):
    """F1: the binding is the port's whole identity; a re-plug with another
    network and MAC takes effect completely, whatever the old one was."""
    net_a, net_b = env.network(), env.network()
    a, b = env.guest(net_a), env.guest(net_b)
    mover = env.guest(net_a)
    for g in (a, b, mover):
        g.wait_up()
    both_ways(a, mover, "in-a")
    mover.unbind()
    old_mac = mover.mac
    mover.network, mover.mac = net_b, new_mac()
    mover.bind()
    events.expect(mover.id, ["port-up", "vif-plugged", "port-down", "port-unbound",
                             "port-up", "vif-plugged"])
    assert port_show(sw, mover.id)["network"] == net_b
    both_ways(b, mover, "in-b")
    # Network A reaches it no more, by either MAC.
    a.vm.send([udp(a.mac, old_mac, b"to-old-mac"), udp(a.mac, mover.mac, b"to-new-mac"),
               bytes(Ether(src=a.mac, dst=BCAST) / ARP(hwsrc=a.mac, psrc="10.7.2.1"))])
    assert mover.vm.received(quiet=0.3) == []
    assert b.vm.received(quiet=0.05) == []


def test_large_guest_memory_vm_detaches_reattaches_and_shuts_down_promptly_f14(env, sw, events):
    """F14: deleting the port of a large VM must not hang (4 GiB of guest
    memory mapped by straitd, untouched, so cheap to have here)."""
    net = env.network()
    g1, big = env.guest(net), env.guest(net, mem_mb=4096)
    g1.wait_up()
    big.wait_up(30)
    both_ways(g1, big, "large")
    history = ["port-up", "vif-plugged"]
    events.expect(big.id, history)

    t0 = time.monotonic()
    big.unbind()
    assert time.monotonic() - t0 < 2.0, "unbind of a large VM's port took too long"
    history += ["port-down", "port-unbound"]
    events.expect(big.id, history)
    big.bind()
    history += ["port-up", "vif-plugged"]
    events.expect(big.id, history)
    both_ways(g1, big, "large-again")

    # The guest goes away while its port stays bound: destroy_device.
    t0 = time.monotonic()
    big.vm.kill()
    wait_state(sw, big.id, "down", 5)
    history += ["port-down"]
    events.expect(big.id, history)
    assert time.monotonic() - t0 < 5.0


# ---- 6. guest driver reset ---------------------------------------------------------


def test_guest_driver_reset_under_traffic_delivers_nothing_while_down_and_resumes_f6_f15(
        env, sw, events):
    net = env.network()
    g1, g2 = env.guest(net), env.guest(net)
    g1.wait_up()
    g2.wait_up()
    both_ways(g1, g2, "before")
    ev = events
    history = ["port-up", "vif-plugged"]
    ev.expect(g2.id, history)
    with Traffic(g1.vm, g1.mac, g2.mac) as tr:
        g2.vm.receive_until(lambda got: len(got) >= 20)

        # A slow reset: the driver goes (destroy_device) and stays away.
        g2.vm.stop()
        history += ["port-down"]
        ev.expect(g2.id, history)
        s0 = g2.stats()
        sent0 = tr.sent
        time.sleep(0.6)
        s1 = g2.stats()
        assert g2.state() == "down"
        assert tr.sent > sent0 + 50  # traffic kept coming...
        assert s1["tx_packets"] == s0["tx_packets"], (s0, s1)  # ...and none went to the port
        assert s1["drops"].get("port_down", 0) > s0["drops"].get("port_down", 0), (s0, s1)

        # The driver comes back: forwarding resumes by itself.
        g2.vm.start()
        history += ["port-up", "vif-plugged"]
        ev.expect(g2.id, history)
        since = tr.sent
        g2.vm.receive_until(lambda got: any((seq_of(f) or -1) >= since for f in got))

        # A quick reset: killed and booted again at once.
        g2.vm.kill()
        g2.vm.start()
        history += ["port-down", "port-up", "vif-plugged"]
        ev.expect(g2.id, history)
        since = tr.sent
        g2.vm.receive_until(lambda got: any((seq_of(f) or -1) >= since for f in got))
    ev.quiet(g2.id, history)
    assert g1.stats()["drops"] == {}
    both_ways(g1, g2, "after")


def test_resets_detaches_and_vm_kills_under_full_rate_traffic_never_deliver_while_down(
        env, sw, events):
    """The same, with a guest sending as fast as it can (testpmd txonly), so
    destroy_device and unbind race the worker's dequeue and enqueue. Checked
    on straitd's counters only (the receiver's wire cannot keep up)."""
    net = env.network()
    rx = env.guest(net)
    bl = Guest(env, net, None, "blaster")
    bl.vm = Blaster(env.dir, bl.path, bl.mac, rx.mac)
    env.guests.append(bl)
    bl.bind()
    bl.vm.start()
    rx.wait_up()
    bl.wait_up()

    def delivered(secs=0.3):
        a = rx.stats()["tx_packets"]
        time.sleep(secs)
        return rx.stats()["tx_packets"] - a

    wait_for(lambda: delivered() > 0, 10, what="blaster traffic at the receiver")
    for cycle in range(2):
        # The receiver's guest shuts down: nothing is delivered to its port...
        rx.vm.stop()
        wait_state(sw, rx.id, "down", 10)
        s0 = rx.stats()
        time.sleep(0.3)
        s1 = rx.stats()
        assert rx.state() == "down"
        assert s1["tx_packets"] == s0["tx_packets"], (cycle, s0, s1)
        assert s1["drops"]["port_down"] > s0["drops"].get("port_down", 0), (cycle, s0, s1)
        # ...until it is back.
        rx.vm.start()
        rx.wait_up()
        wait_for(lambda: delivered() > 0, 10, what=f"traffic resumes after reset {cycle}")

        # The receiver's guest is killed and booted again at once.
        rx.vm.kill()
        rx.vm.start()
        rx.wait_up()
        wait_for(lambda: delivered() > 0, 10, what=f"traffic resumes after kill {cycle}")

        # Both ports are detached and attached again, the VMs running.
        for g in (rx, bl):
            g.unbind()
            g.bind()
        rx.wait_up()
        bl.wait_up()
        wait_for(lambda: delivered() > 0, 10, what=f"traffic resumes after re-attach {cycle}")
    assert bl.vm.running() and bl.vm.starts == 1
    assert sw.proc.poll() is None


# ---- 7. server mode ----------------------------------------------------------------


def test_server_mode_straitd_creates_socket_0660_vm_connects_as_client_and_traffic_flows_f13(env):
    net = env.network()
    g1, g2 = env.guest(net, mode="server", start=False), env.guest(net, mode="server", start=False)
    for g in (g1, g2):
        st = g.path.stat()
        assert stat.S_ISSOCK(st.st_mode), g.path
        assert stat.S_IMODE(st.st_mode) == 0o660, oct(st.st_mode)
        assert port_show(env.sw, g.id)["attach"] == {"type": "vhost", "path": str(g.path),
                                                     "mode": "server"}
        assert g.state() == "down"
        g.vm.start()
    g1.wait_up()
    g2.wait_up()
    both_ways(g1, g2, "server-mode")

    # The VM goes and comes back: straitd keeps listening.
    g2.vm.stop()
    wait_state(env.sw, g2.id, "down", 10)
    assert g2.path.exists()
    g2.vm.start()
    g2.wait_up()
    both_ways(g1, g2, "server-mode-again")

    # Unbinding removes the socket straitd created.
    g1.unbind()
    wait_for(lambda: not g1.path.exists(), 5, what=f"{g1.path} removed")


# ---- 8. bad input --------------------------------------------------------------------


def switch_state(sw):
    show = sw.call("show")
    return {"networks": show["networks"], "ports": show["ports"], "physnets": show["physnets"]}


@pytest.mark.parametrize("attach,field,code", [
    ({"type": "vhost", "path": "vm.sock"}, "attach.path", "invalid_argument"),
    ({"type": "vhost", "path": "./vm.sock", "mode": "client"}, "attach.path", "invalid_argument"),
    ({"type": "vhost", "path": "", "mode": "server"}, "attach.path", "invalid_argument"),
    ({"type": "vhost", "path": "/tmp/" + "x" * 120}, "attach.path", "invalid_argument"),
    ({"type": "vhost", "path": "/tmp/vh.sock", "mode": "bogus"}, "attach.mode", "invalid_argument"),
    ({"type": "vhost", "path": "/tmp/vh.sock", "mode": 1}, "attach.mode", "invalid_argument"),
    ({"type": "vhost", "path": "/tmp/vh.sock", "mdoe": "server"}, "attach.mdoe", "invalid_argument"),
    ({"type": "vhost"}, "attach.path", "invalid_argument"),
    ({"type": "vhost", "path": "/nonexistent-dir/vh.sock", "mode": "server"}, "attach.path",
     "device_error"),
], ids=["relative", "dot-relative", "empty", "too-long", "mode-bogus", "mode-not-string",
        "unknown-key", "path-missing", "server-dir-missing"])
def test_bad_vhost_attach_is_refused_clearly_and_changes_nothing(env, sw, attach, field, code):
    net = env.network()
    before = switch_state(sw)
    r = sw.request("port.bind", {"id": str(uuid.uuid4()), "network": net, "mac": new_mac(),
                                 "attach": attach})
    assert r["ok"] is False, r
    assert r["error"]["code"] == code, r
    msg = r["error"]["message"]
    assert field in msg or (code == "device_error" and attach["path"] in msg), msg
    assert switch_state(sw) == before


def test_two_ports_on_one_socket_path_is_refused_and_the_first_keeps_working(env, sw):
    net, other = env.network(), env.network()
    g1, g2 = env.guest(net), env.guest(net)
    g1.wait_up()
    g2.wait_up()
    vid = port_show(sw, g1.id)["vhost"]["vid"]
    before = switch_state(sw)
    for mode in (None, "client", "server"):
        for network in (net, other):
            attach = {"type": "vhost", "path": str(g1.path)}
            if mode:
                attach["mode"] = mode
            r = sw.request("port.bind", {"id": str(uuid.uuid4()), "network": network,
                                         "mac": new_mac(), "attach": attach})
            assert r["ok"] is False and r["error"]["code"] == "conflict", r
            assert "attach.path" in r["error"]["message"] and g1.id in r["error"]["message"], r
    assert switch_state(sw) == before
    assert port_show(sw, g1.id)["vhost"]["vid"] == vid and g1.state() == "up"
    assert g1.vm.running() and g1.path.exists()
    both_ways(g1, g2, "after-conflict")


def test_server_mode_bind_on_an_existing_file_is_refused_and_leaves_it_alone(env, sw):
    net = env.network()
    precious = env.dir / "precious.txt"
    precious.write_text("not a socket")
    live = env.dir / "live.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(live))
    listener.listen(1)
    try:
        for path in (precious, live):
            before = switch_state(sw)
            r = sw.request("port.bind", {"id": str(uuid.uuid4()), "network": net,
                                         "mac": new_mac(),
                                         "attach": {"type": "vhost", "path": str(path),
                                                    "mode": "server"}})
            assert r["ok"] is False, r
            assert str(path) in r["error"]["message"], r
            assert switch_state(sw) == before
            assert path.exists(), f"a refused bind removed {path}"
        assert precious.read_text() == "not a socket"
    finally:
        listener.close()


def test_server_mode_socket_left_by_a_crashed_straitd_is_taken_over(env):
    net = env.network()
    stale = env.dir / "stale.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(stale))
    s.close()  # the file stays, nobody listens: what a SIGKILLed server leaves
    g1 = env.guest(net, mode="server", path=stale)
    assert stat.S_IMODE(stale.stat().st_mode) == 0o660
    g2 = env.guest(net)
    g1.wait_up()
    g2.wait_up()
    both_ways(g1, g2, "stale-socket-taken-over")


# ---- 9. MTU: 1518-byte and 9000-byte frames ------------------------------------------
#
# straitd's mbufs hold 2 KB: a jumbo frame from a guest is dequeued as a chain
# of mbufs, parsed from its first segment, copied whole for a flood, and
# enqueued into the receiving guest's 2 KB buffers through mergeable rx
# buffers (VIRTIO_NET_F_MRG_RXBUF: one frame over several descriptors). The
# guests' wires carry 9200 bytes; the switch alone decides what is too big.

JUMBO_WIRE = 9200


def test_jumbo_frames_on_mtu_9000_network_arrive_byte_exact_and_oversize_frames_are_dropped(env):
    net = env.network(mtu=9000)
    a, b, c = (env.guest(net, mtu=JUMBO_WIRE) for _ in range(3))
    for g in (a, b, c):
        g.wait_up()

    # 9000 bytes, and the largest the network takes: 14 + 9000 (IP MTU).
    # 1514 (1518 with the FCS): one 2 KB mbuf.
    to_b = [udp(a.mac, b.mac, b"jumbo-9000", size=9000),
            udp(a.mac, b.mac, b"jumbo-9014", size=9014),
            udp(a.mac, b.mac, b"frame-1518", size=1514)]
    a.vm.send(to_b)
    got = b.vm.receive_until(lambda got: len(got) >= len(to_b), 20)
    assert [len(f) for f in got] == [len(f) for f in to_b]
    assert got == to_b

    to_a = udp(c.mac, a.mac, b"jumbo-to-a", size=9000)
    c.vm.send([to_a])
    a.vm.receive_until(lambda got: to_a in got, 20)

    # A jumbo broadcast floods: each receiver gets a whole copy of the chain.
    bcast = udp(a.mac, BCAST, b"jumbo-flood", size=9000)
    a.vm.send([bcast])
    b.vm.receive_until(lambda got: bcast in got, 20)
    c.vm.receive_until(lambda got: bcast in got, 20)

    # One byte over the network's MTU: dropped at the switch and counted.
    before = a.stats()["drops"].get("mtu_exceeded", 0)
    over = udp(a.mac, b.mac, b"jumbo-9015", size=9015)
    a.vm.send([over])
    wait_for(lambda: a.stats()["drops"].get("mtu_exceeded", 0) == before + 1, 10,
             what="mtu_exceeded counted")
    assert b.vm.received(quiet=0.3) == []
    assert c.vm.received(quiet=0.05) == []  # the flood above is all it had
    assert a.vm.received(quiet=0.05) == []
    s_a, s_b = a.stats(), b.stats()
    assert s_b["tx_packets"] == len(to_b) + 1
    assert s_b["tx_bytes"] == sum(map(len, to_b)) + len(bcast)
    assert s_a["drops"] == {"mtu_exceeded": 1}
    assert s_b["drops"] == {} and c.stats()["drops"] == {}


def test_mtu_1500_network_takes_1518_byte_frames_and_drops_one_byte_more(env):
    net = env.network()  # mtu 1500, the default
    a, b = env.guest(net, mtu=JUMBO_WIRE), env.guest(net)
    a.wait_up()
    b.wait_up()
    full = udp(a.mac, b.mac, b"frame-1518", size=1514)  # 1518 on the wire with the FCS
    a.vm.send([full])
    b.vm.receive_until(lambda got: full in got)
    for size in (1515, 9000):
        a.vm.send([udp(a.mac, b.mac, b"too-big", size=size)])
    wait_for(lambda: a.stats()["drops"].get("mtu_exceeded", 0) == 2, 10,
             what="two frames dropped as mtu_exceeded")
    assert b.vm.received(quiet=0.3) == []
    assert b.stats()["tx_packets"] == 1 and a.stats()["drops"] == {"mtu_exceeded": 2}


# ---- 10. multiqueue ----------------------------------------------------------------
#
# A straitd with two workers (lcore 2 shares CPU 0 with the control thread).
# A guest with two queue pairs: each of its rx queues is polled by its own
# worker, and each worker transmits to it on its own queue. A one-queue guest
# receiving from both workers has one queue for two transmitters: that queue
# is shared, under a spinlock per burst.


@pytest.fixture(scope="module")
def mqsw(straitd_factory):
    return straitd_factory(name="vhmq", workers=(1, 2), eal=["--lcores", "0@0,1@1,2@0"])


def flows(src, dst, tag, n):
    """n frames, each its own UDP flow (the wire's RSS spreads them)."""
    return [bytes(Ether(src=src, dst=dst) / IP(src="10.7.9.1", dst="10.7.9.2") /
                  UDP(sport=10000 + i, dport=7) / Raw(f"{tag}-{i}".encode())) for i in range(n)]


def rx_owners(sw, dp_port):
    """{rx queue: worker id} of a datapath port, from `show`."""
    return {q["queue"]: w["id"] for w in sw.call("show")["workers"]
            for q in w["rx_queues"] if q["port"] == dp_port}


def worker_packets(sw):
    return {w["id"]: w["packets"] for w in sw.stats()["workers"]}


def test_multiqueue_guest_both_queue_pairs_polled_by_two_workers_forward_byte_exact(
        mqsw, tmp_path_factory):
    e = Env(mqsw, tmp_path_factory.mktemp("vhmq"))
    try:
        net = e.network()
        # Booted in turn, so the rx queues are spread in a known way: mq's
        # two over both workers, then a on worker 0 and b on worker 1.
        mq = e.guest(net, queues=2)
        mq.wait_up()
        a = e.guest(net)
        a.wait_up()
        b = e.guest(net)
        b.wait_up()
        shown = port_show(mqsw, mq.id)
        assert shown["vhost"]["queues"] == 2
        owners = rx_owners(mqsw, shown["dp_port"])
        assert sorted(owners) == [0, 1] and owners[0] != owners[1], owners
        wa = rx_owners(mqsw, port_show(mqsw, a.id)["dp_port"])
        wb = rx_owners(mqsw, port_show(mqsw, b.id)["dp_port"])
        assert wa[0] != wb[0], (wa, wb)

        # From mq, 64 flows: the guest sends them on both of its queues (the
        # kernel hashes each flow to one), so both workers forward, each to
        # a's single queue (shared: the spinlock). a gets every frame,
        # byte-exact; frames of one queue keep their order.
        before = worker_packets(mqsw)
        out = flows(mq.mac, a.mac, "mq-to-a", 64)
        mq.vm.send(out)
        got = a.vm.receive_until(lambda got: len(got) >= len(out), 20)
        got += a.vm.received(quiet=0.3)
        assert sorted(got) == sorted(out)
        after = worker_packets(mqsw)
        moved = {w: after[w] - before[w] for w in after}
        assert all(moved.values()) and sum(moved.values()) == len(out), moved

        # To mq: a's worker sends on one of mq's queues, b's on the other.
        to_mq = flows(a.mac, mq.mac, "a-to-mq", 16) + flows(b.mac, mq.mac, "b-to-mq", 16)
        a.vm.send(to_mq[:16])
        b.vm.send(to_mq[16:])
        got = mq.vm.receive_until(lambda got: len(got) >= len(to_mq), 20)
        got += mq.vm.received(quiet=0.3)
        assert sorted(got) == sorted(to_mq)

        for g in (mq, a, b):
            assert g.stats()["drops"] == {}, g.stats()

        # Both workers to one shared queue at once, a few hundred frames. The
        # guests, on a CPU shared with everything else, may fall behind: then
        # a frame is lost in a guest or counted tx_full at the switch. Every
        # frame the switch took from mq is sent to b or counted, and what
        # arrives is whole and arrives once.
        m0, s0 = mq.stats()["rx_packets"], b.stats()
        burst = flows(mq.mac, b.mac, "burst", 256)
        for i in range(0, len(burst), 16):
            mq.vm.send(burst[i:i + 16])
            time.sleep(0.01)

        def settled():
            m = mq.stats()["rx_packets"]
            time.sleep(0.3)
            return mq.stats()["rx_packets"] == m
        wait_for(settled, 20, what="the burst through the switch")
        took = mq.stats()["rx_packets"] - m0
        s1 = b.stats()
        sent = s1["tx_packets"] - s0["tx_packets"]
        full = s1["drops"].get("tx_full", 0)
        assert sent + full == took and took >= len(burst) // 2, (took, s0, s1)
        assert set(s1["drops"]) <= {"tx_full"} and mq.stats()["drops"] == {}, s1
        got = b.vm.received(quiet=0.5, timeout=20)
        assert len(set(got)) == len(got) and set(got) <= set(burst)
    finally:
        e.close()


# ---- 11. hugepages ---------------------------------------------------------------
#
# The rest of the module runs on --no-huge (memfd) memory; here straitd and
# the VMs run on 2 MB hugepages, which the fixture reserves (root only) and
# gives back afterwards.

def maps_file_in(pid, directory):
    """Whether process `pid` has memory mapped from a file in `directory`."""
    return f" {directory}/" in Path(f"/proc/{pid}/maps").read_text()


def test_vm_to_vm_forwarding_on_hugepages(hugepages, tmp_path_factory, monkeypatch):
    monkeypatch.setattr(conftest, "EAL_ARGS", ["--huge-dir", str(hugepages), "-m", "512",
                                               "--no-pci", *conftest.EAL_EXTRA])
    hsw = Straitd(tmp_path_factory.mktemp("vhhuge")).start()
    e = Env(hsw, tmp_path_factory.mktemp("vhh"), huge_dir=hugepages)
    try:
        check_vm_to_vm(e)
        assert maps_file_in(hsw.proc.pid, hugepages), "straitd is not on hugepages"
        for g in e.guests:
            assert maps_file_in(g.vm.proc.pid, hugepages), f"{g.vm.name} is not on hugepages"
        e.close()
        assert hsw.stop() == 0, hsw.log.read_text()[-2000:]
    finally:
        e.close()
        hsw.kill()


# ---- 12. server-mode sockets: where, whose, which mode -----------------------------


def a_group():
    """A group of this host other than root's, for the socket to be given to."""
    for name in ("kvm", "libvirt-qemu", "nogroup", "daemon"):
        try:
            return grp.getgrnam(name)
        except KeyError:
            pass
    pytest.skip("no group other than root's on this host")


def vhost_straitd(tmp, vhost_section):
    """A straitd whose [vhost] section is `vhost_section` (in place of the
    harness's own, if it writes one)."""
    base = config_text(tmp, {}).split("\n[vhost]\n")[0].rstrip("\n")
    return Straitd(tmp, config=f"{base}\n[vhost]\n{vhost_section}").start()


def test_server_socket_bare_name_lands_in_socket_dir_with_configured_mode_owner_and_group(
        tmp_path):
    if os.geteuid() != 0:
        pytest.skip("giving a socket to another user needs root")
    owner, group = pwd.getpwnam("nobody"), a_group()
    sock_dir = tmp_path / "run" / "vhost"  # does not exist yet: straitd makes it
    sw = vhost_straitd(tmp_path / "sw", f'socket_dir = "{sock_dir}"\nsocket_owner = "nobody"\n'
                                        f'socket_group = "{group.gr_name}"\nsocket_mode = "0640"\n')
    vm = None
    try:
        sw.call("network.create", {"id": "n", "type": "local"})
        pid = str(uuid.uuid4())
        port = bind_vhost(sw, pid, "n", new_mac(), "vhu-bare.sock", mode="server")
        path = sock_dir / "vhu-bare.sock"
        assert port["attach"] == {"type": "vhost", "path": str(path), "mode": "server"}
        assert port_show(sw, pid)["attach"]["path"] == str(path)  # stored absolute
        st = path.stat()
        assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o640, oct(st.st_mode)
        assert (st.st_uid, st.st_gid) == (owner.pw_uid, group.gr_gid)
        assert sock_dir.is_dir()

        # A working socket: a guest connects to it and the port comes up.
        vm = VM(tmp_path, path, server=False, name="vm-bare").start()
        wait_state(sw, pid, "up")
        vm.wait_forwarding()

        # An absolute path elsewhere keeps its own directory, and a bare
        # name in client mode is still refused (QEMU's socket has no default
        # place).
        other = tmp_path / "elsewhere.sock"
        bind_vhost(sw, str(uuid.uuid4()), "n", new_mac(), other, mode="server")
        assert stat.S_IMODE(other.stat().st_mode) == 0o640
        with pytest.raises(ApiError) as err:
            bind_vhost(sw, str(uuid.uuid4()), "n", new_mac(), "vhu-client.sock")
        assert err.value.code == "invalid_argument" and "attach.path" in err.value.message

        sw.call("port.unbind", {"id": pid})
        wait_for(lambda: not path.exists(), 5, what=f"{path} removed")
        vm.stop()
        assert sw.stop() == 0, sw.log.read_text()[-2000:]
    finally:
        if vm is not None:
            vm.close()
        sw.kill()


@pytest.mark.parametrize("key", ["socket_owner", "socket_group"])
def test_server_socket_with_unknown_owner_or_group_is_refused_and_changes_nothing(tmp_path, key):
    sock_dir = tmp_path / "vhost"
    sw = vhost_straitd(tmp_path / "sw", f'socket_dir = "{sock_dir}"\n{key} = "no-such-name-e2e"\n')
    try:
        sw.call("network.create", {"id": "n", "type": "local"})
        before = switch_state(sw)
        for path in ("vhu-x.sock", str(tmp_path / "abs.sock")):
            r = sw.request("port.bind", {"id": str(uuid.uuid4()), "network": "n", "mac": new_mac(),
                                         "attach": {"type": "vhost", "path": path,
                                                    "mode": "server"}})
            assert r["ok"] is False and r["error"]["code"] == "device_error", r
            assert key in r["error"]["message"] and "no-such-name-e2e" in r["error"]["message"], r
        assert switch_state(sw) == before
        assert not sock_dir.exists() and not (tmp_path / "abs.sock").exists()
        # Client mode does not create the socket: the setting does not apply.
        bind_vhost(sw, str(uuid.uuid4()), "n", new_mac(), tmp_path / "client.sock")
        assert sw.stop() == 0
    finally:
        sw.kill()
