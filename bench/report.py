#!/usr/bin/python3
"""Tables and JSON for bench/run.sh (Debian python3, standard library only).

report.py RESULTS.tsv META.txt OUT.json [CONTROL.tsv]; the rest comes from B_*
variables.
RESULTS.tsv: switch scenario size flows rep status mpps txfail samples note
[workers] (run.sh --workers: the generator/sink pairs and forwarding
threads of the row; 1 when absent)
CONTROL.tsv (control-plane points, issue 8): switch scenario flows rep status
values_ms(comma-separated) note
"""
import collections
import json
import os
import platform
import re
import statistics
import subprocess
import sys

CEILING = "ceiling"
OVS = "ovs"
# scenario with a feature -> the same traffic without it, the first of the
# list that ran (same run, same switch): the feature's cost as a ratio
SG_BASELINE = {"vlan_sg": ["vlan"], "vlan_sg_default": ["vlan"],
               # unrelated rule changes, once a second: against the same without them
               "vlan_sg_churn": ["vlan_sg"],
               # 1000 MACs learned and aged a second on the physnet: against none
               "vlan_phys_churn": ["vlan_phys"]}
TUNNEL_BASELINE = {"vxlan": ["l2", "vlan"], "vxlan_decap": ["l2", "vlan"]}
# issue 25's port features: a trunk's subport, QoS limits and marking
PORT_FEATURE_BASELINE = {"l2_trunk": ["l2"], "l2_qos": ["l2"]}
# bytes a frame gains on its way to the sink: vxlan (encap) delivers the
# generator's frames inside Ethernet/IPv4/UDP/VXLAN (Strait and OVS alike)
SINK_OVERHEAD = {"vxlan": 50}


def paired(r, base):
    """r / base rep by rep: each pair of reps ran in the same round of the
    alternation, seconds apart, where a ratio of medians may set a fast rep
    of one against a slow rep of the other (README "Two speeds": a pair can
    still straddle the two). Reps are paired by their number; a rep that
    failed on either side makes no pair. -> {"paired_median_ratio", "paired_min_ratio",
    "paired_max_ratio", "pairs"} (None and 0 when no pair)."""
    b = dict(zip(base["rep_ids"], base["reps"]))
    q = [x / b[i] for i, x in zip(r["rep_ids"], r["reps"]) if b.get(i)]
    return {"paired_median_ratio": round(statistics.median(q), 3) if q else None,
            "paired_min_ratio": round(min(q), 3) if q else None,
            "paired_max_ratio": round(max(q), 3) if q else None,
            "pairs": len(q)}


def feature_ratios(results, baselines):
    """Each switch's feature scenario against its own plain scenario at the
    same point (size, flows). Rows only where both ran."""
    out = []
    for r in results:
        if r["scenario"] not in baselines or r["switch"] == CEILING:  # testpmd io: none of them
            continue
        base = None
        for base_sc in baselines[r["scenario"]]:
            base = next((b for b in results if b["switch"] == r["switch"] and b["scenario"] == base_sc
                         and b["size"] == r["size"] and b["flows"] == r["flows"]
                         and b["workers"] == r["workers"]), None)
            if base is not None:
                break
        if base is None:
            continue
        med = (r["median_mpps"] / base["median_mpps"]
               if base["median_mpps"] and r["median_mpps"] is not None else None)
        q = (r["p90"] / base["p90"] if base["p90"] and r["p90"] is not None else None)
        # The switch's own cycles per frame (Strait's workers' busy cycles
        # over their packets, whole rep): the feature's cost without the
        # generator's and the machine's noise.
        cyc, base_cyc = median_metric(r, "cyc_per_pkt"), median_metric(base, "cyc_per_pkt")
        out.append({"switch": r["switch"], "scenario": r["scenario"], "baseline": base["scenario"],
                    "size": r["size"], "flows": r["flows"], "workers": r["workers"],
                    "median_mpps": r["median_mpps"], "baseline_median_mpps": base["median_mpps"],
                    "median_ratio": round(med, 3) if med is not None else None,
                    "p90_ratio": round(q, 3) if q is not None else None,
                    "cyc_per_pkt": cyc, "baseline_cyc_per_pkt": base_cyc,
                    "cyc_ratio": round(cyc / base_cyc, 3) if cyc and base_cyc else None,
                    **paired(r, base)})
    return out


