"""Traffic of bench/soak.py: the VM stand-ins and what they must and must not see.

Each scenario's traffic is one strait-gen --gap-watch (bench/traffic_gen.cc):
two virtio-user servers, port 0 sends one UDP frame (10.0.0.1:1024 ->
10.1.0.1:5001) every --interval-us, port 1 counts what arrives and prints
its running totals (GAPWATCH_STATS, every STATS_MS) and each first arrival
after a pause (RX_FIRST / RX_RESUME). Its ports are VMs bound to straitd in
client mode, or a physnet's NIC (straitd's vhost PMD as the client), so a
straitd restart, a port unbind or the generator's own restart (the guest
powered off and on) only pauses them: the virtio-user servers take the
switch back when it reconnects.

A stream expects one of:
  flow    frames arrive, except during a disruption the soak announces
          (disrupt() .. expect_flow()); no arrival for STALL_S after that
          is a stall.
  block   no frame may ever arrive: every arrival is a violation.
  toggle  flow while the rule that allows it is acknowledged (rule_back()),
          block from SLACK_S after the reply that removed it (rule_gone()).
"""
import time
from pathlib import Path

from lifecycle_bench import Gen, fields, log

STATS_MS = 200
WATCH_GAP_MS = 500   # RX_RESUME after this long without an arrival
STALL_S = 30.0       # a flowing stream silent this long after its disruption ended
# Frames the worker forwarded before the reply that removed their rule may
# still sit in the receiver's ring until strait-gen reads it (every
# --interval-us): arrivals up to this long after the reply are not violations.
SLACK_S = 0.05
COUNTERS = ("tx", "txfail", "rx", "nomem")


class Stream:
    """One scenario's generator, supervised across its own restarts."""

    def __init__(self, name, expect, tx_sock, rx_sock, src_mac, dst_mac, ctx):
        self.name, self.expect = name, expect
        self.tx_sock, self.rx_sock = Path(tx_sock), Path(rx_sock)
        self.src_mac, self.dst_mac = src_mac, dst_mac
        self.ctx = ctx   # {"build", "work", "interval_us"}
        self.gen, self.incarnation, self.parsed = None, 0, 0
        self.done = dict.fromkeys(COUNTERS, 0)   # totals of earlier incarnations
        self.cur = dict.fromkeys(COUNTERS, 0)
        self.last_rx_ts = 0.0
        self.stalls, self.windows = [], []
        self.resume_ms = {}        # cause -> ms from its start to the first frame after it
        self.flow_since = None     # frames must arrive after this (None: not now)
        self.disruption = None     # (cause, start) of the one frames have not resumed from
        self.stalled = False
        # silent window: arrivals after `since` are violations; rx_base is the
        # received total when it began (block: from the first frame)
        self.silent = {"since": 0.0, "rx_base": 0, "frames": 0} if expect == "block" else None

    # -- the generator --------------------------------------------------------

    def start(self):
        self.incarnation += 1
        self.parsed = 0
        # As QEMU does before it listens: a socket file left by a generator
        # that died (virtio-user's server mode cannot bind over it, and the
        # scenario would never come back).
        for sock in (self.tx_sock, self.rx_sock):
            sock.unlink(missing_ok=True)
        self.cur = dict.fromkeys(COUNTERS, 0)
        eal = ["-m", "128",
               "--vdev", f"virtio_user0,path={self.tx_sock},server=1,queue_size=1024",
               "--vdev", f"virtio_user1,path={self.rx_sock},server=1,queue_size=1024"]
        args = ["--gap-watch", str(WATCH_GAP_MS), "--interval-us", str(self.ctx["interval_us"]),
                "--stats-ms", str(STATS_MS), "--src-mac", self.src_mac, "--dst-mac", self.dst_mac]
        self.gen = Gen(self.ctx["build"], self.ctx["work"], f"{self.name}{self.incarnation}",
                       eal, args)
        return self

    def stop(self):
        """Stops the generator (the guest powers off); keeps its totals."""
        if self.gen is None:
            return None
        rc = self.gen.stop()
        self.poll(time.time())
        for k in COUNTERS:
            self.done[k] += self.cur[k]
        self.cur = dict.fromkeys(COUNTERS, 0)
        self.gen = None
        return rc

    def exited(self):
        return self.gen is not None and self.gen.proc.poll() is not None

    def total(self, key):
        return self.done[key] + self.cur[key]

    # -- what the soak announces ---------------------------------------------------

    def disrupt(self, t, cause):
        """Frames may stop from t (cause: a restart, a rebind, the guest's
        power cycle); one not yet resumed from keeps its own cause and start."""
        if self.disruption is None:
            self.disruption = (cause, t)
        self.flow_since = None

    def expect_flow(self, t, cause=None):
        """The disruption is over at t: frames must arrive again (toggle:
        only while its rule is there; block: never). cause: of a disruption
        that begins here (the rule's creation)."""
        if self.silent is not None:
            self.disruption = None
            return
        self.flow_since = t
        if self.disruption is None and cause:
            self.disruption = (cause, t)

    def rule_gone(self, t_reply):
        """toggle: the reply removing the allowing rule came at t_reply."""
        self.flow_since, self.disruption = None, None
        self.silent = {"since": t_reply + SLACK_S, "rx_base": None, "frames": 0,
                       "reply": t_reply}

    def rule_back(self, t_call):
        """toggle: the allowing rule is being created (call sent at t_call):
        the silent window closes; frames must come back."""
        self.poll(time.time())
        if self.silent is not None:
            self.silent["until"] = t_call
            self.windows.append(self.silent)
            self.silent = None
        self.expect_flow(t_call, "rule_create")

    # -- what the generator saw ----------------------------------------------------

    def poll(self, now):
        """Reads the generator's new lines; checks stalls and violations."""
        if self.gen is not None:
            with self.gen.lock:
                new = self.gen.lines[self.parsed:]
            self.parsed += len(new)
            for line in new:
                self._line(line)
        self._check_stall(now)

    def _line(self, line):
        if line.startswith("GAPWATCH_STATS "):
            f = fields(line)
            for k in COUNTERS:
                self.cur[k] = int(f[k])
            self.last_rx_ts = max(self.last_rx_ts, float(f["last_rx_ts"]))
            self._check_silent(float(f["ts"]))
            self._check_resumed(self.last_rx_ts)
        elif line.startswith(("RX_FIRST ", "RX_RESUME ")):
            # printed at the arrival itself: the totals line may come up to
            # STATS_MS later, after a toggle already closed the window
            ts = float(fields(line)["ts"])
            self.last_rx_ts = max(self.last_rx_ts, ts)
            self._check_silent(ts)
            self._check_resumed(ts)

    def _check_resumed(self, arrival_ts):
        """The first arrival after a disruption ended: how long it lasted."""
        if self.flow_since is None or self.disruption is None or arrival_ts < self.flow_since:
            return
        cause, start = self.disruption
        self.resume_ms.setdefault(cause, []).append((arrival_ts - start) * 1e3)
        self.disruption = None

    def _check_silent(self, ts):
        """Counts arrivals in a silent window: at least the frames received
        after its first totals line, and at least one."""
        s = self.silent
        if s is None or ts <= s["since"]:
            return
        rx = self.total("rx")
        if s["rx_base"] is None:
            s["rx_base"] = rx
        if self.last_rx_ts > s["since"]:
            if not s["frames"]:
                when = (f"{self.last_rx_ts - s['reply']:.3f} s after the reply that removed its "
                        "rule" if "reply" in s else "where no rule ever allows one")
                log(f"VIOLATION {self.name}: a frame arrived {when}")
            s["frames"] = max(1, rx - s["rx_base"])

    def _check_stall(self, now):
        if self.flow_since is None:
            self.stalled = False
            return
        if self.last_rx_ts >= self.flow_since:
            self.stalled = False
            return
        if not self.stalled and now - self.flow_since > STALL_S:
            self.stalled = True
            self.stalls.append({"since": self.flow_since, "detected": now,
                                "last_rx_ts": self.last_rx_ts})
            log(f"STALL {self.name}: nothing arrived {now - self.flow_since:.0f} s after "
                "its disruption ended")

    def violations(self):
        """Frames that arrived while no rule allowed them."""
        windows = self.windows + ([self.silent] if self.silent else [])
        return sum(w["frames"] for w in windows)

    def summary(self):
        return {"name": self.name, "expect": self.expect, "sent": self.total("tx"),
                "send_failed": self.total("txfail"), "received": self.total("rx"),
                "generator_starts": self.incarnation, "stalls": len(self.stalls),
                "stall_detail": self.stalls, "violation_frames": self.violations(),
                "silent_windows": len(self.windows) + (1 if self.silent else 0),
                "violation_windows": [w for w in self.windows if w["frames"]],
                "resume_ms": self.resume_ms}


