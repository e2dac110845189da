"""A real neutron-server drives straitd through etcd (docs/openstack.md).

Once per module: etcd, MariaDB and neutron-server (ML2 with networking-strait
from this repository, noauth, fake:// transport) as plain processes, a
stand-in for nova's API that records the external events neutron sends, and
one straitd with [etcd] as host "compute-1". Everything goes through
neutron's REST API, as nova and an operator would; the VMs are virtio-user
guests (vm.py) on the vhost-user sockets neutron's binding names, QEMU's
side being the server, as nova plugs them.
"""
import json
import time
import uuid

import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Dot1Q, Ether

from conftest import Straitd, config_text, wait_for
from openstack import Etcd, FakeNova, MariaDB, NeutronError, NeutronServer, have_openstack
from vm import VM, have_testpmd

HOST = "compute-1"
PREFIX = "/strait"

pytestmark = pytest.mark.skipif(not have_testpmd(), reason="dpdk-testpmd is not installed")


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    assert have_openstack(), "etcd, MariaDB or neutron is missing: scripts/bootstrap.sh installs them"
    tmp = tmp_path_factory.mktemp("cloud")
    c = type("Cloud", (), {})()
    c.tmp = tmp
    c.etcd = Etcd(tmp).start()
    c.db = MariaDB(tmp).start()
    c.nova = FakeNova()
    c.neutron = NeutronServer(tmp, c.db, c.etcd, c.nova, prefix=PREFIX, service_plugins="trunk,qos",
                              extension_drivers="port_security,qos")
    c.neutron.migrate()
    c.neutron.start()
    swdir = tmp / "straitd"
    extra = f'\n[etcd]\nendpoints = ["{c.etcd.url}"]\nhost = "{HOST}"\nprefix = "{PREFIX}"\nlease_ttl_s = 5\n'
    cfg = config_text(swdir, {"physnet1": f"net_pcap_ns1,tx_pcap={swdir}/physnet1_tx.pcap"})
    (swdir / "vhost").mkdir(parents=True)  # where QEMU (here: the VMs) creates the sockets
    c.sw = Straitd(swdir, config=cfg + extra).start()
    wait_for(lambda: f"{PREFIX}/states/{HOST}/alive" in c.etcd.get_prefix(f"{PREFIX}/states/"),
             timeout=20, what="straitd alive in etcd")
    c.vms = []
    yield c
    for vm in c.vms:
        vm.close()
    problems = []
    if c.sw.proc.poll() is not None:
        problems.append(f"straitd died:\n{c.sw.log.read_text()[-3000:]}")
    c.sw.stop()
    c.neutron.stop()
    c.db.stop()
    c.etcd.stop()
    c.nova.close()
    assert not problems, problems


def state(c, port_id):
    v = c.etcd.get_prefix(f"{PREFIX}/states/{HOST}/ports/{port_id}")
    return json.loads(next(iter(v.values()))) if v else None


def neutron_port(c, port_id):
    return c.neutron.get(f"/v2.0/ports/{port_id}")["port"]


def wait_status(c, port_id, status, timeout=30):
    wait_for(lambda: neutron_port(c, port_id)["status"] == status, timeout=timeout, interval=0.1,
             what=f"port {port_id} {status} in neutron (straitd state: {state(c, port_id)})")


def network(c, vlan):
    n = c.neutron.post("/v2.0/networks", {"network": {
        "name": f"net{vlan}", "provider:network_type": "vlan",
        "provider:physical_network": "physnet1", "provider:segmentation_id": vlan}})["network"]
    s = c.neutron.post("/v2.0/subnets", {"subnet": {
        "network_id": n["id"], "cidr": f"10.{vlan % 250}.0.0/24", "ip_version": 4,
        "enable_dhcp": False}})["subnet"]
    return n, s


def group(c, name, tcp_ports=()):
    g = c.neutron.post("/v2.0/security-groups", {"security_group": {"name": name}})["security_group"]
    rules = [rule(c, g["id"], p) for p in tcp_ports]
    return g, rules


def rule(c, group_id, port):
    return c.neutron.post("/v2.0/security-group-rules", {"security_group_rule": {
        "security_group_id": group_id, "direction": "ingress", "ethertype": "IPv4",
        "protocol": "tcp", "port_range_min": port, "port_range_max": port}})["security_group_rule"]


