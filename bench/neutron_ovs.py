"""neutron-openvswitch-agent on Open vSwitch with DPDK, for the bench's
OpenStack comparison: rabbitmq-server, ovsdb-server + ovs-vswitchd-dpdk
(netdev datapath) and the agent as plain processes under one tmp dir, next
to tests/e2e/openstack.py's MariaDB and neutron-server.

Debian's packages: neutron-openvswitch-agent, rabbitmq-server,
openvswitch-switch-dpdk (apt-get install --no-install-recommends).
neutron-server's fake:// transport is in-process only: the agent needs a
broker, hence RabbitMQ.

ovs-vswitchd runs in the host's network namespace, not in one of its own as
bench/ovs.sh's does: the agent's OpenFlow controller (os-ken) listens on
127.0.0.1 and ovs-vswitchd must reach it. Its netdev bridges' tap devices
(ovs-netdev, br-int, br-phys) therefore live in the host namespace; stop()
removes them.
"""
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
from openstack import PYTHON, Proc, free_port  # noqa: E402
from conftest import wait_for  # noqa: E402

VSWITCHD = "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"
OVS_SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"


class RabbitMQ(Proc):
    """rabbitmq-server as root, everything (mnesia, logs, cookie, epmd) under
    tmp: a node of its own that leaves nothing behind."""

    def __init__(self, tmp):
        tmp = Path(tmp)
        self.dir = tmp / "rabbitmq"
        self.port, dist, self.epmd_port = free_port(), free_port(), free_port()
        self.node = f"rabbit-{os.getpid()}@localhost"
        self.url = f"rabbit://guest:guest@127.0.0.1:{self.port}/"
        self.env = dict(
            os.environ,
            HOME=str(self.dir),  # the Erlang cookie
            RABBITMQ_CONF_ENV_FILE=str(self.dir / "rabbitmq-env.conf"),  # not /etc's
            RABBITMQ_CONFIG_FILE=str(self.dir / "rabbitmq"),  # rabbitmq.conf
            RABBITMQ_ENABLED_PLUGINS_FILE=str(self.dir / "enabled_plugins"),
            RABBITMQ_MNESIA_BASE=str(self.dir / "mnesia"),
            RABBITMQ_LOG_BASE=str(self.dir / "log"),
            RABBITMQ_PID_FILE=str(self.dir / "rabbit.pid"),
            RABBITMQ_NODENAME=self.node,
            RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
            RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(dist),
            # Our own epmd, started first in the foreground: Erlang would
            # otherwise start a daemonized one that outlives the test.
            ERL_EPMD_PORT=str(self.epmd_port),
            ERL_EPMD_ADDRESS="127.0.0.1",
        )
        self.epmd = Proc(tmp, "epmd", ["epmd", "-port", str(self.epmd_port),
                                       "-address", "127.0.0.1"], env=self.env)
        super().__init__(tmp, "rabbitmq", ["/usr/lib/rabbitmq/bin/rabbitmq-server"], env=self.env)

    def start(self):
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "rabbitmq-env.conf").write_text("")
        (self.dir / "enabled_plugins").write_text("[].\n")
        (self.dir / ".erlang.cookie").write_text(uuid.uuid4().hex)
        (self.dir / ".erlang.cookie").chmod(0o400)
        # disk_free_limit: the default (50 MB) is fine; memory: leave the
        # rest of the box to neutron.
        (self.dir / "rabbitmq.conf").write_text(
            "loopback_users.guest = true\nvm_memory_high_watermark.absolute = 512MB\n")
        self.epmd.start()
        super().start()
        wait_for(self._ready, timeout=60, interval=0.2, what="rabbitmq")
        return self

    def _ready(self):
        if self.proc.poll() is not None:
            raise RuntimeError(f"rabbitmq-server exited {self.proc.returncode}:\n{self.tail()}")
        # the AMQP listener opens last in the boot
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def stop(self, sig=15, timeout=30):
        super().stop(sig, timeout)
        self.epmd.stop()