class Hotplug:
    """A server-mode port whose guest plugs and unplugs for the whole soak
    (strait-gen --connect-cycles): the vhost new_device/destroy_device path
    and its connection's fds, once every few seconds."""

    def __init__(self, path, ctx, hold_ms=2000, gap_ms=1000):
        self.path, self.ctx = Path(path), ctx
        self.hold_ms, self.gap_ms = hold_ms, gap_ms
        self.gen, self.incarnation = None, 0
        self.done_ok = self.done_failed = 0

    def start(self):
        self.incarnation += 1
        self.gen = Gen(self.ctx["build"], self.ctx["work"], f"hp{self.incarnation}", ["-m", "64"],
                       ["--connect-cycles", "1000000", "--vdev-path", str(self.path),
                        "--hold-ms", str(self.hold_ms), "--gap-ms", str(self.gap_ms)])
        return self

    def counts(self):
        if self.gen is None:
            return 0, 0
        return len(self.gen.matching("CONNECT n=")), len(self.gen.matching("CONNECT_FAILED"))

    def supervise(self):
        """strait-gen gives up after 10 failed plugs in a row (the switch
        restarting): start it again."""
        if self.gen is not None and self.gen.proc.poll() is not None:
            self.stop()
            self.start()

    def stop(self):
        if self.gen is None:
            return
        self.gen.stop()
        ok, failed = self.counts()
        self.done_ok += ok
        self.done_failed += failed
        self.gen = None

    def summary(self):
        ok, failed = self.counts()
        return {"plugs": self.done_ok + ok, "plugs_failed": self.done_failed + failed,
                "generator_starts": self.incarnation, "hold_ms": self.hold_ms,
                "gap_ms": self.gap_ms}

