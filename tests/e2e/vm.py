"""Virtual machines for the vhost-user tests, and the API event stream.

A VM is DPDK's virtio-user frontend (what QEMU's virtio-net is to the switch)
inside `dpdk-testpmd`, io-forwarding between its virtio NIC and a veth pair
(conftest.Wire): the test sends frames on the wire's outer end and they leave
the VM's NIC towards the switch; what the switch sends to the VM comes out
of the wire, where the test reads it. The VM keeps its wire across restarts,
like a guest keeps its NIC.

`server=True` (default): the VM is the vhost-user server (QEMU with libvirt
mode='server') and straitd the client; testpmd blocks in EAL init until
straitd has connected. `server=False`: straitd created the socket
(attach.mode "server") and the VM connects to it.

The two cores of the box are shared by straitd's worker, its control thread
and every VM: a VM's threads are pinned to CPU 0 and run at nice 10, so a
busy-polling VM does not starve straitd's control thread. testpmd runs with
--no-mlockall (locking the guest's memory took tens of seconds under load).
Expect slowness; never measure throughput with these.
"""
import json
import os
import select
import shutil
import signal
import subprocess
import time
from pathlib import Path

from scapy.layers.l2 import Ether  # noqa: F401  (loads scapy far enough for conf.L2socket)

from conftest import Netns, Wire, unique, wait_for

TESTPMD = shutil.which("dpdk-testpmd") or "/usr/bin/dpdk-testpmd"
# Below straitd (its control thread must win CPU 0 when it wakes), but not so
# far below that another nice-0 busy poller on the box starves the VMs.
VM_NICE = 10


def have_testpmd():
    return Path(TESTPMD).exists()


