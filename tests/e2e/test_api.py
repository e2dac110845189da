"""The control API and straitctl (docs/api.md): exit codes 0/1/2, -o json on
every command, refused requests change nothing, the raw socket protocol."""
import itertools
import json
import os
import re
import stat
import subprocess

import pytest

from conftest import STRAITCTL, new_mac, read_line, unique, uuid_for, wait_for

_n = itertools.count(1)


@pytest.fixture(scope="module")
def sw(straitd_factory):
    return straitd_factory(physnets={"physnet1": "net_pcap_up1,tx_pcap={tmp}/physnet1_tx.pcap"},
                           name="api")


def devargs(sw):
    n = next(_n)
    return f"net_pcap{n + 100},tx_pcap={sw.tmp}/api_port{n}.pcap", sw.tmp / f"api_port{n}.pcap"


def port_uuid():
    return uuid_for(1000 + next(_n))


def state(sw):
    """Everything a refused request must leave as it was."""
    show = sw.call("show")
    return {"networks": show["networks"], "ports": show["ports"],
            "generation": show["generation"], "physnets": show["physnets"]}


@pytest.fixture
def net(sw):
    """A local network, deleted (with its ports) at the end of the test."""
    nid = unique("apinet")
    sw.ctl("network", "create", nid, "--type", "local")
    yield nid
    for p in sw.call("port.list")["ports"]:
        if p["network"] == nid:
            sw.call("port.unbind", {"id": p["id"]})
    sw.request("network.delete", {"id": nid})


def bind(sw, net, mac=None, pid=None, check=True, json_out=False):
    pid = pid or port_uuid()
    d, _ = devargs(sw)
    p = sw.ctl("port", "bind", pid, "--network", net, "--mac", mac or new_mac(), "--ethdev", d,
               check=check, json_out=json_out)
    return pid, p


# ---- the socket ------------------------------------------------------------------


def test_api_socket_is_owner_only(sw):
    st = os.stat(sw.sock)
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert st.st_uid == os.getuid()


def test_malformed_json_gets_an_error_and_the_connection_keeps_answering(sw):
    with sw.connect() as s:
        s.sendall(b'{"id": 1, "method": "network.list"\n')  # cut short
        bad = json.loads(read_line(s))
        s.sendall(b'[1, 2, 3]\n')
        not_object = json.loads(read_line(s))
        s.sendall(b'{"id": "x", "params": {}}\n')
        no_method = json.loads(read_line(s))
        s.sendall(b'{"id": 9, "method": "network.list", "params": [1]}\n')
        bad_params = json.loads(read_line(s))
        s.sendall(b'{"id": 5, "method": "network.list"}\n')
        good = json.loads(read_line(s))
    assert bad["ok"] is False and bad["error"]["code"] == "invalid_argument"
    assert bad["id"] is None
    assert not_object["ok"] is False and not_object["error"]["code"] == "invalid_argument"
    assert no_method["ok"] is False and no_method["id"] == "x"
    assert no_method["error"]["message"].startswith("method")
    assert bad_params["ok"] is False and bad_params["id"] == 9
    assert bad_params["error"]["message"].startswith("params")
    assert good["ok"] is True and good["id"] == 5 and "networks" in good["result"]


def test_request_id_is_echoed_whatever_its_type(sw):
    for rid in [7, "seven", {"a": [1, 2]}, [3], None, 1.5, True]:
        r = sw.request("network.list", rid=rid)
        assert r["ok"] is True and r["id"] == rid


def test_pipelined_requests_are_answered_in_order(sw):
    reqs = [{"id": i, "method": m} for i, m in
            enumerate(["network.list", "no.such.method", "port.list", "stats", "show"])]
    with sw.connect() as s:
        s.sendall("".join(json.dumps(r) + "\n" for r in reqs).encode())
        f = s.makefile("rb")
        replies = [json.loads(f.readline()) for _ in reqs]
    assert [r["id"] for r in replies] == list(range(len(reqs)))
    assert [r["ok"] for r in replies] == [True, False, True, True, True]


def test_oversized_request_is_refused_and_the_switch_keeps_answering(sw):
    with sw.connect() as s:
        try:
            s.sendall(b"x" * (1 << 20) + b"y" * 4096)
        except (BrokenPipeError, ConnectionResetError):
            pass
        r = json.loads(read_line(s))
    assert r["ok"] is False and r["error"]["code"] == "invalid_argument"
    assert sw.request("network.list")["ok"] is True


