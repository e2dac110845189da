"""A real neutron-server for the tests: etcd, MariaDB and neutron-server
(ML2 with networking-strait) as plain processes on loopback, a stand-in for
nova's API that records neutron's external events, and a small client of
neutron's REST API. Started once per test module (about a minute cold: the
schema migration is most of it). Debian's packages: etcd-server,
mariadb-server, python3-neutron, neutron-common, python3-etcd3gw
(scripts/bootstrap.sh --openstack installs them).
"""
import http.server
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from conftest import SOURCE, wait_for

PYTHON = "/usr/bin/python3"  # Debian's: neutron lives there
DRIVER_DIR = SOURCE / "networking-strait"


def have_openstack():
    return all(shutil.which(b) for b in ("etcd", "mariadbd", "neutron-server", "neutron-db-manage"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proc:
    def __init__(self, tmp: Path, name, argv, env=None):
        self.tmp, self.name, self.argv, self.env = Path(tmp), name, argv, env
        self.log = self.tmp / f"{name}.log"
        self.proc = None

    def start(self):
        self._logf = open(self.log, "a")
        self.proc = subprocess.Popen(self.argv, stdout=self._logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=self.env, start_new_session=True)
        return self

    def stop(self, sig=15, timeout=20):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
        self._logf.close()
        self.proc = None

    def kill(self):
        self.stop(sig=9)

    def tail(self, n=40):
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:]) if self.log.exists() else ""


class Etcd(Proc):
    def __init__(self, tmp):
        self.port, peer = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        super().__init__(tmp, "etcd", [
            "etcd", "--data-dir", str(Path(tmp) / "etcd-data"),
            "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"default=http://127.0.0.1:{peer}"])

    def start(self):
        super().start()
        wait_for(lambda: self._answers(), timeout=20, what="etcd")
        return self

    def _answers(self):
        try:
            self.post("/v3/maintenance/status", {})
            return True
        except OSError:
            return False

    def post(self, path, body):
        req = urllib.request.Request(self.url + path, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read())

    @staticmethod
    def _b64(s):
        import base64
        return base64.b64encode(s.encode()).decode()

    def get_prefix(self, prefix):
        import base64
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        r = self.post("/v3/kv/range", {"key": self._b64(prefix), "range_end": self._b64(end)})
        return {base64.b64decode(kv["key"]).decode(): base64.b64decode(kv.get("value", "")).decode()
                for kv in r.get("kvs", [])}

    def put(self, key, value):
        self.post("/v3/kv/put", {"key": self._b64(key), "value": self._b64(value)})


class MariaDB(Proc):
    def __init__(self, tmp):
        self.port = free_port()
        self.datadir = Path(tmp) / "mariadb"
        self.sock = Path(tmp) / "mariadb.sock"
        super().__init__(tmp, "mariadb", [
            "mariadbd", "--no-defaults", f"--datadir={self.datadir}", f"--port={self.port}",
            "--bind-address=127.0.0.1", f"--socket={self.sock}", "--user=root",
            "--skip-log-bin", "--innodb-flush-log-at-trx-commit=0", "--innodb-buffer-pool-size=64M"])

    def start(self):
        if not self.datadir.exists():
            subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={self.datadir}",
                            "--user=root", "--auth-root-authentication-method=normal",
                            "--skip-test-db"], check=True, capture_output=True)
        super().start()
        wait_for(lambda: self.sql("SELECT 1", check=False).returncode == 0, timeout=30, what="mariadb")
        self.sql("CREATE DATABASE IF NOT EXISTS neutron")
        return self

    def sql(self, query, check=True):
        return subprocess.run(["mariadb", f"--socket={self.sock}", "-uroot", "-e", query],
                              capture_output=True, text=True, check=check)

    @property
    def url(self):
        return f"mysql+pymysql://root@127.0.0.1:{self.port}/neutron"


