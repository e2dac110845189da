#!/usr/bin/python3
"""Control-plane lifecycle benchmark of straitd (issue 4).

Usage: /usr/bin/python3 bench/lifecycle_bench.py BUILD_DIR [--ports N] [--cycles N]
           [--restarts N] [--conns N] [--rule-changes N] [--restart-signal TERM|KILL]
           [--sg-groups N] [--sg-rules N] [--sg-changes N]
           [--scenarios control,vif_plugged,restart,control_sg,rule_change,sg_scale]
           [--control-sg-modes sequential,parallel,bulk] [--rule-first-packet] [--lock-held]
           [--out DIR] [--keep]

One straitd (worker on lcore 1, control thread on CPU 0, --no-huge) and
strait-gen (bench/traffic_gen.cc) as the guests. The scenarios, in this
order (--scenarios picks some):

  control_N_ports      bind N vhost-user ports (client mode, sockets nobody
                       serves: bound, in the published snapshot, down) one
                       call at a time on one connection; a reply comes after
                       the snapshot with the port is live in every worker
                       (publish + RCU grace period), so the last reply is
                       "all N live". Per-call reply time p50/p99 and the
                       total. control_N_ports_parallel: the same N again
                       (after unbinding them) over --conns connections.
  vif_plugged_latency  a server-mode port; strait-gen --connect-cycles
                       plugs a virtio-user guest into it --cycles times and
                       prints when each device was started (its rings live:
                       the switch's new_device); paired with the port's next
                       vif-plugged event (events.subscribe, "ts"), both
                       CLOCK_REALTIME.
  restart_N_ports      N ports bound (those of control_N_ports; bound in one
                       bulk port.bind when run alone), plus two ports whose
                       guests (strait-gen --gap-watch: virtio-user servers,
                       straitd connects as client) exchange a frame every
                       200 us; straitd is stopped (--restart-signal, default
                       TERM) and started again --restarts times. From the new
                       process's start (CLOCK_REALTIME before the exec):
                       start_to_all_ports_listed_ms: the first port.list
                         reply, which lists every port (the API listens only
                         once the whole state is restored and published);
                       start_to_all_ports_live_ms: the first poll (port.list
                         then stats, back to back) showing all N + 2 ports in
                         the datapath again: every port with its datapath
                         index, its vhost socket registered again
                         (vhost.attached), every worker running a snapshot at
                         least as new as the switch's latest (stats: each
                         worker's generation >= generation, so the restored
                         snapshot with all ports is published and picked up),
                         and both guests' ports up (their devices back). The
                         N plain ports have no guest (sockets nobody serves),
                         so "forwarding" can only be seen on the two guests;
                         poll_ms is the round trip of one poll: the figure is
                         late by at most that;
                       start_to_first_frame_ms: the first frame strait-gen
                         saw delivered between the guests.
  control_N_ports_sg   (issue 4) N ports bound with security groups (3 groups:
                       a neutron-default-like one with remote_group_id
                       self-references, one with tcp/22 + icmp, one with
                       tcp/80,443; every port in the default group and one
                       of the others), each with fixed IPv4 and IPv6 addresses,
                       so every bind also changes the default group's member
                       set. As control_N_ports: one call at a time
                       (_sequential), over --conns connections (_parallel),
                       and all N in one bulk port.bind; the N plain ports of
                       control_N_ports are unbound first.
  rule_change          with the N ports of control_N_ports_sg bound:
                       security_group_rule.create and .delete on the group
                       every port is in, --rule-changes pairs each with a
                       remote_ip_prefix rule and with a remote_group_id rule;
                       a reply comes after the new rules are live in every
                       worker, so the reply time is the time to apply it.
  sg_scale             (issue 5) the other scenarios' ports unbound; group
                       scale-all (egress any IPv4, ingress from itself) and
                       --sg-groups groups scale-gNN of --sg-rules rules each
                       (tcp/udp ranges from prefixes; every tenth rule from
                       remote_group_id scale-all), one security_group.create
                       each; then N ports (scale-all + scale-g(i mod groups),
                       fixed IPv4 + IPv6) in ONE bulk port.bind: compile of
                       every group set with an N-member remote group +
                       publish. Then --sg-changes times: a rule create and
                       delete in scale-all (every set rebuilt) and a fixed-IP
                       change of one port (every set re-indexed). show's
                       compiled sets and build counters go with each result.

Prints a table and writes BUILD_DIR/bench-results/strait-lifecycle-<stamp>.json
({"results": [{"switch": "strait", "scenario", "metric", "median_ms", "p50",
"p99", "min", "max", "samples", ...}], ...}); the last line printed is its
path. Nothing is compared here: bench/run.sh runs control_sg (bulk only,
--control-sg-modes bulk) and rule_change per rep beside OVS-DPDK and prints
the Strait/OVS ratio (issue 8); it holds /tmp/strait-bench.lock itself and
passes --lock-held.
"""
import argparse
import fcntl
import json
import os
import platform
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

MAC1, MAC2 = "02:00:00:00:00:01", "02:00:00:00:00:02"
NETWORK = "bench"
NO_ANCHOR = ("nothing compared here; bench/run.sh runs control_sg (bulk) and rule_change "
             "beside OVS-DPDK (ovs-vsctl/ovs-ofctl) and prints the Strait/OVS ratio")
CONTROL_SG_MODES = ("sequential", "parallel", "bulk")
SCENARIOS = ("control", "vif_plugged", "restart", "control_sg", "rule_change", "sg_scale")

# control_sg / rule_change: the security groups and the ports' id range
SG_DEFAULT, SG_SSH, SG_WEB = "bench-default", "bench-ssh", "bench-web"
SG_PORT_BASE = 0x5e000000   # port_uuid(SG_PORT_BASE + i): never a control port's id


def _rule(direction, ethertype, protocol=None, lo=None, hi=None, prefix=None, remote=None):
    r = {"direction": direction, "ethertype": ethertype, "protocol": protocol}
    if lo is not None:
        r["port_range_min"], r["port_range_max"] = lo, hi if hi is not None else lo
    if prefix is not None:
        r["remote_ip_prefix"] = prefix
    if remote is not None:
        r["remote_group_id"] = remote
    return r


# neutron's default group (egress any; ingress from members of the same
# group), one for ssh + ping, one for a web server
SG_GROUPS = {
    SG_DEFAULT: [_rule("egress", "IPv4"), _rule("egress", "IPv6"),
                 _rule("ingress", "IPv4", remote=SG_DEFAULT),
                 _rule("ingress", "IPv6", remote=SG_DEFAULT)],
    SG_SSH: [_rule("ingress", "IPv4", "tcp", 22, prefix="0.0.0.0/0"),
             _rule("ingress", "IPv4", "icmp", prefix="0.0.0.0/0"),
             _rule("ingress", "IPv6", "tcp", 22, prefix="::/0"),
             _rule("ingress", "IPv6", "ipv6-icmp", prefix="::/0")],
    SG_WEB: [_rule("ingress", "IPv4", "tcp", 80, prefix="0.0.0.0/0"),
             _rule("ingress", "IPv4", "tcp", 443, prefix="0.0.0.0/0"),
             _rule("ingress", "IPv6", "tcp", 443, prefix="::/0")],
}


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def port_uuid(i):
    return f"1c0e0000-0000-4000-8000-{i:012x}"


def percentile(xs, q):
    """Linear interpolation between closest ranks (numpy's default)."""
    s = sorted(xs)
    if not s:
        return None
    k = (len(s) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def summary(samples_ms):
    if not samples_ms:
        return {"median_ms": None, "p50": None, "p99": None, "min": None, "max": None,
                "samples": 0}
    p50 = percentile(samples_ms, 50)
    return {"median_ms": p50, "p50": p50, "p99": percentile(samples_ms, 99),
            "min": min(samples_ms), "max": max(samples_ms), "samples": len(samples_ms)}


def cpu_idle_pct(secs=1.0):
    def read():
        return [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:9]]
    a = read()
    time.sleep(secs)
    b = read()
    d = [y - x for x, y in zip(a, b)]
    return round(100.0 * (d[3] + d[4]) / sum(d)) if sum(d) else 0


