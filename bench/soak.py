#!/usr/bin/python3
"""Soak of straitd (issue 23): traffic through every scenario for a long time
while its state churns and it restarts; resources must stay flat, no frame
may pass without its rules, and every acknowledged change must survive.

Usage: /usr/bin/python3 bench/soak.py BUILD_DIR [--duration 3600] [--seed 1]
           [--restart-every 300] [--lifecycle-every 60] [--toggle-every 20]
           [--stream-op-every 30] [--op-interval 1] [--sample-every 10]
           [--verify-every 60] [--warmup 60] [--interval-us 2000] [--worker 1]
           [--out DIR] [--keep]

One straitd (worker on lcore 1, idle_sleep_us = 100, --no-huge, its
metrics endpoint on) and, as its VMs and NICs, strait-gen processes
(bench/traffic_gen.cc, --gap-watch: one UDP frame every --interval-us,
10.0.0.1:1024 -> 10.1.0.1:5001). Scenarios (bench/soak_traffic.py):
  l2         two VMs on a local network
  vlan       a VM on vlan network 100, frames out tagged on physnet `phys`
             (the DPDK vhost PMD to strait-gen's sink)
  vxlan      a VM on vxlan network 5001, its peer's MAC behind remote VTEP
             10.99.0.2: frames out in VXLAN on physnet `underlay`
  sg_toggle  two VMs on vlan network 101 with port security: the receiver's
             group allows the stream by one rule, deleted and created again
             every --toggle-every s; no frame may arrive while it is gone
  sg_block   the same on vlan network 102, the receiver's group never allows
             it: no frame may ever arrive
plus a server-mode port whose guest plugs and unplugs every few seconds.

Meanwhile, with a fixed --seed: churn every --op-interval s (binds, bulk
binds, unbinds, port updates of 12 more ports, rule creates and deletes in
the receivers' groups, temporary groups, tunnel FDB entries, requests that
must be refused: bench/soak_state.py); every --stream-op-every s a traffic
port is unbound and bound again or its groups change; every
--lifecycle-every s one scenario's strait-gen is stopped and started again
(the guest powered off and on: its vhost-user peer goes away and comes
back); every --restart-every s straitd gets SIGTERM (it must exit 0) and
starts again on the same state directory. libvirt's own domain events are
not driven here (they need libvirtd and QEMU guests:
tests/e2e/test_libvirt_qemu.py).

Checked: violations (frames forwarded without their rules, must be 0);
stalls (a flowing scenario silent 30 s after its disruption ended); the
state straitd lists against what it acknowledged (bench/soak_state.py),
every --verify-every s, after each restart and at the end; straitd's exit
status at each stop. Sampled every --sample-every s: RSS, fds, threads,
mbufs in use, DPDK heap (bench/soak_figures.py, with how the slopes and the
"flat" verdict are computed).

Writes BUILD_DIR/bench-results/strait-soak-<stamp>.json (and .csv of the
samples, logs in <stamp>-soak-logs/); prints a summary whose last line is
the JSON's path. Exit status 0 when everything held, 1 otherwise.
"""
import argparse
import fcntl
import json
import random
from collections import Counter
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lifecycle_bench import Events, Straitd, cpu_idle_pct, log, machine  # noqa: E402
from soak_figures import Sampler, figures  # noqa: E402
from soak_report import summary_text  # noqa: E402
from soak_state import (BASE_GROUPS, SG_ALLOW, SG_BLOCK, SG_EGRESS, SG_SSH,  # noqa: E402
                        TOGGLE_RULE, Churn, Model)
from soak_traffic import Hotplug, Stream  # noqa: E402

VTEP_LOCAL, VTEP_REMOTE, NEXT_HOP_MAC = "10.99.0.1", "10.99.0.2", "02:00:00:00:00:fe"
NETWORKS = {
    "soak-l2": {"type": "local"},
    "soak-vlan": {"type": "vlan", "physnet": "phys", "segmentation_id": 100},
    "soak-vxlan": {"type": "vxlan", "segmentation_id": 5001},
    "soak-sg": {"type": "vlan", "physnet": "phys", "segmentation_id": 101},
    "soak-sg-block": {"type": "vlan", "physnet": "phys", "segmentation_id": 102},
}
# name, expect, network, receiver: its groups (a VM port) or a physnet
# (strait-gen's port 1 is that physnet's NIC). Senders with groups are in
# SG_EGRESS with fixed IP 10.0.0.1, receivers 10.1.0.1: the frames' addresses.
SCENARIOS = (
    ("l2", "flow", "soak-l2", []),
    ("vlan", "flow", "soak-vlan", "phys"),
    ("vxlan", "flow", "soak-vxlan", "underlay"),
    ("sg_toggle", "toggle", "soak-sg", [SG_ALLOW]),
    ("sg_block", "block", "soak-sg-block", [SG_BLOCK]),
)
STOP_TIMEOUT_S = 60
TOGGLE_QUIET_S = 8   # no rule toggle this soon after a restart, power cycle or rebind