class OvsDpdk:
    """ovsdb-server + ovs-vswitchd-dpdk with its own db, run dir, DPDK file
    prefix; DPDK in no-huge memory (as bench/ovs.sh's "MEM != huge")."""

    def __init__(self, tmp, mem_mb=1024, pmd_core=1):
        self.tmp = Path(tmp)
        self.dir = self.tmp / "ovs"
        self.db_sock = self.dir / "db.sock"
        self.vhost_dir = self.dir / "vhu"
        self.mem_mb, self.pmd_core = mem_mb, pmd_core
        self.prefix = f"strait-neutron-ovs{os.getpid()}"
        # Every OVS tool (ours and the agent's ovs-vsctl/ovs-ofctl, which it
        # runs without a --db) finds this instance, never /var/run/openvswitch.
        self.env = dict(os.environ, OVS_RUNDIR=str(self.dir), OVS_LOGDIR=str(self.dir),
                        OVS_DBDIR=str(self.dir), OVS_SYSCONFDIR=str(self.dir))
        self.db = Proc(self.tmp, "ovsdb-server", [
            "ovsdb-server", str(self.dir / "conf.db"), f"--remote=punix:{self.db_sock}",
            f"--unixctl={self.dir}/ovsdb-server.ctl", "--no-chdir"], env=self.env)
        self.vswitchd = Proc(self.tmp, "ovs-vswitchd", [
            VSWITCHD, f"unix:{self.db_sock}", f"--unixctl={self.dir}/ovs-vswitchd.ctl",
            "--no-chdir", "-vconsole:info", "-vsyslog:off"], env=self.env)

    def vsctl(self, *args, check=True):
        return subprocess.run(["ovs-vsctl", f"--db=unix:{self.db_sock}", "--timeout=30", *args],
                              env=self.env, capture_output=True, text=True, check=check).stdout

    def ofctl(self, *args):
        return subprocess.run(["ovs-ofctl", *args], env=self.env, capture_output=True,
                              text=True, check=True).stdout

    def appctl(self, *args, check=True):
        return subprocess.run(["ovs-appctl", "-t", str(self.dir / "ovs-vswitchd.ctl"), *args],
                              env=self.env, capture_output=True, text=True, check=check).stdout

    def start(self):
        for dev in ("ovs-netdev", "br-int", "br-phys"):  # the host namespace's names
            if Path(f"/sys/class/net/{dev}").exists():
                raise RuntimeError(f"network device {dev} exists already (another OVS?)")
        self.vhost_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run(["ovsdb-tool", "create", str(self.dir / "conf.db"), OVS_SCHEMA],
                       check=True, capture_output=True)
        self.db.start()
        wait_for(self.db_sock.exists, timeout=10, what="ovsdb-server")
        # DPDK without hugepages: OVS adds --in-memory unless --legacy-mem is
        # given, and --no-huge cannot run --in-memory; --no-shconf keeps
        # /var/run/dpdk clean. Its shared 262144-mbuf pool does not fit in
        # no-huge memory: per-port-memory gives each port a pool of its own.
        # One PMD on pmd_core that sleeps when idle (pmd-maxsleep, OVS 3.1):
        # a spinning PMD would take one of the box's two cores from neutron.
        # br-phys is bridge_mappings' bridge: the agent requires it to exist
        # (br-int it creates itself).
        eal = (f"--no-pci --file-prefix={self.prefix} --no-telemetry --no-huge --legacy-mem "
               f"--no-shconf -m {self.mem_mb}")
        self.vsctl("--no-wait", "init", "--", "set", "Open_vSwitch", ".",
                   "other_config:dpdk-init=true", f"other_config:dpdk-extra={eal}",
                   "other_config:per-port-memory=true",
                   f"other_config:pmd-cpu-mask={1 << self.pmd_core:#x}",
                   "other_config:pmd-maxsleep=10000",
                   "--", "add-br", "br-phys", "--", "set", "Bridge", "br-phys",
                   "datapath_type=netdev")
        t0 = time.monotonic()
        self.vswitchd.start()
        wait_for(lambda: self._up(), timeout=60, interval=0.1, what="ovs-vswitchd (DPDK)")
        self.start_s = time.monotonic() - t0
        return self

    def _up(self):
        if self.vswitchd.proc.poll() is not None:
            raise RuntimeError(f"ovs-vswitchd exited:\n{self.vswitchd.tail()}")
        return (self.vsctl("--no-wait", "get", "Open_vSwitch", ".", "dpdk_initialized",
                           check=False).strip() == "true"
                and (self.dir / "br-phys.mgmt").exists())

    def stop(self):
        if self.vswitchd.proc is not None and self.vswitchd.proc.poll() is None:
            # --cleanup deletes the bridges' datapath and taps, which
            # otherwise outlive the process in the host namespace
            self.appctl("exit", "--cleanup", check=False)
            try:
                self.vswitchd.proc.wait(20)
            except subprocess.TimeoutExpired:
                pass
        self.vswitchd.stop()
        self.db.stop()
        for dev in ("br-int", "br-phys", "ovs-netdev"):
            if Path(f"/sys/class/net/{dev}").exists():
                subprocess.run(["ip", "link", "del", dev], capture_output=True)

    def flows(self, bridge="br-int"):
        return self.ofctl("dump-flows", f"unix:{self.dir}/{bridge}.mgmt")