def port(c, net, groups, host=HOST, **extra):
    body = {"network_id": net["id"], "security_groups": [g["id"] for g in groups],
            "binding:host_id": host, "device_owner": "compute:nova",
            "device_id": str(uuid.uuid4()), **extra}
    return c.neutron.post("/v2.0/ports", {"port": body})["port"]


def boot(c, p, name):
    """The guest nova would boot on the port: QEMU serves the socket neutron named."""
    vm = VM(c.tmp, p["binding:vif_details"]["vhostuser_socket"], server=True, name=name)
    c.vms.append(vm)
    vm.start()
    return vm


def syn(src, dst, dport):
    ip = lambda p: p["fixed_ips"][0]["ip_address"]
    return bytes(Ether(src=src["mac_address"], dst=dst["mac_address"]) /
                 IP(src=ip(src), dst=ip(dst)) / TCP(sport=40000 + dport, dport=dport, flags="S"))


def arrives(a_vm, b_vm, frame, timeout=8.0):
    a_vm.send([frame])
    try:
        b_vm.receive_until(lambda got: frame in got, timeout)
        return True
    except AssertionError:
        return False


@pytest.fixture(scope="module")
def pair(cloud):
    """Two ports bound through neutron, their guests booted, both ACTIVE."""
    c = cloud
    net, _ = network(c, 101)
    web, rules = group(c, "web", tcp_ports=(80,))
    a, b = port(c, net, [web]), port(c, net, [web])
    for p in (a, b):
        assert p["binding:vif_type"] == "vhostuser", p
        d = p["binding:vif_details"]
        assert d["vhostuser_mode"] == "server" and d["vhostuser_ovs_plug"] is False
        assert d["vhostuser_socket"].endswith("/vhu" + p["id"][:11])
        assert d["vhostuser_socket"].startswith(str(c.sw.tmp / "vhost"))
    for p in (a, b):
        wait_for(lambda: (state(c, p["id"]) or {}).get("state") == "bound", timeout=20,
                 what=f"straitd bound {p['id']}")
    vms = [boot(c, a, "vm-a"), boot(c, b, "vm-b")]
    for p in (a, b):
        wait_status(c, p["id"], "ACTIVE")
    for vm in vms:
        vm.wait_forwarding()
    return c, net, web, a, b, vms


def test_ports_bound_through_neutron_go_active_and_nova_hears_vif_plugged(pair):
    c, net, web, a, b, vms = pair
    for p in (a, b):
        assert state(c, p["id"])["state"] == "up"
        plugged = [e for e in c.nova.events
                   if e["name"] == "network-vif-plugged" and e["tag"] == p["id"]]
        assert plugged and plugged[0]["server_uuid"] == p["device_id"], c.nova.events
        assert plugged[0]["status"] == "completed"
    shown = c.sw.call("port.show", {"id": a["id"]})
    assert shown["state"] == "up" and shown["network"] == net["id"]
    assert shown["security_groups"] == [web["id"]]
    assert c.sw.call("network.list")["networks"][0]["segmentation_id"] == 101


def why(c, *ports):
    """What straitd says of the ports, for a failure's message."""
    return json.dumps({p["id"]: {"stats": c.sw.port_stats(p["id"]),
                                 "port": c.sw.call("port.show", {"id": p["id"]})} for p in ports})


def test_rules_changed_through_neutron_are_enforced_and_withdrawn(pair):
    c, net, web, a, b, (vm_a, vm_b) = pair
    assert arrives(vm_a, vm_b, syn(a, b, 80)), why(c, a, b)
    assert not arrives(vm_a, vm_b, syn(a, b, 22), timeout=2.0)
    r22 = rule(c, web["id"], 22)
    wait_for(lambda: any(r["id"] == r22["id"] for r in
                         c.sw.call("security_group.show", {"id": web["id"]})["rules"]),
             timeout=15, what="rule 22 in straitd")
    assert arrives(vm_a, vm_b, syn(a, b, 22))
    c.neutron.delete(f"/v2.0/security-group-rules/{r22['id']}")
    wait_for(lambda: not any(r["id"] == r22["id"] for r in
                             c.sw.call("security_group.show", {"id": web["id"]})["rules"]),
             timeout=15, what="rule 22 gone from straitd")
    f = bytes(Ether(src=a["mac_address"], dst=b["mac_address"]) /
              IP(src=a["fixed_ips"][0]["ip_address"], dst=b["fixed_ips"][0]["ip_address"]) /
              TCP(sport=41000, dport=22, flags="S"))
    assert not arrives(vm_a, vm_b, f, timeout=2.0)