# ---- straitd and its API -------------------------------------------------------


class Api:
    """One API connection: requests answered in order (NDJSON)."""

    def __init__(self, path, timeout=60.0):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(str(path))
        self.buf = b""
        self.n = 0

    def send(self, method, params=None):
        self.n += 1
        req = {"id": self.n, "method": method}
        if params is not None:
            req["params"] = params
        self.s.sendall((json.dumps(req) + "\n").encode())

    def line(self):
        while b"\n" not in self.buf:
            chunk = self.s.recv(1 << 16)
            if not chunk:
                raise ConnectionError("straitd closed the API connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def call(self, method, params=None):
        self.send(method, params)
        r = self.line()
        if not r.get("ok"):
            raise RuntimeError(f"{method}: {r.get('error')}")
        return r["result"]

    def close(self):
        self.s.close()


class Straitd:
    def __init__(self, build, work, worker, config=None):
        """config: the TOML to run with (bench/soak.py's); None: this
        bench's (state dir and API socket in `work`, no libvirt)."""
        self.bin = Path(build) / "control" / "straitd"
        self.work = Path(work)
        self.sock = self.work / "api.sock"
        self.cfg = self.work / "straitd.toml"
        self.prefix = f"slc{os.getpid()}sw"
        self.cfg.write_text(config or (f'state_dir = "{self.work / "state"}"\n'
                                       f'api_socket = "{self.sock}"\n'
                                       f"[datapath]\nworkers = [{worker}]\n"
                                       "[libvirt]\nenabled = false\n"))
        self.proc = None
        self.starts = 0
        self.started_at = None   # CLOCK_REALTIME just before the exec

    @property
    def log(self):
        return self.work / f"straitd.{self.starts}.log"

    def start(self):
        self.starts += 1
        self._logf = open(self.log, "w")
        self.started_at = time.time()
        self.proc = subprocess.Popen(
            [str(self.bin), "--config", str(self.cfg), "--", "--no-huge", "--no-shconf",
             "-m", "512", "--no-pci", "--file-prefix", self.prefix],
            stdout=self._logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        return self

    def wait_api(self, timeout=120.0):
        """The first connection the API accepts (it listens once the whole
        state is restored and published)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"straitd exited ({self.proc.returncode}): "
                                   + self.log.read_text()[-1500:])
            try:
                return Api(self.sock)
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"straitd: no API after {timeout}s")
                time.sleep(0.002)

    def stop(self, sig=signal.SIGTERM, timeout=60.0):
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log(f"straitd ignored {sig.name} for {timeout}s: SIGKILL")
            self.proc.kill()
            self.proc.wait()
        self._logf.close()
        shutil.rmtree(f"/var/run/dpdk/{self.prefix}", ignore_errors=True)
        return self.proc.returncode


class Events:
    """events.subscribe on its own connection, read by a thread."""

    def __init__(self, sock):
        self.api = Api(sock, timeout=None)
        self.api.send("events.subscribe")
        assert self.api.line().get("ok")
        self.seen = []
        self.lock = threading.Lock()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        try:
            while True:
                ev = self.api.line()
                if "event" in ev:
                    with self.lock:
                        self.seen.append(ev)
        except (ConnectionError, OSError, ValueError):
            pass

    def of(self, port, name):
        with self.lock:
            return [e for e in self.seen if e["port"] == port and e["event"] == name]

    def close(self):
        try:
            self.api.s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.api.close()
        self.t.join(2)


class Gen:
    """strait-gen in one of its modes; stdout lines kept as they come."""

    def __init__(self, build, work, name, eal, args):
        self.name = name
        self.prefix = f"slc{os.getpid()}{name}"
        self.logpath = Path(work) / f"gen-{name}.log"
        cmd = [str(Path(build) / "bench" / "strait-gen"), "-l", "0", "--no-huge", "--no-shconf",
               "--no-pci", "--no-telemetry", "--log-level=lib.eal:error", "--file-prefix",
               self.prefix, *eal, "--", *args]
        self.lines = []
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, text=True, bufsize=1)
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        with open(self.logpath, "w") as f:
            for line in self.proc.stdout:
                f.write(line)
                f.flush()
                with self.lock:
                    self.lines.append(line.rstrip("\n"))

    def matching(self, prefix):
        with self.lock:
            return [line for line in self.lines if line.startswith(prefix)]

    def wait_line(self, prefix, timeout):
        """The first line starting with prefix."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.matching(prefix):
                return line
            if self.proc.poll() is not None and not self.t.is_alive():
                break
            time.sleep(0.005)
        return None

    def stop(self, timeout=10.0):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.t.join(5)
        shutil.rmtree(f"/var/run/dpdk/{self.prefix}", ignore_errors=True)
        return self.proc.returncode


def fields(line):
    """'KEY a=1 b=2.5' -> {'a': '1', 'b': '2.5'}"""
    return dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)


def bind_params(i, path, mac=None, mode="client"):
    return {"id": port_uuid(i), "network": NETWORK,
            "mac": mac or f"02:1c:00:00:{i >> 8 & 0xff:02x}:{i & 0xff:02x}",
            "attach": {"type": "vhost", "path": str(path), "mode": mode}}


# ---- the scenarios -------------------------------------------------------------


def bind_sequential(sw, params):
    """One call at a time: each call's reply time, and the total."""
    api = Api(sw.sock)
    lat = []
    t0 = time.monotonic()
    for p in params:
        t = time.monotonic()
        api.call("port.bind", p)
        lat.append((time.monotonic() - t) * 1e3)
    total = (time.monotonic() - t0) * 1e3
    api.close()
    return lat, total


def bind_parallel(sw, params, conns):
    """All requests written at once over `conns` connections (straitd takes
    one request per connection at a time), replies read by one select loop.
    Returns the total time: per-call times are not meaningful here."""
    apis = [Api(sw.sock) for _ in range(conns)]
    batches = [params[c::conns] for c in range(conns)]
    t0 = time.monotonic()
    for api, batch in zip(apis, batches):
        api.s.sendall("".join(json.dumps({"id": p["id"], "method": "port.bind", "params": p}) + "\n"
                              for p in batch).encode())
    left = {api.s: len(batch) for api, batch in zip(apis, batches) if batch}
    by_sock = {api.s: api for api in apis}
    errors = []
    while left:
        ready, _, _ = select.select(list(left), [], [], 60)
        if not ready:
            raise RuntimeError(f"parallel bind: no reply for 60 s ({sum(left.values())} left)")
        for s in ready:
            api = by_sock[s]
            chunk = s.recv(1 << 16)
            if not chunk:
                raise ConnectionError("straitd closed an API connection")
            api.buf += chunk
            *lines, api.buf = api.buf.split(b"\n")
            for line in lines:
                r = json.loads(line)
                if not r.get("ok"):
                    errors.append(r.get("error"))
                left[s] -= 1
            if left[s] == 0:
                del left[s]
    total = (time.monotonic() - t0) * 1e3
    for a in apis:
        a.close()
    if errors:
        raise RuntimeError(f"parallel bind: {len(errors)} refused, e.g. {errors[0]}")
    return total


def check_all_live(sw, ids):
    api = Api(sw.sock)
    ports = {p["id"]: p for p in api.call("port.list")["ports"]}
    api.close()
    missing = [i for i in ids if i not in ports or ports[i]["dp_port"] is None]
    if missing:
        raise RuntimeError(f"{len(missing)} bound port(s) not in the datapath, e.g. {missing[0]}")


def scenario_control(sw, n, conns, vdir, results):
    api = Api(sw.sock)
    api.call("network.create", {"id": NETWORK, "type": "local"})
    api.close()
    params = [bind_params(i, vdir / f"p{i}.sock") for i in range(n)]
    ids = [p["id"] for p in params]
    log(f"control: binding {n} ports, one call at a time")
    lat, total = bind_sequential(sw, params)
    check_all_live(sw, ids)
    results.append({"scenario": f"control_{n}_ports_sequential", "metric": "bind_reply_ms",
                    **summary(lat), "total_ms": total, "ports": n,
                    "binds_per_s": n / (total / 1e3)})
    log(f"control: {n} binds in {total:.0f} ms; unbinding them")
    api = Api(sw.sock)
    t0 = time.monotonic()
    for i in ids:
        api.call("port.unbind", {"id": i})
    unbind_ms = (time.monotonic() - t0) * 1e3
    api.close()
    log(f"control: {n} unbinds in {unbind_ms:.0f} ms; binding them over {conns} connections")
    total = bind_parallel(sw, params, conns)
    check_all_live(sw, ids)
    results.append({"scenario": f"control_{n}_ports_parallel", "metric": "all_binds_total_ms",
                    **summary([total]), "total_ms": total, "ports": n, "connections": conns,
                    "binds_per_s": n / (total / 1e3), "unbind_sequential_total_ms": unbind_ms})
    log(f"control: {n} binds over {conns} connections in {total:.0f} ms; unbinding them")
    api = Api(sw.sock)
    for i in ids:
        api.call("port.unbind", {"id": i})
    # The F5 path: every port in one request, one transaction, one snapshot.
    log(f"control: binding {n} ports in one bulk port.bind")
    t0 = time.monotonic()
    bound = api.call("port.bind", {"ports": params})["ports"]
    total = (time.monotonic() - t0) * 1e3
    api.close()
    if len(bound) != n:
        raise RuntimeError(f"bulk bind: {len(bound)} ports in the reply, not {n}")
    check_all_live(sw, ids)
    results.append({"scenario": f"control_{n}_ports", "metric": "bulk_bind_total_ms",
                    **summary([total]), "total_ms": total, "ports": n,
                    "binds_per_s": n / (total / 1e3)})
    log(f"control: {n} ports in one bulk bind: {total:.0f} ms")


def scenario_vif_plugged(sw, build, work, vdir, cycles, results):
    path = vdir / "cc.sock"
    pid = port_uuid(0xcc0000)
    api = Api(sw.sock)
    ensure_network(api)  # when run without the control scenario before it
    api.call("port.bind", bind_params(0xcc0000, path, mac="02:cc:00:00:00:01", mode="server"))
    api.close()
    ev = Events(sw.sock)
    hold_ms, gap_ms = 100, 20
    log(f"vif-plugged: {cycles} plug/unplug cycles of a virtio-user guest "
        f"(hold {hold_ms} ms, pause {gap_ms} ms)")
    gen = Gen(build, work, "cc", ["-m", "128"],
              ["--connect-cycles", str(cycles), "--vdev-path", str(path),
               "--hold-ms", str(hold_ms), "--gap-ms", str(gap_ms)])
    try:
        gen.proc.wait(timeout=60 + cycles * (hold_ms + gap_ms + 200) / 1e3)
    except subprocess.TimeoutExpired:
        log("vif-plugged: strait-gen still cycling at the deadline: stopped")
    rc = gen.stop()
    time.sleep(0.3)  # the last cycle's events
    plugs = [fields(line) for line in gen.matching("CONNECT ")]
    failed = len(gen.matching("CONNECT_FAILED"))
    vifs = sorted(float(e["ts"]) for e in ev.of(pid, "vif-plugged"))
    downs = len(ev.of(pid, "port-down"))
    ev.close()
    # Each vif-plugged belongs to the plug whose window [plug start, next
    # plug start) holds it; the device counts from when it was started. A
    # plug without one ("missed"): the guest left (after hold_ms) before the
    # switch announced it, which the switch then rightly never does.
    lat, missed, extra = [], 0, 0
    starts = [float(p["ts"]) - float(p["plug_ms"]) / 1e3 for p in plugs] + [float("inf")]
    j = 0
    for k, p in enumerate(plugs):
        while j < len(vifs) and vifs[j] < starts[k]:
            j += 1
            extra += 1
        mine = []
        while j < len(vifs) and vifs[j] < starts[k + 1]:
            mine.append(vifs[j])
            j += 1
        if not mine:
            missed += 1
            continue
        lat.append((mine[0] - float(p["ts"])) * 1e3)
        extra += len(mine) - 1
    plug_ms = [float(p["plug_ms"]) for p in plugs]
    results.append({"scenario": "vif_plugged_latency", "metric": "new_device_to_vif_plugged_ms",
                    **summary(lat), "cycles": len(plugs) + failed, "plugs_failed": failed,
                    "missed": missed, "unpaired_events": extra, "port_down_events": downs,
                    "guest_plug_ms_p50": percentile(plug_ms, 50), "strait_gen_rc": rc,
                    "hold_ms": hold_ms, "gap_ms": gap_ms})
    log(f"vif-plugged: {len(lat)} paired of {len(plugs)} plugs ({failed} failed, {missed} "
        f"without vif-plugged, {downs} port-down events)")


def first_resume_after(gen, t0, timeout):
    """The first delivery strait-gen saw resume after wall-clock time t0."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in gen.matching("RX_RESUME"):
            ts = float(fields(line)["ts"])
            if ts >= t0:
                return ts
        if gen.proc.poll() is not None:
            return None
        time.sleep(0.005)
    return None


def ensure_plain_ports(sw, n, vdir):
    """The N ports of control_N_ports, bound in one bulk request if the
    restart scenario runs without it."""
    api = Api(sw.sock)
    ensure_network(api)
    have = {p["id"] for p in api.call("port.list")["ports"]}
    missing = [bind_params(i, vdir / f"p{i}.sock") for i in range(n)
               if port_uuid(i) not in have]
    if missing:
        api.call("port.bind", {"ports": missing})
    api.close()


def wait_all_live(sw, guests, n_ports, timeout=60.0):
    """Polls port.list and stats until every port is live in the datapath
    again (see restart_N_ports); returns (CLOCK_REALTIME of the reply that
    showed it, polls, that poll's round trip in ms)."""
    api = Api(sw.sock)
    deadline = time.monotonic() + timeout
    polls = 0
    try:
        while True:
            t_poll = time.monotonic()
            ports = api.call("port.list")["ports"]
            stats = api.call("stats")
            t_reply = time.time()
            polls += 1
            vhost = [p for p in ports if isinstance(p.get("vhost"), dict)]
            up = {p["id"] for p in ports if p["state"] == "up"}
            if (len(ports) == n_ports and all(p["dp_port"] is not None for p in ports)
                    and all(p["vhost"]["attached"] for p in vhost)
                    and all(w["generation"] >= stats["generation"] for w in stats["workers"])
                    and all(g in up for g in guests)):
                return t_reply, polls, (time.monotonic() - t_poll) * 1e3
            if time.monotonic() > deadline:
                raise RuntimeError(f"restart: not every port live {timeout}s after the start: "
                                   f"{len(ports)} listed, {len(up)} up, workers at "
                                   f"{[w['generation'] for w in stats['workers']]} of "
                                   f"{stats['generation']}")
            time.sleep(0.001)
    finally:
        api.close()


def scenario_restart(sw, build, work, vdir, n, restarts, sig, results):
    ensure_plain_ports(sw, n, vdir)
    s1, s2 = vdir / "vm1.sock", vdir / "vm2.sock"
    gen = Gen(build, work, "gw", ["-m", "256",
                                  "--vdev", f"virtio_user0,path={s1},server=1,queue_size=1024",
                                  "--vdev", f"virtio_user1,path={s2},server=1,queue_size=1024"],
              ["--gap-watch", "20", "--interval-us", "200", "--src-mac", MAC1, "--dst-mac", MAC2,
               "--link-timeout", "60"])
    first, listed, live, poll_ms, stop_ms = [], [], [], [], []
    guests = [port_uuid(0xf00001), port_uuid(0xf00002)]
    try:
        n_ports = bind_guests(sw, gen, s1, s2)
        for r in range(restarts):
            time.sleep(1.0)  # traffic flowing
            t = time.monotonic()
            rc = sw.stop(sig)
            stop_ms.append((time.monotonic() - t) * 1e3)
            if rc not in (0, -sig):
                raise RuntimeError(f"straitd stop -> {rc}: " + sw.log.read_text()[-1500:])
            sw.start()
            api = sw.wait_api()
            ports = api.call("port.list")["ports"]
            t_list = time.time()
            api.close()
            if len(ports) != n_ports or any(p["dp_port"] is None for p in ports):
                raise RuntimeError(f"restart {r + 1}: {len(ports)} of {n_ports} ports restored")
            t_live, polls, rtt = wait_all_live(sw, guests, n_ports)
            resume = first_resume_after(gen, sw.started_at, 60)
            if resume is None:
                raise RuntimeError(f"restart {r + 1}: no frame between the guests 60 s after "
                                   "the restart: " + "\n".join(gen.lines[-5:]))
            first.append((resume - sw.started_at) * 1e3)
            listed.append((t_list - sw.started_at) * 1e3)
            live.append((t_live - sw.started_at) * 1e3)
            poll_ms.append(rtt)
            log(f"restart {r + 1}: after the process start, {n_ports} ports listed "
                f"{listed[-1]:.0f} ms, all {n_ports} live in the datapath (snapshot picked up by "
                f"every worker, sockets registered, guests up) {live[-1]:.0f} ms (poll {rtt:.1f} ms,"
                f" {polls} polls), first frame between the guests {first[-1]:.0f} ms "
                f"(stop took {stop_ms[-1]:.0f} ms)")
    finally:
        gen.stop()
    tail = gen.matching("GAPWATCH_RESULT")
    common = {"ports": n_ports, "restarts": len(first), "signal": sig.name,
              "stop_ms_p50": percentile(stop_ms, 50),
              "gapwatch": fields(tail[0]) if tail else None}
    results.append({"scenario": f"restart_{n}_ports", "metric": "start_to_first_frame_ms",
                    **summary(first), **common})
    results.append({"scenario": f"restart_{n}_ports", "metric": "start_to_all_ports_listed_ms",
                    **summary(listed), **common})
    results.append({"scenario": f"restart_{n}_ports", "metric": "start_to_all_ports_live_ms",
                    **summary(live), **common, "poll_ms_p50": percentile(poll_ms, 50),
                    "what": "process start to the first port.list + stats poll showing every "
                            "port with its datapath index and vhost socket registered, every "
                            "worker on the latest snapshot, both guest ports up"})


def bind_guests(sw, gen, s1, s2):
    """Binds the two guests' ports (client mode) and waits for traffic
    between them; returns how many ports are bound in all."""
    api = Api(sw.sock)
    # A virtio-user server creates its socket and waits there for the
    # switch before it creates the next one.
    for k, (path, mac) in enumerate(((s1, MAC1), (s2, MAC2))):
        deadline = time.monotonic() + 30
        while not path.exists():
            if gen.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"strait-gen --gap-watch did not create {path}: "
                                   + "\n".join(gen.lines[-5:]))
            time.sleep(0.02)
        api.call("port.bind", bind_params(0xf00001 + k, path, mac=mac))
    n_ports = len(api.call("port.list")["ports"])
    api.close()
    if not gen.wait_line("RX_FIRST", 60):
        raise RuntimeError("no frame between the two guests before any restart: "
                           + "\n".join(gen.lines[-5:]))
    return n_ports


def sg_port_params(i, vdir):
    """The i-th port of control_sg: fixed IPv4 + IPv6, the default group and
    one of the two others."""
    p = bind_params(SG_PORT_BASE + i, vdir / f"s{i}.sock",
                    mac=f"02:5e:00:00:{i >> 8 & 0xff:02x}:{i & 0xff:02x}")
    p["fixed_ips"] = [f"10.200.{(i + 1) >> 8 & 0xff}.{(i + 1) & 0xff}", f"fd00:5e::{i + 1:x}"]
    p["security_groups"] = [SG_DEFAULT, SG_SSH if i % 2 == 0 else SG_WEB]
    return p


def ensure_network(api):
    if not any(n["id"] == NETWORK for n in api.call("network.list")["networks"]):
        api.call("network.create", {"id": NETWORK, "type": "local"})


def ensure_groups(api):
    got = api.call("security_group.list", {})
    if isinstance(got, dict):   # {"security_groups": [...]} as other lists, or a bare list
        got = got.get("security_groups", [])
    have = {g["id"] for g in got}
    for gid, rules in SG_GROUPS.items():
        if gid not in have:
            # explicit rule ids, as neutron's agents send them
            api.call("security_group.create", {"id": gid, "name": gid,
                                               "rules": [{"id": f"{gid}-{k}", **r}
                                                         for k, r in enumerate(rules)]})


def unbind_all(sw, ids):
    api = Api(sw.sock)
    t0 = time.monotonic()
    for i in ids:
        api.call("port.unbind", {"id": i})
    ms = (time.monotonic() - t0) * 1e3
    api.close()
    return ms


def check_sg_ports(sw, params):
    """Every port bound, in the datapath, with its groups and port security."""
    check_all_live(sw, [p["id"] for p in params])
    api = Api(sw.sock)
    ports = {p["id"]: p for p in api.call("port.list")["ports"]}
    api.close()
    bad = [p["id"] for p in params
           if ports[p["id"]].get("security_groups") != p["security_groups"]
           or ports[p["id"]].get("port_security_enabled") is not True]
    if bad:
        got = ports[bad[0]]
        raise RuntimeError(f"{len(bad)} port(s) without their groups/port security, e.g. {bad[0]}: "
                           f"security_groups={got.get('security_groups')} "
                           f"port_security_enabled={got.get('port_security_enabled')}")


def scenario_control_sg(sw, n, conns, vdir, results, modes=CONTROL_SG_MODES):
    """N ports with security groups: one call at a time (sequential), over
    `conns` connections (parallel) and in one bulk port.bind (bulk); `modes`
    picks some (bench/run.sh: bulk only, its control_N_ports point)."""
    api = Api(sw.sock)
    ensure_network(api)
    # rte_vhost holds 1024 sockets: the plain ports of control_N_ports go first
    plain_ids = {port_uuid(i) for i in range(n)}
    plain = [p["id"] for p in api.call("port.list")["ports"] if p["id"] in plain_ids]
    api.close()
    if plain:
        log(f"control_sg: unbinding the {len(plain)} plain ports of control_{n}_ports")
        unbind_all(sw, plain)
    api = Api(sw.sock)
    ensure_groups(api)
    api.close()
    n_rules = sum(len(r) for r in SG_GROUPS.values())
    common = {"ports": n, "groups": len(SG_GROUPS), "rules": n_rules,
              "groups_per_port": 2, "fixed_ips_per_port": 2}
    params = [sg_port_params(i, vdir) for i in range(n)]
    ids = [p["id"] for p in params]
    unbind_ms = None
    if "sequential" in modes:
        unbind_ms = control_sg_sequential(sw, n, params, results, common)
    if "parallel" in modes:
        control_sg_parallel(sw, n, conns, params, results, common, unbind_ms)
    if "bulk" not in modes:
        return
    log(f"control_sg: binding {n} ports with security groups in one bulk port.bind")
    api = Api(sw.sock)
    t0 = time.monotonic()
    bound = api.call("port.bind", {"ports": params})["ports"]
    total = (time.monotonic() - t0) * 1e3
    api.close()
    if len(bound) != n:
        raise RuntimeError(f"bulk bind: {len(bound)} ports in the reply, not {n}")
    check_sg_ports(sw, params)
    results.append({"scenario": f"control_{n}_ports_sg", "metric": "bulk_bind_total_ms",
                    **summary([total]), "total_ms": total, "binds_per_s": n / (total / 1e3),
                    "values_ms": [total], **common})
    log(f"control_sg: {n} ports with security groups in one bulk bind: {total:.0f} ms")


def control_sg_sequential(sw, n, params, results, common):
    ids = [p["id"] for p in params]
    log(f"control_sg: binding {n} ports with security groups ({common['groups']} groups, "
        f"{common['rules']} rules, a self-referencing remote group), one call at a time")
    lat, total = bind_sequential(sw, params)
    check_sg_ports(sw, params)
    tenth = max(1, n // 10)
    results.append({"scenario": f"control_{n}_ports_sg_sequential", "metric": "bind_reply_ms",
                    **summary(lat), "total_ms": total, "binds_per_s": n / (total / 1e3),
                    # does a bind cost more as the remote group grows? (F8)
                    "p50_first_10pct": percentile(lat[:tenth], 50),
                    "p50_last_10pct": percentile(lat[-tenth:], 50),
                    # p50 of each tenth of the binds, in order (member count grows)
                    "p50_by_tenth": [percentile(lat[k * tenth:(k + 1) * tenth], 50)
                                     for k in range(10) if lat[k * tenth:(k + 1) * tenth]],
                    **common})
    log(f"control_sg: {n} binds in {total:.0f} ms (p50 {percentile(lat, 50):.2f} ms, first 10 % "
        f"{percentile(lat[:tenth], 50):.2f} ms, last 10 % {percentile(lat[-tenth:], 50):.2f} ms); "
        "unbinding them")
    return unbind_all(sw, ids)


def control_sg_parallel(sw, n, conns, params, results, common, unbind_ms=None):
    ids = [p["id"] for p in params]
    log(f"control_sg: binding {n} ports with security groups over {conns} connections")
    total = bind_parallel(sw, params, conns)
    check_sg_ports(sw, params)
    results.append({"scenario": f"control_{n}_ports_sg_parallel", "metric": "all_binds_total_ms",
                    **summary([total]), "total_ms": total, "connections": conns,
                    "binds_per_s": n / (total / 1e3), **common})
    if unbind_ms is not None:   # the sequential binds' unbind, before these binds
        results[-1]["unbind_sequential_total_ms"] = unbind_ms
    log(f"control_sg: {n} binds over {conns} connections in {total:.0f} ms; unbinding them")
    unbind_all(sw, ids)


def scenario_rule_change(sw, n, pairs, vdir, results, first_packet=None):
    """Rule create/delete on the group all N ports are in; each reply comes
    once the change is live in every worker. first_packet=(build, work):
    then also rule_first_packet (the create to the first frame through it)."""
    api = Api(sw.sock)
    ensure_network(api)
    ensure_groups(api)
    params = [sg_port_params(i, vdir) for i in range(n)]
    have = {p["id"] for p in api.call("port.list")["ports"]}
    missing = [p for p in params if p["id"] not in have]
    if missing:
        log(f"rule_change: binding {len(missing)} ports with security groups first (bulk)")
        api.call("port.bind", {"ports": missing})
    api.close()
    check_sg_ports(sw, params)
    members = len(api_members(sw, SG_DEFAULT))
    api = Api(sw.sock)
    for kind in ("remote_ip_prefix", "remote_group_id"):
        log(f"rule_change: {pairs} rule create/delete pairs ({kind}) on {SG_DEFAULT}, "
            f"a group of {members} ports")
        create, delete = [], []
        for k in range(pairs):
            rule = {"security_group_id": SG_DEFAULT, "direction": "ingress", "ethertype": "IPv4",
                    "protocol": "tcp", "port_range_min": 20000 + k, "port_range_max": 20000 + k}
            if kind == "remote_ip_prefix":
                rule["remote_ip_prefix"] = "192.0.2.0/24"
            else:
                rule["remote_group_id"] = SG_DEFAULT
            t = time.monotonic()
            made = api.call("security_group_rule.create", rule)
            create.append((time.monotonic() - t) * 1e3)
            t = time.monotonic()
            api.call("security_group_rule.delete", {"id": made["id"]})
            delete.append((time.monotonic() - t) * 1e3)
        common = {"ports": n, "group_members": members, "pairs": pairs, "rule_kind": kind,
                  "group_rules_before": len(SG_GROUPS[SG_DEFAULT])}
        sfx = "" if kind == "remote_ip_prefix" else "_remote_group"
        results.append({"scenario": "rule_change", "metric": f"rule_create{sfx}_reply_ms",
                        **summary(create), "values_ms": create, **common})
        results.append({"scenario": "rule_change", "metric": f"rule_delete{sfx}_reply_ms",
                        **summary(delete), "values_ms": delete, **common})
        log(f"rule_change ({kind}): create p50 {percentile(create, 50):.2f} ms p99 "
            f"{percentile(create, 99):.2f} ms; delete p50 {percentile(delete, 50):.2f} ms p99 "
            f"{percentile(delete, 99):.2f} ms")
    api.close()
    if first_packet:
        rule_first_packet(sw, *first_packet, vdir, pairs, n, results)


FP_GROUP = "bench-fp"   # rule_first_packet's group: egress any IPv4, nothing in
FP_PORT_BASE = 0xf20000
FP_MAC1, FP_MAC2 = "02:00:00:00:0f:01", "02:00:00:00:0f:02"   # not restart's guests' MACs


def rule_first_packet(sw, build, work, vdir, changes, n, results):
    """With the N ports still bound, two more ports (guests: strait-gen
    --gap-watch, one frame every 200 us from port 1, 10.0.0.1 -> 10.1.0.1
    UDP 5001) in group FP_GROUP, which lets nothing in: the frames are
    dropped at port 2's ingress. Then `changes` times: create the ingress
    rule UDP 5001 from 10.0.0.0/16 in FP_GROUP and time the first frame at
    port 2 (RX_FIRST/RX_RESUME ts, CLOCK_REALTIME) from the call; delete it,
    and wait until the frames stop. A sample counts only if nothing had
    arrived for 50 ms before the create (the delete had taken effect); the
    others are counted as skipped. The same measurement as bench/ovs.sh's
    OVS rule_change."""
    s1, s2 = vdir / "fp1.sock", vdir / "fp2.sock"
    gen = Gen(build, work, "fp", ["-m", "256",
                                  "--vdev", f"virtio_user0,path={s1},server=1,queue_size=1024",
                                  "--vdev", f"virtio_user1,path={s2},server=1,queue_size=1024"],
              ["--gap-watch", "20", "--interval-us", "200", "--src-mac", FP_MAC1,
               "--dst-mac", FP_MAC2, "--link-timeout", "60"])
    api = Api(sw.sock)
    first, reply, skipped = [], [], 0
    try:
        ensure_network(api)
        got = api.call("security_group.list", {})
        if isinstance(got, dict):
            got = got.get("security_groups", [])
        if FP_GROUP not in {g["id"] for g in got}:
            api.call("security_group.create", {"id": FP_GROUP, "name": FP_GROUP,
                                               "rules": [{"id": f"{FP_GROUP}-0",
                                                          **_rule("egress", "IPv4")}]})
        for k, (path, mac, ip, pair) in enumerate(((s1, FP_MAC1, "10.0.0.1", "10.0.0.0/16"),
                                                   (s2, FP_MAC2, "10.1.0.1", "10.1.0.0/16"))):
            deadline = time.monotonic() + 30
            while not path.exists():
                if gen.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"strait-gen --gap-watch did not create {path}: "
                                       + "\n".join(gen.lines[-5:]))
                time.sleep(0.02)
            p = bind_params(FP_PORT_BASE + k, path, mac=mac)
            p.update({"fixed_ips": [ip], "allowed_address_pairs": [{"ip_address": pair}],
                      "security_groups": [FP_GROUP], "port_security_enabled": True})
            api.call("port.bind", p)
        if not gen.wait_line("GAPWATCH ", 60):
            raise RuntimeError("strait-gen --gap-watch did not start: " + "\n".join(gen.lines[-5:]))
        time.sleep(0.3)
        if gen.matching("RX_"):
            raise RuntimeError("frames reach port 2 before the rule exists")
        rule = {"security_group_id": FP_GROUP, "direction": "ingress", "ethertype": "IPv4",
                "protocol": "udp", "port_range_min": 5001, "port_range_max": 5001,
                "remote_ip_prefix": "10.0.0.0/16"}
        log(f"rule_change: {changes} rule creates timed to the first frame through them "
            f"({n} + 2 ports bound)")
        tries = 0
        while len(first) < changes and tries < 2 * changes + 3:
            tries += 1
            seen = len(gen.matching("RX_"))
            t = time.time()
            made = api.call("security_group_rule.create", rule)
            tr = time.time()
            line, deadline = None, time.monotonic() + 5
            while line is None and time.monotonic() < deadline:
                got = gen.matching("RX_")
                line = got[seen] if len(got) > seen else None
                if line is None:
                    time.sleep(0.002)
            if line is None:
                raise RuntimeError("no frame through the created rule within 5 s")
            f = fields(line)
            if "last_ts" in f and float(f["last_ts"]) > t - 0.05:
                skipped += 1
            else:
                first.append((float(f["ts"]) - t) * 1e3)
                reply.append((tr - t) * 1e3)
            time.sleep(0.1)
            api.call("security_group_rule.delete", {"id": made["id"]})
            time.sleep(0.25)
    finally:
        api.close()
        gen.stop()
    results.append({"scenario": "rule_change", "metric": "rule_create_to_first_packet_ms",
                    **summary(first), "values_ms": first, "reply_ms": reply, "skipped": skipped,
                    "ports": n + 2, "interval_us": 200,
                    "detect": "strait-gen --gap-watch: first arrival at port 2 after the call"})
    if not first:
        raise RuntimeError(f"rule_change first packet: no valid sample ({skipped} skipped)")
    log(f"rule_change: create -> first frame p50 {percentile(first, 50):.2f} ms "
        f"(reply p50 {percentile(reply, 50):.2f} ms; {skipped} skipped)")


def api_members(sw, gid):
    api = Api(sw.sock)
    g = api.call("security_group.show", {"id": gid})
    api.close()
    return g.get("ports", [])


# ---- sg_scale (issue 5) --------------------------------------------------------

SG_SCALE_ALL = "scale-all"
SG_SCALE_PORT_BASE = 0x5f000000   # port_uuid(SG_SCALE_PORT_BASE + i): its own id range


def sg_scale_group(g):
    return f"scale-g{g:02d}"


def sg_scale_rules(g, n_rules):
    """The n_rules rules of scale-gNN: tcp/udp port ranges (single ports and
    ranges of 4..16) from remote_ip_prefix /24s (IPv4) or /64s (IPv6), and
    every tenth rule (and the last) an ingress tcp range from remote_group_id
    scale-all, IPv4 and IPv6 in turn, so each group's set names a remote group
    of every port. Distinct within the group (nothing merges when compiled);
    the prefixes differ between groups."""
    rules = []
    for k in range(n_rules):
        seq = g * n_rules + k
        lo = 1024 + (seq * 16) % 60000
        hi = lo + (0, 3, 7, 15)[k % 4]
        if k % 10 == 9 or k == n_rules - 1:
            eth = "IPv4" if (k // 10) % 2 == 0 else "IPv6"
            r = _rule("ingress", eth, "tcp", lo, hi, remote=SG_SCALE_ALL)
        elif k % 5 == 4:
            r = _rule("ingress", "IPv6", "tcp" if k % 2 == 0 else "udp", lo, hi,
                      prefix=f"fd{g % 256:02x}:{k:x}::/64")
        else:
            r = _rule("ingress" if k % 7 else "egress", "IPv4", "tcp" if k % 2 == 0 else "udp",
                      lo, hi, prefix=f"10.{seq >> 8 & 0xff}.{seq & 0xff}.0/24")
        rules.append({"id": f"{sg_scale_group(g)}-{k}", **r})
    return rules


def sg_scale_port_params(i, groups, vdir):
    """Port i of sg_scale: scale-all and scale-g(i mod groups), fixed IPv4 + IPv6."""
    p = bind_params(SG_SCALE_PORT_BASE + i, vdir / f"g{i}.sock",
                    mac=f"02:5f:00:00:{i >> 8 & 0xff:02x}:{i & 0xff:02x}")
    p["fixed_ips"] = [f"10.201.{(i + 1) >> 8 & 0xff}.{(i + 1) & 0xff}", f"fd00:5f::{i + 1:x}"]
    p["security_groups"] = [SG_SCALE_ALL, sg_scale_group(i % groups)]
    return p


def sg_show(api):
    """show's security_groups: compiled sets (count, rules min/max, remote
    groups) and the build counters."""
    sg = api.call("show")["security_groups"]
    sets = sg.get("compiled_sets", [])
    rules = [s["rules"] for s in sets]
    return {"groups": sg.get("groups"), "compiled_sets": len(sets),
            "set_rules_min": min(rules) if rules else None,
            "set_rules_max": max(rules) if rules else None,
            "remote_groups": sorted({str(r) for s in sets for r in s.get("remote_groups", [])}),
            "builds": dict(sg.get("builds", {}))}


def builds_delta(before, after):
    return {k: after["builds"].get(k, 0) - before["builds"].get(k, 0)
            for k in ("built", "reindexed", "reused")}


def scenario_sg_scale(sw, n, n_groups, n_rules, changes, vdir, results):
    """Issue 5: compile and publish time for n ports in n_groups groups of
    n_rules rules each, with a remote group of all n ports; then the time to
    apply one rule change / one membership change to all of them."""
    api = Api(sw.sock, timeout=600)
    ensure_network(api)
    # rte_vhost holds 1024 sockets: every other scenario's ports go first
    mine = {port_uuid(SG_SCALE_PORT_BASE + i) for i in range(n)}
    others = [p["id"] for p in api.call("port.list")["ports"] if p["id"] not in mine]
    api.close()
    if others:
        log(f"sg_scale: unbinding the {len(others)} ports of the other scenarios")
        unbind_all(sw, others)
    api = Api(sw.sock, timeout=600)
    got = api.call("security_group.list", {})
    if isinstance(got, dict):
        got = got.get("security_groups", [])
    if any(g["id"] == SG_SCALE_ALL or g["id"].startswith("scale-g") for g in got):
        raise RuntimeError("sg_scale: scale-* groups exist already (run it on a fresh straitd)")
    api.call("security_group.create", {
        "id": SG_SCALE_ALL, "name": SG_SCALE_ALL,
        "rules": [{"id": f"{SG_SCALE_ALL}-0", **_rule("egress", "IPv4")},
                  {"id": f"{SG_SCALE_ALL}-1", **_rule("ingress", "IPv4", remote=SG_SCALE_ALL)}]})
    log(f"sg_scale: creating {n_groups} groups of {n_rules} rules each (one call per group)")
    create = []
    t0 = time.monotonic()
    for g in range(n_groups):
        body = {"id": sg_scale_group(g), "name": sg_scale_group(g),
                "rules": sg_scale_rules(g, n_rules)}
        t = time.monotonic()
        api.call("security_group.create", body)
        create.append((time.monotonic() - t) * 1e3)
    create_total = (time.monotonic() - t0) * 1e3
    before = sg_show(api)
    log(f"sg_scale: {n_groups} group creates in {create_total:.0f} ms "
        f"(p50 {percentile(create, 50):.2f} ms, max {max(create):.2f} ms)")
    params = [sg_scale_port_params(i, n_groups, vdir) for i in range(n)]
    log(f"sg_scale: binding {n} ports (scale-all + one of {n_groups} groups each) "
        "in one bulk port.bind")
    t = time.monotonic()
    bound = api.call("port.bind", {"ports": params})["ports"]
    bind_ms = (time.monotonic() - t) * 1e3
    if len(bound) != n:
        raise RuntimeError(f"sg_scale bulk bind: {len(bound)} ports in the reply, not {n}")
    after_bind = sg_show(api)
    api.close()
    check_sg_ports(sw, params)
    members = len(api_members(sw, SG_SCALE_ALL))
    common = {"ports": n, "groups": n_groups, "rules_per_group": n_rules,
              "remote_group_members": members,
              "remote_group_rules_per_group": sum(1 for r in sg_scale_rules(0, n_rules)
                                                  if "remote_group_id" in r),
              "compiled_sets": after_bind["compiled_sets"],
              "set_rules_min": after_bind["set_rules_min"],
              "set_rules_max": after_bind["set_rules_max"]}
    tenth = max(1, n_groups // 10)
    results.append({"scenario": "sg_scale", "metric": "sg_scale_group_create_ms",
                    **summary(create), "creates_total_ms": create_total,
                    # does a create cost more as groups are added? p50 per tenth, in order
                    "p50_by_tenth": [percentile(create[k * tenth:(k + 1) * tenth], 50)
                                     for k in range(10) if create[k * tenth:(k + 1) * tenth]],
                    **common})
    results.append({"scenario": "sg_scale", "metric": f"sg_scale_bind_{n}_ports_ms",
                    **summary([bind_ms]), "total_ms": bind_ms, "binds_per_s": n / (bind_ms / 1e3),
                    "builds_delta": builds_delta(before, after_bind), "show": after_bind,
                    **common})
    log(f"sg_scale: {n} ports bound in {bind_ms:.0f} ms: {after_bind['compiled_sets']} compiled "
        f"sets of {after_bind['set_rules_min']}..{after_bind['set_rules_max']} rules, remote "
        f"group of {members} members; builds {builds_delta(before, after_bind)}")

    # one rule every set includes: all compiled sets rebuilt, twice per pair
    api = Api(sw.sock, timeout=600)
    rc, rd, rc_builds, rd_builds = [], [], [], []
    log(f"sg_scale: {changes} rule create/delete pairs on {SG_SCALE_ALL} (in every set)")
    for k in range(changes):
        rule = {"security_group_id": SG_SCALE_ALL, "direction": "ingress", "ethertype": "IPv4",
                "protocol": "tcp", "port_range_min": 61000 + k, "port_range_max": 61000 + k,
                "remote_ip_prefix": "192.0.2.0/24"}
        s0 = sg_show(api)
        t = time.monotonic()
        made = api.call("security_group_rule.create", rule)
        rc.append((time.monotonic() - t) * 1e3)
        s1 = sg_show(api)
        t = time.monotonic()
        api.call("security_group_rule.delete", {"id": made["id"]})
        rd.append((time.monotonic() - t) * 1e3)
        s2 = sg_show(api)
        rc_builds.append(builds_delta(s0, s1))
        rd_builds.append(builds_delta(s1, s2))
    results.append({"scenario": "sg_scale", "metric": "sg_scale_rule_create_ms", **summary(rc),
                    "builds_per_change": rc_builds[0], "builds_each": rc_builds, **common})
    results.append({"scenario": "sg_scale", "metric": "sg_scale_rule_delete_ms", **summary(rd),
                    "builds_per_change": rd_builds[0], "builds_each": rd_builds, **common})
    log(f"sg_scale: rule create p50 {percentile(rc, 50):.1f} ms max {max(rc):.1f} ms "
        f"(builds {rc_builds[0]}); delete p50 {percentile(rd, 50):.1f} ms max {max(rd):.1f} ms "
        f"(builds {rd_builds[0]})")

    # one port's fixed IPv4 changes: the remote group's members change in
    # every set, the rules do not (re-index only)
    mc, mc_builds = [], []
    p0 = params[0]
    log(f"sg_scale: {changes} fixed-IP changes of one port (a member of {SG_SCALE_ALL})")
    for k in range(changes):
        ips = [f"10.202.0.{k + 1}", p0["fixed_ips"][1]]
        s0 = sg_show(api)
        t = time.monotonic()
        api.call("port.update", {"id": p0["id"], "fixed_ips": ips})
        mc.append((time.monotonic() - t) * 1e3)
        mc_builds.append(builds_delta(s0, sg_show(api)))
    api.close()
    results.append({"scenario": "sg_scale", "metric": "sg_scale_member_change_ms", **summary(mc),
                    "builds_per_change": mc_builds[0], "builds_each": mc_builds, **common})
    log(f"sg_scale: member change p50 {percentile(mc, 50):.1f} ms max {max(mc):.1f} ms "
        f"(builds {mc_builds[0]})")


# ---- report --------------------------------------------------------------------


def fmt(v, nd=2):
    return "-" if v is None else f"{v:.{nd}f}"


def table(results):
    head = f"{'scenario':<33} {'metric':<34} {'n':>5} {'p50 ms':>9} {'p99 ms':>9} " \
           f"{'min ms':>9} {'max ms':>9}  notes"
    out = [head, "-" * len(head)]
    for r in results:
        notes = []
        if "total_ms" in r:
            notes.append(f"total {r['total_ms']:.0f} ms ({r['binds_per_s']:.0f} binds/s)")
        if "missed" in r:
            notes.append(f"missed {r['missed']}, plug p50 {fmt(r['guest_plug_ms_p50'])} ms")
        if r.get("metric") == "start_to_all_ports_listed_ms":
            notes.append(f"{r['ports']} ports, stop ({r['signal']}) "
                         f"p50 {fmt(r['stop_ms_p50'], 0)} ms")
        if r.get("metric") == "start_to_all_ports_live_ms":
            notes.append(f"all {r['ports']} ports in the datapath, sockets registered, every "
                         f"worker on the latest snapshot, guests up; poll p50 "
                         f"{fmt(r['poll_ms_p50'])} ms")
        if r.get("metric") == "start_to_first_frame_ms":
            notes.append("first frame between the 2 guest ports (the only ones with a guest)")
        if "p50_first_10pct" in r:
            notes.append(f"p50 first/last 10 %: {fmt(r['p50_first_10pct'])}/"
                         f"{fmt(r['p50_last_10pct'])} ms")
        if "skipped" in r:
            notes.append(f"first frame via strait-gen --gap-watch; reply p50 "
                         f"{fmt(percentile(r['reply_ms'], 50))} ms; {r['skipped']} skipped")
        if "rule_kind" in r:
            notes.append(f"{r['rule_kind']} rule, group of {r['group_members']} ports")
        if r.get("scenario") == "sg_scale":
            if "creates_total_ms" in r:
                notes.append(f"{r['groups']} groups x {r['rules_per_group']} rules: total "
                             f"{r['creates_total_ms']:.0f} ms")
            else:
                notes.append(f"{r['compiled_sets']} sets of {r['set_rules_max']} rules, remote "
                             f"group of {r['remote_group_members']}")
            b = r.get("builds_per_change") or r.get("builds_delta")
            if b:
                notes.append(f"built {b['built']}, reindexed {b['reindexed']}, "
                             f"reused {b['reused']}")
        if "error" in r:
            notes.append("FAILED: " + r["error"])
        out.append(f"{r['scenario']:<33} {r.get('metric', ''):<34} {r.get('samples', 0):>5} "
                   f"{fmt(r.get('p50')):>9} {fmt(r.get('p99')):>9} {fmt(r.get('min')):>9} "
                   f"{fmt(r.get('max')):>9}  {'; '.join(notes)}")
    out.append(f"OVS: {NO_ANCHOR}.")
    return "\n".join(out)


def machine():
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return {"host": platform.node(), "kernel": platform.release(), "cpu": cpu,
            "cpus": os.cpu_count()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--ports", type=int, default=1000, help="ports to bind (default 1000)")
    ap.add_argument("--cycles", type=int, default=1000, help="vif-plugged cycles (default 1000)")
    ap.add_argument("--restarts", type=int, default=3, help="straitd restarts (default 3)")
    ap.add_argument("--conns", type=int, default=8, help="connections of the parallel bind")
    ap.add_argument("--rule-changes", type=int, default=100,
                    help="rule_change: create/delete pairs per rule kind (default 100)")
    ap.add_argument("--sg-groups", type=int, default=100,
                    help="sg_scale: groups of --sg-rules rules (default 100)")
    ap.add_argument("--sg-rules", type=int, default=50,
                    help="sg_scale: rules per group (default 50)")
    ap.add_argument("--sg-changes", type=int, default=5,
                    help="sg_scale: rule create/delete pairs and member changes (default 5)")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS),
                    help=f"comma-separated, of {','.join(SCENARIOS)} (default: all)")
    ap.add_argument("--restart-signal", choices=["TERM", "KILL"], default="TERM")
    ap.add_argument("--worker", type=int, default=1, help="straitd's worker lcore (default 1)")
    ap.add_argument("--out", help="JSON and logs directory (default BUILD/bench-results)")
    ap.add_argument("--keep", action="store_true", help="keep the temp directory")
    ap.add_argument("--control-sg-modes", default=",".join(CONTROL_SG_MODES),
                    help="control_sg: which of sequential,parallel,bulk (default: all)")
    ap.add_argument("--rule-first-packet", action="store_true",
                    help="rule_change: also time --rule-changes creates to the first frame "
                         "through them (two more ports, strait-gen --gap-watch)")
    ap.add_argument("--lock-held", action="store_true",
                    help="the caller (bench/run.sh) holds /tmp/strait-bench.lock: do not take it")
    a = ap.parse_args()
    if not 1 <= a.ports <= 1000:
        ap.error("--ports: 1..1000 (rte_vhost holds at most 1024 sockets; the bench adds 3)")
    chosen = [x for x in a.scenarios.split(",") if x]
    unknown = [x for x in chosen if x not in SCENARIOS]
    if unknown or not chosen:
        ap.error(f"--scenarios: unknown {','.join(unknown) or '(none given)'} "
                 f"(known: {','.join(SCENARIOS)})")
    sg_modes = [x for x in a.control_sg_modes.split(",") if x]
    if not sg_modes or any(x not in CONTROL_SG_MODES for x in sg_modes):
        ap.error(f"--control-sg-modes: of {','.join(CONTROL_SG_MODES)}")
    if a.rule_changes < 1:
        ap.error("--rule-changes: at least 1")
    if a.sg_groups < 1 or a.sg_rules < 1 or a.sg_changes < 1:
        ap.error("--sg-groups, --sg-rules, --sg-changes: at least 1")
    build = Path(a.build).resolve()
    for t, p in (("straitd", build / "control" / "straitd"),
                 ("strait-gen", build / "bench" / "strait-gen")):
        if not p.exists():
            log(f"building {t} in {build}")
            subprocess.run(["cmake", "--build", str(build), "--target", t], check=True,
                           stdout=sys.stderr)
    out = Path(a.out or build / "bench-results")
    out.mkdir(parents=True, exist_ok=True)
    if not a.lock_held:
        lock = open("/tmp/strait-bench.lock", "w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            sys.exit("lifecycle_bench: another benchmark holds /tmp/strait-bench.lock")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    work = Path(tempfile.mkdtemp(prefix="slc.", dir="/tmp"))  # short: sun_path is 108 bytes
    vdir = work / "v"
    vdir.mkdir()
    sig = signal.Signals[f"SIG{a.restart_signal}"]
    results, failures = [], []
    idle_start = cpu_idle_pct()
    log(f"lifecycle bench: {a.ports} ports, {a.cycles} cycles, {a.restarts} restarts; "
        f"CPUs idle before: {idle_start} %")
    t_start = time.monotonic()
    sw = Straitd(build, work, a.worker).start()
    try:
        sw.wait_api().close()
        for name, fn in (("control", lambda: scenario_control(sw, a.ports, a.conns, vdir, results)),
                         ("vif_plugged", lambda: scenario_vif_plugged(sw, build, work, vdir,
                                                                      a.cycles, results)),
                         ("restart", lambda: scenario_restart(sw, build, work, vdir, a.ports,
                                                              a.restarts, sig, results)),
                         ("control_sg", lambda: scenario_control_sg(sw, a.ports, a.conns, vdir,
                                                                    results, sg_modes)),
                         ("rule_change", lambda: scenario_rule_change(
                             sw, a.ports, a.rule_changes, vdir, results,
                             (build, work) if a.rule_first_packet else None)),
                         ("sg_scale", lambda: scenario_sg_scale(sw, a.ports, a.sg_groups,
                                                                a.sg_rules, a.sg_changes, vdir,
                                                                results))):
            if name not in chosen:
                continue
            try:
                fn()
            except Exception as e:  # noqa: BLE001 (a failed scenario is reported, the rest run)
                log(f"{name}: FAILED: {e}")
                failures.append({"scenario": name, "error": str(e)})
                if sw.proc.poll() is not None:
                    break
    finally:
        sw.stop()
        logs = out / f"{stamp}-lifecycle-logs"
        logs.mkdir(exist_ok=True)
        for f in work.glob("*.log"):
            shutil.copy(f, logs)
        if a.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    idle_end = cpu_idle_pct()
    for r in results:
        r["switch"] = "strait"
    doc = {"results": results, "failures": failures,
           "anchor": {"ovs": None, "note": NO_ANCHOR},
           "machine": machine(), "cpu_idle_pct": {"start": idle_start, "end": idle_end},
           "config": {"ports": a.ports, "cycles": a.cycles, "restarts": a.restarts,
                      "scenarios": chosen, "rule_changes": a.rule_changes,
                      "security_groups": {g: len(r) for g, r in SG_GROUPS.items()},
                      "sg_scale": {"groups": a.sg_groups, "rules_per_group": a.sg_rules,
                                   "changes": a.sg_changes},
                      "conns": a.conns, "control_sg_modes": sg_modes, "restart_signal": a.restart_signal,
                      "worker_lcore": a.worker, "memory": "--no-huge",
                      "wall_s": round(time.monotonic() - t_start, 1)},
           "logs": str(logs)}
    path = out / f"strait-lifecycle-{stamp}.json"
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"strait lifecycle bench: {machine()['cpu']}, {os.cpu_count()} CPUs; CPUs idle "
          f"{idle_start} % before, {idle_end} % after")
    print(table(results))
    for f in failures:
        print(f"FAILED {f['scenario']}: {f['error']}")
    print(path)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
