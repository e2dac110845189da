"""bench/soak.py's summary: what was done, what held, and the resource figures."""
from soak_figures import TOLERANCE_PER_H

UNITS = {"rss_anon_kb": "kB", "rss_kb": "kB", "rss_shmem_kb": "kB", "vm_size_kb": "kB",
         "heap_allocated_bytes": "B", "heap_allocated_bytes_floor": "B"}


def _num(v, nd=0):
    if v is None:
        return "-"
    return f"{v:.{nd}f}" if isinstance(v, float) else str(v)


def _mid(xs):
    return xs[len(xs) // 2] if xs else None


def _ops_lines(doc):
    o = doc["ops"]
    refused = doc["refused_as_expected"]
    hp = doc["hotplug"]
    restarts = doc["restarts"]
    stop = sorted(r["stop_ms"] for r in restarts)
    ready = sorted(r["start_to_api_ms"] for r in restarts)
    return [
        f"operations: binds {o.get('bind', 0)} ({o.get('bulk_bind', 0)} bulk requests among them), "
        f"unbinds {o.get('unbind', 0)}, port updates {o.get('port_update', 0)}, "
        f"rule creates {o.get('rule_create', 0)} and deletes {o.get('rule_delete', 0)} "
        f"({o.get('rule_toggles', 0)} of them the toggled rule's), groups created "
        f"{o.get('group_create', 0)} / deleted {o.get('group_delete', 0)}, tunnel FDB adds "
        f"{o.get('fdb_add', 0)} / deletes {o.get('fdb_delete', 0)}",
        f"  traffic ports rebound {o.get('stream_port_rebinds', 0)}, their groups changed "
        f"{o.get('stream_port_updates', 0)}; refused as they must be: {sum(refused.values())} "
        f"{dict(refused) if refused else ''}; requests that went wrong: "
        f"{len(doc['failed_requests'])}",
        f"  restarts {len(restarts)} (SIGTERM; stop p50 {_num(_mid(stop))} ms, start to API p50 "
        f"{_num(_mid(ready))} ms; exit status "
        f"other than 0: {sum(1 for r in restarts if r['stop_rc'] != 0)}), crashes "
        f"{len(doc['crashes'])}",
        f"  lifecycle: {o.get('lifecycle_cycles', 0)} guest power cycles (a scenario's strait-gen "
        f"stopped and started), {hp['plugs']} hot-plugs of a server-mode port "
        f"({hp['plugs_failed']} failed: a plug fails while straitd restarts)",
        f"  scenario generators that exited by themselves (started again): "
        f"{len(doc['generator_exits'])}",
        "  events (events.subscribe): "
        + (", ".join(f"{k} {v}" for k, v in sorted(doc["events_seen"].items())) or "none"),
    ]


def _stream_lines(doc):
    head = (f"  {'scenario':<10} {'expect':<7} {'sent':>10} {'received':>10} {'stalls':>6} "
            f"{'violations':>10}")
    out = ["traffic:", head]
    causes = {}
    for s in doc["streams"]:
        out.append(f"  {s['name']:<10} {s['expect']:<7} {s['sent']:>10} {s['received']:>10} "
                   f"{s['stalls']:>6} {s['violation_frames']:>10}")
        for cause, ms in s["resume_ms"].items():
            causes.setdefault(cause, []).extend(ms)
    for cause, ms in sorted(causes.items()):
        ms = sorted(ms)
        out.append(f"  first frame after a {cause.replace('_', ' ')}: p50 {_mid(ms):.0f} ms, "
                   f"max {ms[-1]:.0f} ms ({len(ms)} times)")
    for kind, ms in doc["toggle_reply_ms"].items():
        if ms:
            ms = sorted(ms)
            out.append(f"  toggled rule {kind}: reply p50 {_mid(ms):.1f} ms, max {ms[-1]:.1f} ms")
    return out


def _slope(v, se):
    return "-" if v is None else f"{v:.1f}+-{2 * se:.1f}"


def _figure_lines(doc):
    figs = doc["figures"]
    head = (f"  {'figure':<24} {'first':>10} {'last':>10} {'min':>10} {'max':>10} "
            f"{'within/h':>20} {'across/h':>20} {'tolerance/h':>11}  verdict")
    out = [f"resources: slopes per hour (+- twice their standard error) over the samples "
           f">= {doc['config']['warmup']:.0f} s into each straitd process; within: while a "
           "process runs (the verdict); across: from one restart to the next", head]
    for k, f in figs.items():
        unit = UNITS.get(k, "")
        name = f"{k} ({unit})" if unit else k
        out.append(f"  {name:<24} {_num(f['first']):>10} {_num(f['last']):>10} "
                   f"{_num(f['min']):>10} {_num(f['max']):>10} "
                   f"{_slope(f['within_per_h'], f['within_se_per_h']):>20} "
                   f"{_slope(f['across_per_h'], f['across_se_per_h']):>20} "
                   f"{_num(f.get('tolerance_per_h')):>11}  {f.get('verdict', '')}")
    return out


def problems(doc):
    """Everything that makes the soak fail, in words."""
    p = []
    if doc["aborted"]:
        p.append(f"aborted: {doc['aborted']}")
    if doc["crashes"]:
        p.append(f"{len(doc['crashes'])} crash(es)")
    bad = [r for r in doc["restarts"] if r["stop_rc"] != 0]
    if bad or doc["final_stop_rc"] not in (0, None):
        p.append(f"straitd exit status on SIGTERM: {[r['stop_rc'] for r in bad]} "
                 f"final {doc['final_stop_rc']}")
    v = sum(s["violation_frames"] for s in doc["streams"])
    if v:
        p.append(f"{v} frame(s) forwarded without their rules")
    st = sum(s["stalls"] for s in doc["streams"])
    if st:
        p.append(f"{st} stall(s)")
    diffs = [x for x in doc["verifications"] if x["differences"]]
    if diffs:
        p.append(f"{len(diffs)} state verification(s) with differences")
    if doc["failed_requests"]:
        p.append(f"{len(doc['failed_requests'])} request(s) refused or accepted against "
                 "expectation")
    for k, f in doc["figures"].items():
        if k in TOLERANCE_PER_H and f.get("verdict") == "GROWS":
            p.append(f"{k} grows")
    scrapes = [r["metrics_ok"] for r in doc["samples"]]
    if scrapes and not all(scrapes):
        p.append(f"metrics endpoint failed {scrapes.count(False)} of {len(scrapes)} scrapes")
    return p


def summary_text(doc):
    """(the text, whether everything held)"""
    m = doc["machine"]
    sent = sum(s["sent"] for s in doc["streams"])
    got = sum(s["received"] for s in doc["streams"])
    v = sum(s["violation_frames"] for s in doc["streams"])
    nver = len(doc["verifications"])
    ndiff = sum(len(x["differences"]) for x in doc["verifications"])
    lines = [f"strait soak: {m['cpu']}, {m['cpus']} CPUs (idle before: "
             f"{doc['cpu_idle_pct_before']} %); {doc['duration_s']:.0f} s, seed {doc['seed']}"]
    lines += _ops_lines(doc)
    lines += _stream_lines(doc)
    lines.append(f"frames: {sent} sent, {got} received; violations (frames forwarded without "
                 f"their rules): {v}")
    lines.append(f"state: {nver} verifications (every {doc['config']['verify_every']:.0f} s, "
                 f"after each restart, at the end): {ndiff} differences")
    lines += _figure_lines(doc)
    p = problems(doc)
    lines.append("VERDICT: PASS" if not p else "VERDICT: FAIL: " + "; ".join(p))
    return "\n".join(lines), not p