def test_a_change_made_while_etcd_is_down_arrives_when_it_is_back(pair):
    c, net, web, a, b, (vm_a, vm_b) = pair
    assert not arrives(vm_a, vm_b, syn(a, b, 8080), timeout=2.0)
    c.etcd.stop()
    try:
        r = rule(c, web["id"], 8080)  # neutron commits it; its journal row waits
    finally:
        c.etcd.start()
    wait_for(lambda: any(x["id"] == r["id"] for x in
                         c.sw.call("security_group.show", {"id": web["id"]})["rules"]),
             timeout=30, what="the rule made while etcd was down")
    assert arrives(vm_a, vm_b, syn(a, b, 8080))
    assert neutron_port(c, a["id"])["status"] == "ACTIVE"


def test_a_document_straitd_refuses_puts_the_port_in_error_and_the_rest_works(pair):
    c, net, web, a, b, vms = pair
    p = port(c, net, [web])
    wait_for(lambda: (state(c, p["id"]) or {}).get("state") == "bound", timeout=20, what="bound")
    # A bad document under this host (as a broken or hostile writer would leave it).
    c.etcd.put(f"{PREFIX}/nodes/{HOST}/ports/{p['id']}", "{not json")
    wait_status(c, p["id"], "ERROR")
    assert "not JSON" in state(c, p["id"])["reason"]
    assert neutron_port(c, a["id"])["status"] == "ACTIVE"
    assert state(c, a["id"])["state"] == "up"


def rule_ids(c, group_id):
    return {r["id"] for r in c.sw.call("security_group.show", {"id": group_id})["rules"]}


def test_what_neutron_acknowledged_before_it_was_killed_is_replayed(pair):
    """A change neutron committed whose journal row had not reached etcd
    (etcd down) when neutron-server was killed arrives once both are back."""
    c, net, web, a, b, (vm_a, vm_b) = pair
    c.etcd.stop()
    try:
        r = rule(c, web["id"], 9001)
    finally:
        c.neutron.kill()
        c.etcd.start()
    time.sleep(2)
    assert r["id"] not in rule_ids(c, web["id"])  # nobody published it
    c.neutron.start()
    wait_for(lambda: r["id"] in rule_ids(c, web["id"]), timeout=60,
             what="the journal replayed by the next neutron-server")
    assert arrives(vm_a, vm_b, syn(a, b, 9001)), why(c, a, b)


def test_straitd_killed_comes_back_converged_and_its_guests_forward_again(pair):
    c, net, web, a, b, (vm_a, vm_b) = pair
    c.sw.kill()
    r = rule(c, web["id"], 9002)  # made while straitd is away
    c.sw.start()
    wait_for(lambda: r["id"] in rule_ids(c, web["id"]), timeout=30,
             what="the change made while straitd was down")
    for p in (a, b):
        wait_for(lambda: (state(c, p["id"]) or {}).get("state") == "up", timeout=30,
                 what=f"{p['id']} up again (its guest reconnected)")
    assert arrives(vm_a, vm_b, syn(a, b, 9002)), why(c, a, b)
    assert arrives(vm_a, vm_b, syn(a, b, 80)), why(c, a, b)
    assert neutron_port(c, a["id"])["status"] == "ACTIVE"