def test_unknown_method_is_refused(sw):
    r = sw.request("no.such.method", {})
    assert r["ok"] is False
    assert r["error"]["code"] == "invalid_argument"
    assert "no.such.method" in r["error"]["message"]
    p = sw.ctl("call", "no.such.method", check=False)
    assert p.returncode == 1
    assert "unknown method" in p.stderr
    assert p.stdout == ""


# ---- straitctl exit codes and output ----------------------------------------------


# (straitctl arguments, the API method whose result it prints)
READ_COMMANDS = [
    (["network", "list"], "network.list"),
    (["port", "list"], "port.list"),
    (["port", "show", "{port}"], "port.show"),
    (["show"], None),
    (["stats"], None),
    (["call", "network.list"], "network.list"),
    (["call", "port.show", '{{"id": "{port}"}}'], "port.show"),
]


@pytest.fixture(scope="module")
def bound_port(sw):
    nid = unique("jsonnet")
    sw.call("network.create", {"id": nid, "type": "vlan", "physnet": "physnet1",
                               "segmentation_id": 300})
    pid, _ = bind(sw, nid, mac="02:e2:aa:00:00:01")
    yield pid
    sw.call("port.unbind", {"id": pid})
    sw.call("network.delete", {"id": nid})


@pytest.mark.parametrize("cmd,method", READ_COMMANDS, ids=[" ".join(c[:2]) for c, _ in READ_COMMANDS])
def test_read_commands_print_json_with_o_json(sw, bound_port, cmd, method):
    cmd = [c.format(port=bound_port) for c in cmd]
    out = json.loads(sw.ctl(*cmd, json_out=True).stdout)
    assert isinstance(out, dict)
    if method:  # the very result of the API (show and stats change between calls)
        assert out == sw.call(method, {"id": bound_port} if method == "port.show" else None)
    else:
        assert out.keys() == sw.call(cmd[0]).keys()
    # -o after the command works too, and the table form succeeds
    assert json.loads(sw.ctl(*cmd, "-o", "json").stdout).keys() == out.keys()
    table = sw.ctl(*cmd)
    assert table.stdout.strip() and table.stderr == ""


def test_write_commands_print_json_with_o_json(sw):
    nid = unique("wnet")
    out = json.loads(sw.ctl("network", "create", nid, "--type", "vlan", "--physnet", "physnet1",
                            "--segmentation-id", 301, "--mtu", 1400, json_out=True).stdout)
    assert out == {"id": nid, "type": "vlan", "physnet": "physnet1", "segmentation_id": 301,
                   "mtu": 1400, "local_vlan": 0, "ports": 0}
    pid, mac = port_uuid(), new_mac()
    d, _ = devargs(sw)
    out = json.loads(sw.ctl("port", "bind", pid, "--network", nid, "--mac", mac, "--ip", "10.0.0.5",
                            "--ip", "fd00::5", "--ethdev", d, json_out=True).stdout)
    assert out["id"] == pid and out["network"] == nid and out["mac"] == mac
    assert out["fixed_ips"] == ["10.0.0.5", "fd00::5"]
    assert out["attach"] == {"type": "ethdev", "devargs": d}
    assert out["state"] == "up" and out["local_vlan"] >= 1
    assert isinstance(out["dp_port"], int) and isinstance(out["ethdev"], int)
    assert json.loads(sw.ctl("network", "list", json_out=True).stdout)["networks"][0]["id"]
    assert json.loads(sw.ctl("port", "unbind", pid, json_out=True).stdout) == {}
    assert json.loads(sw.ctl("network", "delete", nid, json_out=True).stdout) == {}
    assert nid not in [n["id"] for n in sw.call("network.list")["networks"]]


def test_straitctl_usage_errors_exit_2(sw):
    for args in (["network"], ["network", "create", "x"], ["port", "bind", port_uuid()],
                 ["-o", "yaml", "show"], ["call", "network.list", "not json"],
                 ["call", "network.list", "[1]"], ["no-such-command"]):
        p = sw.ctl(*args, check=False)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert p.stderr.strip(), args
    assert subprocess.run([str(STRAITCTL)], capture_output=True).returncode == 2


