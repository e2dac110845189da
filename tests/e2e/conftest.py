"""End-to-end harness: the real straitd and straitctl, frames made by scapy.

Each test module shares one straitd (module-scoped fixture): its own
temporary directory, its own EAL --file-prefix, idle_sleep_us = 100 so the
worker sleeps when idle. At the end of the module it is stopped with SIGTERM
and must exit 0 (a crash fails the module); it is killed if it will not stop.

Ports are net_pcap vdevs: a port's rx_pcap is read once, when it is bound
(so receivers are bound first and the sender last), and its tx_pcap holds
what the switch sent to it. A physical network the tests drive in both
directions, at any time, is a veth pair (Wire): straitd owns one end
(net_af_packet), the test sends and receives on the other with a scapy L2
socket. Without veth (no CAP_NET_ADMIN) those tests skip, and
test_physnet_replay.py still covers physnet -> VM with an endless net_pcap.

Environment (set by ctest, see tests/CMakeLists.txt): STRAIT_BUILD (build
directory), STRAIT_SOURCE (source directory).
"""
import itertools
import json
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

SOURCE = Path(os.environ.get("STRAIT_SOURCE", Path(__file__).resolve().parents[2]))
BUILD = Path(os.environ.get("STRAIT_BUILD", SOURCE / "build"))
STRAITD = BUILD / "control" / "straitd"
STRAITCTL = BUILD / "control" / "straitctl" / "straitctl"

# make test SANITIZE=...: straitd is instrumented (tests/README.md "Sanitizers").
# Under ASan its shadow memory covers DPDK's default base address, so the
# kernel places DPDK's memory wherever it likes, often where a secondary
# process (dpdk-dumpcap) has its own libraries: STRAIT_E2E_EAL gives a base
# address both can map.
SANITIZED = bool(os.environ.get("STRAIT_SANITIZE"))
EAL_EXTRA = os.environ.get("STRAIT_E2E_EAL", "").split()
EAL_ARGS = ["--no-huge", "-m", "512", "--no-pci", *EAL_EXTRA]
READY_TIMEOUT = 20.0

_seq = itertools.count(1)


def unique(tag: str) -> str:
    """A name no other straitd on this host uses: pid + a counter."""
    return f"{tag}{os.getpid()}_{next(_seq)}"