def test_a_remote_group_admits_its_members_on_other_hosts(pair):
    """A rule whose remote group is `db` admits the addresses of db's ports
    wherever they are bound: here one on compute-2 (whose straitd is a
    stand-in alive key), as neutron creates, readdresses and deletes it."""
    c, net, web, a, b, vms = pair
    db, _ = group(c, "db")
    c.etcd.put(f"{PREFIX}/states/compute-2/alive", json.dumps({
        "host": "compute-2", "physnets": ["physnet1"], "network_types": ["flat", "vlan"],
        "vhost_socket_dir": "/run/strait/vhost"}))
    far = port(c, net, [db], host="compute-2")
    assert far["binding:vif_type"] == "vhostuser", far
    ip = far["fixed_ips"][0]["ip_address"]
    r = c.neutron.post("/v2.0/security-group-rules", {"security_group_rule": {
        "security_group_id": web["id"], "direction": "ingress", "ethertype": "IPv4",
        "protocol": "tcp", "port_range_min": 5432, "port_range_max": 5432,
        "remote_group_id": db["id"]}})["security_group_rule"]

    def members():
        return c.sw.call("security_group.show", {"id": db["id"]}).get("remote_members", {})

    def verdict(src):  # a SYN from the physnet to b, through the real pipeline
        return c.sw.call("trace", {"port": "physnet:physnet1", "frame": {
            "src": "fa:16:3e:99:99:99", "dst": b["mac_address"], "vlan": 101, "ip_src": src,
            "ip_dst": b["fixed_ips"][0]["ip_address"], "proto": "tcp", "sport": 40000,
            "dport": 5432}})["verdict"]

    wait_for(lambda: r["id"] in rule_ids(c, web["id"]) and members().get(far["id"]) == [ip + "/32"],
             timeout=20, what=f"db's member on compute-2 in straitd ({members()})")
    assert far["id"] not in [x["id"] for x in c.sw.call("port.list")["ports"]]  # not bound here
    assert verdict(ip) == "output"
    assert verdict("10.101.0.77") == "drop"
    # Readdressed through neutron: the new address is admitted, the old one no more.
    new_ip = "10.101.0.200"
    c.neutron.put(f"/v2.0/ports/{far['id']}", {"port": {"fixed_ips": [
        {"subnet_id": far["fixed_ips"][0]["subnet_id"], "ip_address": new_ip}]}})
    wait_for(lambda: members().get(far["id"]) == [new_ip + "/32"], timeout=20,
             what=f"the new address in straitd ({members()})")
    assert verdict(new_ip) == "output" and verdict(ip) == "drop"
    c.neutron.delete(f"/v2.0/ports/{far['id']}")
    wait_for(lambda: far["id"] not in members(), timeout=20, what="the deleted member gone")
    assert verdict(new_ip) == "drop"


def test_kills_in_a_stream_of_changes_lose_nothing_neutron_acknowledged(pair):
    """Rules created through neutron one after another while etcd, then
    neutron-server, then straitd are killed and started again: every rule
    neutron acknowledged reaches straitd, straitd ends with exactly neutron's
    rules, and an unchanged port's traffic flows while etcd or neutron-server
    is away."""
    import threading
    c, net, web, a, b, (vm_a, vm_b) = pair
    acked, stop = [], threading.Event()

    def stream():
        port = 7000
        while not stop.is_set():
            try:
                acked.append(rule(c, web["id"], port)["id"])
                port += 1
            except (OSError, NeutronError):
                pass  # neutron-server away: that change was not acknowledged
            time.sleep(0.3)

    t = threading.Thread(target=stream, daemon=True)
    t.start()
    try:
        def after(n):
            wait_for(lambda: len(acked) >= n, timeout=90, what=f"{n} rules acknowledged")
        after(2)
        c.etcd.kill()
        assert arrives(vm_a, vm_b, syn(a, b, 80)), "traffic stopped while etcd was away"
        c.etcd.start()
        after(len(acked) + 2)
        c.neutron.kill()
        assert arrives(vm_a, vm_b, syn(a, b, 80)), "traffic stopped while neutron-server was away"
        c.neutron.start()
        after(len(acked) + 2)
        c.sw.kill()
        c.sw.start()
        after(len(acked) + 2)
    finally:
        stop.set()
        t.join(30)
    neutron_rules = {r["id"] for r in c.neutron.get(
        f"/v2.0/security-group-rules?security_group_id={web['id']}")["security_group_rules"]}
    assert set(acked) <= neutron_rules
    wait_for(lambda: rule_ids(c, web["id"]) == neutron_rules, timeout=60,
             what="straitd's rules to be neutron's")
    for p in (a, b):
        wait_for(lambda: (state(c, p["id"]) or {}).get("state") == "up", timeout=30,
                 what=f"{p['id']} up again")
    assert arrives(vm_a, vm_b, syn(a, b, 80)), why(c, a, b)
    assert neutron_port(c, a["id"])["status"] == "ACTIVE"


