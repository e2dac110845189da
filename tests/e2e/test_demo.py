"""`make demo` (scripts/demo.sh): six vhost-user "VMs" (three strait-gen
processes, virtio-user) come up on two networks and carry traffic, VM-to-VM
and VM-to-NIC; the demo stops cleanly on DEMO_SECONDS and on Ctrl-C, says so
when a VM dies, and leaves no process and no file behind."""
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import BUILD, SOURCE, STRAITCTL

DEMO = SOURCE / "scripts" / "demo.sh"
GEN = BUILD / "bench" / "strait-gen"

pytestmark = pytest.mark.skipif(not (STRAITCTL.exists() and GEN.exists()),
                                reason="straitctl or strait-gen is not built")

VMS = [f"vm{i}" for i in range(1, 7)]
UUID = {f"vm{i}": f"de000000-0000-4000-8000-00000000000{i}" for i in range(1, 7)}
NETWORK = {"vm1": "blue", "vm2": "blue", "vm3": "green", "vm4": "green", "vm5": "blue",
           "vm6": "blue"}
SENDERS = ["vm1", "vm3", "vm5"]    # port 0 of each strait-gen
RECEIVERS = ["vm2", "vm4", "vm6"]  # port 1: vm2 <- vm1, vm4 <- vm3, vm6 <- the NIC


def demo_dirs():
    tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    return set(tmp.glob("strait-demo.*"))


def eal_dirs(script_pid):
    return set(Path("/var/run/dpdk").glob(f"strait-demo-{script_pid}*"))


def processes_of(script_pid):
    """Pids of the straitd and the strait-gens a demo started (their EAL
    prefixes name the script: strait-demo-PID, strait-demo-PID-gN)."""
    p = subprocess.run(["pgrep", "-f", "--", f"--file-prefix strait-demo-{script_pid}(-g[0-9]+)?( |$)"],
                       capture_output=True, text=True)
    return p.stdout.split()


