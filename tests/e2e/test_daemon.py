"""straitd as a program: command line, config errors, start and stop."""
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from conftest import (EAL_ARGS, SOURCE, STRAITD, Straitd, config_text, read_pcap, unique,
                      uuid_for, wait_for, write_pcap)


def project_version():
    m = re.search(r"project\(strait VERSION ([0-9.]+)", (SOURCE / "CMakeLists.txt").read_text())
    return m.group(1)


def run_straitd(cfg_path, timeout=30):
    """Runs a straitd that is expected to exit by itself."""
    prefix = unique("e2ecfg")
    p = subprocess.run([str(STRAITD), "--config", str(cfg_path), "--", *EAL_ARGS,
                        "--file-prefix", prefix], capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    existed = Path(f"/var/run/dpdk/{prefix}").exists()
    shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)
    return p, existed


def test_straitd_version():
    p = subprocess.run([str(STRAITD), "--version"], capture_output=True, text=True)
    assert p.returncode == 0
    assert p.stdout.strip() == f"straitd {project_version()}"


def test_straitd_help():
    p = subprocess.run([str(STRAITD), "--help"], capture_output=True, text=True)
    assert p.returncode == 0
    assert "straitd" in p.stdout and "--config" in p.stdout and "EAL" in p.stdout


def test_straitd_unknown_option_is_a_usage_error():
    p = subprocess.run([str(STRAITD), "--no-such-option"], capture_output=True, text=True)
    assert p.returncode != 0
    assert "--no-such-option" in p.stdout + p.stderr


# (config body after the valid preamble, key the message must name)
BAD_CONFIGS = {
    "unknown_key": ("bogus = 1\n", "bogus"),
    "unknown_datapath_key": ("[datapath]\nwrokers = [1]\n", "datapath.wrokers"),
    "workers_out_of_range": ("[datapath]\nworkers = [200]\n", "datapath.workers[0]"),
    "workers_negative": ("[datapath]\nworkers = [1, -1]\n", "datapath.workers[1]"),
    "workers_empty": ("[datapath]\nworkers = []\n", "datapath.workers"),
    "workers_twice": ("[datapath]\nworkers = [1, 1]\n", "datapath.workers[1]"),
    "workers_not_a_list": ('[datapath]\nworkers = "1"\n', "datapath.workers"),
    "idle_sleep_negative": ("[datapath]\nidle_sleep_us = -1\n", "datapath.idle_sleep_us"),
    "flow_cache_too_small": ("[datapath]\nflow_cache_entries = 5\n", "datapath.flow_cache_entries"),
    "syntax_error": ("[datapath\nworkers = [1]\n", ":3:"),  # line 3 of the file
    "physnet_without_device": ("[physnets.p1]\n", "physnets.p1.device"),
    "physnet_unknown_key": ('[physnets.p1]\ndevice = "net_null0"\ndevcie = "x"\n',
                            "physnets.p1.devcie"),
    "physnets_sharing_a_device": ('[physnets.p1]\ndevice = "net_null0"\n'
                                  '[physnets.p2]\ndevice = "net_null0,size=64"\n',
                                  "physnets.p2.device"),
    "state_dir_not_a_string": ("STATE_DIR_INT", "state_dir"),
    "api_socket_too_long": ("API_SOCKET_LONG", "api_socket"),
}


@pytest.mark.parametrize("name", list(BAD_CONFIGS))
def test_bad_config_exits_with_one_message_naming_the_key(tmp_path, name):
    body, key = BAD_CONFIGS[name]
    sock, state = tmp_path / "api.sock", tmp_path / "state"
    head = [f'state_dir = "{state}"', f'api_socket = "{sock}"']
    if body == "STATE_DIR_INT":
        head[0], body = "state_dir = 5", ""
    if body == "API_SOCKET_LONG":
        head[1], body = f'api_socket = "{tmp_path}/{"s" * 120}.sock"', ""
    cfg = tmp_path / "bad.toml"
    cfg.write_text("\n".join(head) + "\n" + body)
    p, eal_started = run_straitd(cfg)
    out = (p.stdout + p.stderr).strip().splitlines()
    assert p.returncode != 0
    assert len(out) == 1, out
    assert out[0].startswith("straitd: ") and key in out[0], out
    assert str(cfg) in out[0] or "bad.toml" in out[0]
    assert not sock.exists() and not state.exists()
    assert not eal_started


def test_missing_config_file_is_refused(tmp_path):
    p = subprocess.run([str(STRAITD), "--config", str(tmp_path / "none.toml")],
                       capture_output=True, text=True)
    assert p.returncode != 0
    assert "none.toml" in p.stdout + p.stderr