def test_port_security_and_address_pairs_set_through_neutron_take_effect(pair):
    c, net, web, a, b, (vm_a, vm_b) = pair
    spoofed = bytes(Ether(src=a["mac_address"], dst=b["mac_address"]) /
                    IP(src="10.101.0.250", dst=b["fixed_ips"][0]["ip_address"]) /
                    TCP(sport=42000, dport=80, flags="S"))
    assert not arrives(vm_a, vm_b, spoofed, timeout=2.0)
    c.neutron.put(f"/v2.0/ports/{a['id']}", {"port": {
        "allowed_address_pairs": [{"ip_address": "10.101.0.250"}]}})
    wait_for(lambda: c.sw.call("port.show", {"id": a["id"]})["allowed_address_pairs"],
             timeout=15, what="the address pair in straitd")
    assert arrives(vm_a, vm_b, spoofed)
    # Port security off (groups go with it, as neutron requires): anything goes.
    c.neutron.put(f"/v2.0/ports/{b['id']}", {"port": {
        "security_groups": [], "port_security_enabled": False}})
    wait_for(lambda: not c.sw.call("port.show", {"id": b["id"]})["port_security_enabled"],
             timeout=15, what="port security off in straitd")
    assert arrives(vm_a, vm_b, syn(a, b, 23))
    assert neutron_port(c, a["id"])["status"] == "ACTIVE"  # updates never blink the port


def test_a_port_deleted_or_moved_through_neutron_leaves_straitd(cloud):
    c = cloud
    net, _ = network(c, 102)
    g, _ = group(c, "plain")
    p, q = port(c, net, [g]), port(c, net, [g])
    for x in (p, q):
        wait_for(lambda: (state(c, x["id"]) or {}).get("state") == "bound", timeout=20,
                 what="bound")
    c.neutron.delete(f"/v2.0/ports/{p['id']}")
    wait_for(lambda: state(c, p["id"]) is None and
             p["id"] not in [x["id"] for x in c.sw.call("port.list")["ports"]],
             timeout=20, what="deleted port gone from straitd")
    # To a host without straitd: neutron cannot bind it there, and it leaves this one.
    moved = c.neutron.put(f"/v2.0/ports/{q['id']}", {"port": {"binding:host_id": "compute-9"}})["port"]
    assert moved["binding:vif_type"] == "binding_failed"
    wait_for(lambda: q["id"] not in [x["id"] for x in c.sw.call("port.list")["ports"]],
             timeout=20, what="moved port gone from straitd")
    assert state(c, q["id"]) is None
    wait_for(lambda: net["id"] not in [n["id"] for n in c.sw.call("network.list")["networks"]],
             timeout=10, what="the network leaves with its last port")


def test_a_trunk_carries_its_subports_vlans_to_their_networks(cloud):
    """neutron's trunk service plugin: a subport made through neutron is bound
    with its parent, goes ACTIVE with the parent's guest, and the guest's
    frames tagged with its VLAN are on its network; removed, it leaves."""
    c = cloud
    net_p, _ = network(c, 110)
    net_s, _ = network(c, 111)
    g, _ = group(c, "trunked", tcp_ports=(80,))
    parent, peer = port(c, net_p, [g]), port(c, net_s, [g])
    # neutron's usual subport: the parent's MAC, on another network, not bound yet.
    sub = c.neutron.post("/v2.0/ports", {"port": {
        "network_id": net_s["id"], "mac_address": parent["mac_address"],
        "security_groups": [g["id"]]}})["port"]
    trunk = c.neutron.post("/v2.0/trunks", {"trunk": {
        "port_id": parent["id"],
        "sub_ports": [{"port_id": sub["id"], "segmentation_type": "vlan",
                       "segmentation_id": 42}]}})["trunk"]
    wait_for(lambda: (state(c, sub["id"]) or {}).get("state") == "bound", timeout=20,
             what=f"straitd bound subport {sub['id']} (parent {state(c, parent['id'])})")
    attach = c.sw.call("port.show", {"id": sub["id"]})["attach"]
    assert attach == {"type": "subport", "parent": parent["id"], "segmentation_type": "vlan",
                      "segmentation_id": 42}, attach
    assert neutron_port(c, sub["id"])["device_owner"] == "trunk:subport"
    vm_p, vm_q = boot(c, parent, "vm-trunk"), boot(c, peer, "vm-peer")
    for p in (parent, sub, peer):
        wait_status(c, p["id"], "ACTIVE")
    assert c.neutron.get(f"/v2.0/trunks/{trunk['id']}")["trunk"]["status"] == "ACTIVE"
    for vm in (vm_p, vm_q):
        vm.wait_forwarding()
    ip = lambda p: p["fixed_ips"][0]["ip_address"]
    inner = (IP(src=ip(sub), dst=ip(peer)) / TCP(sport=40080, dport=80, flags="S"))
    tagged = bytes(Ether(src=sub["mac_address"], dst=peer["mac_address"]) / Dot1Q(vlan=42) / inner)
    untagged = bytes(Ether(src=sub["mac_address"], dst=peer["mac_address"]) / inner)
    vm_p.send([tagged])
    vm_q.receive_until(lambda got: untagged in got, 8.0)
    reply = IP(src=ip(peer), dst=ip(sub)) / TCP(sport=80, dport=40080, flags="SA")
    vm_q.send([bytes(Ether(src=peer["mac_address"], dst=sub["mac_address"]) / reply)])
    vm_p.receive_until(
        lambda got: bytes(Ether(src=peer["mac_address"], dst=sub["mac_address"]) /
                          Dot1Q(vlan=42) / reply) in got, 8.0)
    # Removed from the trunk: it leaves straitd, and VLAN 42 is nobody's.
    c.neutron.put(f"/v2.0/trunks/{trunk['id']}/remove_subports",
                  {"sub_ports": [{"port_id": sub["id"]}]})
    wait_for(lambda: sub["id"] not in [x["id"] for x in c.sw.call("port.list")["ports"]],
             timeout=20, what="removed subport gone from straitd")
    assert c.sw.call("port.show", {"id": parent["id"]})["subports"] == []
    vm_p.send([tagged])
    with pytest.raises(AssertionError):
        vm_q.receive_until(lambda got: untagged in got, 2.0)