def start_demo(seconds=0):
    env = dict(os.environ, DEMO_SECONDS=str(seconds))
    return subprocess.Popen(["bash", str(DEMO), str(BUILD)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env,
                            stdin=subprocess.DEVNULL,
                            # Ctrl-C must work even when our own parent ignores SIGINT
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def make_sure_stopped(p, before):
    """Whatever happened: no demo, no straitd or VM of it, no directory left."""
    if p.poll() is None:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    for pid in processes_of(p.pid):
        os.kill(int(pid), signal.SIGKILL)
    for d in demo_dirs() - before:
        shutil.rmtree(d, ignore_errors=True)
    for d in eal_dirs(p.pid):
        shutil.rmtree(d, ignore_errors=True)


def read_until(p, text, timeout=90):
    out = ""
    deadline = time.monotonic() + timeout
    while text not in out and time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        out += line
    assert text in out, out
    return out


def leftovers(p, before):
    return demo_dirs() - before, processes_of(p.pid), eal_dirs(p.pid)


def check_vms_up(out):
    """The six VM ports came up, attached through vhost-user."""
    assert "all 6 VM ports are up" in out, out
    for vm in VMS:
        # straitctl show, Ports: ID NETWORK MAC IPS STATE LINK LVLAN DOMAIN ATTACH
        m = re.search(rf"^{UUID[vm]}[ \t]+(\S+)[ \t]+\S+[ \t]+\S+[ \t]+(\S+)[ \t]+up[ \t]+\d+"
                      rf"[ \t]+\S+[ \t]+(vhost:\S+)$",
                      out, re.M)
        assert m, out
        assert m.group(1, 2) == (NETWORK[vm], "up"), m.group(0)
        assert m.group(3).endswith(f"/{vm}.sock"), m.group(0)


def check_traffic(out):
    rates = re.findall(r"switched ([0-9.]+) Mpps", out)
    assert rates, out
    assert float(rates[-1]) > 0.01, out
    # still up in the last sample of the rate table
    last = out[out.rindex("Mpps over"):]
    for vm in VMS:
        assert re.search(rf"^{vm}\s+{NETWORK[vm]}\s+up\s", last, re.M), last
    # the switch's own counters (straitctl stats, the last sample): each VM
    # sent (the switch received from it) or received what it should
    ports = {port: (int(rx), int(tx)) for port, rx, tx in re.findall(
        r"^(de000000-\S+|physnet:physnet1)[ \t]+(\d+)[ \t]+\d+[ \t]+(\d+)", out, re.M)}
    for vm in SENDERS:
        assert ports[UUID[vm]][0] > 0, (vm, out)
    for vm in RECEIVERS:
        assert ports[UUID[vm]][1] > 0, (vm, out)
    nic_rx, nic_tx = ports["physnet:physnet1"]
    assert nic_rx > 0 and nic_tx > 0, out  # NIC-to-VM and VM-to-NIC
    assert re.search(r"^unknown_vlan\s+[1-9]", out, re.M), out


def test_demo_runs_for_demo_seconds_and_cleans_up():
    before = demo_dirs()
    p = start_demo(seconds=4)
    try:
        out, _ = p.communicate(timeout=120)
        left = leftovers(p, before)
    finally:
        make_sure_stopped(p, before)
    assert p.returncode == 0, out
    assert "network blue" in out and "network green" in out  # what the demo is
    check_vms_up(out)
    check_traffic(out)
    # each strait-gen's own count at the end: its receiving VM got frames
    got = dict(re.findall(r"^demo: strait-gen g\d counted: vm\d sent \S+ Mpps, (vm\d) received ([0-9.]+) Mpps",
                          out, re.M))
    assert set(got) == set(RECEIVERS), out
    assert all(float(v) > 0 for v in got.values()), out
    assert "straitd stopped cleanly" in out
    assert left == (set(), [], set())  # no temporary directory, no process, no EAL files


def test_demo_stops_cleanly_on_ctrl_c():
    before = demo_dirs()
    p = start_demo()
    try:
        out = read_until(p, "switched")
        assert len(processes_of(p.pid)) == 4, "straitd and three strait-gens are running"
        p.send_signal(signal.SIGINT)
        rest, _ = p.communicate(timeout=60)
        out += rest
        left = leftovers(p, before)
    finally:
        make_sure_stopped(p, before)
    assert p.returncode == 0, out
    check_vms_up(out)
    assert "straitd stopped cleanly" in out
    assert left == (set(), [], set())


@pytest.mark.parametrize("how", ["reader_gone", "hangup"])
def test_demo_stops_cleanly_when_its_terminal_or_reader_goes(how):
    """`make demo | head`, or the terminal closed: straitd and the VMs run in
    sessions of their own, so the demo must stop them itself, as on Ctrl-C,
    instead of dying of SIGPIPE or SIGHUP and leaving them running."""
    before = demo_dirs()
    p = start_demo()
    try:
        read_until(p, "switched")
        assert len(processes_of(p.pid)) == 4, "straitd and three strait-gens are running"
        if how == "reader_gone":
            p.stdout.close()  # the next line the demo prints hits a closed pipe
        else:
            p.send_signal(signal.SIGHUP)
        p.wait(60)
        left = leftovers(p, before)
    finally:
        make_sure_stopped(p, before)
    assert p.returncode == 0
    assert left == (set(), [], set())


def test_demo_says_so_when_a_vm_dies():
    before = demo_dirs()
    p = start_demo()
    try:
        read_until(p, "switched")
        gens = subprocess.run(["pgrep", "-f", "--", f"--file-prefix strait-demo-{p.pid}-g2 "],
                              capture_output=True, text=True).stdout.split()
        assert len(gens) == 1, gens
        os.kill(int(gens[0]), signal.SIGKILL)
        out, _ = p.communicate(timeout=60)  # no hang: it notices and stops by itself
        left = leftovers(p, before)
    finally:
        make_sure_stopped(p, before)
    assert p.returncode == 1, out
    assert re.search(r"VMs vm3 and vm4 died: their strait-gen \(g2\) exited with status 137", out), out
    assert left == (set(), [], set())