def test_worker_lcore_missing_on_this_host_is_one_message(tmp_path):
    lcore = (os.cpu_count() or 1) + 2
    if lcore > 127:
        pytest.skip("every lcore id the config accepts exists on this host")
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(config_text(tmp_path, {}, workers=(lcore,)))
    p, _ = run_straitd(cfg)
    out = (p.stdout + p.stderr).strip().splitlines()
    assert p.returncode != 0
    assert not (tmp_path / "api.sock").exists()
    straitd_lines = [line for line in out if line.startswith("straitd")]
    assert len(straitd_lines) == 1 and "datapath.workers" in straitd_lines[0], out
    assert len(out) < 10, f"{len(out)} lines of output"


def test_physnet_device_that_cannot_be_opened_names_the_key(tmp_path):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(config_text(tmp_path, {"p1": "net_nosuchdriver0,x=1"}))
    p, _ = run_straitd(cfg)
    assert p.returncode != 0
    errors = [line for line in (p.stdout + p.stderr).splitlines()
              if "physnets.p1.device" in line]
    assert len(errors) == 1, p.stdout + p.stderr
    assert "net_nosuchdriver0" in errors[0]
    assert not (tmp_path / "api.sock").exists()
    assert " ready" not in p.stdout


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_straitd_cleanly(tmp_path, sig):
    sw = Straitd(tmp_path, physnets={"physnet1": "net_pcap_up1,tx_pcap={tmp}/p.pcap"})
    sw.start()
    try:
        assert sw.call("network.list") == {"networks": []}
        assert sw.stop(sig) == 0
    finally:
        sw.kill()
    assert not sw.sock.exists()
    assert "straitd stopped" in sw.log.read_text()


def test_stop_completes_the_pcaps_of_ports_still_bound(tmp_path):
    sw = Straitd(tmp_path).start()
    try:
        sw.call("network.create", {"id": "n", "type": "local"})
        frames = [Ether(src="02:e2:dd:00:00:01", dst="02:e2:dd:00:00:02") /
                  IP() / UDP() / Raw(b"%d" % i * 40) for i in range(5)]
        write_pcap(tmp_path / "in.pcap", frames)
        sw.call("port.bind", {"id": uuid_for(1), "network": "n", "mac": "02:e2:dd:00:00:02",
                              "attach": {"type": "ethdev",
                                         "devargs": f"net_pcap1,tx_pcap={tmp_path}/out.pcap"}})
        sw.call("port.bind", {"id": uuid_for(2), "network": "n", "mac": "02:e2:dd:00:00:01",
                              "attach": {"type": "ethdev", "devargs":
                                         f"net_pcap2,rx_pcap={tmp_path}/in.pcap,"
                                         f"tx_pcap={tmp_path}/out2.pcap"}})
        wait_for(lambda: sw.port_stats(uuid_for(1))["tx_packets"] == 5, what="5 frames out")
        assert sw.stop() == 0
    finally:
        sw.kill()
    assert [bytes(f) for f in read_pcap(tmp_path / "out.pcap")] == [bytes(f) for f in frames]


MEMIF_LINKS = 4


def memif_pair(base: Path):
    """Two straitds joined by MEMIF_LINKS net_memif links (one physnet per
    link): the server side listens on one socket, the client connects."""
    sock = base / "memif.sock"
    eal = ["--log-level=pmd.net.memif:info"]  # its "Connected." lines
    server = Straitd(base / "server", eal=eal, physnets={
        f"m{i}": f"net_memif_s{i},role=server,id={i},socket={sock}" for i in range(MEMIF_LINKS)})
    client = Straitd(base / "client", eal=eal, physnets={
        f"m{i}": f"net_memif_c{i},role=client,id={i},socket={sock}" for i in range(MEMIF_LINKS)})
    return server, client


def test_stop_while_memif_peers_disconnect_exits_cleanly(tmp_path):
    """Issue #23: straitd died with SIGSEGV on SIGTERM in 8 of 87 stops when
    its net_memif peers disconnected at the same moment: DPDK's interrupt
    thread handled the disconnect while the main thread freed what the
    device used. Two straitds linked by memif, stopped together: each sees
    its peer leave while it shuts down. Every exit must be 0, 20 times."""
    failures = []
    for run in range(20):
        server, client = memif_pair(tmp_path / f"run{run}")
        try:
            server.start()
            client.start()
            for sw in (server, client):
                wait_for(lambda: sw.log.read_text().count("Connected.") >= MEMIF_LINKS,
                         timeout=10, what=f"{MEMIF_LINKS} memif links up in {sw.tmp}")
            # Both at once: the peer's disconnect reaches each while it stops.
            server.proc.send_signal(signal.SIGTERM)
            client.proc.send_signal(signal.SIGTERM)
            for sw in (server, client):
                rc = sw.stop()
                if rc != 0:
                    failures.append(f"run {run}: {sw.tmp.name} exited {rc}\n" +
                                    "\n".join(sw.log.read_text().splitlines()[-8:]))
        finally:
            server.kill()
            client.kill()
    assert not failures, "\n".join(failures)