def uuid(n):
    return f"50a5a000-0000-4000-8000-{n:012x}"


def mac(k, side):
    return f"02:50:00:00:{k + 1:02x}:{side:02x}"


def free_tcp_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def config_text(work, vdir, worker, metrics_port):
    return f"""state_dir = "{work / 'state'}"
api_socket = "{work / 'api.sock'}"

[datapath]
workers = [{worker}]
idle_sleep_us = 100

[physnets.phys]
device = "net_vhost_sphys,iface={vdir / 'vlan-rx.sock'},client=1,queues=1"

[physnets.underlay]
device = "net_vhost_sul,iface={vdir / 'vxlan-rx.sock'},client=1,queues=1"

[vtep]
local_ip = "{VTEP_LOCAL}"
physnet = "underlay"
next_hop_mac = "{NEXT_HOP_MAC}"

[vhost]
socket_dir = "{vdir / 'srv'}"

[libvirt]
enabled = false

[metrics]
enabled = true
listen = "127.0.0.1:{metrics_port}"
"""


class Soak:
    def __init__(self, a, build, work):
        self.a, self.build, self.work = a, build, work
        self.vdir = work / "v"
        self.vdir.mkdir()
        self.metrics_port = free_tcp_port()
        self.sw = Straitd(build, work, a.worker,
                          config_text(work, self.vdir, a.worker, self.metrics_port))
        self.rng = random.Random(a.seed)
        self.model = Model()
        self.churn = Churn(self.model, self.rng, self.vdir, "soak-vxlan")
        ctx = {"build": build, "work": work, "interval_us": a.interval_us}
        self.streams, self.stream_ports = [], {}   # port id -> (stream, bind params)
        for k, (name, expect, net, rx) in enumerate(SCENARIOS):
            s = Stream(name, expect, self.vdir / f"{name}-tx.sock", self.vdir / f"{name}-rx.sock",
                       mac(k, 1), mac(k, 2), ctx)
            self.streams.append(s)
        self.hotplug = Hotplug(self.vdir / "srv" / "hp.sock", ctx)
        self.t0 = time.time()
        self.sampler = Sampler(self.t0, self.metrics_port)
        self.api = self.subscriber = None
        self.events_seen = Counter()   # events.subscribe, all straitd processes
        self.toggle_rule = None
        self.events = {"restarts": [], "crashes": [], "lifecycle": 0, "toggles": 0,
                       "toggle_create_reply_ms": [], "toggle_delete_reply_ms": [],
                       "stream_rebinds": 0, "stream_updates": 0, "verifications": [],
                       "generator_exits": []}

    # -- straitd ------------------------------------------------------------------

    def start_switch(self):
        t = time.time()
        self.sw.start()
        self.api = self.sw.wait_api()
        self.sampler.new_process(t)
        ready_ms = (time.time() - t) * 1e3
        self.subscriber = Events(self.sw.sock)
        return ready_ms

    def close_api(self):
        """The request and event connections, before straitd stops."""
        if self.subscriber:
            self.subscriber.close()
            with self.subscriber.lock:
                self.events_seen.update(e["event"] for e in self.subscriber.seen)
            self.subscriber = None
        if self.api:
            self.api.close()

    def restart(self, why="scheduled"):
        t = time.time()
        for s in self.streams:
            s.disrupt(t, "restart")
        self.close_api()
        rc = self.sw.stop(signal.SIGTERM, STOP_TIMEOUT_S)
        stop_ms = (time.time() - t) * 1e3
        ready_ms = self.start_switch()
        entry = {"t_s": round(t - self.t0, 1), "why": why, "stop_rc": rc,
                 "stop_ms": round(stop_ms), "start_to_api_ms": round(ready_ms)}
        self.events["restarts"].append(entry)
        if rc != 0:
            log(f"straitd stop -> {rc} (expected 0): see {self.sw.work}/straitd.*.log")
        self.verify("after restart")
        t = time.time()
        for s in self.streams:
            s.expect_flow(t)
        log(f"restart {len(self.events['restarts'])}: stop {stop_ms:.0f} ms (rc {rc}), "
            f"start to API {ready_ms:.0f} ms")

    def check_alive(self):
        """A straitd that died by itself is a crash: recorded, then started again."""
        if self.sw.proc.poll() is None:
            return
        rc = self.sw.proc.returncode
        tail = self.sw.log.read_text(errors="replace").splitlines()[-20:]
        self.events["crashes"].append({"t_s": round(time.time() - self.t0, 1), "rc": rc,
                                       "log_tail": tail})
        log(f"CRASH: straitd exited by itself ({rc}); starting it again")
        self.restart("after a crash")

    # -- the topology -------------------------------------------------------------------

    def port_params(self, k, side, net, groups):
        sock = self.streams[k].tx_sock if side == 1 else self.streams[k].rx_sock
        p = {"id": uuid(k * 2 + side), "network": net, "mac": mac(k, side),
             "attach": {"type": "vhost", "mode": "client", "path": str(sock)}}
        if groups:
            p["fixed_ips"] = ["10.0.0.1" if side == 1 else "10.1.0.1"]
            p["security_groups"] = groups
        return p

    def setup(self):
        api = self.api
        for nid, spec in NETWORKS.items():
            self.model.create_network(api, nid, spec)
        for gid, rules in BASE_GROUPS.items():
            self.model.create_group(api, gid, rules)
        self.toggle_rule = self.model.add_rule(api, SG_ALLOW, TOGGLE_RULE)
        self.model.fdb_add(api, "soak-vxlan", mac(2, 2), VTEP_REMOTE)
        for s in self.streams:
            s.start()
        self.hotplug.start()
        for k, (name, expect, net, rx) in enumerate(SCENARIOS):
            sender = self.port_params(k, 1, net, [SG_EGRESS] if isinstance(rx, list) and rx else [])
            ports = [sender] + ([self.port_params(k, 2, net, rx)] if isinstance(rx, list) else [])
            for p in ports:
                self.model.bind(api, [p])
                self.stream_ports[p["id"]] = (self.streams[k], p)
        self.model.bind(api, [{"id": uuid(0xfff), "network": "soak-l2",
                               "mac": "02:50:00:00:ff:01",
                               "attach": {"type": "vhost", "mode": "server",
                                          "path": str(self.hotplug.path)}}])
        if self.model.failures:
            raise RuntimeError(f"set-up refused: {self.model.failures[0]}")
        t = time.time()
        for s in self.streams:
            s.expect_flow(t)

    # -- what happens on a schedule -----------------------------------------------------

    def toggle(self):
        """Deletes or creates the rule sg_toggle's frames need; the replies'
        times go with the figures (first frame: the stream's rule_create)."""
        s = next(x for x in self.streams if x.expect == "toggle")
        t = time.time()
        if self.toggle_rule:
            if self.model.delete_rule(self.api, self.toggle_rule):
                s.rule_gone(time.time())
                self.toggle_rule = None
            self.events["toggle_delete_reply_ms"].append((time.time() - t) * 1e3)
        else:
            s.rule_back(t)
            self.toggle_rule = self.model.add_rule(self.api, SG_ALLOW, TOGGLE_RULE)
            self.events["toggle_create_reply_ms"].append((time.time() - t) * 1e3)
        self.events["toggles"] += 1

    def lifecycle(self):
        """The next scenario's guests power off (strait-gen stops: its
        vhost-user sockets go) and on again a second later."""
        s = self.streams[self.events["lifecycle"] % len(self.streams)]
        s.disrupt(time.time(), "guest_power_cycle")
        s.stop()
        time.sleep(1.0)
        s.start()
        s.expect_flow(time.time())
        self.events["lifecycle"] += 1

    def restart_generator(self, s):
        """A scenario's strait-gen that exited by itself: recorded with its
        last lines, then started again (frames must come back as after a
        power cycle)."""
        tail = s.gen.lines[-5:]
        self.events["generator_exits"].append({"t_s": round(time.time() - self.t0, 1),
                                               "scenario": s.name, "rc": s.gen.proc.returncode,
                                               "tail": tail})
        log(f"strait-gen of {s.name} exited ({s.gen.proc.returncode}): {tail}; starting it again")
        s.disrupt(time.time(), "guest_power_cycle")
        s.stop()
        s.start()
        s.expect_flow(time.time())

    def stream_op(self):
        """A traffic port unbound and bound again with the same binding, or a
        receiver's groups changed (never to one that lets sg_block's frames in)."""
        pid = self.rng.choice(sorted(self.stream_ports))
        s, params = self.stream_ports[pid]
        if self.rng.random() < 0.5 or not params.get("security_groups") or \
                params["security_groups"][0] == SG_EGRESS:
            s.disrupt(time.time(), "port_rebind")
            if self.model.unbind(self.api, pid):
                time.sleep(0.2)
                self.model.bind(self.api, [params])
            s.expect_flow(time.time())
            self.events["stream_rebinds"] += 1
            return
        base = params["security_groups"][0]
        groups = [base] if len(self.model.ports[pid]["security_groups"]) > 1 else [base, SG_SSH]
        self.model.update(self.api, pid, {"security_groups": groups})
        self.events["stream_updates"] += 1

    def verify(self, when):
        diffs = self.model.verify(self.api)
        self.events["verifications"].append({"t_s": round(time.time() - self.t0, 1),
                                             "when": when, "differences": diffs})
        for d in diffs[:10]:
            log(f"STATE DIFFERENCE ({when}): {d}")

    def sample(self):
        row = self.sampler.sample(self.sw.proc.pid, self.api, self.streams)
        log(f"t={row['t_s']:.0f}s rss_anon={row['rss_anon_kb']} kB fds={row['fds_floor']} "
            f"maps={row['maps_floor']} mbufs_in_use={row['mbufs_in_use_floor']} "
            f"heap={row['heap_allocated_bytes_floor']} "
            f"frames sent/received {row['frames_sent']}/{row['frames_received']} "
            f"requests {sum(self.model.ops.values())}")

    # -- the run ------------------------------------------------------------------------------

    def run(self):
        a = self.a
        self.start_switch()
        self.setup()
        every = {"restart": a.restart_every, "lifecycle": a.lifecycle_every,
                 "toggle": a.toggle_every, "stream_op": a.stream_op_every,
                 "verify": a.verify_every, "sample": a.sample_every}
        now = time.time()
        due = {k: now + v if v else float("inf") for k, v in every.items()}   # 0: never
        due["sample"] = now
        end = self.t0 + a.duration
        while time.time() < end:
            self.check_alive()
            for s in self.streams:
                s.poll(time.time())
                if s.exited():
                    self.restart_generator(s)
            self.hotplug.supervise()
            try:
                if all(s.disruption is None and s.gen is not None for s in self.streams):
                    self.sampler.glance(self.sw.proc.pid, self.api)   # all devices there
                for what, do in (("restart", self.restart), ("lifecycle", self.lifecycle),
                                 ("toggle", self.toggle), ("stream_op", self.stream_op),
                                 ("verify", lambda: self.verify("periodic")),
                                 ("sample", self.sample)):
                    if time.time() >= due[what]:
                        do()
                        due[what] = time.time() + every[what]
                        if what in ("restart", "lifecycle", "stream_op"):
                            # the toggled rule's first frame is timed on a stream
                            # that is not coming back from something else
                            due["toggle"] = max(due["toggle"], time.time() + TOGGLE_QUIET_S)
                self.churn.step(self.api)
            except (ConnectionError, OSError, ValueError) as e:
                if self.sw.proc.poll() is None:
                    raise   # straitd is there but does not answer: that ends the soak
                # straitd died under the request: its outcome is unknown,
                # check_alive() records the crash and the next verification
                # shows whether it was kept
                log(f"a request lost its answer ({e}): straitd exited")
            time.sleep(a.op_interval)
        self.verify("at the end")
        self.sample()

    def finish(self):
        """Stops everything; returns straitd's last exit status."""
        for s in self.streams:
            s.stop()
        self.hotplug.stop()
        self.close_api()
        return self.sw.stop(signal.SIGTERM, STOP_TIMEOUT_S) if self.sw.proc else None

    def document(self, final_rc, wall_s):
        a = self.a
        ops = dict(self.model.ops)
        ops.update({"rule_toggles": self.events["toggles"],
                    "stream_port_rebinds": self.events["stream_rebinds"],
                    "stream_port_updates": self.events["stream_updates"],
                    "restarts": len(self.events["restarts"]),
                    "lifecycle_cycles": self.events["lifecycle"]})
        return {"duration_s": round(wall_s, 1), "seed": a.seed, "ops": ops,
                "refused_as_expected": dict(self.model.refused),
                "failed_requests": self.model.failures,
                "streams": [s.summary() for s in self.streams],
                "hotplug": self.hotplug.summary(),
                "restarts": self.events["restarts"], "crashes": self.events["crashes"],
                "generator_exits": self.events["generator_exits"],
                "toggle_reply_ms": {"create": self.events["toggle_create_reply_ms"],
                                    "delete": self.events["toggle_delete_reply_ms"]},
                "final_stop_rc": final_rc, "events_seen": dict(self.events_seen),
                "verifications": self.events["verifications"],
                "figures": figures(self.sampler.rows, a.warmup),
                "samples": self.sampler.rows,
                "config": {k: v for k, v in vars(a).items() if k != "build"},
                "machine": machine()}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--duration", type=float, default=3600, help="seconds (default 3600)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--restart-every", type=float, default=300, help="s; 0: no restart")
    ap.add_argument("--lifecycle-every", type=float, default=60, help="s; 0: none")
    ap.add_argument("--toggle-every", type=float, default=20, help="s; 0: none")
    ap.add_argument("--stream-op-every", type=float, default=30, help="s; 0: none")
    ap.add_argument("--op-interval", type=float, default=1.0, help="s between churn requests")
    ap.add_argument("--sample-every", type=float, default=10)
    ap.add_argument("--verify-every", type=float, default=60)
    ap.add_argument("--warmup", type=float, default=60,
                    help="s of each straitd process left out of the slopes (default 60)")
    ap.add_argument("--interval-us", type=int, default=2000,
                    help="each scenario's frame interval (default 2000: 500 frames/s)")
    ap.add_argument("--worker", type=int, default=1, help="straitd's worker lcore")
    ap.add_argument("--out", help="JSON, CSV and logs directory (default BUILD/bench-results)")
    ap.add_argument("--keep", action="store_true", help="keep the temp directory")
    a = ap.parse_args()
    if a.duration < 30 or a.sample_every <= 0 or a.verify_every <= 0 or a.op_interval < 0:
        ap.error("--duration >= 30, --sample-every and --verify-every > 0, --op-interval >= 0")
    return a


