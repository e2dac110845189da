"""bench/soak.py's resource figures: samples of straitd, and whether they stay flat.

A sample (every --sample-every seconds) reads straitd's /proc/PID (RSS,
open file descriptors, threads) and its `show` (mbufs in use in its packet
pools, DPDK malloc heap allocated bytes and allocations, conntrack entries),
and scrapes its metrics endpoint once (the scrape's own connection must come
and go without a trace).

straitd restarts every few minutes, and each process starts from nothing:
a leak shows as growth within a process's life, which a slope over the
whole run would average away against the drop at each restart. So each
figure has two slopes, per hour, over the samples taken at least
--warmup seconds into a process's life:
  within   one slope fitted to every process's samples at once, each
           process around its own mean: what grows while a process runs.
           The verdict is on this one.
  across   the slope of each process's median against time, from the
           second process on: what a restart carries over. A restart gives
           back all a process held, so this is the state (which the churn
           keeps from drifting) and start-up noise (the same state, started
           ten times, came up with 73 to 77 MB of anonymous RSS): shown, no
           verdict.
The slope comes with its standard error: "flat" when it is below the
tolerance (TOLERANCE_PER_H) by at least twice that, GROWS when above it by
more than that, "unclear" in between (the noise hides the answer; it fails
nothing).
"""
import csv
import http.client
import math
import os
import time
from statistics import median

# Per hour, of the within slope: leaks of about one fd, mapping or kB every
# few hundred requests (an hour has about 4000), and what an hour's samples
# can tell from the churn's own movement. Each process holds more or less
# as its state moves (12 ports bound or not, groups, rules): the samples'
# spread around a process's mean is about 3 fds or mappings, 40 kB of heap,
# so an hour of 5-minute processes resolves a slope to about +-15 fds/h.
# RSS is its anonymous part: under --no-huge DPDK's memory (a memfd) and
# the guests' memory mapped by vhost are shared memory that grows as the
# packet pools and rings get touched once (rss_shmem_kb); a leak in DPDK's
# memory shows in the heap and mbuf figures instead.
TOLERANCE_PER_H = {
    "rss_anon_kb": 4096,                    # 4 MiB
    "fds_floor": 20,
    "maps_floor": 20,
    "mbufs_in_use_floor": 64,
    "heap_allocated_bytes_floor": 1 << 20,  # 1 MiB
}
EXTRA = ("fds", "maps", "mbufs_in_use", "heap_allocated_bytes", "rss_kb", "rss_shmem_kb",
         "vm_size_kb", "heap_allocations", "threads", "ct_entries", "mempools", "ports")
COLUMNS = ("t_s", "ts", "lifetime", "age_s", "pid", "rss_kb", "rss_anon_kb", "rss_shmem_kb",
           "vm_size_kb", "maps", "maps_floor", "fds", "fds_floor", "glances", "threads",
           "mbufs_in_use", "mbufs_in_use_floor", "mbufs", "mempools", "mempool_bytes",
           "heap_allocated_bytes", "heap_allocated_bytes_floor",
           "heap_allocations", "heap_total_bytes", "ct_entries", "ports", "generation",
           "metrics_ok", "frames_sent", "frames_received")


def fds_and_maps(pid):
    with open(f"/proc/{pid}/maps") as f:
        maps = sum(1 for _ in f)
    return len(os.listdir(f"/proc/{pid}/fd")), maps


def proc_figures(pid):
    status = {}
    for line in open(f"/proc/{pid}/status"):
        k, _, v = line.partition(":")
        status[k] = v.split()
    fds, maps = fds_and_maps(pid)
    return {"rss_kb": int(status["VmRSS"][0]), "rss_anon_kb": int(status["RssAnon"][0]),
            "rss_shmem_kb": int(status["RssShmem"][0]), "vm_size_kb": int(status["VmSize"][0]),
            "maps": maps, "threads": int(status["Threads"][0]), "fds": fds}


def switch_figures(show):
    mp, mem = show["mempool"], show["memory"]
    return {"mbufs_in_use": mp["in_use"], "mbufs": mp["buffers"],
            "mempools": len(mp.get("pools", [])), "mempool_bytes": mp["memory_bytes"],
            "heap_allocated_bytes": mem["heap_allocated_bytes"],
            "heap_allocations": mem["heap_allocations"],
            "heap_total_bytes": mem["heap_total_bytes"],
            "ct_entries": show["conntrack"]["entries"], "ports": len(show["ports"]),
            "generation": show["generation"]}


