"""bench/neutron_bench.py runs end to end (a few ports, Strait only): every
port reaches ACTIVE through neutron, each figure comes from the events it
names, in their order, and the JSON holds what the bench's report promises.
The OVS agent's side needs rabbitmq-server and neutron-openvswitch-agent
(make bench-neutron installs them), which the tests do not."""
import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD, SOURCE
from openstack import have_openstack

# Sanitizer builds leave the bench out (STRAIT_BUILD_BENCH=OFF).
pytestmark = pytest.mark.skipif(not (BUILD / "bench" / "strait-gen").exists(),
                                reason="the bench is not built here")


def test_neutron_bench_times_ports_and_rules_through_a_real_neutron(tmp_path):
    assert have_openstack(), "etcd, MariaDB or neutron is missing: scripts/bootstrap.sh installs them"
    p = subprocess.run(["/usr/bin/python3", str(SOURCE / "bench" / "neutron_bench.py"), str(BUILD),
                        "--ports", "3", "--rules", "1", "--switches", "strait",
                        "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, STRAIT_BUILD=str(BUILD)))
    assert p.returncode == 0, p.stderr[-4000:]
    doc = json.loads(Path(p.stdout.strip().splitlines()[-1]).read_text())
    assert doc["switches"] == ["strait"] and doc["ratios"] == []
    ports = next(r for r in doc["results"] if r["scenario"] == "port_to_active")
    assert len(ports["samples"]) == 3
    for s in ports["samples"]:
        at = s["at"]
        # POST, PUT, document in etcd, bound, up, ACTIVE: in that order.
        assert at["post"] < at["put"] < at["doc"] <= at["bound"] <= at["up"] <= at["active"], at
        assert 0 < s["strait_ms"] <= s["up_ms"] < s["total_ms"]
        assert abs(s["neutron_ms"] + s["up_ms"] + s["report_ms"] + s["guest_ms"] - s["total_ms"]) < 1
        # The report path: the driver's part (state up -> no provisioning
        # block left) and neutron's own status update after it; unseen when
        # the block came and went before the bench's first look after the PUT.
        if at["unblocked"]:
            assert at["up"] <= at["unblocked"] <= at["active"], at
            assert abs(s["driver_ms"] + s["neutron_status_ms"] - s["report_ms"]) < 1
    assert any(s["at"]["unblocked"] for s in ports["samples"])
    rules = next(r for r in doc["results"] if r["scenario"] == "rule_to_enforced")
    assert [s["op"] for s in rules["samples"]] == ["create", "delete"]
    for s in rules["samples"]:
        assert 0 < s["strait_ms"] < s["total_ms"]
    figures = {(r["scenario"], r["figure"]) for r in doc["summary"]}
    assert {("port_to_active", f) for f in ("total_ms", "neutron_ms", "strait_ms", "report_ms")} <= figures
    assert set(doc["goals"]) == {"strait_share_p99_below_20ms", "report_path_p99_below_200ms"}