class VM:
    """One guest with one virtio NIC on vhost-user socket `sock`."""

    def __init__(self, tmp, sock, server=True, name="vm", queue_size=256, mem_mb=128, queues=1,
                 mtu=None, huge_dir=None):
        self.tmp = Path(tmp)
        self.mem_mb = mem_mb
        self.queues = queues
        self.mtu = mtu  # of the wire; None: the kernel's 1500
        self.huge_dir = huge_dir  # guest memory on hugepages there; None: --no-huge
        self.sock = Path(sock)
        self.server = server
        self.name = name
        self.queue_size = queue_size
        self.wire = Wire()
        # The wire's inner end and testpmd live in a network namespace of
        # their own: straitd and every other VM drive net_af_packet devices
        # too, and in one namespace their fanout groups can collide
        # (conftest.Netns).
        self.netns = None
        self.prefix = unique("vm")
        self.proc = None
        self.starts = 0
        self._logf = None
        self._signalled = None

    @property
    def log(self):
        return self.tmp / f"{self.name}.{self.starts}.log"

    def start(self):
        """Boots the guest (returns at once: a server-mode VM waits for the
        switch to connect). A socket left behind by a killed VM is removed
        first, as QEMU does."""
        assert not self.running(), f"{self.name} is already running"
        if self.wire is not None and self.wire.sock is None:
            self.netns = self.netns or Netns("vm")
            try:
                self.wire.create(netns=self.netns, mtu=self.mtu)
            except Exception:
                self.wire.destroy()
                raise
        if self.server and (self.sock.exists() or self.sock.is_symlink()):
            self.sock.unlink()
        self.starts += 1
        self._signalled = None
        self._logf = open(self.log, "w")
        cmd = self.netns.cmd(*self._cmd()) if self.netns else self._cmd()
        self.proc = subprocess.Popen(cmd, stdout=self._logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        return self

    def _eal(self):
        # Hugepage-backed guest memory is shared with the switch one file per
        # memseg list (--single-file-segments): vhost-user takes at most 8
        # memory regions, and every 2 MB page would be one.
        memory = (["--huge-dir", str(self.huge_dir), "--single-file-segments"] if self.huge_dir
                  else ["--no-huge"])
        return ["stdbuf", "-oL", "-eL", "nice", "-n", str(VM_NICE), TESTPMD,
                *memory, "-m", str(self.mem_mb), "--no-shconf", "--file-prefix", self.prefix,
                "--no-pci", "--lcores", "0@0,1@0"]

    def _virtio(self, extra=""):
        # More than one queue pair needs the control queue (the guest driver
        # tells the device how many pairs it uses).
        cq = ",cq=1" if self.queues > 1 else ""
        return ["--vdev", f"virtio_user0,path={self.sock},server={1 if self.server else 0},"
                          f"queue_size={self.queue_size},queues={self.queues}{cq}{extra}"]

    def _wire_vdev(self):
        if self.mtu and self.mtu > 1500:
            # Jumbo frames: net_af_packet refuses ring frames larger than a
            # 2 KB buffer, libpcap does not (it chains what it receives). Only
            # inbound frames are read, or the VM's own output would echo back.
            assert self.queues == 1, "a jumbo wire has one queue"
            return f"net_pcap0,rx_iface_in={self.wire.inside},tx_iface={self.wire.inside}"
        # qpairs > 1: one packet socket per queue in a PACKET_FANOUT_HASH group,
        # so the kernel spreads the wire's flows over the queues (RSS).
        return f"net_af_packet0,iface={self.wire.inside},qpairs={self.queues}"

    def _cmd(self):
        return self._eal() + [
            "--vdev", self._wire_vdev(),
            *self._virtio(),
            # --no-mlockall: locking all of the guest's memory takes seconds on
            # this shared box, and nothing here needs it.
            "--", "--no-mlockall", "--forward-mode=io", "--total-num-mbufs=8192",
            "--no-flush-rx", f"--rxq={self.queues}", f"--txq={self.queues}",
            "--stats-period", "1", "--disable-link-check"]

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def log_text(self):
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_forwarding(self, timeout=20.0):
        """Until testpmd forwards between its two NICs (its driver is ready)."""
        def ready():
            if not self.running():
                raise AssertionError(f"{self.name} exited ({self.proc.returncode}):\n"
                                     + self.log_text()[-3000:])
            return "forwards packets on" in self.log_text()
        wait_for(ready, timeout, interval=0.05, what=f"{self.name} forwarding")
        return self

    def stop(self, timeout=15.0):
        """A clean shutdown (SIGINT): the guest driver resets the device
        (destroy_device at the switch) and, in server mode, removes the socket."""
        return self._end(signal.SIGINT, timeout)

    def kill(self):
        """SIGKILL: the connection just drops; the socket file stays behind."""
        return self._end(signal.SIGKILL, 10.0)

    def begin_stop(self):
        """Sends SIGINT and returns at once (stop several VMs in parallel)."""
        if self.running() and self._signalled is None:
            self.proc.send_signal(signal.SIGINT)
            self._signalled = signal.SIGINT

    def _end(self, sig, timeout):
        if self.proc is None:
            return None
        try:
            if self.proc.poll() is None:
                # testpmd re-raises SIGINT once it has cleaned up: never
                # interrupt that cleanup with a second one.
                if self._signalled != sig:
                    self.proc.send_signal(sig)
                    self._signalled = sig
                try:
                    self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
                    raise AssertionError(f"{self.name} ignored {sig!r} for {timeout}s")
            return self.proc.returncode
        finally:
            self._logf.close()
            shutil.rmtree(f"/var/run/dpdk/{self.prefix}", ignore_errors=True)

    def close(self):
        """Ends the guest (however it is) and removes its wire."""
        try:
            if self.proc is not None:
                try:
                    self._end(signal.SIGINT, 5.0)
                except AssertionError:
                    pass
        finally:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            if self.wire is not None:
                self.wire.destroy()
            if self.netns is not None:
                self.netns.delete()
                self.netns = None

    # -- frames --

    def send(self, frames):
        """Frames (scapy packets or bytes) out of the VM's NIC, to the switch."""
        self.wire.send(frames)

    def received(self, quiet=0.3, timeout=5.0):
        """Frames the switch sent to the VM since the last call, as bytes,
        once nothing has come for `quiet` seconds."""
        return [bytes(p) for p in self.wire.drain(quiet=quiet, timeout=timeout)]

    def receive_until(self, pred, timeout=10.0):
        """Collects frames (bytes) until pred(frames) holds; returns them."""
        out = []
        deadline = time.monotonic() + timeout
        while not pred(out):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{self.name}: timed out after {timeout}s; got {len(out)} frames")
            r, _, _ = select.select([self.wire.sock], [], [], min(left, 0.2))
            if r:
                p = self.wire.sock.recv()
                if p is not None:
                    out.append(bytes(p))
        return out


class Blaster(VM):
    """A guest whose only NIC sends 64-byte frames to `dst` as fast as it can
    (testpmd txonly), from the port's own MAC `mac`. No wire: what reaches
    it is counted by testpmd and dropped."""

    def __init__(self, tmp, sock, mac, dst, name="blaster", **kw):
        super().__init__(tmp, sock, name=name, **kw)
        self.wire = None
        self.mac, self.dst = mac, dst

    def _cmd(self):
        return self._eal() + [
            *self._virtio(f",mac={self.mac}"),
            "--", "--no-mlockall", "--forward-mode=txonly", "--port-topology=loop",
            f"--eth-peer=0,{self.dst}", "--total-num-mbufs=8192", "--stats-period", "1",
            "--disable-link-check"]


# ---- the switch side ----------------------------------------------------------


def port_show(sw, port_id):
    return sw.call("port.show", {"id": port_id})


def port_state(sw, port_id):
    return port_show(sw, port_id)["state"]


def wait_state(sw, port_id, state, timeout=20.0):
    return wait_for(lambda: port_state(sw, port_id) == state, timeout, interval=0.02,
                    what=f"port {port_id} {state}")


def bind_vhost(sw, port_id, network, mac, path, mode=None):
    attach = {"type": "vhost", "path": str(path)}
    if mode is not None:
        attach["mode"] = mode
    return sw.call("port.bind", {"id": port_id, "network": network, "mac": mac,
                                 "attach": attach})


def straitd_fds(pid):
    """straitd's open file descriptors: {fd: target}."""
    out = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            pass
    return out


def rss_kib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


class Events:
    """A connection subscribed to straitd's event stream. Requests may be
    sent on it too: replies and events come back in the order straitd wrote
    them, which is what lets a test see whether a state changed before or
    after its event."""

    def __init__(self, sw):
        self.s = sw.connect()
        self.buf = b""
        self.seen = []      # every event, in order
        self.lines = []     # every line (events and replies), in order
        self._next_id = 1000
        self.s.sendall(b'{"id": "sub", "method": "events.subscribe"}\n')
        reply = self._next_reply("sub", 10.0)
        assert reply.get("ok"), reply

    def close(self):
        self.s.close()

    def _read_line(self, timeout):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([self.s], [], [], left)
            if not r:
                return None
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("event stream closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        obj = json.loads(line)
        self.lines.append(obj)
        if "event" in obj:
            self.seen.append(obj)
        return obj

    def _next_reply(self, rid, timeout):
        deadline = time.monotonic() + timeout
        while True:
            obj = self._read_line(max(0.0, deadline - time.monotonic()))
            if obj is None:
                raise AssertionError(f"no reply to request {rid!r} in {timeout}s")
            if obj.get("id") == rid and "event" not in obj:
                return obj

    def request(self, method, params=None, timeout=10.0):
        """A request on the event connection; events read meanwhile are kept."""
        self._next_id += 1
        rid = self._next_id
        req = {"id": rid, "method": method}
        if params is not None:
            req["params"] = params
        self.s.sendall((json.dumps(req) + "\n").encode())
        return self._next_reply(rid, timeout)

    def pump(self, quiet=0.0):
        """Reads lines until none has come for `quiet` seconds."""
        while self._read_line(quiet) is not None:
            pass

    def of(self, port):
        """The names of the events of `port` seen so far, in order."""
        return [e["event"] for e in self.seen if e.get("port") == port]

    def expect(self, port, names, timeout=20.0):
        """Waits until `port` has had len(names) events; they must be `names`
        (a port's whole history: port ids are never reused). Returns them."""
        deadline = time.monotonic() + timeout
        while len(self.of(port)) < len(names):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._read_line(left)
        got = [e for e in self.seen if e.get("port") == port]
        assert [e["event"] for e in got] == list(names), \
            f"events of port {port}: {[e['event'] for e in got]}, expected {list(names)}"
        return got

    def quiet(self, port, names, settle=0.3):
        """`port` has had exactly `names`, and nothing more comes for `settle` s."""
        self.pump(settle)
        assert self.of(port) == list(names), f"events of port {port}: {self.of(port)}"
