"""`make demo` (scripts/demo.sh): starts, forwards, stops cleanly, leaves nothing."""
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

pytestmark = pytest.mark.skipif(not STRAITCTL.exists(), reason="straitctl is not built")


def demo_dirs():
    tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    return set(tmp.glob("strait-demo.*"))


def straitd_of(script_pid):
    """Pids of the straitd a demo started (its EAL prefix names the script)."""
    p = subprocess.run(["pgrep", "-f", "--", f"--file-prefix strait-demo-{script_pid}$"],
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
    """Whatever happened: no demo, no straitd of it, no directory left."""
    if p.poll() is None:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    for pid in straitd_of(p.pid):
        os.kill(int(pid), signal.SIGKILL)
    for d in demo_dirs() - before:
        shutil.rmtree(d, ignore_errors=True)
    shutil.rmtree(f"/var/run/dpdk/strait-demo-{p.pid}", ignore_errors=True)


def check_traffic(out):
    rates = re.findall(r"switched ([0-9.]+) Mpps", out)
    assert rates, out
    assert float(rates[-1]) > 0.01, out
    # both networks forwarded, and the unknown VLAN of physnet1 was dropped
    ports = re.findall(r"^(de000000-\S+|physnet:physnet1)\s+(\d+)\s+\d+\s+(\d+)", out, re.M)
    assert {p for p, rx, tx in ports if int(rx) > 0 and int(tx) > 0} >= {
        "physnet:physnet1", *(f"de000000-0000-4000-8000-00000000000{i}" for i in range(1, 5))}, out
    assert re.search(r"^unknown_vlan\s+[1-9]", out, re.M), out


def test_demo_runs_for_demo_seconds_and_cleans_up():
    before = demo_dirs()
    p = start_demo(seconds=3)
    try:
        out, _ = p.communicate(timeout=60)
        leftovers = demo_dirs() - before, straitd_of(p.pid)
    finally:
        make_sure_stopped(p, before)
    assert p.returncode == 0, out
    assert "network blue" in out and "network green" in out  # what the demo is
    check_traffic(out)
    assert "straitd stopped cleanly" in out
    assert leftovers == (set(), [])  # no temporary directory, no straitd


def test_demo_stops_cleanly_on_ctrl_c():
    before = demo_dirs()
    p = start_demo()
    out = ""
    try:
        deadline = time.monotonic() + 60
        while "switched" not in out and time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            out += line
        assert "switched" in out, out
        assert straitd_of(p.pid), "straitd is running"
        p.send_signal(signal.SIGINT)
        rest, _ = p.communicate(timeout=30)
        out += rest
        leftovers = demo_dirs() - before, straitd_of(p.pid)
    finally:
        make_sure_stopped(p, before)
    assert p.returncode == 0, out
    assert "straitd stopped cleanly" in out
    assert leftovers == (set(), [])  # no temporary directory, no straitd
