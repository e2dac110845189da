"""bench/report.py: the tables and JSON of `make bench`, from rows as
bench/run.sh writes them (no switch runs here)."""
import json
import os
import pathlib
import subprocess

REPORT = pathlib.Path(__file__).resolve().parents[2] / "bench" / "report.py"


def run_report(tmp_path, rows, ctl_rows=()):
    res = tmp_path / "results.tsv"
    res.write_text("".join("\t".join(str(x) for x in r) + "\n" for r in rows))
    meta = tmp_path / "meta.txt"
    meta.write_text("desc\tstrait\tstraitd\ndesc\tovs\tovs-vswitchd\n")
    ctl = tmp_path / "control.tsv"
    ctl.write_text("".join("\t".join(str(x) for x in r) + "\n" for r in ctl_rows))
    out = tmp_path / "out.json"
    env = dict(os.environ, B_REPS="5", B_DUR="3", B_WARM="1", B_SW_CPU="1", B_GEN_CPU="0")
    p = subprocess.run(["/usr/bin/python3", str(REPORT), str(res), str(meta), str(out), str(ctl)],
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(out.read_text()), p.stdout


def tput(sw, sc, rep, mpps, status="ok"):
    return [sw, sc, 64, 1, rep, status, mpps, "0", f"{mpps},{mpps}", "cyc_per_pkt=250"]


def ratio(doc, sw, ref, sc):
    return next(x for x in doc["ratios"]
                if x["switch"] == sw and x["reference"] == ref and x["scenario"] == sc)


def test_ratios_pair_reps_of_the_same_round(tmp_path):
    # The machine runs fast (~10 Mpps) or slow (~5): Strait's reps 1-3 ran
    # fast, OVS's only 1-2 (rep 3 turned slow between the two). The medians
    # compare a fast Strait with a slow OVS; the rounds say 1.1.
    strait = [11.0, 11.0, 11.0, 5.5, 5.5]
    ovs = [10.0, 10.0, 5.0, 5.0, 5.0]
    rows = [tput("strait", "vlan", i + 1, v) for i, v in enumerate(strait)]
    rows += [tput("ovs", "vlan", i + 1, v) for i, v in enumerate(ovs)]
    doc, out = run_report(tmp_path, rows)
    x = ratio(doc, "strait", "ovs", "vlan")
    assert x["median_ratio"] == 2.2
    assert x["paired_median_ratio"] == 1.1
    assert (x["paired_min_ratio"], x["paired_max_ratio"], x["pairs"]) == (1.1, 2.2, 5)
    assert "paired" in out and " 1.100 " in out


def test_a_failed_rep_makes_no_pair(tmp_path):
    rows = [tput("strait", "vlan", 1, 10.0), tput("strait", "vlan", 2, 0, status="switch-failed"),
            tput("strait", "vlan", 3, 12.0),
            tput("ovs", "vlan", 1, 5.0), tput("ovs", "vlan", 2, 8.0), tput("ovs", "vlan", 3, 4.0)]
    doc, _ = run_report(tmp_path, rows)
    x = ratio(doc, "strait", "ovs", "vlan")
    # rounds 1 and 3 only: 2.0 and 3.0 (round 2's 8 Mpps OVS rep has no partner)
    assert x["pairs"] == 2
    assert (x["paired_min_ratio"], x["paired_max_ratio"]) == (2.0, 3.0)
    assert x["paired_median_ratio"] == 2.5
    r = next(r for r in doc["results"] if r["switch"] == "strait")
    assert r["rep_ids"] == [1, 3] and r["failed_reps"] == 1


def test_feature_ratios_pair_the_scenarios_reps_too(tmp_path):
    rows = [tput("strait", "vlan", 1, 10.0), tput("strait", "vlan", 2, 5.0),
            tput("strait", "vlan_sg", 1, 9.0), tput("strait", "vlan_sg", 2, 4.5)]
    doc, _ = run_report(tmp_path, rows)
    (x,) = doc["sg_ratios"]
    assert (x["scenario"], x["baseline"]) == ("vlan_sg", "vlan")
    assert x["paired_median_ratio"] == 0.9 and x["pairs"] == 2


def test_json_keeps_the_keys_each_run_is_compared_by(tmp_path):
    rows = [tput(sw, "l2", rep, 8.0) for rep in (1, 2) for sw in ("ceiling", "ovs", "strait")]
    ctl = [["strait", "control_1000_ports", 1000, 1, "ok", "60.5", "metric=bind detect=api"],
           ["ovs", "control_1000_ports", 1000, 1, "ok", "4000", "metric=bundle detect=flows"]]
    doc, _ = run_report(tmp_path, rows, ctl)
    for r in doc["results"]:
        assert {"switch", "scenario", "size", "flows", "min", "max", "p90"} <= r.keys()
        assert ("median_mpps" in r) != ("median_ms" in r)
    ctl_r = next(r for r in doc["results"] if r["scenario"] == "control_1000_ports"
                 and r["switch"] == "strait")
    assert ctl_r["median_ms"] == 60.5 and ctl_r["size"] is None
    assert {(x["switch"], x["reference"]) for x in doc["ratios"]} == {
        ("ovs", "ceiling"), ("strait", "ceiling"), ("strait", "ovs")}
    assert doc["control_ratios"][0]["median_ratio"] == round(60.5 / 4000, 3)


def test_rule_change_is_also_reported_from_the_calls_return(tmp_path):
    # first frame at 1.2 / 0.9 ms, the API reply at 1.0 / 1.1 ms: visible
    # 0.2 ms after the reply, and once before it (-0.2). OVS: ovs-ofctl
    # returned at 20 ms, the first frame came at 40 / 60 ms.
    ctl = [["strait", "rule_change", 1, 1, "ok", "1.2,0.9",
            "metric=rule_create_to_first_packet_ms api_reply_ms=1.0,1.1 skipped=0"],
           ["ovs", "rule_change", 1, 1, "ok", "40,60",
            "metric=rule_add_to_first_packet_ms ofctl_reply_ms=20,20 skipped=0"],
           # a rep whose replies do not line up with its samples adds nothing
           ["strait", "rule_change", 1, 2, "ok", "1.5", "api_reply_ms=1.0,1.0"]]
    doc, out = run_report(tmp_path, [tput("strait", "l2", 1, 8.0)], ctl)
    after = {r["switch"]: r for r in doc["results"] if r["scenario"] == "rule_change_after_reply"}
    assert sorted(after["strait"]["samples"]) == [-0.2, 0.2]
    assert after["strait"]["reps"] == [0.0] and after["strait"]["size"] is None
    assert after["ovs"]["samples"] == [20.0, 40.0] and after["ovs"]["median_ms"] == 30.0
    assert "rule_change_after_reply" in out
    # the call-to-first-frame point itself is unchanged: every sample of both reps
    rc = next(r for r in doc["results"] if r["scenario"] == "rule_change" and r["switch"] == "strait")
    assert sorted(rc["samples"]) == [0.9, 1.2, 1.5]
    assert {x["scenario"] for x in doc["control_ratios"]} == {"rule_change"}


def test_workers_rows_make_a_scaling_table(tmp_path):
    # run.sh --workers writes the worker count as an 11th column; a point is
    # (scenario, size, flows, workers), so N workers are never set against
    # one, except in the scaling table, where that is the point.
    def w(sw, rep, mpps, n):
        return tput(sw, "vlan_sg", rep, mpps) + [n]
    rows = [w("strait", r, 8.0, 1) for r in (1, 2)] + [w("strait", r, 15.2, 2) for r in (1, 2)]
    rows += [w("ovs", r, 3.0, 1) for r in (1, 2)] + [w("ovs", r, 4.0, 2) for r in (1, 2)]
    rows.append(tput("strait", "vlan", 1, 9.0))  # no 11th column: one worker
    doc, out = run_report(tmp_path, rows)
    assert {(r["switch"], r["workers"]) for r in doc["results"] if r["scenario"] == "vlan_sg"} == {
        ("strait", 1), ("strait", 2), ("ovs", 1), ("ovs", 2)}
    assert next(r for r in doc["results"] if r["scenario"] == "vlan")["workers"] == 1
    at2 = next(x for x in doc["ratios"] if x["switch"] == "strait" and x["workers"] == 2)
    assert (at2["reference"], at2["median_ratio"]) == ("ovs", 3.8)
    s = {(x["switch"], x["workers"]): x for x in doc["scaling"]}
    assert s[("strait", 2)]["efficiency"] == 0.95  # 15.2 / (2 x 8.0)
    assert s[("strait", 2)]["vs_ovs"] == 3.8
    assert s[("ovs", 2)]["efficiency"] == 0.667 and s[("ovs", 2)]["vs_ovs"] is None
    assert "== scaling" in out
    # the sg table compares the same worker count only: vlan_sg at 1 worker
    # against vlan (1 worker), none at 2
    sg = [x for x in doc["sg_ratios"] if x["switch"] == "strait"]
    assert [(x["workers"], x["baseline"]) for x in sg] == [(1, "vlan")]


def test_without_workers_rows_there_is_no_scaling_table(tmp_path):
    rows = [tput("strait", "vlan_sg", 1, 8.0), tput("strait", "vlan_sg_churn", 1, 7.6)]
    doc, out = run_report(tmp_path, rows)
    assert doc["scaling"] == [] and "== scaling" not in out
    churn = next(x for x in doc["sg_ratios"] if x["scenario"] == "vlan_sg_churn")
    assert (churn["baseline"], churn["median_ratio"]) == ("vlan_sg", 0.95)