def wait_for(cond, timeout=5.0, interval=0.02, what="condition"):
    """Polls cond() until it returns a truthy value; returns that value."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


# ---- straitd ---------------------------------------------------------------


def config_text(tmp: Path, physnets: dict, workers=(1,), idle_sleep_us=100, extra="",
                libvirt_uri=None, datapath="") -> str:
    """straitd's config for a test. libvirt_uri None: no libvirt watcher (the
    host's libvirtd, if any, is not the test's business). datapath: more
    lines of the [datapath] table."""
    lines = [
        f'state_dir = "{tmp / "state"}"',
        f'api_socket = "{tmp / "api.sock"}"',
        extra,
        "[datapath]",
        f"workers = [{', '.join(str(w) for w in workers)}]",
        f"idle_sleep_us = {idle_sleep_us}",
        datapath,
    ]
    for name, dev in physnets.items():
        lines += [f"[physnets.{name}]", f'device = "{dev}"']
    if "[metrics]" not in extra:  # one straitd per test may have the default port
        lines += ["[metrics]", "enabled = false"]
    if libvirt_uri is None:
        lines += ["[libvirt]", "enabled = false"]
    else:
        lines += ["[libvirt]", "enabled = true", f'uri = "{libvirt_uri}"']
    lines += ["[vhost]", f'socket_dir = "{tmp / "vhost"}"']
    return "\n".join(lines) + "\n"


class ApiError(Exception):
    def __init__(self, reply, log_tail=""):
        """log_tail: straitd's last log lines where they say more (a device
        error's cause is in DPDK's log)."""
        super().__init__(json.dumps(reply.get("error")) + (f"\nstraitd log:\n{log_tail}" if log_tail else ""))
        self.reply = reply
        self.code = reply.get("error", {}).get("code")
        self.message = reply.get("error", {}).get("message")


STRAITD_READY = re.compile(r"straitd \S+ ready: ")


class Straitd:
    """One straitd process and the ways to talk to it."""

    def __init__(self, tmp: Path, physnets=None, config=None, workers=(1,), eal=(), netns=None):
        self.netns = netns  # a Netns: straitd runs in it (its veth ends belong there)
        self.tmp = Path(tmp)
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.sock = self.tmp / "api.sock"
        self.cfg = self.tmp / "straitd.toml"
        self.eal = list(eal)
        if config is None:
            physnets = {k: v.format(tmp=self.tmp) for k, v in (physnets or {}).items()}
            config = config_text(self.tmp, physnets, workers=workers)
        self.cfg.write_text(config)
        self.prefix = unique("e2e")
        self.log = self.tmp / "straitd.log"
        self.proc = None

    def start(self):
        self._logf = open(self.log, "w")
        argv = [str(STRAITD), "--config", str(self.cfg), "--", *EAL_ARGS, *self.eal,
                "--file-prefix", self.prefix]
        self.proc = subprocess.Popen(
            self.netns.cmd(*argv) if self.netns else argv,
            stdout=self._logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + READY_TIMEOUT
        # straitd's own line, not a vhost device's "ready" (a restarted
        # straitd's client sockets may reconnect before its API listens)
        while not STRAITD_READY.search(self.log.read_text()):
            if self.proc.poll() is not None:
                raise RuntimeError(f"straitd exited with {self.proc.returncode}:\n{self.log.read_text()}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"straitd not ready after {READY_TIMEOUT}s:\n{self.log.read_text()}")
            time.sleep(0.02)
        return self

    def stop(self, sig=signal.SIGTERM, timeout=10.0):
        """Stops straitd with `sig`; returns its exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"straitd ignored {sig!r} for {timeout}s")
        self._logf.close()
        self._cleanup_runtime_dir()
        return self.proc.returncode

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc is not None:
            self._logf.close()
        self._cleanup_runtime_dir()

    def _cleanup_runtime_dir(self):
        shutil.rmtree(f"/var/run/dpdk/{self.prefix}", ignore_errors=True)

    # -- API over the raw socket --

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(str(self.sock))
        return s

    def request(self, method, params=None, rid=1):
        """Sends one request on a fresh connection; returns the whole reply."""
        with self.connect() as s:
            req = {"id": rid, "method": method}
            if params is not None:
                req["params"] = params
            s.sendall((json.dumps(req) + "\n").encode())
            return json.loads(read_line(s))

    def call(self, method, params=None):
        """The result of a request that must succeed (ApiError otherwise)."""
        r = self.request(method, params)
        if not r.get("ok"):
            tail = ""
            if r.get("error", {}).get("code") == "device_error":
                tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-15:])
            raise ApiError(r, tail)
        return r["result"]

    # -- straitctl --

    def ctl(self, *args, check=True, json_out=False):
        cmd = [str(STRAITCTL), "-s", str(self.sock)]
        if json_out:
            cmd += ["-o", "json"]
        cmd += [str(a) for a in args]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        if check and p.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} -> {p.returncode}\n{p.stdout}\n{p.stderr}")
        return p

    # -- counters --

    def stats(self):
        return self.call("stats")

    def port_stats(self, port_id):
        for p in self.stats()["ports"]:
            if p["id"] == port_id:
                return p
        raise KeyError(port_id)

    def drops(self, port_id):
        return self.port_stats(port_id)["drops"]


def read_line(s):
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError(f"connection closed after {buf!r}")
        buf += chunk
    return buf


@pytest.fixture(scope="module")
def straitd_factory(tmp_path_factory):
    """Starts straitd processes; every one is stopped at the end of the module."""
    started = []

    def start(physnets=None, config=None, name="sw", **kw):
        sw = Straitd(tmp_path_factory.mktemp(name), physnets=physnets, config=config, **kw)
        started.append(sw)
        return sw.start()

    yield start
    # A clean stop must still work after the module's tests; a straitd that
    # died on the way (or will not stop) fails the module's teardown.
    problems = []
    for sw in started:
        died = sw.proc.poll()
        try:
            rc = sw.stop()
        except AssertionError as e:
            rc = str(e)
        finally:
            sw.kill()
        if died is not None or rc != 0:
            problems.append(f"straitd in {sw.tmp}: exited {died} before the end; stop -> {rc}\n"
                            + "\n".join(sw.log.read_text().splitlines()[-20:]))
    assert not problems, "\n".join(problems)


# ---- ports -----------------------------------------------------------------


_mac_seq = itertools.count(1)


def new_mac() -> str:
    """A unicast MAC no other test of this run has used (learned entries
    outlive the test that taught them)."""
    n = next(_mac_seq)
    return f"02:e2:00:{(n >> 16) & 0xff:02x}:{(n >> 8) & 0xff:02x}:{n & 0xff:02x}"


def uuid_for(n: int) -> str:
    return f"{n:08x}-0000-4000-8000-{os.getpid() % 0xffffffffffff:012x}"