def test_straitctl_cannot_reach_the_switch_exits_2(sw, tmp_path):
    p = subprocess.run([str(STRAITCTL), "-s", str(tmp_path / "nothing.sock"), "show"],
                       capture_output=True, text=True)
    assert p.returncode == 2
    assert "nothing.sock" in p.stderr
    env = dict(os.environ, STRAIT_SOCKET=str(sw.sock))
    p = subprocess.run([str(STRAITCTL), "network", "list"], capture_output=True, env=env)
    assert p.returncode == 0  # $STRAIT_SOCKET is the default socket


def test_straitctl_log_level_reads_and_changes_the_level_at_run_time(sw):
    before = sw.ctl("log-level").stdout.strip()
    assert before in ("debug", "info", "warning", "error")
    try:
        assert sw.ctl("log-level", "debug").stdout.strip() == "debug"
        assert sw.ctl("log-level").stdout.strip() == "debug"
        assert sw.call("log.level") == {"level": "debug"}
        assert "log level set to debug" in sw.log.read_text(errors="replace")
        assert json.loads(sw.ctl("log-level", json_out=True).stdout) == {"level": "debug"}
        p = sw.ctl("log-level", "chatty", check=False)  # refused before anything is sent
        assert p.returncode == 2 and "chatty" in p.stderr
        assert sw.ctl("log-level").stdout.strip() == "debug"
    finally:
        sw.ctl("log-level", before)
    assert sw.ctl("log-level").stdout.strip() == before


