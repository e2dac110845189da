"""Real guests: libvirtd + QEMU (TCG) with vhost-user NICs, straitd following.

Two libvirt domains, each with one `<interface type='vhostuser'>` whose
socket QEMU creates (`mode='server'`, what nova does; target dev 'vhu' + the
port UUID's first 11 characters), on one Strait network; straitd binds both
ports as the vhost-user client (attach.mode "client") and follows libvirt
(`[libvirt] enabled, uri qemu:///system`). The guests are Debian's 6.1
kernel with a busybox initramfs (scripts/vm_image.sh, tests/e2e/guest/init):
each configures 192.0.2.x/24 on its NIC and pings the other once a second,
printing every result on its serial console, which virtlogd writes to a file
the test reads. `virsh reboot` presses ACPI's power button: the guest powers
off at once and libvirt resets it.

The tests run in order on the same two domains (A and B): both boot and ping
each other; A is rebooted (port-down, port-up again, pings resume); A is
destroyed (port-down, B's pings fail); A is started again (up, pinging; the
event history as an API subscriber and `straitctl events` saw it); B is
destroyed and undefined. What port.show says about each port's domain (the
libvirt watcher) is recorded at every step and checked by the last test.

libvirt has no private instance here: qemu:///system is what straitd follows,
so the system's virtlogd and libvirtd are used, started (`-d`, no systemd)
when not running and stopped again at the end. What these machines need
(TCG only, vectors=0 on the NIC, memfd shared memory) is in the shared notes'
VM-TESTING.md. Consoles, domain XML and QEMU's logs are kept in the pytest
temporary directory (libvirt-logs*).

Skips (the whole module) when not root, without /usr/bin/qemu-system-x86_64
or libvirt's daemons, or when the guest image cannot be built (no package
lists, no network).
"""
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from conftest import BUILD, SOURCE, STRAITCTL, Straitd, config_text, wait_for
from vm import Events, port_show

QEMU = "/usr/bin/qemu-system-x86_64"
URI = "qemu:///system"
QEMU_USER = "libvirt-qemu"
NAME_PREFIX = "strait-e2e-"
NET_A_IP, NET_B_IP = "192.0.2.1", "192.0.2.2"
# The port events these tests follow (others a newer straitd may add are ignored).
LINK = ("port-up", "vif-plugged", "port-down", "port-unbound")

BOOT_TIMEOUT = 90.0   # start until both ping each other (TCG, 2 shared cores)
EVENT_TIMEOUT = 45.0


def _why_not():
    if os.geteuid() != 0:
        return "not root: libvirtd (qemu:///system) and QEMU guests need root"
    if not Path(QEMU).exists():
        return f"{QEMU} is not installed (qemu-system-x86): this machine cannot run QEMU guests"
    for tool in ("libvirtd", "virtlogd", "virsh"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (libvirt-daemon-system, libvirt-clients)"
    try:
        pwd.getpwnam(QEMU_USER)
    except KeyError:
        return f"no user {QEMU_USER} (libvirt-daemon-system is not set up)"
    return None


_why = _why_not()
if _why:
    pytest.skip(_why, allow_module_level=True)


# ---- libvirt ---------------------------------------------------------------------


def virsh(*args, timeout=60, check=True):
    cmd = ["virsh", "-q", "-c", URI, *[str(a) for a in args]]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} -> {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def _pid_alive(pidfile):
    try:
        pid = int(Path(pidfile).read_text().strip())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def _running(pid):
    """Alive and not a zombie (a daemon is reaped by init, not by us)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class Libvirt:
    """The system's virtlogd + libvirtd: started here when not running
    (and then stopped at the end), used as they are otherwise."""

    DAEMONS = (("virtlogd", "/run/virtlogd.pid"), ("libvirtd", "/run/libvirtd.pid"))

    def __init__(self):
        self.started = []  # (name, pid) of the daemons this module started

    def start(self):
        for name, pidfile in self.DAEMONS:
            if _pid_alive(pidfile):
                continue
            p = subprocess.run([name, "-d"], capture_output=True, text=True, timeout=30)
            if p.returncode != 0:
                raise RuntimeError(f"{name} -d -> {p.returncode}: {p.stderr.strip()}")
            pid = wait_for(lambda: _pid_alive(pidfile), 10, 0.05, f"{name} pid file")
            self.started.append((name, pid))
        wait_for(lambda: virsh("version", timeout=10, check=False).returncode == 0, 30, 0.2,
                 f"libvirtd answering on {URI}")
        return self

    def stop(self):
        for name, pid in reversed(self.started):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                if not _running(pid):
                    break
                time.sleep(0.1)
            else:
                os.kill(pid, signal.SIGKILL)
        self.started = []


def remove_domain(name):
    """Destroys and undefines a domain, whatever state it is in."""
    virsh("destroy", name, check=False)
    virsh("undefine", name, check=False)


# ---- guests ----------------------------------------------------------------------


class Console:
    """A guest's serial console as virtlogd writes it (append='on': kept
    across destroy/start); positions are byte offsets."""

    def __init__(self, path):
        self.path = Path(path)

    def mark(self):
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def lines(self, since=0):
        try:
            data = self.path.read_bytes()[since:]
        except FileNotFoundError:
            return []
        return [l for l in data.decode(errors="replace").splitlines() if "strait-guest:" in l]

    def tail(self, n=15):
        try:
            text = self.path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no console log)"
        return "\n".join(text.splitlines()[-n:])

    def pings(self, since, peer):
        """The results ('ok'/'fail') of the guest's pings of `peer` after `since`."""
        pat = re.compile(r"strait-guest: \S+ ping \d+ " + re.escape(peer) + r" (ok|fail)")
        return [m.group(1) for m in map(pat.search, self.lines(since)) if m]


