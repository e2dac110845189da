"""The Prometheus endpoint ([metrics], docs/api.md): scraped with urllib,
every line parsed by a strict parser of the text exposition format, and the
counters compared with the traffic the test sent through net_pcap ports.

One straitd for the module, its endpoint on a free loopback port; the tests
that check start-up refusals run straitd briefly on their own.
"""
import math
import re
import socket
import subprocess
import urllib.error
import urllib.request

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Raw

from conftest import (EAL_ARGS, STRAITD, Lab, Straitd, config_text, new_mac, unique, wait_for)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metrics_config(tmp, listen=None, enabled=None):
    extra = ["[metrics]"]
    if enabled is not None:
        extra.append(f"enabled = {'true' if enabled else 'false'}")
    if listen is not None:
        extra.append(f'listen = "{listen}"')
    return config_text(tmp, {}, extra="\n".join(extra))


@pytest.fixture(scope="module")
def sw(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("metrics")
    port = free_port()
    s = Straitd(tmp, config=metrics_config(tmp, f"127.0.0.1:{port}"))
    s.metrics_url = f"http://127.0.0.1:{port}/metrics"
    s.start()
    yield s
    rc = s.stop()
    s.kill()
    assert rc == 0, s.log.read_text()


@pytest.fixture
def lab(sw):
    lab = Lab(sw)
    yield lab
    lab.close()


# ---- the exposition format, strictly -----------------------------------------

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
# A label value: anything but " \ and newline, or one of the three escapes.
VALUE = r'(?:[^"\\\n]|\\[\\"n])*'
PAIRS = rf'{LABEL}="{VALUE}"(?:,{LABEL}="{VALUE}")*'
SAMPLE = re.compile(rf"^({NAME})(?:\{{({PAIRS})?\}})? (\S+)$")
PAIR = re.compile(rf'({LABEL})="({VALUE})"')
HELP = re.compile(rf"^# HELP ({NAME}) (.+)$")
TYPE = re.compile(rf"^# TYPE ({NAME}) (counter|gauge)$")


def unescape(v):
    return re.sub(r'\\([\\"n])', lambda m: "\n" if m.group(1) == "n" else m.group(1), v)


def parse_exposition(text):
    """{family: {"help", "type", "samples": {frozenset(labels): value}}}.
    Fails on anything a Prometheus server would refuse or frown on: a
    sample without HELP and TYPE before it, a family split in two, a series
    twice, a label twice, a counter without _total or below zero, a value
    that is no number, a missing final newline."""
    assert text.endswith("\n"), "the exposition must end with a newline"
    families, current, finished = {}, None, set()
    for n, line in enumerate(text[:-1].split("\n"), 1):
        where = f"line {n}: {line!r}"
        if m := HELP.match(line):
            name = m.group(1)
            assert name not in families and name not in finished, f"{where}: family again"
            if current:
                finished.add(current)
            families[name] = {"help": m.group(2), "type": None, "samples": {}}
            current = name
            continue
        if m := TYPE.match(line):
            assert m.group(1) == current and families[current]["type"] is None, \
                f"{where}: TYPE must follow its family's HELP, once"
            families[current]["type"] = m.group(2)
            continue
        assert not line.startswith("#"), f"{where}: a comment that is neither HELP nor TYPE"
        m = SAMPLE.match(line)
        assert m, f"{where}: not NAME{{LABELS}} VALUE"
        name, labels_text, value_text = m.groups()
        assert name == current and families[name]["type"], \
            f"{where}: sample outside its family (HELP and TYPE first, samples together)"
        pairs = PAIR.findall(labels_text or "")
        labels = {k: unescape(v) for k, v in pairs}
        assert len(labels) == len(pairs), f"{where}: a label twice"
        value = float(value_text)  # raises on anything but a number
        assert not math.isnan(value), f"{where}: NaN"
        key = frozenset(labels.items())
        assert key not in families[name]["samples"], f"{where}: series twice"
        families[name]["samples"][key] = value
        if families[name]["type"] == "counter":
            assert name.endswith("_total") and value >= 0, f"{where}: counter"
    for name, f in families.items():
        assert f["type"], f"{name}: HELP without TYPE"
    return families


def scrape(sw):
    with urllib.request.urlopen(sw.metrics_url, timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return parse_exposition(r.read().decode("utf-8"))


def value(families, name, **labels):
    return families[name]["samples"][frozenset(labels.items())]


def series(families, name):
    """[(labels dict, value)] of a family."""
    return [(dict(k), v) for k, v in families[name]["samples"].items()]


def http_status(url, method="GET"):
    body = b"x" if method in ("POST", "PUT") else None
    req = urllib.request.Request(url, method=method, data=body)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def udp(src, dst, payload, vlan=None):
    l2 = Ether(src=src, dst=dst)
    if vlan is not None:
        l2 = l2 / Dot1Q(vlan=vlan)
    return l2 / IP(src="10.7.0.1", dst="10.7.0.2") / UDP(sport=4000, dport=5000) / Raw(payload)


# ---- the tests -----------------------------------------------------------------


def test_parser_rejects_what_prometheus_would():
    """The strict parser is what the other tests lean on: it must fail."""
    ok = '# HELP a_total x\n# TYPE a_total counter\na_total{l="q\\"\\\\\\n"} 1\n'
    assert value(parse_exposition(ok), "a_total", l='q"\\\n') == 1
    for bad in ["a 1\n",                                               # no HELP/TYPE
                "# HELP a x\n# TYPE a gauge\na 1",                     # no final newline
                "# HELP a x\n# TYPE a gauge\na{l=\"x\"y\"} 1\n",      # unescaped quote
                "# HELP a x\n# TYPE a gauge\na{l=\"x\"} 1\na{l=\"x\"} 2\n",
                "# HELP a x\n# TYPE a counter\na 1\n",                  # counter without _total
                "# HELP a x\n# TYPE a gauge\na one\n",
                "# HELP a x\n# TYPE a gauge\n# HELP b x\n# TYPE b gauge\nb 1\na 1\n"]:
        with pytest.raises((AssertionError, ValueError)):
            parse_exposition(bad)


def test_idle_switch_exposes_every_family(sw):
    f = scrape(sw)
    st, show = sw.stats(), sw.call("show")
    for name in ["strait_port_rx_packets_total", "strait_port_tx_packets_total",
                 "strait_port_rx_bytes_total", "strait_port_tx_bytes_total",
                 "strait_port_drops_total", "strait_port_up",
                 "strait_worker_busy_cycles_total", "strait_worker_idle_cycles_total",
                 "strait_worker_packets_total", "strait_worker_cache_hits_total",
                 "strait_worker_cache_misses_total", "strait_worker_cache_evictions_total",
                 "strait_drops_total", "strait_snapshot_generation", "strait_ports_bound",
                 "strait_networks", "strait_libvirt_connected", "strait_tsc_hz",
                 "strait_build_info", "strait_mempool_buffers", "strait_mempool_buffers_in_use",
                 "strait_mempool_memory_bytes", "strait_memory_hugepages",
                 "strait_memory_reserved_bytes", "strait_heap_size_bytes",
                 "strait_heap_allocated_bytes", "strait_conntrack_capacity",
                 "strait_conntrack_entries", "strait_conntrack_new_per_second",
                 "strait_conntrack_created_total", "strait_conntrack_refused_total",
                 "strait_conntrack_invalid_total", "strait_conntrack_expired_total",
                 "strait_conntrack_flushed_total"]:
        assert name in f, name
    workers = [(str(w["id"]), str(w["lcore"])) for w in st["workers"]]
    assert sorted((l["worker"], l["lcore"]) for l, _ in series(f, "strait_worker_packets_total")) \
        == sorted(workers)
    assert value(f, "strait_snapshot_generation") == st["generation"]
    assert value(f, "strait_tsc_hz") == st["tsc_hz"] > 0
    assert value(f, "strait_libvirt_connected") == 0  # [libvirt] enabled = false
    assert value(f, "strait_build_info", version=show["version"]) == 1
    # Every drop reason has its series from the start, at zero when idle.
    reasons = {l["reason"] for l, _ in series(f, "strait_drops_total")}
    assert {"mtu_exceeded", "tagged_on_access_port", "invalid_src_mac", "tx_full"} <= reasons
    assert "none" not in reasons
    # DPDK's memory: straitd runs --no-huge here (EAL_ARGS), on 4 KiB pages.
    assert value(f, "strait_memory_hugepages") == 0 and show["memory"]["hugepages"] is False
    [(where, reserved)] = series(f, "strait_memory_reserved_bytes")
    assert where == {"socket": "0", "page_size": "4096"} and reserved > 0
    heaps = {l["socket"]: v for l, v in series(f, "strait_heap_size_bytes")}
    used = {l["socket"]: v for l, v in series(f, "strait_heap_allocated_bytes")}
    assert heaps.keys() == used.keys() and heaps
    assert all(0 < used[s] <= heaps[s] <= reserved for s in heaps)
    assert 0 < value(f, "strait_mempool_memory_bytes") <= sum(used.values())
    assert value(f, "strait_mempool_buffers_in_use") <= value(f, "strait_mempool_buffers")
    # Connection tracking: the table's size and the idle switch's rate.
    assert value(f, "strait_conntrack_capacity") == st["conntrack"]["capacity"] > 0
    assert value(f, "strait_conntrack_new_per_second") == 0
    assert f["strait_conntrack_new_per_second"]["type"] == "gauge"
    assert f["strait_conntrack_refused_total"]["type"] == "counter"
    idle = value(f, "strait_worker_idle_cycles_total", worker="0", lcore="1")
    assert wait_for(lambda: value(scrape(sw), "strait_worker_idle_cycles_total", worker="0",
                                  lcore="1") > idle, what="idle cycles to grow")


def test_counters_match_the_traffic_sent(sw, lab):
    net = lab.network("local", mtu=1000)
    a, b = new_mac(), new_mac()
    pb = lab.port(net, b)
    good = [udp(a, b, b"metrics-%d" % i + b"." * 40) for i in range(5)]
    bad = {
        "mtu_exceeded": [udp(a, b, b"x" * 1000)],
        "tagged_on_access_port": [udp(a, b, b"tagged" * 8, vlan=5), udp(a, b, b"t" * 50, vlan=0)],
        "invalid_src_mac": [udp("01:00:5e:00:00:01", b, b"mcast-src" * 6)],
    }
    frames = good + [f for fs in bad.values() for f in fs]
    pa = lab.port(net, a, send=frames)
    lab.sent_all(pa, len(frames))

    f = scrape(sw)
    st = sw.stats()
    A = {"port": pa.id, "network": net}
    B = {"port": pb.id, "network": net}
    assert value(f, "strait_port_rx_packets_total", **A) == len(frames)
    assert value(f, "strait_port_rx_bytes_total", **A) == sum(len(bytes(x)) for x in frames)
    assert value(f, "strait_port_tx_packets_total", **B) == len(good)
    assert value(f, "strait_port_tx_bytes_total", **B) == sum(len(bytes(x)) for x in good)
    assert value(f, "strait_port_rx_packets_total", **B) == 0
    assert value(f, "strait_port_tx_packets_total", **A) == 0
    drops_a = {l["reason"]: v for l, v in series(f, "strait_port_drops_total")
               if l["port"] == pa.id}
    assert {k: v for k, v in drops_a.items() if v} == {k: len(v) for k, v in bad.items()}
    assert value(f, "strait_port_up", **A) == 1 and value(f, "strait_port_up", **B) == 1
    assert value(f, "strait_ports_bound") == 2
    assert value(f, "strait_networks") == 1

    # The scrape says what `stats` says, port by port and reason by reason.
    for p in st["ports"]:
        labels = {"port": p["id"], "network": net if not p["id"].startswith("physnet:") else ""}
        for key in ("rx_packets", "rx_bytes", "tx_packets", "tx_bytes"):
            assert value(f, f"strait_port_{key}_total", **labels) == p[key], (p["id"], key)
    # This straitd saw no other traffic: switch-wide drops are A's drops.
    total = {l["reason"]: v for l, v in series(f, "strait_drops_total") if v}
    assert total == {k: len(v) for k, v in bad.items()} == st["drops"]
    worker_packets = sum(v for _, v in series(f, "strait_worker_packets_total"))
    assert worker_packets == len(frames)
    lookups = sum(v for _, v in series(f, "strait_worker_cache_hits_total")) + \
        sum(v for _, v in series(f, "strait_worker_cache_misses_total"))
    assert 0 < lookups <= len(frames)
    assert sum(v for _, v in series(f, "strait_worker_busy_cycles_total")) > 0

    assert len(pb.received()) == len(good)  # unbinds B: its series go with it
    f = scrape(sw)
    assert not [l for l, _ in series(f, "strait_port_rx_packets_total") if l["port"] == pb.id]
    assert value(f, "strait_ports_bound") == 1


def test_other_paths_are_404_and_other_methods_405(sw):
    root = sw.metrics_url.rsplit("/", 1)[0]
    for path in ["/", "/metric", "/metrics/", "/metrics/x", "/favicon.ico"]:
        status, _, body = http_status(root + path)
        assert status == 404, path
        assert b"/metrics" in body
    for method in ["POST", "PUT", "DELETE", "PATCH"]:
        status, headers, _ = http_status(sw.metrics_url, method)
        assert status == 405, method
        assert headers.get("Allow") == "GET, HEAD"
    status, headers, body = http_status(sw.metrics_url, "HEAD")
    assert status == 200 and body == b""
    # The endpoint still answers after all that, and so does the API.
    assert "strait_drops_total" in scrape(sw)
    assert sw.stats()["generation"] >= 1


def test_many_scrapes_in_a_row_and_at_once(sw):
    """Keep-alive and parallel connections all get whole answers."""
    import concurrent.futures
    for _ in range(20):
        scrape(sw)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: scrape(sw), range(32)))
    assert all("strait_port_up" in r for r in results)
    # One connection, kept alive, as Prometheus scrapes.
    import http.client
    host, port = sw.metrics_url.split("/")[2].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    for _ in range(3):
        conn.request("GET", "/metrics")
        r = conn.getresponse()
        assert r.status == 200 and r.getheader("Connection") != "close"
        parse_exposition(r.read().decode())
    conn.close()
    # A client that connects and says nothing does not block the others.
    with socket.create_connection((host, int(port))):
        scrape(sw)