def median_metric(r, key):
    """The median over r's reps of one of the switch's counters, or None."""
    v = [m[key] for m in r.get("switch_metrics", []) if isinstance(m.get(key), (int, float))]
    return statistics.median(v) if v else None


def print_feature_ratios(title, rows, f):
    if not rows:
        return
    print()
    print(title)
    hdr = (f"{'scenario':15} {'size':>5} {'flows':>7} {'w':>2} {'switch':9} {'/ scenario':10} "
           f"{'Mpps':>8} {'base':>8} {'median':>7} {'p90-1s':>7} {PAIRED_HDR} "
           f"{'cyc/pkt':>7} {'base':>7} {'ratio':>6}")
    print(hdr)
    print("-" * len(hdr))
    for x in sorted(rows, key=lambda x: (x["scenario"], x["size"], x["flows"], x["workers"], x["switch"])):
        print(f"{x['scenario']:15} {x['size']:>5} {x['flows']:>7} {x['workers']:>2} {x['switch']:9} "
              f"{'/ ' + x['baseline']:10} {f(x['median_mpps'], 8)} {f(x['baseline_median_mpps'], 8)} "
              f"{f(x['median_ratio'])} {f(x['p90_ratio'])} {paired_cols(x, f)} "
              f"{f(x.get('cyc_per_pkt'), 7, 0)} {f(x.get('baseline_cyc_per_pkt'), 7, 0)} "
              f"{f(x.get('cyc_ratio'), 6, 2)}")


PAIRED_HDR = f"{'paired':>7} {'min':>6} {'max':>6} {'n':>2}"


def scaling_rows(results):
    """run.sh --workers: each switch's aggregate Mpps at N workers against N x
    its own 1-worker figure at the same point (efficiency), and Strait
    against OVS and the ceiling at each N. Rows only for points with more
    than one N."""
    if not any(x["workers"] != 1 for x in results):
        return []

    def at(r, switch, workers):  # the same point's row of `switch` at `workers`
        return next((b for b in results if b["switch"] == switch and b["workers"] == workers
                     and (b["scenario"], b["size"], b["flows"]) == (r["scenario"], r["size"], r["flows"])),
                    None)

    def ratio(a, b):
        return round(a / b, 3) if b and a is not None else None

    out = []
    for r in results:
        base = at(r, r["switch"], 1)
        base_mpps = base["median_mpps"] if base else None

        def ref(sw):
            x = at(r, sw, r["workers"])
            return ratio(r["median_mpps"], x["median_mpps"] if x else None)
        out.append({"switch": r["switch"], "scenario": r["scenario"], "size": r["size"],
                    "flows": r["flows"], "workers": r["workers"], "median_mpps": r["median_mpps"],
                    "one_worker_mpps": base_mpps,
                    "efficiency": ratio(r["median_mpps"], r["workers"] * base_mpps if base_mpps else None),
                    "vs_ovs": ref(OVS) if r["switch"] not in (OVS, CEILING) else None,
                    "vs_ceiling": ref(CEILING) if r["switch"] != CEILING else None})
    return out


def print_scaling(rows, f):
    if not rows:
        return
    print()
    print("== scaling (--workers): aggregate Mpps of N pairs at N forwarding threads; efficiency = "
          "Mpps / (N x the same switch's 1-worker Mpps, same run); / ovs, / ceiling: at the same N")
    hdr = (f"{'scenario':15} {'size':>5} {'flows':>7} {'switch':9} {'w':>2} {'Mpps':>8} "
           f"{'1-worker':>8} {'effic.':>7} {'/ ovs':>7} {'/ ceil.':>7}")
    print(hdr)
    print("-" * len(hdr))
    for x in sorted(rows, key=lambda x: (x["scenario"], x["size"], x["flows"], x["switch"], x["workers"])):
        print(f"{x['scenario']:15} {x['size']:>5} {x['flows']:>7} {x['switch']:9} {x['workers']:>2} "
              f"{f(x['median_mpps'], 8)} {f(x['one_worker_mpps'], 8)} {f(x['efficiency'])} "
              f"{f(x['vs_ovs'])} {f(x['vs_ceiling'])}")


