"""Least privilege (docs/api.md "Privileges"): straitd started as root
becomes [privileges] user once EAL, its devices and its sockets are up,
keeps only the capabilities listed, and goes on working: the API, ports
hot-plugged after the switch, vhost-user sockets QEMU's user reaches through
the socket group, a restart on the same state.

The user is `nobody` (group `nogroup`); the stand-in for QEMU's user is
`daemon`. Every test runs in a directory of its own under /tmp that the user
can reach (pytest's tmp_path lies in a directory closed to all but root),
owned by the user as the unit's StateDirectory=/RuntimeDirectory= would be.
"""
import errno
import grp
import os
import pwd
import shutil
import socket
import stat
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from conftest import (EAL_ARGS, STRAITD, Straitd, config_text, unique, uuid_for, veth_available,
                      wait_for, write_pcap)

if os.geteuid() != 0:
    pytest.skip("straitd switches user only when started as root", allow_module_level=True)

USER = pwd.getpwnam("nobody")
GROUP = grp.getgrgid(USER.pw_gid)
QEMU = pwd.getpwnam("daemon")  # another unprivileged user, in no group of straitd's
CAP_NET_RAW = 1 << 13
CAP_SETS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")


@pytest.fixture
def home():
    d = Path(tempfile.mkdtemp(prefix="strait-privs-"))
    d.chmod(0o755)
    os.chown(d, USER.pw_uid, USER.pw_gid)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def privileged_config(home, privileges, vhost=""):
    base = config_text(home, {}).split("\n[vhost]\n")[0].rstrip("\n")
    return (f'{base}\n[vhost]\nsocket_dir = "{home / "vhost"}"\n{vhost}\n'
            f"[privileges]\n{privileges}\n")


def proc_status(pid, tid=None):
    path = f"/proc/{pid}/task/{tid}/status" if tid else f"/proc/{pid}/status"
    out = {}
    for line in Path(path).read_text().splitlines():
        key, _, value = line.partition(":")
        out[key] = value.split()
    return out


def caps(status):
    return {k: int(status[k][0], 16) for k in CAP_SETS}


def owner(path):
    st = os.stat(path)
    return st.st_uid, st.st_gid


def as_qemu(code, groups=(), umask=0o022, timeout=10):
    """Runs Python `code` as QEMU's stand-in user with supplementary `groups`."""
    return subprocess.run(["/usr/bin/python3", "-c", code], user=QEMU.pw_uid, group=QEMU.pw_gid,
                          extra_groups=list(groups), umask=umask, capture_output=True, text=True,
                          timeout=timeout)


def frames_to(dst, n=5):
    return [Ether(src="02:e2:bb:00:00:01", dst=dst) / IP() / UDP() / Raw(b"%d" % i * 40)
            for i in range(n)]


def test_started_as_root_it_becomes_the_user_with_no_capability_and_still_forwards(home):
    cfg = privileged_config(home, 'user = "nobody"\ngroup = "nogroup"')
    sw = Straitd(home, config=cfg).start()
    try:
        pid = sw.proc.pid
        status = proc_status(pid)
        assert status["Uid"] == [str(USER.pw_uid)] * 4 and status["Gid"] == [str(GROUP.gr_gid)] * 4
        assert caps(status) == dict.fromkeys(CAP_SETS, 0), status
        assert status["NoNewPrivs"] == ["1"]
        # EAL's threads (workers, interrupts, multi-process, telemetry) too
        for tid in os.listdir(f"/proc/{pid}/task"):
            t = proc_status(pid, tid)
            assert t["Uid"] == [str(USER.pw_uid)] * 4, (tid, t["Name"])
            assert caps(t)["CapPrm"] == caps(t)["CapEff"] == 0, (tid, t["Name"])
            assert t["NoNewPrivs"] == ["1"], (tid, t["Name"])
        log = sw.log.read_text()
        assert "privileges: running as user nobody (uid 65534), group nogroup" in log, log
        assert "capabilities none" in log
        assert owner(home / "state" / "strait.db") == (USER.pw_uid, GROUP.gr_gid)
        assert owner(sw.sock) == (USER.pw_uid, GROUP.gr_gid)
        assert stat.S_IMODE(os.stat(sw.sock).st_mode) == 0o600  # still owner-only

        # Ports hot-plugged after the switch: their pcap files are opened as
        # the user, and EAL announces them through its runtime directory.
        sw.call("network.create", {"id": "n", "type": "local"})
        write_pcap(home / "in.pcap", frames_to("02:e2:bb:00:00:02"))
        sw.call("port.bind", {"id": uuid_for(1), "network": "n", "mac": "02:e2:bb:00:00:02",
                              "attach": {"type": "ethdev",
                                         "devargs": f"net_pcap1,tx_pcap={home}/out.pcap"}})
        sw.call("port.bind", {"id": uuid_for(2), "network": "n", "mac": "02:e2:bb:00:00:01",
                              "attach": {"type": "ethdev", "devargs":
                                         f"net_pcap2,rx_pcap={home}/in.pcap,"
                                         f"tx_pcap={home}/out2.pcap"}})
        wait_for(lambda: sw.port_stats(uuid_for(1))["tx_packets"] == 5, what="5 frames out")
        assert sw.stop() == 0
    finally:
        sw.kill()
    assert "straitd stopped" in sw.log.read_text()
    assert not sw.sock.exists()
    assert owner(home / "state" / "strait.db") == (USER.pw_uid, GROUP.gr_gid)

    # A restart on the same state, as root again, becomes the user again.
    again = Straitd(home, config=cfg).start()
    try:
        assert [n["id"] for n in again.call("network.list")["networks"]] == ["n"]
        assert proc_status(again.proc.pid)["Uid"] == [str(USER.pw_uid)] * 4
        assert again.stop() == 0
    finally:
        again.kill()