class Port:
    def __init__(self, sw, network, mac, rx_frames, pid=None):
        self.sw = sw
        n = next(_seq)
        self.id = pid or uuid_for(n)
        self.network = network
        self.mac = mac
        self.vdev = f"net_pcap{n}"
        self.tx = sw.tmp / f"port{n}_tx.pcap"
        self.rx = sw.tmp / f"port{n}_rx.pcap" if rx_frames is not None else None
        self.devargs = f"{self.vdev},tx_pcap={self.tx}"
        if self.rx is not None:
            write_pcap(self.rx, rx_frames)
            self.devargs = f"{self.vdev},rx_pcap={self.rx},tx_pcap={self.tx}"
        self.bound = False
        self.final_stats = None

    def bind(self):
        self.sw.call("port.bind", {"id": self.id, "network": self.network, "mac": self.mac,
                                   "attach": {"type": "ethdev", "devargs": self.devargs}})
        self.bound = True
        return self

    def stats(self):
        return self.sw.port_stats(self.id)

    def unbind(self):
        """Unbinds (which completes the tx pcap); keeps the last counters."""
        if self.bound:
            self.final_stats = self.stats()
            self.sw.call("port.unbind", {"id": self.id})
            self.bound = False
        return self

    def received(self):
        """Frames the switch sent to this port (unbinds it first)."""
        self.unbind()
        return read_pcap(self.tx)


class Lab:
    """What one test creates on a shared straitd, removed again at its end:
    the module's straitd has room for 32 ethdevs, and tests must not see each
    other's ports."""

    def __init__(self, sw):
        self.sw = sw
        self.ports = []
        self.networks = []

    def network(self, type_, physnet=None, seg=None, mtu=None):
        nid = create_network(self.sw, "net", type_, physnet, seg, mtu)
        self.networks.append(nid)
        return nid

    def port(self, network, mac, send=None):
        """Binds a port; `send`: frames it injects right when bound."""
        p = Port(self.sw, network, mac, send)
        self.ports.append(p)
        return p.bind()

    def sent_all(self, port, n, timeout=5.0):
        """Waits until straitd has taken all n frames of port's rx pcap."""
        wait_for(lambda: port.stats()["rx_packets"] >= n, timeout,
                 what=f"{n} frames received from port {port.id}")
        # The burst that counted them is still being forwarded: one API
        # round trip that waits for a grace period covers it.
        self.sync()

    def sync(self):
        """Returns once every worker has finished what it was doing (a
        port unbind/bind is answered after an RCU grace period)."""
        assert self.networks, "sync() binds a scratch port: create a network first"
        Port(self.sw, self.networks[0], "02:ff:ff:ff:ff:fe", None).bind().unbind()

    def close(self):
        for p in self.ports:
            try:
                p.unbind()
            except Exception:
                pass
        for n in self.networks:
            try:
                self.sw.call("network.delete", {"id": n})
            except Exception:
                pass


# ---- frames ----------------------------------------------------------------


def write_pcap(path, frames):
    """frames: scapy packets or bytes. Written directly: scapy's writer is
    slow for thousands of frames."""
    out = [struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1)]
    for i, f in enumerate(frames):
        b = f if isinstance(f, (bytes, bytearray)) else bytes(f)
        out.append(struct.pack("<IIII", 1, i, len(b), len(b)) + b)
    Path(path).write_bytes(b"".join(out))