def paired_cols(x, f):
    return (f"{f(x['paired_median_ratio'])} {f(x['paired_min_ratio'], 6, 2)} "
            f"{f(x['paired_max_ratio'], 6, 2)} {x['pairs']:>2}")


# Issue 8's "a rule change visible to the datapath < 1 ms after the API call
# returns": each rule_change sample's first frame through the rule, less the
# time the call took to return (Strait: its API reply; OVS: ovs-ofctl
# --bundle add-flow exiting). Below 0: a frame went through before the
# caller had the reply.
AFTER_REPLY = "rule_change_after_reply"
REPLY_KEYS = ("api_reply_ms", "ofctl_reply_ms")


def note_fields(note):
    """A row's note, `key=value` words -> dict (other words ignored)."""
    return dict(x.split("=", 1) for x in note.split() if "=" in x)


def after_reply(sc, first_ms, note):
    """-> (samples, the reply key they were taken against), or ([], None)."""
    if sc != "rule_change":
        return [], None
    kv = note_fields(note)
    for k in REPLY_KEYS:
        reply = [float(x) for x in kv.get(k, "").split(",") if x]
        if reply and len(reply) == len(first_ms):  # one reply per sample, same order
            return [round(f - r, 3) for f, r in zip(first_ms, reply)], k
    return [], None


def control_points(path):
    """CONTROL.tsv -> (results entries, failures, unavailable): one entry per
    (switch, scenario) with the ms statistics over every sample of every rep."""
    pts = collections.OrderedDict()
    failures, unavailable = [], {}
    if not path or not os.path.exists(path):
        return [], failures, unavailable
    for line in open(path):
        if not line.strip():
            continue
        r = line.rstrip("\n").split("\t")
        r += [""] * (7 - len(r))
        sw, sc, flows, rep, status, vals, note = r[:7]
        if status == "unavailable":
            unavailable[sw] = note
            continue
        def point(scenario):
            return pts.setdefault((scenario, sw), {"flows": int(flows), "reps": [], "samples": [],
                                                   "failed": 0, "notes": []})

        def add(scenario, values, note):
            d = point(scenario)
            d["reps"].append(round(statistics.median(values), 3))
            d["samples"] += values
            d["notes"].append(note)

        v = [float(x) for x in vals.split(",") if x]
        if status != "ok" or not v:
            point(sc)["failed"] += 1
            failures.append(f"{sw} {sc} control rep={rep}: {status} {note}")
            continue
        add(sc, v, note)
        after, key = after_reply(sc, v, note)
        if after:
            add(AFTER_REPLY, after, "metric=first_packet_minus_reply_ms "
                f"detect=rule_change_first_frame_minus_{key}")
    out = []
    for (sc, sw), d in pts.items():
        v = d["samples"]
        kv = note_fields(d["notes"][0]) if d["notes"] else {}
        out.append({"switch": sw, "scenario": sc, "size": None, "flows": d["flows"],
                    "median_ms": round(statistics.median(v), 3) if v else None,
                    "min": min(v) if v else None, "max": max(v) if v else None,
                    "p90": p90(v), "reps": d["reps"], "failed_reps": d["failed"],
                    "samples": v, "metric": kv.get("metric"), "detect": kv.get("detect"),
                    "notes": d["notes"]})
    return out, failures, unavailable