def test_second_straitd_on_the_same_socket_is_refused(tmp_path):
    first = Straitd(tmp_path / "a").start()
    try:
        cfg = tmp_path / "b.toml"
        cfg.write_text(config_text(tmp_path / "b", {}).replace(str(tmp_path / "b" / "api.sock"),
                                                                str(first.sock)))
        p, _ = run_straitd(cfg)
        assert p.returncode != 0
        assert "another straitd" in p.stdout + p.stderr
        assert first.call("network.list") == {"networks": []}  # the first one still answers
        assert first.stop() == 0
    finally:
        first.kill()


def test_second_straitd_on_the_same_state_dir_is_refused(tmp_path):
    """Two straitd on one database silently undid each other's acknowledged
    changes: the second one must not start, and say who holds the directory."""
    first = Straitd(tmp_path / "a").start()
    try:
        first.call("network.create", {"id": "n1", "type": "local"})
        state = first.tmp / "state"
        cfg = tmp_path / "b.toml"
        cfg.write_text(config_text(tmp_path / "b", {}).replace(str(tmp_path / "b" / "state"),
                                                                str(state)))
        p, eal_started = run_straitd(cfg)
        out = (p.stdout + p.stderr).strip().splitlines()
        assert p.returncode != 0
        assert len(out) == 1, out
        assert out[0].startswith("straitd: ") and str(state) in out[0], out
        assert f"in use by another straitd (pid {first.proc.pid})" in out[0], out
        assert not eal_started
        assert not (tmp_path / "b" / "api.sock").exists()
        assert [n["id"] for n in first.call("network.list")["networks"]] == ["n1"]
        assert first.stop() == 0
    finally:
        first.kill()


def test_second_straitd_with_a_file_prefix_in_use_names_it(tmp_path):
    """EAL refused a taken --file-prefix without setting rte_errno: straitd
    said "EAL initialisation failed: Success"."""
    first = Straitd(tmp_path / "a").start()
    try:
        cfg = tmp_path / "b.toml"
        cfg.write_text(config_text(tmp_path / "b", {}))
        # Not run_straitd: the runtime directory is the first straitd's.
        p = subprocess.run([str(STRAITD), "--config", str(cfg), "--", *EAL_ARGS,
                            "--file-prefix", first.prefix], capture_output=True, text=True,
                           timeout=30, stdin=subprocess.DEVNULL)
        assert p.returncode != 0
        failed = [line for line in (p.stdout + p.stderr).splitlines()
                  if "EAL initialisation failed" in line]
        assert len(failed) == 1, p.stdout + p.stderr
        assert (f"file prefix {first.prefix} is in use by another DPDK process "
                f"(pid {first.proc.pid})") in failed[0], failed
        assert not (tmp_path / "b" / "api.sock").exists()
        assert first.call("network.list") == {"networks": []}
        assert first.stop() == 0
    finally:
        first.kill()


def test_state_dir_and_database_are_owner_only_also_when_they_were_wider(tmp_path):
    """Any local user could read the ports table (0755 directory, 0644 database)."""
    state = tmp_path / "state"

    def modes():
        files = ["strait.db", "strait.db-wal", "strait.db-shm"]
        return [oct(os.stat(state).st_mode & 0o777)] + \
            [oct(os.stat(state / f).st_mode & 0o777) for f in files]

    sw = Straitd(tmp_path).start()
    try:
        sw.call("network.create", {"id": "n1", "type": "local"})
        assert modes() == ["0o700", "0o600", "0o600", "0o600"]
        assert sw.stop() == 0
        # As an older straitd left them.
        os.chmod(state, 0o755)
        os.chmod(state / "strait.db", 0o644)
        sw.start()
        assert modes() == ["0o700", "0o600", "0o600", "0o600"]
        assert [n["id"] for n in sw.call("network.list")["networks"]] == ["n1"]
        assert sw.stop() == 0
    finally:
        sw.kill()