class FakeNova:
    """Records the external events neutron posts (network-vif-plugged...)."""

    def __init__(self):
        self.events = []
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if self.path.endswith("/os-server-external-events"):
                    outer.events.extend(body.get("events", []))
                    for e in body.get("events", []):
                        e.setdefault("code", 200)
                        e.setdefault("status", "completed")
                    out = json.dumps(body).encode()
                else:
                    out = b"{}"
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def do_GET(self):  # version discovery
                out = json.dumps({"version": {"id": "v2.1", "status": "CURRENT",
                                              "min_version": "2.1", "version": "2.93",
                                              "links": []}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v2.1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


class NeutronServer(Proc):
    # transport_url: fake:// is in-process only; an agent in another process
    # (neutron-openvswitch-agent, bench/neutron_ovs.py) needs a broker
    # (rabbit://...). With any transport the one RPC worker process that
    # rpc_workers = 0 still gets (neutron raises it to 1) consumes the
    # agents' RPC, their state reports included (ML2 listens on the reports
    # topic there too), so rpc_state_report_workers = 0 is right for both.
    def __init__(self, tmp, db: MariaDB, etcd: Etcd, nova: FakeNova, physnets=("physnet1",),
                 prefix="/strait", transport_url="fake://", mechanism_drivers="strait",
                 service_plugins="", extension_drivers="port_security"):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        tmp = Path(tmp)
        self.conf = tmp / "neutron.conf"
        self.ml2 = tmp / "ml2_conf.ini"
        self.conf.write_text(f"""[DEFAULT]
core_plugin = ml2
service_plugins = {service_plugins}
auth_strategy = noauth
transport_url = {transport_url}
bind_host = 127.0.0.1
bind_port = {self.port}
api_workers = 0
rpc_workers = 0
rpc_state_report_workers = 0
notify_nova_on_port_status_changes = true
notify_nova_on_port_data_changes = false
send_events_interval = 0
state_path = {tmp}/neutron-state
[database]
connection = {db.url}
[nova]
auth_type = none
endpoint = {nova.url}
[oslo_concurrency]
lock_path = {tmp}/locks
[agent]
report_interval = 0
""")
        self.ml2.write_text(f"""[ml2]
type_drivers = flat,vlan,vxlan
tenant_network_types = vlan
mechanism_drivers = {mechanism_drivers}
extension_drivers = {extension_drivers}
[ml2_type_vlan]
network_vlan_ranges = {",".join(p + ":100:199" for p in physnets)}
[ml2_type_flat]
flat_networks = {",".join(physnets)}
[ml2_type_vxlan]
vni_ranges = 1000:1999
[securitygroup]
enable_security_group = true
firewall_driver = noop
[ml2_strait]
etcd_endpoints = {etcd.url}
etcd_prefix = {prefix}
""")
        env = dict(os.environ, PYTHONPATH=str(DRIVER_DIR))
        env.pop("VIRTUAL_ENV", None)
        super().__init__(tmp, "neutron-server", [
            PYTHON, "/usr/bin/neutron-server", "--config-file", str(self.conf),
            "--config-file", str(self.ml2)], env=env)
        self.db = db

    def migrate(self):
        subprocess.run([PYTHON, "/usr/bin/neutron-db-manage", "--config-file", str(self.conf),
                        "--config-file", str(self.ml2), "upgrade", "heads"],
                       check=True, capture_output=True)

    def start(self):
        super().start()
        def ready():
            if self.proc.poll() is not None:
                raise RuntimeError(f"neutron-server exited {self.proc.returncode}:\n{self.tail()}")
            try:
                self.get("/v2.0/networks")
                return True
            except OSError:
                return False
        wait_for(ready, timeout=90, interval=0.3, what="neutron-server")
        return self

    # -- REST --
    def _req(self, method, path, body=None):
        req = urllib.request.Request(self.url + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json",
                                              "X-Project-Id": "demo", "X-Roles": "admin"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                data = r.read()
                return json.loads(data) if data else None
        except urllib.error.HTTPError as e:
            raise NeutronError(e.code, e.read().decode(errors="replace")) from None

    def get(self, path):
        return self._req("GET", path)

    def post(self, path, body):
        # noauth: every resource names its project.
        for res in body.values():
            if isinstance(res, dict):
                res.setdefault("tenant_id", "demo")
        return self._req("POST", path, body)

    def put(self, path, body):
        return self._req("PUT", path, body)

    def delete(self, path):
        return self._req("DELETE", path)


class NeutronError(Exception):
    def __init__(self, code, body):
        super().__init__(f"HTTP {code}: {body}")
        self.code = code
        self.body = body