def p90(values):
    """90th percentile, nearest rank (the value 90 % of samples are <= to)."""
    v = sorted(values)
    if not v:
        return None
    k = max(0, min(len(v) - 1, -(-9 * len(v) // 10) - 1))
    return v[k]


def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def calib(line):
    d = dict(re.findall(r"(\w+)=([0-9.]+)", line or ""))
    return {k: float(v) for k, v in d.items()} or {"raw": line}


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except Exception:  # noqa: BLE001 - best effort machine info
        return ""


def machine():
    cpu = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem_gib = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return {
        "cpu": cpu,
        "nproc": os.cpu_count(),
        "mem_gib": mem_gib,
        "kernel": platform.release(),
        "os": sh(". /etc/os-release && echo $PRETTY_NAME"),
        "dpdk": sh("pkg-config --modversion libdpdk"),
        "testpmd": os.environ.get("B_TESTPMD", ""),
        "memory_mode": os.environ.get("B_MEM", ""),
        "loadavg_end": sh("cut -d' ' -f1-3 /proc/loadavg"),
        "hostname": platform.node(),
    }


def main():
    res_path, meta_path, json_path = sys.argv[1:4]
    ctl_results, ctl_failures, ctl_unavailable = control_points(
        sys.argv[4] if len(sys.argv) > 4 else None)
    rows = [l.rstrip("\n").split("\t") for l in open(res_path) if l.strip()]
    meta = collections.defaultdict(dict)
    for line in open(meta_path):
        kind, sw, text = line.rstrip("\n").split("\t", 2)
        meta[kind][sw] = text

    points = collections.OrderedDict()   # (scenario, size, flows, workers) -> switches
    failures = []
    unavailable = {}
    for r in rows:
        r += [""] * (11 - len(r))
        sw, sc, size, flows, rep, status, mpps, txf, samples, note, workers = r[:11]
        if status == "unavailable":
            unavailable[sw] = note
            continue
        workers = int(workers or 1)
        key = (sc, int(size), int(flows), workers)
        d = points.setdefault(key, collections.OrderedDict()).setdefault(
            sw, {"reps": [], "rep_ids": [], "txfail": [], "samples": [], "failed": 0,
                 "metrics": []})
        if status != "ok" or num(mpps) is None:
            d["failed"] += 1
            failures.append(f"{sw} {sc} size={size} flows={flows} workers={workers} rep={rep}: "
                            f"{status} {note}")
            continue
        d["reps"].append(float(mpps))
        d["rep_ids"].append(int(rep))
        if num(txf) is not None:
            d["txfail"].append(float(txf))
        d["samples"] += [float(x) for x in samples.split(",") if x]
        met = {}
        for kv in note.split():
            k, _, v = kv.partition("=")
            met[k] = int(v) if v.isdigit() else (num(v) if num(v) is not None else v)
        d["metrics"].append(met)

    results = []
    for (sc, size, flows, workers), sws in points.items():
        for sw, d in sws.items():
            v = d["reps"]
            results.append({
                "switch": sw, "scenario": sc, "size": size, "flows": flows, "workers": workers,
                "median_mpps": round(statistics.median(v), 3) if v else None,
                "min": min(v) if v else None,
                "max": max(v) if v else None,
                "p90": p90(d["samples"]),
                "reps": v,
                "rep_ids": d["rep_ids"],  # each rep's number in the alternation: pairs reps
                "failed_reps": d["failed"],
                "txfail_mpps_median": round(statistics.median(d["txfail"]), 3) if d["txfail"] else None,
                # L1 Gbit/s of what arrived at the sink (vxlan: the outer
                # frames; testpmd io forwards the plain ones)
                "sink_frame_bytes": size + (SINK_OVERHEAD.get(sc, 0) if sw != CEILING else 0),
                "gbps_l1_median": (round(statistics.median(v) * (size + 20 + (
                    SINK_OVERHEAD.get(sc, 0) if sw != CEILING else 0)) * 8 / 1000, 3) if v else None),
                "samples": d["samples"],
                "switch_metrics": d["metrics"],
            })

    reps = os.environ.get("B_REPS", "?")
    print()
    print(f"== Strait whole-switch bench: {reps} reps x {os.environ.get('B_DUR')} s "
          f"(+{os.environ.get('B_WARM')} s warm-up), switches alternated rep by rep; "
          f"memory: {os.environ.get('B_MEM')}")
    if os.environ.get("B_QUICK") == "1":
        print(f"== QUICK mode (--quick): 1 rep per point at 64 B and 1 flow, SHORTER reps "
              f"({os.environ.get('B_WARM')} s warm-up + {os.environ.get('B_DUR')} s measured; "
              f"default 2 + 5 s) and 1 control-plane rep: a smoke test, not a measurement")
    m = machine()
    print(f"== machine: {m['cpu']}, {m['nproc']} cpus, {m['kernel']}, DPDK {m['dpdk']}")
    print(f"== cores: switch forwarding thread on core {os.environ.get('B_SW_CPU')} alone; "
          f"strait-gen (gen+sink, 1 thread) and the switches' other threads on core "
          f"{os.environ.get('B_GEN_CPU')}")
    if os.environ.get("B_WORKERS_MODE") == "1":
        print(f"== --workers {os.environ.get('B_WORKERS')}: N forwarding threads on cores 1..N, one "
              f"strait-gen per generator/sink pair on cores N+1..2N (N=1 with fewer than 3 CPUs: on "
              f"core 0), everything else on core 0; {os.environ.get('B_NPROC')} CPUs")
    for sw, text in meta["desc"].items():
        print(f"   {sw}: {text}")
    for sw, text in meta["placement"].items():
        print(f"   threads (name:allowed cpus) {text}")
    print(f"== calib c2c (core0<->core1 cache-line round trip; ~60 ns = same L3, ~300 ns = apart): "
          f"start {os.environ.get('B_CALIB_START')} / end {os.environ.get('B_CALIB_END')}")
    print(f"== CPUs idle (other load on the machine): {os.environ.get('B_IDLE_START')} % before, "
          f"{os.environ.get('B_IDLE_END')} % after the run (below ~90 %: numbers are low and noisy)")
    print("== Mpps at the sink; median/min/max over reps; p90-1s = 90th percentile of the "
          "1-second samples; txfail > 0: the switch was the bottleneck")
    if any(r["scenario"] in SINK_OVERHEAD for r in results):
        print("== vxlan: Mpps are frames; Gbit/s (L1) counts the encapsulated frames the sink gets "
              "(size + 50 B); the ceiling forwards the plain frames")
    for sw, why in unavailable.items():
        print(f"== {sw}: NOT RUN: {why}")
    if results:
        print()
    hdr = (f"{'scenario':15} {'size':>5} {'flows':>7} {'w':>2} {'switch':9} {'median':>8} {'min':>7} "
           f"{'max':>7} {'p90-1s':>7} {'Gbit/s':>7} {'txfail':>7} {'reps':>5}  switch counters (median)")
    if results:
        print(hdr)
        print("-" * len(hdr))

    def f(x, w=7, p=3):
        return f"{x:{w}.{p}f}" if isinstance(x, (int, float)) else f"{'-':>{w}}"

    def counters(mets):
        keys = []
        for m_ in mets:
            keys += [k for k in m_ if k not in keys and k != "packets"]
        out = []
        for k in keys:
            v = [m_[k] for m_ in mets if isinstance(m_.get(k), (int, float))]
            if v:
                out.append(f"{k}={statistics.median(v):.0f}")
        return " ".join(out)

    for r in results:
        ok = len(r["reps"])
        reps_s = f"{ok}/{ok + r['failed_reps']}"
        print(f"{r['scenario']:15} {r['size']:>5} {r['flows']:>7} {r['workers']:>2} {r['switch']:9} "
              f"{f(r['median_mpps'], 8)} {f(r['min'])} {f(r['max'])} {f(r['p90'])} "
              f"{f(r['gbps_l1_median'], 7, 2)} {f(r['txfail_mpps_median'])} {reps_s:>5}  "
              f"{counters(r['switch_metrics'])}")

    # Each switch against the ceiling, and Strait against OVS: same run,
    # same generator, same cores.
    ratios = []
    for (sc, size, flows, workers), sws in points.items():
        def at(switch):
            return next((r for r in results if r["switch"] == switch and r["scenario"] == sc
                         and r["size"] == size and r["flows"] == flows
                         and r["workers"] == workers), None)
        # each switch at this point once (not once per row of the whole run)
        pairs = [(sw, CEILING) for sw in sws if sw != CEILING]
        pairs.append(("strait", OVS))
        pairs.append(("strait_meson", "strait"))  # meson-dpdk/'s DPDK against the system's
        for sw, ref in pairs:
            r, base = at(sw), at(ref)
            if r is None or base is None or r["scenario"] != sc:
                continue
            med = (r["median_mpps"] / base["median_mpps"]
                   if base["median_mpps"] and r["median_mpps"] is not None else None)
            q = (r["p90"] / base["p90"] if base["p90"] and r["p90"] is not None else None)
            ratios.append({"switch": sw, "reference": ref, "scenario": sc, "size": size,
                           "flows": flows, "workers": workers,
                           "median_ratio": round(med, 3) if med is not None else None,
                           "p90_ratio": round(q, 3) if q is not None else None,
                           **paired(r, base)})
    if ratios:
        print()
        print("== ratios: median = median / median; p90-1s = p90 / p90; paired = the median of "
              "the rep-by-rep ratios (same round), with their min, max and count")
        hdr = (f"{'scenario':15} {'size':>5} {'flows':>7} {'w':>2} {'switch / reference':18} {'median':>7} "
               f"{'p90-1s':>7} {PAIRED_HDR}")
        print(hdr)
        print("-" * len(hdr))
        for x in sorted(ratios, key=lambda x: (x["reference"] != CEILING, x["scenario"], x["size"],
                                               x["flows"], x["workers"])):
            print(f"{x['scenario']:15} {x['size']:>5} {x['flows']:>7} {x['workers']:>2} "
                  f"{x['switch'] + ' / ' + x['reference']:18} "
                  f"{f(x['median_ratio'])} {f(x['p90_ratio'])} {paired_cols(x, f)}")
    # The cost of security groups (issue 5: "beside the same run without
    # security groups: print the ratio") and of VXLAN encap/decap (issue 6:
    # "beside the same traffic without tunnel in the same run: print the
    # ratio"): each switch against itself without the feature.
    sg_ratios = feature_ratios(results, SG_BASELINE)
    tunnel_ratios = feature_ratios(results, TUNNEL_BASELINE)
    print_feature_ratios("== security groups: each switch against itself without them (same run)",
                         sg_ratios, f)
    print_feature_ratios("== VXLAN: encap (vxlan) and decap (vxlan_decap) against the same frames "
                         "without a tunnel (same run)", tunnel_ratios, f)
    port_ratios = feature_ratios(results, PORT_FEATURE_BASELINE)
    print_feature_ratios("== port features (issue 25): a trunk's subport (l2_trunk), QoS limits "
                         "and marking (l2_qos), against l2 (same run)", port_ratios, f)
    scaling = scaling_rows(results)
    print_scaling(scaling, f)
    # Control plane (issue 8): Strait and OVS, same run, reps alternated.
    ctl_ratios = []
    if ctl_results or ctl_unavailable:
        print()
        print(f"== control plane: {os.environ.get('B_CTL_REPS')} reps per switch, switches "
              f"alternated; ms over every sample of every rep (control_N_ports: 1 per rep; "
              f"rule_change: {os.environ.get('B_CTL_CHANGES')} per rep)")
        for sw, text in meta["ctldesc"].items():
            print(f"   {sw}: {text}")
        for sw, why in ctl_unavailable.items():
            print(f"== {sw}: control plane NOT RUN: {why}")
        hdr = (f"{'scenario':23} {'flows':>6} {'switch':7} {'median':>9} {'min':>9} {'max':>9} "
               f"{'p90':>9} {'n':>4} {'reps':>5}  measured")
        print(hdr)
        print("-" * len(hdr))
        for r in ctl_results:
            ok = len(r["reps"])
            reps_s = f"{ok}/{ok + r['failed_reps']}"
            print(f"{r['scenario']:23} {r['flows']:>6} {r['switch']:7} {f(r['median_ms'], 9, 2)} "
                  f"{f(r['min'], 9, 2)} {f(r['max'], 9, 2)} {f(r['p90'], 9, 2)} "
                  f"{len(r['samples']):>4} {reps_s:>5}  "
                  f"{r['metric'] or '-'} ({r['detect'] or '-'})")
        if any(r["scenario"] == AFTER_REPLY for r in ctl_results):
            print(f"   ({AFTER_REPLY}: each rule_change sample's first frame less the time the "
                  "call took to return; below 0: the frame came before the reply)")
        for sc in dict.fromkeys(r["scenario"] for r in ctl_results):
            if sc == AFTER_REPLY:  # around 0 and may be below: no ratio
                continue
            a = next((r for r in ctl_results if r["scenario"] == sc and r["switch"] == "strait"), None)
            b = next((r for r in ctl_results if r["scenario"] == sc and r["switch"] == OVS), None)
            if not a or not b:
                continue
            med = a["median_ms"] / b["median_ms"] if a["median_ms"] is not None and b["median_ms"] else None
            q = a["p90"] / b["p90"] if a["p90"] is not None and b["p90"] else None
            ctl_ratios.append({"switch": "strait", "reference": OVS, "scenario": sc,
                               "flows": a["flows"], "median_ratio": round(med, 3) if med else None,
                               "p90_ratio": round(q, 3) if q else None})
        if ctl_ratios:
            print()
            hdr = f"{'scenario':20} {'flows':>6} {'strait / ovs (ms)':18} {'median':>7} {'p90':>7}"
            print(hdr)
            print("-" * len(hdr))
            for x in ctl_ratios:
                print(f"{x['scenario']:20} {x['flows']:>6} {'strait / ovs':18} "
                      f"{f(x['median_ratio'])} {f(x['p90_ratio'])}")
            print("   (time: below 1 = Strait faster; the 'measured' column says what each "
                  "switch's figure is)")
    results += ctl_results
    failures += ctl_failures
    if failures:
        print()
        print(f"== {len(failures)} failed reps:")
        for x in failures:
            print("   " + x)
    print()
    print(f"== wall time {os.environ.get('B_WALL')} s; logs: {os.environ.get('B_LOGS')}")

    doc = {
        "results": results,
        "ratios": ratios,
        "sg_ratios": sg_ratios,
        "tunnel_ratios": tunnel_ratios,
        "port_feature_ratios": port_ratios,
        "scaling": scaling,
        "control_ratios": ctl_ratios,
        "meson_ratios": [x for x in ratios if x["switch"] == "strait_meson" and x["reference"] == "strait"],
        "machine": m,
        "cores": {
            "workers_mode": os.environ.get("B_WORKERS_MODE") == "1",
            "workers": [int(x) for x in os.environ.get("B_WORKERS", "1").split(",") if x],
            "switch_forwarding_cpu": int(os.environ.get("B_SW_CPU", 1)),
            "generator_cpu": int(os.environ.get("B_GEN_CPU", 0)),
            "switch_other_threads_cpu": int(os.environ.get("B_GEN_CPU", 0)),
            "switches": dict(meta["desc"]),
            "observed_threads": dict(meta["placement"]),
        },
        "calib": {"start": calib(os.environ.get("B_CALIB_START")),
                  "end": calib(os.environ.get("B_CALIB_END")),
                  "idle_pct_start": num(os.environ.get("B_IDLE_START")),
                  "idle_pct_end": num(os.environ.get("B_IDLE_END"))},
        "config": {"reps": int(reps) if reps.isdigit() else reps,
                   "duration_s": num(os.environ.get("B_DUR")),
                   "warmup_s": num(os.environ.get("B_WARM")),
                   "quick": os.environ.get("B_QUICK") == "1",
                   "control_reps": int(os.environ.get("B_CTL_REPS") or 0),
                   "control_ports": int(os.environ.get("B_CTL_PORTS") or 0),
                   "rule_changes_per_rep": int(os.environ.get("B_CTL_CHANGES") or 0),
                   "throughput": os.environ.get("B_THROUGHPUT", "1") == "1",
                   "build": os.environ.get("B_BUILD"),
                   "logs": os.environ.get("B_LOGS")},
        "unavailable": unavailable,
        "control_unavailable": ctl_unavailable,
        "failures": failures,
    }
    with open(json_path, "w") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main()