def test_straitctl_version_and_help():
    p = subprocess.run([str(STRAITCTL), "--version"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.strip().startswith("straitctl ")
    p = subprocess.run([str(STRAITCTL), "--help"], capture_output=True, text=True)
    assert p.returncode == 0
    for word in ("network", "port", "show", "stats", "call", "--socket", "--output"):
        assert word in p.stdout


# ---- refused requests change nothing ------------------------------------------------


def test_bind_with_duplicate_mac_in_same_network_is_refused_and_changes_nothing(sw, net):
    mac = new_mac()
    first, _ = bind(sw, net, mac=mac)
    before = state(sw)
    d, tx = devargs(sw)
    p = sw.ctl("port", "bind", port_uuid(), "--network", net, "--mac", mac, "--ethdev", d,
               check=False)
    assert p.returncode == 1
    assert "mac" in p.stderr and first in p.stderr
    assert state(sw) == before
    assert not tx.exists()  # the device was never opened
    # ... and its name is free: the same devargs bind with another MAC
    second = port_uuid()
    sw.ctl("port", "bind", second, "--network", net, "--mac", new_mac(), "--ethdev", d)
    assert len([p for p in sw.call("port.list")["ports"] if p["network"] == net]) == 2


def test_same_mac_in_another_network_is_accepted(sw, net):
    mac = new_mac()
    bind(sw, net, mac=mac)
    other = unique("apinet")
    sw.call("network.create", {"id": other, "type": "local"})
    try:
        pid, _ = bind(sw, other, mac=mac)
        sw.call("port.unbind", {"id": pid})
    finally:
        sw.call("network.delete", {"id": other})


def test_bind_with_duplicate_port_id_is_refused(sw, net):
    pid, _ = bind(sw, net)
    before = state(sw)
    _, p = bind(sw, net, pid=pid, check=False)
    assert p.returncode == 1 and "already_exists" in p.stderr
    _, p = bind(sw, net, pid=pid.upper(), check=False)  # UUIDs compare without case
    assert p.returncode == 1 and "already_exists" in p.stderr
    assert state(sw) == before


def test_bind_with_device_that_cannot_be_probed_changes_nothing(sw, net):
    before = state(sw)
    p = sw.ctl("port", "bind", port_uuid(), "--network", net, "--mac", new_mac(), "--ethdev",
               "net_nosuchdriver0,foo=bar", check=False)
    assert p.returncode == 1 and "device_error" in p.stderr
    assert state(sw) == before
    n = [x for x in sw.call("network.list")["networks"] if x["id"] == net][0]
    assert n["local_vlan"] == 0 and n["ports"] == 0  # no local VLAN taken


def test_bind_with_the_device_of_a_physnet_or_another_port_is_refused(sw, net):
    pid, _ = bind(sw, net)
    taken = sw.call("port.show", {"id": pid})["attach"]["devargs"]
    before = state(sw)
    for devargs_ in ("net_pcap_up1,tx_pcap=/dev/null", taken):
        p = sw.ctl("port", "bind", port_uuid(), "--network", net, "--mac", new_mac(), "--ethdev",
                   devargs_, check=False)
        assert p.returncode == 1 and "attach.devargs" in p.stderr, p.stderr
    assert state(sw) == before


@pytest.mark.parametrize("params,field", [
    ({"network": "nonet"}, "network"),
    ({"mac": "01:00:5e:00:00:01"}, "mac"),
    ({"mac": "00:00:00:00:00:00"}, "mac"),
    ({"mac": "02:00:00:00:00"}, "mac"),
    ({"id": "not-a-uuid"}, "id"),
    ({"fixed_ips": ["10.0.0.300"]}, "fixed_ips[0]"),
    ({"fixed_ips": ["10.0.0.1", "10.0.0.1"]}, "fixed_ips[1]"),
    ({"attach": {"type": "bogus", "devargs": "x"}}, "attach.type"),
    ({"attach": {"type": "ethdev", "devargs": "net_pcap0, tx_pcap=x"}}, "attach.devargs"),
    ({"colour": "blue"}, "colour"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_bad_port_bind_is_refused_naming_the_field(sw, net, params, field):
    d, tx = devargs(sw)
    req = {"id": port_uuid(), "network": net, "mac": new_mac(),
           "attach": {"type": "ethdev", "devargs": d}}
    req.update(params)
    before = state(sw)
    r = sw.request("port.bind", req)
    assert r["ok"] is False, r
    assert r["error"]["message"].startswith(field), r["error"]
    assert state(sw) == before
    assert not tx.exists()


@pytest.mark.parametrize("params,field", [
    ({"type": "vlan", "physnet": "physnet1", "segmentation_id": 5000}, "segmentation_id"),
    ({"type": "vlan", "physnet": "physnet1", "segmentation_id": 0}, "segmentation_id"),
    ({"type": "vlan", "physnet": "physnet1", "segmentation_id": "7"}, "segmentation_id"),
    ({"type": "vlan", "physnet": "physnet1"}, "segmentation_id"),
    ({"type": "vlan", "segmentation_id": 7}, "physnet"),
    ({"type": "vlan", "physnet": "nosuchnet", "segmentation_id": 7}, "physnet"),
    ({"type": "flat", "physnet": "physnet1", "segmentation_id": 7}, "segmentation_id"),
    ({"type": "local", "physnet": "physnet1"}, "physnet"),
    ({"type": "bridge"}, "type"),
    ({"type": "local", "mtu": 67}, "mtu"),
    ({"type": "local", "mtu": 9001}, "mtu"),
    ({"type": "local", "id": "bad id"}, "id"),
    ({"type": "local", "colour": "blue"}, "colour"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_bad_network_create_is_refused_naming_the_field(sw, params, field):
    before = state(sw)
    req = {"id": unique("badnet")}
    req.update(params)
    r = sw.request("network.create", req)
    assert r["ok"] is False, r
    assert r["error"]["message"].startswith(field), r["error"]
    assert state(sw) == before


def test_network_create_with_segmentation_id_5000_names_the_field(sw):
    before = state(sw)
    p = sw.ctl("network", "create", unique("n"), "--type", "vlan", "--physnet", "physnet1",
               "--segmentation-id", 5000, check=False)
    assert p.returncode == 1
    assert "segmentation_id" in p.stderr and "5000" in p.stderr
    assert p.stdout == ""
    assert state(sw) == before


def test_vlan_already_used_on_the_physnet_is_refused(sw):
    a, b = unique("seg"), unique("seg")
    sw.call("network.create", {"id": a, "type": "vlan", "physnet": "physnet1",
                               "segmentation_id": 302})
    try:
        before = state(sw)
        p = sw.ctl("network", "create", b, "--type", "vlan", "--physnet", "physnet1",
                   "--segmentation-id", 302, check=False)
        assert p.returncode == 1 and "conflict" in p.stderr and a in p.stderr
        p = sw.ctl("network", "create", a, "--type", "local", check=False)
        assert p.returncode == 1 and "already_exists" in p.stderr
        assert state(sw) == before
    finally:
        sw.call("network.delete", {"id": a})


def test_second_flat_network_on_a_physnet_is_refused(sw):
    a, b = unique("flat"), unique("flat")
    sw.call("network.create", {"id": a, "type": "flat", "physnet": "physnet1"})
    try:
        r = sw.request("network.create", {"id": b, "type": "flat", "physnet": "physnet1"})
        assert r["ok"] is False and r["error"]["code"] == "conflict"
    finally:
        sw.call("network.delete", {"id": a})


def test_network_delete_with_bound_ports_is_refused(sw, net):
    pid, _ = bind(sw, net)
    before = state(sw)
    p = sw.ctl("network", "delete", net, check=False)
    assert p.returncode == 1 and "conflict" in p.stderr
    assert state(sw) == before
    sw.ctl("port", "unbind", pid)
    sw.ctl("network", "delete", net)
    assert net not in [n["id"] for n in sw.call("network.list")["networks"]]


def test_unknown_port_and_network_are_not_found(sw):
    for args in (["port", "unbind", port_uuid()], ["port", "show", port_uuid()],
                 ["network", "delete", "no-such-network"]):
        p = sw.ctl(*args, check=False)
        assert p.returncode == 1 and "not_found" in p.stderr, (args, p.stderr)


def test_unbind_releases_the_local_vlan_and_the_device(sw, net):
    pid, _ = bind(sw, net)
    d = sw.call("port.show", {"id": pid})["attach"]["devargs"]
    assert sw.call("port.show", {"id": pid})["local_vlan"] >= 1
    sw.ctl("port", "unbind", pid)
    n = [x for x in sw.call("network.list")["networks"] if x["id"] == net][0]
    assert n["local_vlan"] == 0 and n["ports"] == 0
    # the same device can be bound again (it was closed and unplugged)
    sw.ctl("port", "bind", port_uuid(), "--network", net, "--mac", new_mac(), "--ethdev", d)


def test_port_ids_are_case_insensitive(sw, net):
    pid = port_uuid().upper()
    bind(sw, net, pid=pid)
    assert sw.call("port.show", {"id": pid})["id"] == pid.lower()
    p = sw.ctl("port", "unbind", pid, check=False)
    assert p.returncode == 0, p.stderr


def test_fixed_ip_used_in_the_same_network_is_refused(sw, net):
    d, _ = devargs(sw)
    sw.ctl("port", "bind", port_uuid(), "--network", net, "--mac", new_mac(), "--ip", "10.5.0.1",
           "--ethdev", d)
    before = state(sw)
    d2, tx2 = devargs(sw)
    p = sw.ctl("port", "bind", port_uuid(), "--network", net, "--mac", new_mac(), "--ip", "10.5.0.2",
               "--ip", "10.5.0.1", "--ethdev", d2, check=False)
    assert p.returncode == 1 and "conflict" in p.stderr and "fixed_ips" in p.stderr
    assert state(sw) == before and not tx2.exists()


# ---- what straitctl tells of a port's device --------------------------------------


def table_rows(text):
    """A straitctl table as {first cell: {header: cell}} (no cell holds a space)."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    return {r[0]: dict(zip(lines[0], r)) for r in lines[1:]}


def test_an_ethdev_port_whose_link_is_down_says_so_with_its_queues(sw, net):
    """Issue #23: `port list` said `up` for an ethdev port whose link was
    down, and nothing showed an ethdev's rx/tx queue counts. A memif server
    port that no peer has joined forwards (state up) with its link down."""
    pid = port_uuid()
    sw.ctl("port", "bind", pid, "--network", net, "--mac", new_mac(), "--ethdev",
           f"net_memif_api{next(_n)},role=server,socket={sw.tmp}/{pid[:8]}.memif")
    wait_for(lambda: sw.call("port.show", {"id": pid})["state"] == "up", what="port up")
    port = sw.call("port.show", {"id": pid})
    assert (port["link"], port["rx_queues"], port["tx_queues"]) == ("down", 1, 1)
    row = table_rows(sw.ctl("port", "list").stdout)[pid]
    assert (row["STATE"], row["LINK"]) == ("up", "down")
    detail = sw.ctl("port", "show", pid).stdout
    assert re.search(r"^link: +down$", detail, re.M), detail
    assert re.search(r"^queues: +1 rx, 1 tx$", detail, re.M), detail
    # The physnet's NIC (net_pcap) has its link up.
    physnet = sw.call("show")["physnets"][0]
    assert (physnet["link"], physnet["rx_queues"], physnet["tx_queues"]) == ("up", 1, 1)
    shown = sw.ctl("show").stdout
    physnets = table_rows(shown.split("Physnets\n")[1].split("\n\n")[0])["physnet1"]
    assert (physnets["LINK"], physnets["RXQ"], physnets["TXQ"]) == ("up", "1", "1")
    assert re.search(r"^libvirt +disabled$", shown, re.M), shown