class Guest:
    def __init__(self, tag, rundir, image, ip, peer, mac):
        self.tag = tag
        self.name = f"{NAME_PREFIX}{os.getpid()}-{tag}"
        self.uuid = str(uuid.uuid4())
        self.port = str(uuid.uuid4())
        self.ifname = "vhu" + self.port[:11]
        self.mac = mac
        self.ip = ip
        self.peer = peer
        self.sock = rundir / "sock" / self.ifname
        self.console = Console(rundir / f"{tag}.console.log")
        self.xml = rundir / f"{tag}.xml"
        self.image = image
        self.defined = False

    def domain_xml(self):
        cmdline = (f"{(self.image / 'cmdline').read_text().strip()} "
                   f"strait.ip={self.ip}/24 strait.peer={self.peer} strait.name={self.tag}")
        return f"""<domain type='qemu' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>{self.name}</name>
  <uuid>{self.uuid}</uuid>
  <memory unit='MiB'>256</memory>
  <memoryBacking>
    <source type='memfd'/>
    <access mode='shared'/>
  </memoryBacking>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>{self.image / 'vmlinux'}</kernel>
    <initrd>{self.image / 'initrd.img'}</initrd>
    <cmdline>{cmdline}</cmdline>
  </os>
  <features><acpi/></features>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>{QEMU}</emulator>
    <interface type='vhostuser'>
      <mac address='{self.mac}'/>
      <source type='unix' path='{self.sock}' mode='server'/>
      <target dev='{self.ifname}'/>
      <model type='virtio'/>
      <rom enabled='no'/>
      <alias name='ua-net0'/>
    </interface>
    <serial type='pty'>
      <log file='{self.console.path}' append='on'/>
      <target port='0'/>
    </serial>
    <console type='pty'><target type='serial' port='0'/></console>
    <controller type='usb' model='none'/>
    <memballoon model='none'/>
  </devices>
  <qemu:override>
    <qemu:device alias='ua-net0'>
      <qemu:frontend>
        <qemu:property name='vectors' type='unsigned' value='0'/>
      </qemu:frontend>
    </qemu:device>
  </qemu:override>
</domain>
"""

    def define(self):
        self.xml.write_text(self.domain_xml())
        virsh("define", self.xml)
        self.defined = True

    def state(self):
        return virsh("domstate", self.name, check=False).stdout.strip()

    def qemu_log(self, n=20):
        p = Path(f"/var/log/libvirt/qemu/{self.name}.log")
        try:
            return "\n".join(p.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no QEMU log)"

    def diagnostics(self):
        return (f"--- {self.name} ({self.state()}) console:\n{self.console.tail()}\n"
                f"--- {self.name} QEMU log:\n{self.qemu_log()}")


