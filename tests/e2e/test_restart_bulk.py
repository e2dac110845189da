"""kill -9 during a bulk bind of 1000 ports, then restart (issue 4; LESSONS.md
F4, F11).

One straitd with a state directory binds 1000 vhost-user ports (client mode,
at socket paths nobody serves: they stay down, which is all a binding needs)
over several connections, each with all its requests written at once, so
binds are in flight all the time. Each round SIGKILLs straitd the moment a
random number of replies has come back (seeded: the seed is printed, and
STRAIT_RESTART_SEED=N replays a run), keeps every reply that was already on
its way, and restarts straitd on the same state directory:

- every acknowledged bind (a reply received) is there, exactly as answered;
- nothing is half there: every listed port is one of those asked for, whole
  (network, MAC, addresses, attachment) and in the datapath, and the ports
  restored are exactly those the state database held at the kill; a bind
  that was in flight may or may not have happened;
- every network keeps the local VLAN its ports were answered with (the
  local VLAN is also the conntrack zone: F4). The VLANs are handed out so
  that renumbering would show: networks get their first port in a random
  order, and VLAN 1 is freed again before the bulk bind;
- the ports not listed bind afterwards without a conflict.

The next round kills the bulk bind of the remaining ports, until a last
round binds them all; a clean restart then restores all 1000. rte_vhost
holds at most 1024 sockets: never more than 1000 are registered here.
"""
import json
import os
import random
import select
import shutil
import signal
import sqlite3
import tempfile
import time
from pathlib import Path

import pytest

from conftest import Straitd, unique, uuid_for

N_PORTS = 1000
N_NETWORKS = 6   # 4 get a first port before the bulk bind, 2 only during it
N_SEEDED = 4
ROUNDS = 4       # bulk binds killed at a random point
CONNECTIONS = 4  # straitd answers one request per connection at a time
SEED = int(os.environ.get("STRAIT_RESTART_SEED", random.SystemRandom().randrange(1 << 32)))