def test_saved_ports_on_one_socket_spelled_twice_still_start(tmp_path):
    """An older straitd accepted /dir//vm1.sock beside /dir/vm1.sock. Such a
    database must still start: the socket stays the first port's, the second
    is down, can be unbound, and the socket takes no third port."""
    sock_dir = tmp_path / "vms"
    sock_dir.mkdir()
    sw = Straitd(tmp_path).start()
    try:
        sw.call("network.create", {"id": "n", "type": "local"})
        sw.call("port.bind", {"id": uuid_for(1), "network": "n", "mac": "02:e2:dd:00:00:01",
                              "attach": {"type": "vhost", "path": f"{sock_dir}/vm1.sock"}})
        assert sw.stop() == 0
        db = sqlite3.connect(tmp_path / "state" / "strait.db")
        spec, vlan = db.execute("SELECT spec, local_vlan FROM ports").fetchone()
        second = json.loads(spec)
        second.update(id=uuid_for(2), mac="02:e2:dd:00:00:02")
        second["attach"]["path"] = f"{sock_dir}//vm1.sock"
        db.execute("INSERT INTO ports VALUES (?, ?, ?)", (uuid_for(2), json.dumps(second), vlan))
        db.commit()
        db.close()
        sw.start()
        ports = {p["id"]: p for p in sw.call("port.list")["ports"]}
        assert set(ports) == {uuid_for(1), uuid_for(2)}
        assert ports[uuid_for(2)]["attach"]["path"] == f"{sock_dir}/vm1.sock"
        assert ports[uuid_for(2)]["state"] == "down"
        assert sw.call("port.unbind", {"id": uuid_for(2)}) == {}
        r = sw.request("port.bind", {"id": uuid_for(3), "network": "n", "mac": "02:e2:dd:00:00:03",
                                     "attach": {"type": "vhost", "path": f"{sock_dir}/./vm1.sock"}})
        assert r["error"]["code"] == "conflict", r
        assert f"is already attached to port {uuid_for(1)}" in r["error"]["message"]
        assert sw.stop() == 0
    finally:
        sw.kill()

def test_stale_socket_file_is_taken_over(tmp_path):
    sock = tmp_path / "api.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(sock))
    s.close()  # left behind, nobody listening: like after a crash
    assert sock.exists()
    sw = Straitd(tmp_path).start()
    try:
        assert sw.call("network.list") == {"networks": []}
        assert oct(os.stat(sock).st_mode & 0o777) == "0o600"
        assert sw.stop() == 0
    finally:
        sw.kill()


def test_show_reports_version_workers_and_physnets(tmp_path):
    sw = Straitd(tmp_path, physnets={"physnet1": "net_pcap_up1,tx_pcap={tmp}/p.pcap"}).start()
    try:
        show = sw.call("show")
        assert show["version"] == project_version()
        assert [(w["id"], w["lcore"]) for w in show["workers"]] == [(0, 1)]
        assert [(p["name"], p["device"], p["state"]) for p in show["physnets"]] == \
            [("physnet1", f"net_pcap_up1,tx_pcap={tmp_path}/p.pcap", "up")]
        text = sw.ctl("show").stdout
        assert "physnet1" in text and "net_pcap_up1" in text
        json.loads(sw.ctl("-o", "json", "show").stdout)
    finally:
        sw.stop()
        sw.kill()


def test_restart_without_a_physnet_in_use_is_refused_until_it_is_mapped_again(tmp_path):
    physnets = {"physnet1": "net_pcap_rm1,tx_pcap={tmp}/p.pcap"}
    sw = Straitd(tmp_path, physnets=physnets).start()
    try:
        sw.call("network.create", {"id": "n1", "type": "vlan", "physnet": "physnet1",
                                   "segmentation_id": 100})
        recorded = sw.call("show")["recorded_config"]
        assert recorded["physnets"] == {"physnet1": f"net_pcap_rm1,tx_pcap={tmp_path}/p.pcap"}
        assert recorded["recorded_at"] > 0
        assert sw.stop() == 0
    finally:
        sw.kill()
    with_physnet = sw.cfg.read_text()
    dropped = tmp_path / "dropped.toml"
    dropped.write_text(config_text(tmp_path, {}))
    p, _ = run_straitd(dropped)
    assert p.returncode == 2, p.stdout + p.stderr
    errors = [line for line in (p.stdout + p.stderr).splitlines() if "physnet1" in line]
    assert len(errors) == 1, p.stdout + p.stderr
    assert "network(s) n1 use physnet physnet1" in errors[0]
    assert "net_pcap_rm1" in errors[0] and "delete the network" in errors[0]
    assert " ready" not in p.stdout

    sw = Straitd(tmp_path, config=with_physnet).start()
    try:
        assert [n["id"] for n in sw.call("network.list")["networks"]] == ["n1"]
        assert sw.stop() == 0
    finally:
        sw.kill()


def test_descriptor_table_is_grown_before_any_thread_starts(tmp_path):
    """Each growth of a threaded process's descriptor table waits for an RCU
    grace period: straitd grows it at start, so binding a thousand vhost
    sockets later does not pay five of them."""
    sw = Straitd(tmp_path).start()
    try:
        status = Path(f"/proc/{sw.proc.pid}/status").read_text()
        fdsize = int(re.search(r"^FDSize:\s+(\d+)", status, re.M).group(1))
        limits = Path(f"/proc/{sw.proc.pid}/limits").read_text()
        soft = re.search(r"^Max open files\s+(\d+)", limits, re.M).group(1)
        assert fdsize >= min(int(soft), 8192)
    finally:
        sw.stop()
        sw.kill()