# ---- fixtures --------------------------------------------------------------------


@pytest.fixture(scope="module")
def image():
    """The guest kernel + initramfs, built once and cached in the build dir."""
    out = BUILD / "e2e-guest"
    p = subprocess.run([str(SOURCE / "scripts" / "vm_image.sh"), str(out)],
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        pytest.skip(f"cannot build the guest image (scripts/vm_image.sh): "
                    f"{(p.stderr or p.stdout).strip()[-500:]}")
    return out


@pytest.fixture(scope="module")
def rundir(image, tmp_path_factory):
    """World-traversable (QEMU runs as libvirt-qemu): the image copied here,
    so libvirt's relabelling never touches the build dir, and the socket
    directory, which QEMU (libvirt-qemu) must be able to create sockets in."""
    d = Path(f"/tmp/strait-libvirt-{os.getpid()}")
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(mode=0o755)
    os.chmod(d, 0o755)
    img = d / "image"
    img.mkdir(mode=0o755)
    for f in ("vmlinux", "initrd.img", "cmdline"):
        shutil.copy(image / f, img / f)
        os.chmod(img / f, 0o644)
    sock = d / "sock"
    sock.mkdir(mode=0o755)
    qemu = pwd.getpwnam(QEMU_USER)
    os.chown(sock, qemu.pw_uid, qemu.pw_gid)
    yield d
    # Kept for a post-mortem: consoles, domain XML, QEMU's logs.
    keep = tmp_path_factory.mktemp("libvirt-logs")
    for f in [*d.glob("*.console.log"), *d.glob("*.xml"),
              *Path("/var/log/libvirt/qemu").glob(f"{NAME_PREFIX}{os.getpid()}-*.log")]:
        shutil.copy(f, keep / f.name)
        if f.parent != d:
            f.unlink(missing_ok=True)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def libvirt(image):
    lv = Libvirt()
    try:
        lv.start()
    except Exception:
        lv.stop()  # installed, and root, yet not starting: a failure, not a skip
        raise
    # Domains a crashed earlier run of this module left behind.
    for name in virsh("list", "--all", "--name", check=False).stdout.split():
        if name.startswith(NAME_PREFIX):
            remove_domain(name)
    yield lv
    lv.stop()


@pytest.fixture(scope="module")
def sw(tmp_path_factory, libvirt):
    tmp = tmp_path_factory.mktemp("libvirt")
    try:
        cfg = config_text(tmp, {}, libvirt_uri=URI)
    except TypeError:  # a conftest without libvirt_uri: the section by hand
        cfg = config_text(tmp, {}, extra=f'[libvirt]\nenabled = true\nuri = "{URI}"\n')
    s = Straitd(tmp, config=cfg).start()
    yield s
    died = s.proc.poll()
    try:
        rc = s.stop()
    finally:
        s.kill()
    assert died is None and rc == 0, \
        f"straitd exited {died} before the end; stop -> {rc}\n" + \
        "\n".join(s.log.read_text().splitlines()[-30:])


@pytest.fixture(scope="module")
def events(sw):
    ev = Events(sw)
    yield ev
    ev.close()


class CtlEvents:
    """`straitctl events -o json` running beside the API subscriber."""

    def __init__(self, sw):
        self.proc = subprocess.Popen([str(STRAITCTL), "-s", str(sw.sock), "-o", "json", "events"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.seen = []
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.seen.append(json.loads(line))
            except ValueError:
                self.seen.append({"unparsed": line})

    def of(self, port):
        return [e["event"] for e in self.seen if e.get("port") == port and e.get("event") in LINK]

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._t.join(5)


@pytest.fixture(scope="module")
def ctl_events(sw):
    ce = CtlEvents(sw)
    time.sleep(0.3)  # subscribed (the first event comes many seconds later)
    yield ce
    ce.close()


@pytest.fixture(scope="module")
def guests(sw, events, ctl_events, rundir, libvirt):
    """Domains A and B, defined (not started), their ports bound on one network."""
    img = rundir / "image"
    a = Guest("a", rundir, img, NET_A_IP, NET_B_IP, "52:54:00:e2:00:0a")
    b = Guest("b", rundir, img, NET_B_IP, NET_A_IP, "52:54:00:e2:00:0b")
    net = f"lvnet{os.getpid()}"
    sw.call("network.create", {"id": net, "type": "local"})
    try:
        for g in (a, b):
            sw.call("port.bind", {"id": g.port, "network": net, "mac": g.mac,
                                  "attach": {"type": "vhost", "path": str(g.sock),
                                             "mode": "client"}})
            g.define()
        yield a, b
    finally:
        for g in (a, b):
            remove_domain(g.name)
        for g in (a, b):
            try:
                sw.call("port.unbind", {"id": g.port})
            except Exception:
                pass
        try:
            sw.call("network.delete", {"id": net})
        except Exception:
            pass


# What port.show said about each port's domain at each step (the watcher),
# checked by the last test: [(step, tag, expected, what port.show said)].
DOMAIN_SEEN = []


def record_domain(sw, g, step, expect_state, timeout=10.0):
    """Waits (up to `timeout`) for port.show's "domain" to say `expect_state`
    and records what it said. While no step has ever seen a domain (no
    watcher), only the first one waits."""
    want = {"uuid": g.uuid, "name": g.name, "state": expect_state}
    no_watcher = bool(DOMAIN_SEEN) and all(got in (None, "(no domain field)")
                                           for *_, got in DOMAIN_SEEN)
    deadline = time.monotonic() + (0 if no_watcher else timeout)
    while True:
        got = port_show(sw, g.port).get("domain", "(no domain field)")
        if got == want or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    DOMAIN_SEEN.append((step, g.tag, want, got))


# ---- helpers ---------------------------------------------------------------------


def wait_pinging(g, since, timeout=BOOT_TIMEOUT, others=()):
    """Until g's console shows a successful ping of its peer after `since`."""
    try:
        wait_for(lambda: "ok" in g.console.pings(since, g.peer), timeout, 0.25,
                 f"{g.name} pinging {g.peer}")
    except AssertionError as e:
        raise AssertionError(f"{e}\n" + "\n".join(x.diagnostics() for x in (g, *others)))


def link_events(ev, port):
    return [n for n in ev.of(port) if n in LINK]


def new_events(ev, port, since):
    return link_events(ev, port)[since:]


def wait_events(ev, g, since, names, timeout=EVENT_TIMEOUT, others=()):
    """Until g's port has had exactly `names` after its first `since` events."""
    deadline = time.monotonic() + timeout
    while len(new_events(ev, g.port, since)) < len(names) and time.monotonic() < deadline:
        ev._read_line(max(0.0, min(0.5, deadline - time.monotonic())))
    got = new_events(ev, g.port, since)
    assert got == list(names), (f"events of {g.name}'s port after #{since}: {got}, expected "
                                f"{list(names)}\n" + "\n".join(x.diagnostics() for x in (g, *others)))


# ---- the tests, in order ---------------------------------------------------------


def test_both_guests_boot_and_ping_each_other_through_straitd(sw, events, guests):
    a, b = guests
    for g in (a, b):
        assert port_show(sw, g.port)["state"] == "down"
    marks = {g.name: g.console.mark() for g in (a, b)}
    t0 = time.monotonic()
    # virsh start returns once straitd has connected to the socket QEMU
    # created (QEMU holds the guest paused until then): both at once.
    starts = [subprocess.Popen(["virsh", "-q", "-c", URI, "start", g.name], text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for g in (a, b)]
    for g, p in zip((a, b), starts):
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0, f"virsh start {g.name} -> {p.returncode}: {out}\n{g.diagnostics()}"
    for g in (a, b):
        wait_events(events, g, 0, ["port-up", "vif-plugged"], others=(a, b))
    for g in (a, b):
        wait_pinging(g, marks[g.name], others=(a, b))
    boot_s = time.monotonic() - t0
    for g in (a, b):
        show = port_show(sw, g.port)
        assert show["state"] == "up", show
        assert show["vhost"]["vid"] >= 0, show
        assert show["attach"] == {"type": "vhost", "path": str(g.sock), "mode": "client"}
        assert g.state() == "running"
    # Their traffic went through straitd.
    for g in (a, b):
        st = sw.port_stats(g.port)
        assert st["rx_packets"] > 0 and st["tx_packets"] > 0, st
    print(f"both guests up and pinging {boot_s:.1f}s after virsh start")
    for g in (a, b):
        record_domain(sw, g, "started", "running")


def test_reboot_takes_the_port_down_and_up_again_and_pings_resume_f1_f15(sw, events, guests):
    a, b = guests
    since = len(link_events(events, a.port))
    b_since = len(link_events(events, b.port))
    mark = a.console.mark()
    virsh("reboot", a.name)
    wait_events(events, a, since, ["port-down", "port-up", "vif-plugged"], others=(a, b))
    # The guest really booted again, and pings A -> B and B -> A work again.
    wait_for(lambda: any(" boot" in l for l in a.console.lines(mark)), BOOT_TIMEOUT, 0.25,
             f"{a.name} booting again")
    b_mark = b.console.mark()
    wait_pinging(a, mark, others=(a, b))
    wait_pinging(b, b_mark, others=(a, b))
    assert port_show(sw, a.port)["state"] == "up"
    assert a.state() == "running"
    # B's port never noticed.
    assert new_events(events, b.port, b_since) == []
    assert port_show(sw, b.port)["state"] == "up"
    record_domain(sw, a, "rebooted", "running")


def test_destroy_takes_the_port_down_and_the_other_guests_pings_fail(sw, events, guests):
    a, b = guests
    since = len(link_events(events, a.port))
    virsh("destroy", a.name)
    wait_events(events, a, since, ["port-down"], others=(a, b))
    assert port_show(sw, a.port)["state"] == "down"
    assert a.state() == "shut off"
    b_mark = b.console.mark()
    try:
        wait_for(lambda: b.console.pings(b_mark, b.peer)[-2:] == ["fail", "fail"], 30, 0.25,
                 f"{b.name}'s pings of the destroyed guest failing")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{b.diagnostics()}")
    assert port_show(sw, b.port)["state"] == "up"
    # straitd keeps the binding (and retries the socket) while the domain is off.
    assert port_show(sw, a.port)["attach"]["path"] == str(a.sock)
    record_domain(sw, a, "destroyed", "stopped")


def test_start_again_brings_the_port_up_and_pings_back(sw, events, ctl_events, guests):
    a, b = guests
    since = len(link_events(events, a.port))
    mark, b_mark = a.console.mark(), b.console.mark()
    virsh("start", a.name, timeout=120)
    wait_events(events, a, since, ["port-up", "vif-plugged"], others=(a, b))
    wait_pinging(a, mark, others=(a, b))
    wait_pinging(b, b_mark, others=(a, b))
    assert port_show(sw, a.port)["state"] == "up"
    record_domain(sw, a, "started-again", "running")
    # The whole story of each port, as a subscriber saw it.
    story = {a.port: ["port-up", "vif-plugged", "port-down", "port-up", "vif-plugged",
                      "port-down", "port-up", "vif-plugged"],
             b.port: ["port-up", "vif-plugged"]}
    for port, names in story.items():
        assert link_events(events, port) == names
    # straitctl events -o json saw the same.
    for port, names in story.items():
        wait_for(lambda: len(ctl_events.of(port)) >= len(names), 10, 0.1,
                 f"straitctl events: {len(names)} events of {port}")
        assert ctl_events.of(port) == names, ctl_events.seen
    assert sw.proc.poll() is None


def test_undefine_is_seen_by_straitd(sw, events, guests):
    """Destroyed and undefined: the port stays bound and down, its domain
    'undefined' (recorded for the watcher test)."""
    a, b = guests
    since = len(link_events(events, b.port))
    virsh("destroy", b.name)
    wait_events(events, b, since, ["port-down"], others=(a, b))
    virsh("undefine", b.name)
    b.defined = False
    assert port_show(sw, b.port)["state"] == "down"
    record_domain(sw, b, "undefined", "undefined")


def test_port_show_domain_followed_every_step():
    """port.show's "domain" ({"uuid", "name", "state"}) said, at each step
    above, what libvirt said about the port's domain."""
    assert DOMAIN_SEEN, "no step recorded (the lifecycle tests did not run)"
    wrong = [(step, tag, want, got) for step, tag, want, got in DOMAIN_SEEN if got != want]
    assert not wrong, "\n".join(f"{step} {tag}: expected {want}, port.show said {got}"
                                for step, tag, want, got in wrong)
