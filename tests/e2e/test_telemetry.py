"""DPDK's own operator tools against a running straitd (docs/api.md, "DPDK
telemetry and packet capture"): dpdk-telemetry.py reads the /strait/*
commands, dpdk-dumpcap captures from an ethdev port with a BPF filter, and
from a vhost-user port through the stand-in `port capture` makes for it.

dpdk-dumpcap is a DPDK secondary process: it maps straitd's memory, which
it cannot do on --no-huge memory, so this module's straitd runs on
hugepages (conftest's `hugepages` fixture: root, and it skips otherwise).
The physical network is a veth pair (conftest.Wire); the test sends on its
far end and straitd receives on net_af_packet.
"""
import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

import conftest
from conftest import (Port, Wire, create_network, new_mac, tshark_fields, uuid_for,
                      wait_for)
from vm import TESTPMD, VM, bind_vhost, port_show, wait_state

TELEMETRY = Path("/usr/bin/dpdk-telemetry.py")
DUMPCAP = shutil.which("dpdk-dumpcap") or "/usr/bin/dpdk-dumpcap"
INBOUND, OUTBOUND = 1, 2  # pcapng epb_flags direction


def need(tool):
    if not Path(tool).exists() and not shutil.which(str(tool)):
        pytest.skip(f"{tool} is not installed")


@pytest.fixture(scope="module")
def wire():
    w = Wire()
    try:
        w.create()
    except Exception as e:  # no CAP_NET_ADMIN / no veth
        w.destroy()
        pytest.skip(f"cannot create a veth pair for the physnet: {e}")
    yield w
    w.destroy()


@pytest.fixture(scope="module")
def sw(hugepages, wire, straitd_factory):
    # straitd_factory last: torn down first, so straitd has left the hugetlbfs
    # mount (and the veth) before they go.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(conftest, "EAL_ARGS", ["--huge-dir", str(hugepages), "-m", "256", "--no-pci",
                                          *conftest.EAL_EXTRA])
        sw = straitd_factory(physnets={"physnet1": f"net_af_packet_tlm,iface={wire.inside}"},
                             name="telemetry")
    sw.physnet_dev = "net_af_packet_tlm"
    return sw


@pytest.fixture
def net(sw, wire):
    """A flat network on the veth physnet and one ethdev port on it."""
    wire.drain(quiet=0.01)
    nid = create_network(sw, "tlm", "flat", physnet="physnet1")
    port = Port(sw, nid, new_mac(), None).bind()
    yield nid, port
    port.unbind()
    sw.call("network.delete", {"id": nid})