def test_idle_connections_do_not_starve_a_scrape(sw):
    """Issue #23: 32 idle local connections, each held 10 s, made the
    endpoint stop answering. 100 of them now leave room for a scrape, which
    answers at once, and each is closed after a few silent seconds."""
    import time
    host, port = sw.metrics_url.split("/")[2].split(":")
    idle = [socket.create_connection((host, int(port)), timeout=10) for _ in range(100)]
    try:
        start = time.monotonic()
        try:
            with urllib.request.urlopen(sw.metrics_url, timeout=5) as r:
                body = r.read()
        except OSError as e:
            pytest.fail(f"no answer to a scrape with 100 idle connections open: {e!r}")
        assert b"strait_port_up" in body and time.monotonic() - start < 2.0
        # The silent ones are closed by the server (EOF), well before the
        # 10 s that used to hold a slot.
        for s in idle:
            s.settimeout(max(0.1, start + 6.0 - time.monotonic()))
            try:
                assert s.recv(1) == b"", "an idle connection was answered"
            except socket.timeout:
                pytest.fail(f"an idle connection still open {time.monotonic() - start:.1f} s later")
    finally:
        for s in idle:
            s.close()


# ---- start-up ------------------------------------------------------------------


def run_straitd_expecting_refusal(tmp, config):
    cfg = tmp / "straitd.toml"
    cfg.write_text(config)
    p = subprocess.run([str(STRAITD), "--config", str(cfg), "--", *EAL_ARGS, "--file-prefix",
                        unique("mref")], capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout + p.stderr


@pytest.mark.parametrize("listen,problem", [
    ("127.0.0.1:http", 'port "http" is not a number 1..65535'),
    ("127.0.0.1:70000", 'port "70000" is not a number 1..65535'),
    ("localhost:9464", '"localhost" is not a numeric IPv4 address'),
    ("127.0.0.1", 'is not ADDRESS:PORT'),
    ("::1:9464", "an IPv6 address goes in brackets"),
])
def test_bad_listen_refuses_to_start_naming_the_key(tmp_path, listen, problem):
    rc, out = run_straitd_expecting_refusal(tmp_path, metrics_config(tmp_path, listen))
    assert rc == 2, out
    assert "metrics.listen: " in out and problem in out, out
    assert " ready" not in out


def test_disabled_endpoint_does_not_listen(tmp_path):
    port = free_port()
    s = Straitd(tmp_path, config=metrics_config(tmp_path, f"127.0.0.1:{port}", enabled=False))
    try:
        s.start()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        assert s.stop() == 0
    finally:
        s.kill()


def test_taken_port_is_logged_and_the_switch_runs_on(tmp_path):
    """The endpoint is observability: a port held by another program must
    not keep the switch from forwarding."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        s = Straitd(tmp_path, config=metrics_config(tmp_path, f"127.0.0.1:{port}"))
        try:
            s.start()
            assert s.stats()["generation"] >= 1
            log = s.log.read_text()
            assert f"metrics.listen 127.0.0.1:{port}: cannot listen" in log, log
            assert "running without the metrics endpoint" in log
            assert s.stop() == 0
        finally:
            s.kill()