def test_a_trunk_made_before_its_vm_boots_gets_its_subports_bound_with_the_parent(cloud):
    """nova's order: the trunk exists before the VM; booting binds the parent
    to the host, and its subports follow it there (and leave with it)."""
    c = cloud
    net_p, _ = network(c, 113)
    net_s, _ = network(c, 114)
    g, _ = group(c, "trunk-first", tcp_ports=(80,))
    parent = c.neutron.post("/v2.0/ports", {"port": {
        "network_id": net_p["id"], "security_groups": [g["id"]]}})["port"]
    sub = c.neutron.post("/v2.0/ports", {"port": {
        "network_id": net_s["id"], "mac_address": parent["mac_address"],
        "security_groups": [g["id"]]}})["port"]
    c.neutron.post("/v2.0/trunks", {"trunk": {
        "port_id": parent["id"],
        "sub_ports": [{"port_id": sub["id"], "segmentation_type": "vlan",
                       "segmentation_id": 7}]}})
    time.sleep(1)
    assert state(c, sub["id"]) is None  # nowhere to bind it yet
    # nova binds the parent as it boots the VM.
    parent = c.neutron.put(f"/v2.0/ports/{parent['id']}", {"port": {
        "binding:host_id": HOST, "device_owner": "compute:nova",
        "device_id": str(uuid.uuid4())}})["port"]
    assert parent["binding:vif_type"] == "vhostuser", parent
    wait_for(lambda: (state(c, sub["id"]) or {}).get("state") == "bound", timeout=20,
             what=f"subport {sub['id']} bound with its parent")
    assert c.sw.call("port.show", {"id": parent["id"]})["subports"] == [
        {"port": sub["id"], "segmentation_id": 7}]
    vm = boot(c, parent, "vm-trunk-first")
    for p in (parent, sub):
        wait_status(c, p["id"], "ACTIVE")
    vm.stop()
    # The VM deleted: nova unbinds the parent, the subport leaves with it.
    c.neutron.put(f"/v2.0/ports/{parent['id']}", {"port": {"binding:host_id": "",
                                                            "device_owner": "", "device_id": ""}})
    wait_for(lambda: not {parent["id"], sub["id"]} & {x["id"] for x in c.sw.call("port.list")["ports"]},
             timeout=20, what="parent and subport gone from straitd")