def test_kept_capability_stays_with_the_control_thread_only(home):
    cfg = privileged_config(home, 'user = "nobody"\ncapabilities = ["CAP_NET_RAW"]')
    sw = Straitd(home, config=cfg).start()
    try:
        pid = sw.proc.pid
        main = proc_status(pid)
        assert caps(main) == {"CapInh": 0, "CapPrm": CAP_NET_RAW, "CapEff": CAP_NET_RAW,
                              "CapBnd": CAP_NET_RAW, "CapAmb": 0}, main
        others = [tid for tid in os.listdir(f"/proc/{pid}/task") if tid != str(pid)]
        assert others, "EAL started no thread?"
        for tid in others:
            t = proc_status(pid, tid)
            assert caps(t)["CapPrm"] == caps(t)["CapEff"] == 0, (tid, t["Name"])
        assert "capabilities cap_net_raw=ep" in sw.log.read_text()
        assert sw.stop() == 0
    finally:
        sw.kill()


def test_socket_dir_lets_the_socket_group_in_both_ways(home):
    """QEMU's user, in socket_group, connects to straitd's sockets (server
    mode) and makes its own in socket_dir that straitd reaches (client
    mode); a user outside the group gets nowhere."""
    sock_dir = home / "vhost"
    cfg = privileged_config(home, 'user = "nobody"', vhost=f'socket_group = "{GROUP.gr_name}"')
    sw = Straitd(home, config=cfg).start()
    try:
        st = os.stat(sock_dir)  # made at start, before the switch
        assert (st.st_uid, st.st_gid) == (USER.pw_uid, GROUP.gr_gid)
        assert stat.S_IMODE(st.st_mode) == 0o2770, oct(st.st_mode)
        sw.call("network.create", {"id": "n", "type": "local"})
        sw.call("port.bind", {"id": str(uuid.uuid4()), "network": "n", "mac": "02:e2:bb:00:01:01",
                              "attach": {"type": "vhost", "path": "vhu-srv.sock",
                                         "mode": "server"}})
        server = sock_dir / "vhu-srv.sock"
        st = os.stat(server)
        assert (st.st_uid, st.st_gid) == (USER.pw_uid, GROUP.gr_gid)
        assert stat.S_IMODE(st.st_mode) == 0o660

        connect = (f"import socket; s = socket.socket(socket.AF_UNIX); "
                   f"s.connect({str(server)!r}); print('connected')")
        inside = as_qemu(connect, groups=[GROUP.gr_gid])
        assert inside.returncode == 0 and "connected" in inside.stdout, inside.stderr
        outside = as_qemu(connect)
        assert outside.returncode != 0 and "Permission denied" in outside.stderr, outside

        # QEMU's own socket (libvirt mode='server'): QEMU's umask is 0002;
        # the setgid directory gives the socket straitd's group.
        client = sock_dir / "vhu-qemu.sock"
        listener = subprocess.Popen(
            ["/usr/bin/python3", "-c",
             f"import socket, sys; s = socket.socket(socket.AF_UNIX); s.bind({str(client)!r}); "
             "s.listen(); print('listening', flush=True); s.settimeout(15); c, _ = s.accept(); "
             "print('accepted', flush=True)"],
            user=QEMU.pw_uid, group=QEMU.pw_gid, extra_groups=[GROUP.gr_gid], umask=0o002,
            stdout=subprocess.PIPE, text=True)
        try:
            assert listener.stdout.readline().strip() == "listening"
            assert os.stat(client).st_gid == GROUP.gr_gid
            sw.call("port.bind", {"id": str(uuid.uuid4()), "network": "n",
                                  "mac": "02:e2:bb:00:01:02",
                                  "attach": {"type": "vhost", "path": str(client)}})
            assert listener.stdout.readline().strip() == "accepted", sw.log.read_text()[-2000:]
        finally:
            listener.kill()
            listener.wait()
        assert sw.stop() == 0
    finally:
        sw.kill()