def read_pcap_bytes(path):
    """The frames of a pcap file (microsecond or nanosecond, little endian) as bytes."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return []
    data = path.read_bytes()
    magic = struct.unpack_from("<I", data)[0]
    assert magic in (0xa1b2c3d4, 0xa1b23c4d), f"{path}: not a little-endian pcap"
    frames, ofs = [], 24
    while ofs + 16 <= len(data):
        incl = struct.unpack_from("<IIII", data, ofs)[2]
        frames.append(data[ofs + 16:ofs + 16 + incl])
        ofs += 16 + incl
    return frames


def read_pcap(path):
    """The frames of a pcap file, decoded by scapy."""
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw
    out = []
    for b in read_pcap_bytes(path):
        try:
            out.append(Ether(b))
        except Exception:  # shorter than an Ethernet header
            out.append(Raw(b))
    return out


def tshark_fields(path, fields, display_filter=None):
    """One tuple of field values per frame, as tshark decodes them."""
    cmd = ["tshark", "-r", str(path), "-T", "fields", "-E", "separator=|", "-E", "occurrence=a"]
    if display_filter:
        cmd += ["-Y", display_filter]
    for f in fields:
        cmd += ["-e", f]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return [tuple(line.split("|")) for line in p.stdout.splitlines() if line]


# ---- the physical network as a veth pair -------------------------------------


class Netns:
    """A network namespace for a second DPDK process that drives veth ends.

    net_af_packet joins every packet socket to the PACKET_FANOUT group
    (pid ^ ifindex) & 0xffff, and fanout group ids are shared by the whole
    namespace: two processes in one namespace whose pid and ifindex happen
    to XOR alike collide, and the second probe fails (EINVAL from the kernel,
    "probe failed" from straitd). A process with its veth ends in a namespace
    of its own cannot collide. Loopback is up (the metrics endpoint binds
    127.0.0.1), IPv6 off for every device moved in (no MLD/DAD/RS chatter).
    Removed by delete(), or at the end of the session."""

    def __init__(self, tag="ns"):
        self.name = unique(f"strait-{tag}")
        subprocess.run(["ip", "netns", "add", self.name], check=True, capture_output=True)
        _netns_created.append(self)
        self.run("sh", "-c", "echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6")
        self.run("ip", "link", "set", "lo", "up")

    def cmd(self, *argv):
        """argv run inside the namespace (ip netns exec keeps the pid)."""
        return ["ip", "netns", "exec", self.name, *map(str, argv)]

    def run(self, *argv):
        return subprocess.run(self.cmd(*argv), check=True, capture_output=True)

    def delete(self):
        subprocess.run(["ip", "netns", "delete", self.name], capture_output=True)


_netns_created = []


@pytest.fixture(scope="session", autouse=True)
def _netns_cleanup():
    yield
    for ns in _netns_created:
        ns.delete()


def veth_pair(inside, outside, netns=None, mtu=None):
    """A veth pair, both ends up, without IPv6 autoconfiguration chatter
    (MLD, DAD, RS) on the wire; `inside` in `netns` if given."""
    subprocess.run(["ip", "link", "add", inside, "type", "veth", "peer", "name", outside],
                   check=True, capture_output=True)
    try:
        if netns is not None:
            subprocess.run(["ip", "link", "set", inside, "netns", netns.name],
                           check=True, capture_output=True)
        for dev, ns in ((inside, netns), (outside, None)):
            ip = ["ip"] + (["-n", ns.name] if ns else [])
            if ns is None:
                Path(f"/proc/sys/net/ipv6/conf/{dev}/disable_ipv6").write_text("1")
            if mtu:
                subprocess.run(ip + ["link", "set", dev, "mtu", str(mtu)], check=True,
                               capture_output=True)
            subprocess.run(ip + ["link", "set", dev, "up"], check=True, capture_output=True)
    except Exception:
        subprocess.run(["ip", "link", "del", outside], capture_output=True)
        raise


ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4  # sll_pkttype of a frame this host sent
_veth_seq = itertools.count(1)


class Veth:
    """A veth pair: straitd drives `inside` (net_af_packet), the test the
    other end, `outside`, through a raw AF_PACKET socket: frames as bytes,
    exactly as they crossed the wire (scapy's socket would decode and
    re-encode them). The socket's receive buffer is large: a test may read
    thousands of frames at once. `prefix` keeps interface names apart."""

    def __init__(self, prefix="ve"):
        tag = f"{os.getpid() % 100000}{next(_veth_seq)}"
        self.inside = f"{prefix}i{tag}"[:15]
        self.outside = f"{prefix}o{tag}"[:15]
        self.sock = None

    def create(self, sock=True, netns=None):
        """sock=False: no socket (both ends belong to straitd processes).
        netns: the Netns `inside` goes to (that of the process driving it)."""
        veth_pair(self.inside, self.outside, netns)
        if sock:
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            s.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE (root)
            s.setsockopt(socket.SOL_SOCKET, 32, 4 << 20)   # SO_SNDBUFFORCE
            s.bind((self.outside, 0))
            self.sock = s
        return self

    def send(self, frames):
        for f in frames:
            self.sock.send(f)

    def recv(self, quiet=0.1, timeout=5.0):
        """Every frame straitd sent since the last call, until the wire has
        been quiet for `quiet` seconds (the test's own frames excluded)."""
        out = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r, _, _ = select.select([self.sock], [], [], quiet)
            if not r:
                break
            data, addr = self.sock.recvfrom(65536)
            if addr[2] != PACKET_OUTGOING:
                out.append(data)
        return out

    def destroy(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        subprocess.run(["ip", "link", "del", self.outside], capture_output=True)


class Wire:
    """A veth pair: straitd drives `inside` (net_af_packet), the test the
    other end through a scapy L2 socket, which receives only what came in
    (straitd's transmissions), not what the test itself sent. The kernel
    moves 802.1Q tags into packet metadata on receive; net_af_packet and
    scapy both put them back into the frame, so tags survive both ways
    (802.1ad S-tags come back as 802.1Q: test_pipeline uses a pcap for those)."""

    def __init__(self):
        tag = f"{os.getpid() % 100000}{next(_seq)}"
        self.inside = f"sti{tag}"[:15]
        self.outside = f"sto{tag}"[:15]
        self.sock = None

    def create(self, netns=None, mtu=None):
        """netns: the Netns `inside` goes to; mtu: of both ends (the kernel's
        1500 if None)."""
        veth_pair(self.inside, self.outside, netns, mtu)
        from scapy.config import conf
        self.sock = conf.L2socket(iface=self.outside)
        return self

    def send(self, frames):
        for f in frames:
            self.sock.send(f)

    def drain(self, quiet=0.2, timeout=5.0):
        """Everything straitd sent since the last drain, until the wire has
        been quiet for `quiet` seconds."""
        out = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r, _, _ = select.select([self.sock], [], [], quiet)
            if not r:
                break
            p = self.sock.recv()
            if p is not None:
                out.append(p)
        return out

    def destroy(self):
        if self.sock is not None:
            self.sock.close()
        subprocess.run(["ip", "link", "del", self.outside], capture_output=True)


def veth_available():
    w = Wire()
    try:
        w.create()
        return True
    except Exception:
        return False
    finally:
        w.destroy()


@pytest.fixture
def lab(sw):
    """A Lab on the module's own straitd (each module defines `sw`)."""
    lab = Lab(sw)
    yield lab
    lab.close()


def create_network(sw, prefix, type_, physnet=None, seg=None, mtu=None):
    """network.create with a fresh id (prefix-N); returns the id."""
    nid = unique(prefix)
    params = {"id": nid, "type": type_}
    if physnet:
        params["physnet"] = physnet
    if seg is not None:
        params["segmentation_id"] = seg
    if mtu is not None:
        params["mtu"] = mtu
    sw.call("network.create", params)
    return nid


# ---- hugepages ---------------------------------------------------------------

HUGEPAGES = 512  # 1 GiB: straitd's -m 512 and two 128 MB guests, with room to spare
NR_HUGEPAGES = Path("/proc/sys/vm/nr_hugepages")


def _hugetlbfs_mounts():
    """Mount points of hugetlbfs with the default page size."""
    out = []
    for line in Path("/proc/mounts").read_text().splitlines():
        dev, mnt, fstype, opts = line.split()[:4]
        if fstype == "hugetlbfs" and all(not o.startswith("pagesize=") or o == "pagesize=2M"
                                         for o in opts.split(",")):
            out.append(mnt)
    return out


@pytest.fixture(scope="module")
def hugepages(tmp_path_factory):
    """A hugetlbfs directory with HUGEPAGES more free 2 MB pages; afterwards
    the pages go back and a mount made here is removed."""
    if os.geteuid() != 0:
        pytest.skip("hugepages: reserving them (/proc/sys/vm/nr_hugepages) needs root")
    try:
        before = int(NR_HUGEPAGES.read_text())
        NR_HUGEPAGES.write_text(str(before + HUGEPAGES))
        got = int(NR_HUGEPAGES.read_text()) - before
    except OSError as err:
        pytest.skip(f"hugepages: the kernel refused to reserve {HUGEPAGES} pages ({err})")

    def give_back():
        NR_HUGEPAGES.write_text(str(max(int(NR_HUGEPAGES.read_text()) - HUGEPAGES, 0)))

    if got < HUGEPAGES:
        give_back()
        pytest.skip(f"hugepages: asked the kernel for {HUGEPAGES} 2 MB pages, it gave {got} "
                    "(memory too fragmented or too small)")
    # A mount of our own: unmounting it frees every page a test used, even
    # one a killed process left in a file.
    mnt = tmp_path_factory.mktemp("hugetlbfs")
    mounted = subprocess.run(["mount", "-t", "hugetlbfs", "-o", "pagesize=2M", "nodev", str(mnt)],
                             capture_output=True, text=True).returncode == 0
    if not mounted:
        existing = _hugetlbfs_mounts()
        if not existing:
            give_back()
            pytest.skip("hugepages: no hugetlbfs mounted and mounting one failed")
        mnt = Path(existing[0])
    try:
        yield mnt
    finally:
        if mounted:
            subprocess.run(["umount", str(mnt)], capture_output=True)
        else:  # someone else's mount: remove what our DPDK processes left there
            for f in mnt.iterdir():
                if f.name.startswith((f"e2e{os.getpid()}_", f"vm{os.getpid()}_")):
                    f.unlink(missing_ok=True)
        give_back()