@pytest.fixture
def sock_dir():
    # vhost socket paths must fit sun_path (108 bytes): pytest's are long.
    d = tempfile.mkdtemp(prefix="srb", dir="/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def rsw(tmp_path):
    sw = Straitd(tmp_path)  # no libvirt watcher: the store and the API alone
    yield sw
    sw.kill()


def port_request(i, network, sock_dir):
    """The bind request of port i (ids, MACs and addresses unique)."""
    return {"id": uuid_for(0x5000 + i), "network": network,
            "mac": f"02:5b:00:00:{i >> 8:02x}:{i & 0xff:02x}",
            "fixed_ips": [f"10.{50 + i % N_NETWORKS}.{i >> 8}.{i & 0xff}"],
            "attach": {"type": "vhost", "path": f"{sock_dir}/p{i}.sock", "mode": "client"}}


SPEC_KEYS = ("id", "network", "mac", "fixed_ips", "attach")


def spec_of(port):
    return {k: port[k] for k in SPEC_KEYS}


class BulkBind:
    """Binds `requests` over CONNECTIONS connections. With `kill_after`,
    SIGKILLs straitd as soon as that many replies have arrived; replies
    already sent are still read (they were acknowledged too)."""

    def __init__(self, sw, requests):
        self.sw = sw
        self.requests = requests
        self.acked = {}     # port id -> reply result
        self.refused = {}   # port id -> error
        self.killed_at = None

    def run(self, kill_after=None, timeout=300.0):
        conns = [self.sw.connect() for _ in range(CONNECTIONS)]
        try:
            for c, s in enumerate(conns):
                batch = self.requests[c::CONNECTIONS]
                s.sendall("".join(f'{{"id": "{r["id"]}", "method": "port.bind", "params": '
                                  f'{json.dumps(r)}}}\n' for r in batch).encode())
            self._read(conns, kill_after, timeout)
        finally:
            for s in conns:
                s.close()
        return self

    def _read(self, conns, kill_after, timeout):
        bufs = {s: b"" for s in conns}
        open_ = set(conns)
        expected = len(self.requests)
        deadline = time.monotonic() + timeout
        while open_ and len(self.acked) + len(self.refused) < expected:
            left = deadline - time.monotonic()
            assert left > 0, (f"seed {SEED}: {len(self.acked)} of {expected} binds answered "
                              f"after {timeout}s:\n{self.sw.log.read_text()[-2000:]}")
            ready, _, _ = select.select(list(open_), [], [], left)
            for s in ready:
                try:
                    chunk = s.recv(1 << 16)
                except ConnectionResetError:
                    chunk = b""
                if not chunk:
                    assert self.killed_at is not None, (
                        f"seed {SEED}: straitd closed an API connection:\n"
                        + self.sw.log.read_text()[-2000:])
                    open_.discard(s)
                    continue
                bufs[s] += chunk
                *lines, bufs[s] = bufs[s].split(b"\n")
                for line in lines:
                    self._reply(json.loads(line))
                    if (kill_after is not None and self.killed_at is None
                            and len(self.acked) >= kill_after):
                        self.sw.proc.send_signal(signal.SIGKILL)
                        self.killed_at = len(self.acked)

    def _reply(self, r):
        if r.get("ok"):
            self.acked[r["id"]] = r["result"]
        else:
            self.refused[r["id"]] = r["error"]


def network_vlans(sw):
    return {n["id"]: n for n in sw.call("network.list")["networks"]}


def check_state(sw, requests, acked, vlans, tag):
    """The restored switch against what was acknowledged. `vlans`: network ->
    local VLAN as answered before; completed here with networks whose first
    port was in flight. Returns the ids of the listed ports."""
    where = f"seed {SEED}, {tag}"
    listed = {p["id"]: p for p in sw.call("port.list")["ports"]}
    missing = sorted(set(acked) - set(listed))
    assert not missing, f"{where}: {len(missing)} acknowledged port(s) lost, e.g. {missing[:3]}"
    unknown = sorted(set(listed) - set(requests))
    assert not unknown, f"{where}: ports nobody bound: {unknown[:3]}"
    nets = network_vlans(sw)
    per_net = {}
    dp_ports = set()
    for pid, p in listed.items():
        want = acked[pid] if pid in acked else requests[pid]
        assert spec_of(p) == spec_of(want), f"{where}: port {pid} restored as {p}, bound as {want}"
        assert p["state"] == "down", f"{where}: port {pid} is {p['state']}, nobody on its socket"
        assert isinstance(p["dp_port"], int), f"{where}: port {pid} is not in the datapath: {p}"
        assert p.get("vhost", {}).get("vid") == -1, f"{where}: port {pid}: {p}"
        dp_ports.add(p["dp_port"])
        per_net.setdefault(p["network"], set()).add(p["local_vlan"])
    assert len(dp_ports) == len(listed), f"{where}: two ports share a datapath index"
    for net, n in nets.items():
        if net not in per_net:
            assert n["local_vlan"] == 0 and n["ports"] == 0, f"{where}: empty network {n}"
            continue
        assert per_net[net] == {n["local_vlan"]}, f"{where}: network {net}: {per_net[net]} vs {n}"
        assert 1 <= n["local_vlan"] <= 4094, f"{where}: {n}"
        assert n["ports"] == sum(p["network"] == net for p in listed.values()), f"{where}: {n}"
        if net in vlans:
            assert n["local_vlan"] == vlans[net], (f"{where}: network {net} renumbered from "
                                                   f"local VLAN {vlans[net]} to {n['local_vlan']}")
        vlans[net] = n["local_vlan"]
    in_use = [vlans[net] for net in per_net]
    assert len(set(in_use)) == len(in_use), f"{where}: two networks share a local VLAN: {vlans}"
    m = [line for line in sw.log.read_text().splitlines() if "restored " in line]
    assert m and f"{len(listed)} port(s)" in m[-1], f"{where}: {m[-1:]}"
    return set(listed)


def stored_port_ids(state_dir, scratch):
    """The port ids in the state database as straitd left it (read from a
    copy: opening it recovers the WAL, which is straitd's to do)."""
    scratch.mkdir(exist_ok=True)
    for f in Path(state_dir).glob("strait.db*"):
        shutil.copy(f, scratch / f.name)
    db = sqlite3.connect(scratch / "strait.db")
    try:
        return {row[0] for row in db.execute("SELECT id FROM ports")}
    finally:
        db.close()
        shutil.rmtree(scratch)


def record_vlans(acked, vlans, tag):
    """Every reply of one network carries the same local VLAN, the one
    answered before (a network keeps its ports here: nothing is unbound)."""
    for pid, p in acked.items():
        have = vlans.setdefault(p["network"], p["local_vlan"])
        assert p["local_vlan"] == have, \
            f"seed {SEED}, {tag}: port {pid} answered with local VLAN {p['local_vlan']}, " \
            f"network {p['network']} had {have}"


def test_kill_9_during_bulk_bind_of_1000_ports_loses_no_acknowledged_bind_and_keeps_local_vlans_f4_f11(
        rsw, sock_dir):
    print(f"seed {SEED} (STRAIT_RESTART_SEED={SEED} replays this run)")
    rng = random.Random(SEED)
    t0 = time.monotonic()
    sw = rsw.start()
    nets = [unique(f"rb{k}-") for k in range(N_NETWORKS)]
    for n in nets + ["rbhole"]:
        sw.call("network.create", {"id": n, "type": "local"})
    order = list(range(N_PORTS))
    rng.shuffle(order)
    requests = {}
    for k, i in enumerate(order):
        r = port_request(i, nets[k % N_NETWORKS], sock_dir)
        requests[r["id"]] = r
    ids = [port_request(i, None, sock_dir)["id"] for i in order]

    # VLAN 1 to a scratch port, the seeded networks' first ports in a random
    # order, then VLAN 1 free again: compact renumbering would show.
    hole = dict(port_request(N_PORTS, "rbhole", sock_dir), id=uuid_for(0x4fff))
    sw.call("port.bind", hole)
    acked, vlans = {}, {}
    seeded = ids[:N_SEEDED]
    rng.shuffle(seeded)
    for pid in seeded:
        acked[pid] = sw.call("port.bind", requests[pid])
    sw.call("port.unbind", {"id": hole["id"]})
    record_vlans(acked, vlans, "seeded")
    assert sorted(vlans.values()) == list(range(2, 2 + N_SEEDED)), vlans

    bound = set(seeded)
    for rnd in range(1, ROUNDS + 2):
        todo = [pid for pid in ids if pid not in bound]
        last = rnd == ROUNDS + 1
        # Anywhere in the first 2/(rounds left + 1) of what is left, so the
        # later rounds have ports to bind too.
        span = (len(todo) - CONNECTIONS) * 2 // (ROUNDS - rnd + 2)
        kill_after = None if last else rng.randrange(1, max(2, span))
        tag = f"round {rnd}" + ("" if last else
                                f" (kill -9 after {kill_after} of {len(todo)} replies)")
        print(f"{tag}: binding {len(todo)} ports")
        b = BulkBind(sw, [requests[pid] for pid in todo]).run(kill_after)
        assert not b.refused, f"seed {SEED}, {tag}: refused: {list(b.refused.items())[:3]}"
        record_vlans(b.acked, vlans, tag)
        acked.update(b.acked)
        if last:
            assert len(b.acked) == len(todo), f"seed {SEED}, {tag}: {len(b.acked)} of {len(todo)}"
            break
        assert b.killed_at is not None, f"seed {SEED}, {tag}: never killed"
        sw.proc.wait(10)
        assert sw.proc.returncode == -signal.SIGKILL
        sw.kill()
        shutil.copy(sw.log, sw.tmp / f"straitd.round{rnd}.log")
        stored = stored_port_ids(sw.tmp / "state", sw.tmp / "dbcopy")
        sw.start()
        bound = check_state(sw, requests, acked, vlans, tag)
        assert bound == stored, (f"seed {SEED}, {tag}: restored {len(bound)} ports, the store "
                                 f"holds {len(stored)}: {sorted(bound ^ stored)[:3]}")
        print(f"{tag}: {len(b.acked) - b.killed_at} more replies read after the kill, "
              f"{len(bound)} ports bound after the restart")

    # All 1000 bound (in flight at a kill and restored, or acknowledged): a
    # clean restart restores them all, VLANs unchanged.
    assert bound | set(acked) == set(ids)
    assert sw.stop() == 0, sw.log.read_text()[-2000:]
    shutil.copy(sw.log, sw.tmp / "straitd.final.log")
    sw.start()
    assert check_state(sw, requests, acked, vlans, "clean restart") == set(ids)
    assert sw.stop() == 0, sw.log.read_text()[-2000:]
    print(f"done in {time.monotonic() - t0:.1f} s")