def scrape_metrics(port):
    """One GET /metrics; True when it answered 200 with straitd's families."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/metrics")
        r = c.getresponse()
        body = r.read()
        c.close()
        return r.status == 200 and b"strait_mempool_buffers_in_use" in body
    except OSError:
        return False


FLOORED = ("fds", "maps", "mbufs_in_use", "heap_allocated_bytes")


class Sampler:
    """Samples straitd. fds, mappings and the DPDK heap move with every vhost
    device that connects or goes (the hot-plugging guest is there two
    seconds out of three; rte_vhost keeps its queues in the heap), mbufs in
    use with the frames in flight: glance() reads them once per soak loop
    while every scenario's devices are there, and a sample keeps the least
    seen since the previous one (NAME_floor). A leak raises that floor; a
    device that is there or not, or a frame in flight, does not."""

    def __init__(self, t0, metrics_port):
        self.t0, self.metrics_port = t0, metrics_port
        self.rows = []
        self.lifetime, self.born = 0, None
        self.floor, self.glances = None, 0

    def new_process(self, t):
        self.lifetime += 1
        self.born = t
        self.floor, self.glances = None, 0

    def glance(self, pid, api):
        now = dict(zip(("fds", "maps"), fds_and_maps(pid)))
        show = switch_figures(api.call("show"))
        now.update({k: show[k] for k in ("mbufs_in_use", "heap_allocated_bytes")})
        self.floor = now if self.floor is None else {k: min(v, now[k])
                                                     for k, v in self.floor.items()}
        self.glances += 1

    def sample(self, pid, api, streams):
        now = time.time()
        row = {"t_s": round(now - self.t0, 1), "ts": round(now, 3), "lifetime": self.lifetime,
               "age_s": round(now - self.born, 1), "pid": pid}
        row.update(proc_figures(pid))
        row.update(switch_figures(api.call("show")))
        for k in FLOORED:
            row[f"{k}_floor"] = min(row[k], self.floor[k]) if self.floor else row[k]
        row["glances"] = self.glances
        self.floor, self.glances = None, 0
        row["metrics_ok"] = scrape_metrics(self.metrics_port)
        row["frames_sent"] = sum(s.total("tx") for s in streams)
        row["frames_received"] = sum(s.total("rx") for s in streams)
        self.rows.append(row)
        return row

    def write_csv(self, path):
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
            w.writeheader()
            w.writerows(self.rows)


def fit(groups):
    """Least-squares slope of y on x over groups of (x, y) points, each group
    around its own means, and the slope's standard error: (slope, se) per
    unit of x, or (None, None) with too few points."""
    groups = [g for g in groups if len(g) >= 2]
    dof = sum(len(g) for g in groups) - len(groups) - 1
    if dof < 1:
        return None, None
    centred = []
    for g in groups:
        mx, my = sum(x for x, _ in g) / len(g), sum(y for _, y in g) / len(g)
        centred += [(x - mx, y - my) for x, y in g]
    sxx = sum(dx * dx for dx, _ in centred)
    if sxx == 0:
        return None, None
    slope = sum(dx * dy for dx, dy in centred) / sxx
    residual = sum((dy - slope * dx) ** 2 for dx, dy in centred)
    return slope, math.sqrt(residual / dof / sxx)


def verdict(slope, se, tol):
    """GROWS: the slope (per hour) is above the tolerance by more than twice
    its standard error; flat: below it by at least that (falling is no
    leak); else unclear: the noise hides the answer (a longer run decides)."""
    if slope is None:
        return "not enough samples"
    if slope - 2 * se > tol:
        return "GROWS"
    return "flat" if slope + 2 * se <= tol else "unclear"


def figure(rows, key, warmup_s):
    vals = [r[key] for r in rows]
    settled = [r for r in rows if r["age_s"] >= warmup_s]
    by_life = {}
    for r in settled:
        by_life.setdefault(r["lifetime"], []).append((r["t_s"] / 3600, r[key]))
    within = fit(by_life.values())
    # each process's median at its samples' mean time, from the second process on
    later = [(sum(x for x, _ in pts) / len(pts), median(y for _, y in pts))
             for life, pts in sorted(by_life.items()) if life >= 2]
    across = fit([later])
    out = {"first": vals[0], "last": vals[-1], "min": min(vals), "max": max(vals),
           "samples": len(vals), "settled_samples": len(settled), "processes": len(by_life),
           "within_per_h": within[0], "within_se_per_h": within[1],
           "across_per_h": across[0], "across_se_per_h": across[1]}
    tol = TOLERANCE_PER_H.get(key)
    if tol is not None:
        out["tolerance_per_h"] = tol
        out["verdict"] = verdict(*within, tol)
    return out


def figures(rows, warmup_s):
    if not rows:
        return {}
    return {k: figure(rows, k, warmup_s) for k in (*TOLERANCE_PER_H, *EXTRA)}