def telemetry(sw, *cmds):
    """Runs dpdk-telemetry.py with `cmds` on stdin; one reply per command."""
    p = subprocess.run(["/usr/bin/python3", str(TELEMETRY), "-f", sw.prefix],
                       input="".join(c + "\n" for c in cmds), capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 0, p.stderr
    replies = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    assert len(replies) == len(cmds), p.stdout + p.stderr
    return [r[c.split(",")[0]] for r, c in zip(replies, cmds)]


def udp_to(dst, src, dport, n=1):
    return [Ether(src=src, dst=dst) / IP(src="10.9.0.1", dst="10.9.0.2") /
            UDP(sport=1000 + i, dport=dport) / Raw(b"x" * 40) for i in range(n)]


# ---- dpdk-telemetry.py -----------------------------------------------------------


def test_telemetry_commands_report_the_traffic_sent(sw, wire, net):
    need(TELEMETRY)
    nid, port = net
    src = new_mac()
    good, bad = 20, 3
    wire.send(udp_to(port.mac, src, 7, good))
    # A multicast source MAC: dropped at ingress as invalid_src_mac.
    wire.send(udp_to(port.mac, "01:00:5e:00:00:01", 7, bad))
    wait_for(lambda: port.stats()["tx_packets"] >= good, 5, what="frames forwarded to the port")
    wait_for(lambda: sw.port_stats("physnet:physnet1")["drops"].get("invalid_src_mac", 0) >= bad,
             5, what="invalid_src_mac drops")
    api = sw.stats()
    api_port = next(p for p in api["ports"] if p["id"] == port.id)
    api_phys = next(p for p in api["ports"] if p["id"] == "physnet:physnet1")

    # Published once a second: wait for a copy that has the traffic.
    def settled():
        r = telemetry(sw, f"/strait/port,{port.id}", "/strait/port,physnet:physnet1",
                      "/strait/drops", "/strait/workers", "/strait/ports")
        # None: the copy published last predates the port.
        fresh = r[0] is not None and r[0]["tx_packets"] == api_port["tx_packets"] and \
            r[1]["drop_invalid_src_mac"] == api_phys["drops"]["invalid_src_mac"]
        return r if fresh else None
    one, phys, drops, workers, ports = wait_for(settled, 5, interval=0.3,
                                                what="telemetry to publish the counters")

    assert one["id"] == port.id and one["dp_port"] == api_port["dp_port"]
    assert one["tx_packets"] == good and one["rx_packets"] == 0 and one["drops"] == 0
    assert one["tx_bytes"] == api_port["tx_bytes"] > 0
    assert 0 <= one["age_ms"] < 5000
    assert phys["rx_packets"] == api_phys["rx_packets"] >= good + bad
    assert phys["drop_invalid_src_mac"] == bad and phys["drops"] >= bad
    # Every reason is listed, zero or not.
    assert phys["drop_tx_full"] == 0 and "drop_none" not in phys

    assert drops["invalid_src_mac"] == api["drops"]["invalid_src_mac"] >= bad
    assert drops["total"] == sum(api["drops"].values())
    assert drops["runt_frame"] == api["drops"].get("runt_frame", 0)

    assert workers["count"] == len(api["workers"]) == 1
    assert workers["id"] == [0] and workers["lcore"] == [api["workers"][0]["lcore"]]
    assert workers["packets"][0] >= good + bad and workers["busy_cycles"][0] > 0
    assert workers["tsc_hz"] == api["tsc_hz"]

    assert ports["count"] == len(ports["id"]) == len(api["ports"]) and ports["start"] == 0
    assert "next" not in ports
    i = ports["id"].index(port.id)
    assert ports["tx_packets"][i] == good and ports["dp_port"][i] == api_port["dp_port"]
    j = ports["id"].index("physnet:physnet1")
    assert ports["rx_packets"][j] == phys["rx_packets"] and ports["drops"][j] == phys["drops"]


def test_telemetry_unknown_port_and_bad_page_answer_null(sw):
    need(TELEMETRY)
    missing, bad_page, negative, past_end = telemetry(
        sw, "/strait/port,00000000-dead-4000-8000-000000000000", "/strait/ports,abc",
        "/strait/ports,-1", "/strait/ports,100000")
    assert missing is None and bad_page is None and negative is None
    assert past_end["id"] == [] and past_end["start"] == past_end["count"] >= 1
    assert "next" not in past_end


def test_telemetry_ports_come_in_pages_that_cover_every_port(sw):
    """More ports than one answer holds (64): "next" walks them all once."""
    need(TELEMETRY)
    nid = create_network(sw, "tlmpg", "local")
    ids = [uuid_for(9000 + i) for i in range(70)]
    # vhost server-mode ports: bound with no guest, no ethdev used.
    sw.call("port.bind", {"ports": [
        {"id": i, "network": nid, "mac": new_mac(),
         "attach": {"type": "vhost", "mode": "server", "path": f"tlm{n}.sock"}}
        for n, i in enumerate(ids)]})
    try:
        want = {p["id"] for p in sw.stats()["ports"]}

        def pages():
            seen, start, answers = [], 0, 0
            while start is not None:
                (page,) = telemetry(sw, f"/strait/ports,{start}")
                if page["count"] != len(want):
                    return None  # a copy from before the bind
                assert page["start"] == start and len(page["id"]) <= 64
                seen += page["id"]
                start = page.get("next")
                answers += 1
            return seen, answers
        seen, answers = wait_for(pages, 5, interval=0.3, what="telemetry to list the new ports")
        assert answers == 2 and len(seen) == len(set(seen)) and set(seen) == want
    finally:
        for i in ids:
            sw.call("port.unbind", {"id": i})
        sw.call("network.delete", {"id": nid})


def test_telemetry_help_lists_the_strait_commands(sw):
    need(TELEMETRY)
    (cmds,) = telemetry(sw, "/")
    assert {"/strait/ports", "/strait/port", "/strait/workers", "/strait/drops"} <= set(cmds)


# ---- dpdk-dumpcap -----------------------------------------------------------------


class Capture:
    """dpdk-dumpcap on one of straitd's ethdevs, until it has `count` frames."""

    def __init__(self, sw, iface, bpf, count, out):
        self.out = out
        self.log = out.with_suffix(".log")
        self._logf = open(self.log, "w")
        self.proc = subprocess.Popen(
            # Line-buffered: "Capturing on" is the sign it is ready.
            ["stdbuf", "-oL", DUMPCAP, f"--file-prefix={sw.prefix}", "-i", iface, "-f", bpf,
             "-c", str(count), "-p", "-w", str(out)],
            stdout=self._logf, stderr=subprocess.STDOUT)
        # It says so once its capture callbacks are installed in straitd.
        try:
            wait_for(lambda: "Capturing on" in self.log.read_text() or self.proc.poll() is not None,
                     20, interval=0.05, what="dpdk-dumpcap to start")
        except AssertionError:
            self.stop()
            raise
        assert self.proc.poll() is None, f"dpdk-dumpcap exited:\n{self.log.read_text()}"

    def wait(self, timeout=20):
        try:
            self.proc.wait(timeout)
        finally:
            self.stop()
        assert self.proc.returncode == 0, self.log.read_text()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: it writes its statistics and closes the file
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._logf.close()


def test_dumpcap_captures_filtered_frames_from_a_physnet_ethdev(sw, wire, net, tmp_path):
    need(DUMPCAP)
    need("tshark")
    nid, port = net
    src = new_mac()
    cap = Capture(sw, sw.physnet_dev, "udp dst port 5001", 4, tmp_path / "physnet.pcapng")
    try:
        # Non-matching frames before, between and after the matching ones:
        # with -c 4 the capture must still hold only port 5001.
        for i in range(4):
            wire.send(udp_to(port.mac, src, 5002, 2))
            wire.send(udp_to(port.mac, src, 5001, 1))
        wire.send(udp_to(port.mac, src, 5002, 2))
        cap.wait()
    finally:
        cap.stop()
    rows = tshark_fields(cap.out, ["eth.src", "eth.dst", "udp.dstport", "udp.srcport",
                                   "frame.packet_flags_direction"])
    rows = [r[:-1] + (int(r[-1], 0),) for r in rows]  # tshark writes the flag in hex
    assert rows == [(src, port.mac, "5001", "1000", INBOUND)] * 4, rows
    # straitd forwarded all of them: capturing took nothing from the datapath.
    wait_for(lambda: port.stats()["tx_packets"] >= 12, 5, what="all 12 frames forwarded")


def test_dumpcap_captures_what_straitd_transmits_on_a_port(sw, wire, net, tmp_path):
    need(DUMPCAP)
    need("tshark")
    nid, port = net
    src = new_mac()
    # The port is a net_pcap ethdev: the capture sees its tx direction.
    cap = Capture(sw, port.vdev, "udp and dst port 5003", 3, tmp_path / "port.pcapng")
    try:
        wire.send(udp_to(port.mac, src, 5004, 3))
        wire.send(udp_to(port.mac, src, 5003, 3))
        cap.wait()
    finally:
        cap.stop()
    rows = tshark_fields(cap.out, ["eth.dst", "udp.dstport", "frame.interface_name",
                                   "frame.packet_flags_direction"])
    # The pcapng names the interface after the ethdev id; the frames went out.
    ethdev = sw.call("port.show", {"id": port.id})["ethdev"]
    rows = [r[:-1] + (int(r[-1], 0),) for r in rows]
    assert rows == [(port.mac, "5003", f"dpdk:{ethdev}", OUTBOUND)] * 3, rows


@pytest.fixture
def vms(sw, tmp_path):
    """Two VMs (testpmd's virtio-user, the vhost-user servers) on ports of one
    local network, up: [(port id, MAC, VM)]."""
    need(TESTPMD)
    nid = create_network(sw, "tlmvh", "local")
    made = []
    try:
        for i in range(2):
            pid, mac = str(uuid.uuid4()), new_mac()
            vm = VM(tmp_path, tmp_path / f"vm{i}.sock", name=f"tlmvm{i}")
            bind_vhost(sw, pid, nid, mac, vm.sock)
            made.append((pid, mac, vm))
            vm.start()
        for pid, mac, vm in made:
            wait_state(sw, pid, "up")
            vm.wait_forwarding()
        yield made
    finally:
        for pid, mac, vm in made:
            sw.call("port.unbind", {"id": pid})
            vm.close()
        sw.call("network.delete", {"id": nid})


def test_dumpcap_captures_a_vhost_port_through_its_stand_in(sw, vms, tmp_path):
    need(DUMPCAP)
    need("tshark")
    (a, amac, vma), (b, bmac, vmb) = vms
    assert port_show(sw, a)["capture"] is None
    on = json.loads(sw.ctl("port", "capture", a, "--on").stdout)
    name, ethdev = on["capture"]["ethdev"], on["capture"]["ethdev_id"]
    assert name == f"net_null_{a[:11]}" and on["id"] == a
    assert port_show(sw, a)["capture"] == on["capture"]
    assert f"capture:{name}" in sw.ctl("show").stdout  # the ports table says what to capture

    def frames(src, dst, dport, n):
        # UDP the filter keeps, each after a TCP frame it drops.
        out = []
        for i in range(n):
            out.append(Ether(src=src, dst=dst) / IP(src="10.9.1.1", dst="10.9.1.2") /
                       TCP(sport=2000 + i, dport=dport))
            out.append(Ether(src=src, dst=dst) / IP(src="10.9.1.1", dst="10.9.1.2") /
                       UDP(sport=3000 + i, dport=dport) / Raw(b"c" * 30))
        return out

    cap = Capture(sw, name, "udp", 6, tmp_path / "vhost.pcapng")
    try:
        # Received by port a (the VM sent it), then sent by it (to the VM).
        vma.send(frames(amac, bmac, 6001, 3))
        vmb.receive_until(lambda got: sum(b"c" * 30 in f for f in got) >= 3)
        vmb.send(frames(bmac, amac, 6002, 3))
        cap.wait()
    finally:
        cap.stop()
    rows = tshark_fields(cap.out, ["eth.src", "eth.dst", "tcp.dstport", "udp.dstport",
                                   "udp.srcport", "frame.interface_name",
                                   "frame.packet_flags_direction"])
    rows = [r[:-1] + (int(r[-1], 0),) for r in rows]
    iface = f"dpdk:{ethdev}"
    assert rows == [(amac, bmac, "", "6001", str(3000 + i), iface, INBOUND) for i in range(3)] + \
                  [(bmac, amac, "", "6002", str(3000 + i), iface, OUTBOUND) for i in range(3)], rows

    off = json.loads(sw.ctl("port", "capture", a, "--off").stdout)
    assert off == {"id": a, "capture": None} and port_show(sw, a)["capture"] is None
    again = sw.ctl("port", "capture", a, "--off", check=False)
    assert again.returncode == 1 and "already off" in again.stderr
    # The stand-in took nothing from the datapath: the VMs got everything.
    wait_for(lambda: sw.port_stats(a)["tx_packets"] >= 6, 5, what="port a's 6 frames out")


def test_capture_off_while_dumpcap_runs_then_on_again(sw, vms, tmp_path):
    """The stand-in is hot-unplugged under a running dumpcap: straitd answers,
    forwards on, and makes a new stand-in on request. (DPDK 22.11's dumpcap
    itself crashes when it stops without its device: docs/api.md says to
    stop it first.)"""
    need(DUMPCAP)
    (a, amac, vma), (b, bmac, vmb) = vms
    name = sw.call("port.capture", {"id": a, "enabled": True})["capture"]["ethdev"]
    cap = Capture(sw, name, "udp", 1000, tmp_path / "off.pcapng")
    try:
        assert sw.call("port.capture", {"id": a, "enabled": False}) == {"id": a, "capture": None}
    finally:
        cap.stop()
    assert port_show(sw, a)["capture"] is None
    again = sw.call("port.capture", {"id": a, "enabled": True})
    assert again["capture"]["ethdev"] == name
    f = Ether(src=amac, dst=bmac) / IP(src="10.9.1.1", dst="10.9.1.2") / UDP(dport=7) / Raw(b"d" * 30)
    vma.send([f])
    vmb.receive_until(lambda got: bytes(f) in got)


def test_port_capture_refuses_a_port_that_is_not_vhost(sw, net):
    nid, port = net
    r = sw.ctl("port", "capture", port.id, "--on", check=False)
    assert r.returncode == 1 and "not a vhost-user port" in r.stderr
    assert port_show(sw, port.id).get("capture") is None


def test_telemetry_and_capture_leave_straitd_healthy(sw):
    """The module's teardown also requires a clean SIGTERM exit."""
    assert sw.proc.poll() is None
    assert sw.call("show")["workers"]