def ensure_built(build):
    for target, path in (("straitd", build / "control" / "straitd"),
                         ("strait-gen", build / "bench" / "strait-gen")):
        if not path.exists():
            log(f"building {target} in {build}")
            subprocess.run(["cmake", "--build", str(build), "--target", target], check=True,
                           stdout=sys.stderr)


def main():
    a = parse_args()
    build = Path(a.build).resolve()
    ensure_built(build)
    out = Path(a.out or build / "bench-results")
    out.mkdir(parents=True, exist_ok=True)
    lock = open("/tmp/strait-bench.lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        sys.exit("soak: another benchmark holds /tmp/strait-bench.lock")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    work = Path(tempfile.mkdtemp(prefix="soak.", dir="/tmp"))  # short: sun_path is 108 bytes
    idle = cpu_idle_pct()
    log(f"soak: {a.duration:.0f} s, seed {a.seed}, CPUs idle before: {idle} %")
    soak = Soak(a, build, work)
    error = None
    try:
        soak.run()
    except (Exception, KeyboardInterrupt) as e:  # noqa: BLE001 (reported with what was measured)
        error = f"{type(e).__name__}: {e}"
        log(f"soak aborted: {error}")
    finally:
        final_rc = soak.finish()
        logs = out / f"{stamp}-soak-logs"
        logs.mkdir(exist_ok=True)
        for f in work.glob("*.log"):
            shutil.copy(f, logs)
        if a.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    doc = soak.document(final_rc, time.time() - soak.t0)
    doc.update({"aborted": error, "cpu_idle_pct_before": idle, "logs": str(logs)})
    path = out / f"strait-soak-{stamp}.json"
    csv_path = out / f"strait-soak-{stamp}.csv"
    soak.sampler.write_csv(csv_path)
    doc["csv"] = str(csv_path)
    text, ok = summary_text(doc)
    doc["verdict"] = "PASS" if ok else "FAIL"
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(text)
    print(path)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