class OvsAgent(Proc):
    """neutron-openvswitch-agent for OvsDpdk's bridges, with its own config."""

    def __init__(self, tmp, rabbit: RabbitMQ, ovs: OvsDpdk, host="ovs-host",
                 physnet="physnet1", report_interval=2, polling_interval=2):
        tmp = Path(tmp)
        self.host, self.ovs = host, ovs
        self.conf = tmp / "ovs-agent.conf"
        # root_helper = env: we are root, and sudo would drop OVS_RUNDIR (the
        # agent's ovs-vsctl and its privsep daemons must find this OVS).
        # ovsdb_connection: the agent talks OVSDB (ovsdbapp) and runs
        # "ovsdb-client monitor" (minimize_polling) on this socket; it also
        # adds a punix Manager row for it, harmless as ovsdb-server reads no
        # db: remotes. of_listen_port: free, not 6633 (another OVS agent).
        self.conf.write_text(f"""[DEFAULT]
host = {host}
transport_url = {rabbit.url}
state_path = {tmp}/ovs-agent-state
[oslo_concurrency]
lock_path = {tmp}/ovs-agent-locks
[agent]
root_helper = env
report_interval = {report_interval}
polling_interval = {polling_interval}
minimize_polling = true
tunnel_types =
[ovs]
datapath_type = netdev
vhostuser_socket_dir = {ovs.vhost_dir}
integration_bridge = br-int
bridge_mappings = {physnet}:br-phys
ovsdb_connection = unix:{ovs.db_sock}
of_listen_address = 127.0.0.1
of_listen_port = {free_port()}
[securitygroup]
enable_security_group = true
firewall_driver = openvswitch
""")
        env = dict(ovs.env)
        env.pop("VIRTUAL_ENV", None)
        super().__init__(tmp, "ovs-agent", [PYTHON, "/usr/bin/neutron-openvswitch-agent",
                                            "--config-file", str(self.conf)], env=env)


def vhu_name(port_id):
    # os-vif / nova: "vhu" + the port id, cut to the 14 characters of IFNAMSIZ-2
    return ("vhu" + port_id)[:14]


def plug(ovs: OvsDpdk, port):
    """What os-vif's ovs plugin does for a vhostuser port in client mode
    (vif_details vhostuser_mode=server: QEMU is the server, OVS the client)."""
    name = vhu_name(port["id"])
    sock = port.get("binding:vif_details", {}).get("vhostuser_socket") or str(ovs.vhost_dir / name)
    ovs.vsctl("--", "--may-exist", "add-port", "br-int", name, "--", "set", "Interface", name,
              "type=dpdkvhostuserclient", f"options:vhost-server-path={sock}",
              f"external_ids:iface-id={port['id']}", f"external_ids:attached-mac={port['mac_address']}",
              "external_ids:iface-status=active", f"external_ids:vm-uuid={port['device_id']}")


def unplug(ovs: OvsDpdk, port):
    ovs.vsctl("--", "--if-exists", "del-port", "br-int", vhu_name(port["id"]))


def ofports(ovs: OvsDpdk, ports):
    """{port id: its interface's ofport} (-1: none yet), in one ovs-vsctl."""
    out = ovs.vsctl("--no-wait", "-f", "csv", "--no-headings", "--columns=name,ofport",
                    "list", "Interface")
    by_name = {}
    for line in out.splitlines():
        name, _, num = line.rpartition(",")
        by_name[name.strip('"')] = int(num) if num.lstrip("-").isdigit() else -1  # "[]": none yet
    return {p["id"]: by_name.get(vhu_name(p["id"]), -1) for p in ports}


def rule_enforced(ovs: OvsDpdk, rule, ports):
    """True once br-int has the openvswitch firewall's flows of this tcp/udp
    rule (one destination port, no remote group) for every one of the bound
    ports: in the rule table (72 egress, 82 ingress), for reg5 = the port's
    ofport and tp_dst = the rule's port, both the flow that admits new
    connections (ct_state=+new-est, with ct commit) and the one for
    established ones (+est-rel-rpl). The agent adds them port by port, one
    OpenFlow message each: both for every port is the rule fully in force."""
    table = 72 if rule["direction"] == "egress" else 82
    want = {(o, st) for o in ofports(ovs, ports).values() for st in ("+new-est", "+est-rel-rpl")}
    have = set()
    for line in ovs.flows().splitlines():
        if (f"table={table}," not in line or f",{rule['protocol']}," not in line
                or not re.search(rf"tp_dst={rule['port_range_min']}\b", line)):
            continue
        reg5 = re.search(r"reg5=(0x[0-9a-f]+|\d+)", line)
        st = re.search(r"ct_state=([-+a-z]+)", line)
        if reg5 and st:
            have.add((int(reg5.group(1), 0), st.group(1)))
    return want <= have
