"""A hostile or careless local API client must never take straitd down, nor
hold the other clients up (docs/api.md "Limits"). Each test here once killed
or stalled the switch."""
import json
import socket
import threading
import time

import pytest

from conftest import read_line, unique, uuid_for, new_mac


@pytest.fixture(scope="module")
def sw(straitd_factory):
    return straitd_factory(name="hostile")


def rss_kib(sw):
    for line in open(f"/proc/{sw.proc.pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def alive(sw):
    assert sw.proc.poll() is None, "straitd died:\n" + sw.log.read_text()[-3000:]
    assert sw.request("network.list")["ok"] is True


def read_replies(s, n, timeout=120):
    """n reply lines from s (events would be lines too: none are expected)."""
    s.settimeout(timeout)
    f = s.makefile("rb")
    return [json.loads(f.readline()) for _ in range(n)]


def test_many_requests_in_one_write_are_all_answered(sw):
    # A request answered at once used to re-enter the request loop: the stack
    # grew per request and straitd died of SIGSEGV after ~5 500 replies.
    n = 20000
    with sw.connect() as s:
        batch = "".join(json.dumps({"id": i, "method": "log.level"}) + "\n" for i in range(n))
        t = threading.Thread(target=s.sendall, args=(batch.encode(),))
        t.start()
        replies = read_replies(s, n)
        t.join()
    assert [r["id"] for r in replies] == list(range(n))
    assert all(r["ok"] for r in replies)
    alive(sw)


def test_wrong_type_error_with_multibyte_text_is_valid_utf8(sw):
    # The error quoted the value cut at 37 bytes, inside a character; the
    # reply could not be serialised and straitd aborted.
    for k in range(1, 4):
        mtu = "x" * k + "é" * 30
        r = sw.request("network.create", {"id": unique("utf"), "type": "local", "mtu": mtu})
        assert r["ok"] is False and r["error"]["code"] == "invalid_argument"
        msg = r["error"]["message"]
        assert msg.startswith("mtu: ") and "\ufffd" not in msg
        assert "é" in msg  # the value is quoted back, whole characters only
    with sw.connect() as s:  # the same value as a request id, echoed back
        s.sendall(b'{"id": "\xc3\xa9\xc3", "method": "network.list"}\n')  # not UTF-8 at the end
        r = json.loads(read_line(s))
    assert r["ok"] is False and r["error"]["message"] == "request: not valid JSON"
    alive(sw)


@pytest.mark.parametrize("where", ["id", "params"])
def test_deeply_nested_request_is_refused(sw, where):
    # 65 000 levels of "id" (100 000 of "params"), 130-200 KB: copying or
    # printing them recursed until the stack ran out.
    depth = 65000 if where == "id" else 100000
    nested = "[" * depth + "]" * depth
    line = (f'{{"id": {nested}, "method": "network.list"}}' if where == "id"
            else f'{{"id": 1, "method": "network.list", "params": {{"a": {nested}}}}}')
    with sw.connect() as s:
        s.sendall(line.encode() + b"\n")
        r = json.loads(read_line(s))
        assert r["ok"] is False and r["error"]["code"] == "invalid_argument"
        assert r["error"]["message"] == "request: nested deeper than 64 levels"
        ok = '{"id": 2, "method": "network.list", "params": {"x": ' + "[" * 60 + "]" * 60 + "}}"
        s.sendall(ok.encode() + b"\n")  # the same connection goes on; 60 levels are fine
        r2 = json.loads(read_line(s))
    assert r2["id"] == 2 and r2["ok"] is True
    alive(sw)


def test_pipelining_client_does_not_hold_up_the_others(sw):
    # The control thread served one connection until it was drained: 5 000
    # pipelined `show`s delayed every other client by 3-4 s.
    n = 20000
    hog = sw.connect()
    batch = "".join(json.dumps({"id": i, "method": "show"}) + "\n" for i in range(n)).encode()
    def send_all():
        try:
            hog.sendall(batch)
        except OSError:
            pass  # closed by the test once it has its answer
    t = threading.Thread(target=send_all, daemon=True)
    t.start()
    time.sleep(0.2)  # the hog's requests are queued and being answered
    t0 = time.monotonic()
    r = sw.request("network.list")
    waited = time.monotonic() - t0
    assert r["ok"] is True
    # Served between the hog's slices, not after its 20 000 requests (which
    # take straitd tens of seconds on this machine).
    assert waited < 5.0, f"another client waited {waited:.1f} s"
    hog.close()
    alive(sw)


def test_client_that_never_reads_its_replies_stays_bounded(sw):
    # 40 000 requests, replies never read: straitd's RSS grew from 143 to
    # 729 MiB and stayed at 355 MiB after the client went.
    before = rss_kib(sw)
    hog = sw.connect()
    hog.setblocking(False)
    line = json.dumps({"id": 1, "method": "show"}).encode() + b"\n"
    sent, deadline = 0, time.monotonic() + 20
    # It sends until the socket takes no more: straitd stopped reading it.
    stalled_since = None
    while sent < 40000 and time.monotonic() < deadline:
        try:
            hog.send(line)
            sent += 1
            stalled_since = None
        except BlockingIOError:
            stalled_since = stalled_since or time.monotonic()
            if time.monotonic() - stalled_since > 2:
                break
            time.sleep(0.01)
    assert sent < 40000, "straitd read all 40 000 requests of a client that reads nothing"
    grown_mib = (rss_kib(sw) - before) / 1024
    assert grown_mib < 64, f"RSS grew by {grown_mib:.0f} MiB"
    alive(sw)  # and the others are served meanwhile
    hog.close()
    alive(sw)


def test_missed_events_are_replayed_on_subscribe(sw):
    nid = unique("evnet")
    sw.call("network.create", {"id": nid, "type": "local"})
    pid = uuid_for(7001)
    with sw.connect() as first:
        first.sendall(b'{"id": "s", "method": "events.subscribe"}\n')
        sub = json.loads(read_line(first))["result"]
    assert sub["subscribed"] is True and sub["replayed"] == 0
    epoch, seq0 = sub["epoch"], sub["seq"]
    # Events nobody is subscribed to: a subscriber that was away asks for them.
    sw.call("port.bind", {"id": pid, "network": nid, "mac": new_mac(),
                          "attach": {"type": "ethdev",
                                     "devargs": f"net_pcap7001,tx_pcap={sw.tmp}/ev.pcap"}})
    sw.call("port.unbind", {"id": pid})

    def subscribe(params):
        with sw.connect() as s:
            s.sendall(json.dumps({"id": "s", "method": "events.subscribe",
                                  "params": params}).encode() + b"\n")
            f = s.makefile("rb")
            res = json.loads(f.readline())["result"]
            return res, [json.loads(f.readline()) for _ in range(res["replayed"])]

    res, evs = subscribe({"since": seq0, "epoch": epoch})
    mine = [e for e in evs if e["port"] == pid]
    assert [e["event"] for e in mine] == ["port-up", "vif-plugged", "port-down", "port-unbound"] or \
        [e["event"] for e in mine] == ["port-up", "vif-plugged", "port-unbound"]
    assert [e["seq"] for e in evs] == list(range(seq0 + 1, res["seq"] + 1))
    assert res["complete"] is True
    # From a later point: only what came after it.
    res2, evs2 = subscribe({"since": evs[0]["seq"], "epoch": epoch})
    assert evs2 == evs[1:]
    # Another straitd's epoch (a restart): everything this one still holds.
    res3, evs3 = subscribe({"since": res["seq"], "epoch": "another"})
    assert res3["complete"] is True and evs3[-len(evs):] == evs and evs3[0]["seq"] == 1
    bad = sw.request("events.subscribe", {"since": -1})
    assert bad["ok"] is False and bad["error"]["message"].startswith("params.since")
    sw.call("network.delete", {"id": nid})