def test_a_qos_policy_set_through_neutron_is_marked_and_its_changes_arrive(cloud):
    """neutron's QoS plugin and ML2 extension: a port's policy reaches
    straitd with the port, a rule changed in the policy reaches it again,
    and what the VM sends leaves with the policy's DSCP."""
    c = cloud
    net, _ = network(c, 112)
    g, _ = group(c, "qos", tcp_ports=(80,))
    pol = c.neutron.post("/v2.0/qos/policies", {"policy": {"name": "gold"}})["policy"]
    q = f"/v2.0/qos/policies/{pol['id']}"
    c.neutron.post(f"{q}/dscp_marking_rules", {"dscp_marking_rule": {"dscp_mark": 26}})
    bw = c.neutron.post(f"{q}/bandwidth_limit_rules", {"bandwidth_limit_rule": {
        "max_kbps": 100000, "max_burst_kbps": 10000, "direction": "egress"}})["bandwidth_limit_rule"]
    a, b = port(c, net, [g], qos_policy_id=pol["id"]), port(c, net, [g])
    for p in (a, b):
        wait_for(lambda: (state(c, p["id"]) or {}).get("state") == "bound", timeout=20,
                 what=f"straitd bound {p['id']}")
    shown = lambda: c.sw.call("port.show", {"id": a["id"]})["qos"]
    assert shown() == [{"type": "bandwidth_limit", "direction": "egress", "max_kbps": 100000,
                        "max_burst_kbps": 10000},
                       {"type": "dscp_marking", "dscp_mark": 26}], shown()
    assert c.sw.call("port.show", {"id": b["id"]})["qos"] == []
    # A rule of the policy changed: the port's document goes out again.
    c.neutron.put(f"{q}/bandwidth_limit_rules/{bw['id']}",
                  {"bandwidth_limit_rule": {"max_kbps": 200000}})
    wait_for(lambda: shown()[0]["max_kbps"] == 200000, timeout=20,
             what=f"the changed rule in straitd ({shown()})")
    vm_a, vm_b = boot(c, a, "vm-qos-a"), boot(c, b, "vm-qos-b")
    for p in (a, b):
        wait_status(c, p["id"], "ACTIVE")
    for vm in (vm_a, vm_b):
        vm.wait_forwarding()
    ip = lambda p: p["fixed_ips"][0]["ip_address"]
    tcp = TCP(sport=40180, dport=80, flags="S")
    sent = bytes(Ether(src=a["mac_address"], dst=b["mac_address"]) /
                 IP(src=ip(a), dst=ip(b)) / tcp)
    marked = bytes(Ether(src=a["mac_address"], dst=b["mac_address"]) /
                   IP(src=ip(a), dst=ip(b), tos=26 << 2) / tcp)
    vm_a.send([sent])
    vm_b.receive_until(lambda got: marked in got, 8.0)
    # The policy taken off the port: no rules left in straitd.
    c.neutron.put(f"/v2.0/ports/{a['id']}", {"port": {"qos_policy_id": None}})
    wait_for(lambda: shown() == [], timeout=20, what="the port's rules gone from straitd")
    # A policy on the network: ports without one of their own take its rules.
    net_pol = c.neutron.post("/v2.0/qos/policies", {"policy": {"name": "net"}})["policy"]
    c.neutron.post(f"/v2.0/qos/policies/{net_pol['id']}/dscp_marking_rules",
                   {"dscp_marking_rule": {"dscp_mark": 10}})
    c.neutron.put(f"/v2.0/networks/{net['id']}", {"network": {"qos_policy_id": net_pol["id"]}})
    for p in (a, b):
        wait_for(lambda: c.sw.call("port.show", {"id": p["id"]})["qos"] ==
                 [{"type": "dscp_marking", "dscp_mark": 10}], timeout=20,
                 what=f"the network's policy on {p['id']} in straitd")


def test_a_stopped_guest_makes_its_port_down_and_a_booted_one_active_again(cloud):
    c = cloud
    net, _ = network(c, 103)
    g, _ = group(c, "reboot")
    p = port(c, net, [g])
    vm = boot(c, p, "vm-r1")
    wait_status(c, p["id"], "ACTIVE")
    vm.close()  # QEMU gone: the guest's device goes
    wait_status(c, p["id"], "DOWN")
    assert state(c, p["id"])["state"] == "down"
    boot(c, p, "vm-r2")
    wait_status(c, p["id"], "ACTIVE")


def test_local_changes_are_refused_on_a_host_neutron_drives(cloud):
    r = cloud.sw.request("network.create", {"id": "local1", "type": "local"})
    assert not r["ok"] and r["error"]["code"] == "failed_precondition"
    assert "etcd" in r["error"]["message"]