def test_socket_dir_with_a_group_is_made_at_start_for_qemu_without_privileges(tmp_path):
    """Run as root, too: QEMU's sockets (client mode) need the directory
    before any port is bound, and its group must let QEMU in."""
    sock_dir = tmp_path / "run" / "vhost"
    base = config_text(tmp_path, {}).split("\n[vhost]\n")[0].rstrip("\n")
    sw = Straitd(tmp_path, config=f'{base}\n[vhost]\nsocket_dir = "{sock_dir}"\n'
                                  f'socket_group = "{GROUP.gr_name}"\n').start()
    try:
        st = os.stat(sock_dir)
        assert (st.st_uid, st.st_gid) == (0, GROUP.gr_gid)
        assert stat.S_IMODE(st.st_mode) == 0o2770, oct(st.st_mode)
        assert "([privileges] user not set)" in sw.log.read_text()
        assert sw.stop() == 0
    finally:
        sw.kill()


def test_vhost_guest_comes_up_on_a_socket_made_after_the_switch(home):
    from vm import VM, have_testpmd, wait_state
    if not have_testpmd() or not veth_available():
        pytest.skip("needs dpdk-testpmd and veth pairs for a virtio-user guest")
    cfg = privileged_config(home, 'user = "nobody"')
    sw = Straitd(home, config=cfg).start()
    vm = None
    try:
        sw.call("network.create", {"id": "n", "type": "local"})
        pid = str(uuid.uuid4())
        sw.call("port.bind", {"id": pid, "network": "n", "mac": "02:e2:bb:00:02:01",
                              "attach": {"type": "vhost", "path": "vhu-vm.sock",
                                         "mode": "server"}})
        vm = VM(home, home / "vhost" / "vhu-vm.sock", server=False, name="vm-privs").start()
        wait_state(sw, pid, "up")  # the guest's memory mapped by the user
        vm.wait_forwarding()
        vm.stop()
        assert sw.stop() == 0
    finally:
        if vm is not None:
            vm.close()
        sw.kill()


def run_straitd(cfg_path):
    prefix = unique("e2epriv")
    p = subprocess.run([str(STRAITD), "--config", str(cfg_path), "--", *EAL_ARGS,
                        "--file-prefix", prefix], capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    eal_started = Path(f"/var/run/dpdk/{prefix}").exists()
    shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)
    return p, eal_started


BAD = {
    "unknown_user": ('user = "no-such-user-e2e"', "", "privileges.user"),
    "root": ('user = "root"', "", "privileges.user"),
    "unknown_group": ('user = "nobody"\ngroup = "no-such-group-e2e"', "", "privileges.group"),
    "capability_that_gives_root_back": ('user = "nobody"\ncapabilities = ["CAP_SETUID"]', "",
                                        "privileges.capabilities[0]"),
    "socket_owner_another_user": ('user = "nobody"', 'socket_owner = "daemon"',
                                  "vhost.socket_owner"),
    "socket_group_without_the_user": ('user = "nobody"', 'socket_group = "daemon"',
                                      "vhost.socket_group"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_privileges_config_is_one_message_naming_the_key(home, name):
    privileges, vhost, key = BAD[name]
    cfg = home / "bad.toml"
    cfg.write_text(privileged_config(home, privileges, vhost=vhost))
    p, eal_started = run_straitd(cfg)
    out = (p.stdout + p.stderr).strip().splitlines()
    assert p.returncode == 2, out
    assert len(out) == 1 and out[0].startswith("straitd: config ") and f": {key}: " in out[0], out
    assert not (home / "state").exists() and not eal_started


def test_state_dir_the_user_cannot_reach_stops_straitd_at_start(home):
    closed = home / "closed"
    closed.mkdir(mode=0o700)
    os.chown(closed, 0, 0)
    cfg = home / "cfg.toml"
    text = privileged_config(home, 'user = "nobody"')
    cfg.write_text(text.replace(f'state_dir = "{home / "state"}"',
                                f'state_dir = "{closed / "state"}"'))
    p, _ = run_straitd(cfg)
    assert p.returncode == 2, p.stdout + p.stderr
    errors = [line for line in (p.stdout + p.stderr).splitlines() if "state_dir" in line]
    assert len(errors) == 1 and "not writable by user nobody" in errors[0], p.stdout + p.stderr
    assert " ready" not in p.stdout
