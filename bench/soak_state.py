"""bench/soak.py's record of what straitd acknowledged, and the churn that changes it.

Model keeps, for every request straitd answered "ok", the state that answer
promises (networks, port bindings with their addresses and groups, groups
with their rules, tunnel FDB entries); a refused request changes nothing in
it. verify() compares it with what straitd lists (network.list, port.list,
security_group.list and .show's members, tunnel.show): after each restart
and at the end, every acknowledged change must be there, and nothing else.

Churn is the random part (one seeded random.Random): bind and unbind of
ports nobody serves (client mode, bound and down: cheap), alone or in bulk,
port.update of their groups and addresses, rule creates and deletes in the
groups the traffic's receivers use (never a rule that allows the soak's
blocked stream: RULE_CATALOG), temporary groups, tunnel FDB entries, and
requests that must be refused (a group in use, a bulk bind with one bad
port, ...), which must change nothing.
"""
import json
from collections import Counter

from lifecycle_bench import log

# Group ids the traffic's ports use (bench/soak.py) and whose rules churn.
SG_EGRESS = "soak-egress"   # senders: egress any IPv4
SG_ALLOW = "soak-allow"     # the toggled receiver: TOGGLE_RULE comes and goes
SG_BLOCK = "soak-block"     # the blocked receiver: nothing ever allows UDP 5001 in
SG_SSH = "soak-ssh"


def rule(direction, ethertype="IPv4", protocol=None, lo=None, hi=None, prefix=None, remote=None):
    return {"direction": direction, "ethertype": ethertype, "protocol": protocol,
            "port_range_min": lo, "port_range_max": hi if hi is not None else lo,
            "remote_ip_prefix": prefix, "remote_group_id": remote}


BASE_GROUPS = {
    SG_EGRESS: [rule("egress")],
    SG_ALLOW: [rule("egress")],
    SG_BLOCK: [rule("egress"), rule("ingress", protocol="tcp", lo=22, prefix="0.0.0.0/0"),
               rule("ingress", protocol="tcp", lo=22, remote=SG_BLOCK)],
    SG_SSH: [rule("ingress", protocol="tcp", lo=22, prefix="0.0.0.0/0"),
             rule("ingress", protocol="icmp", prefix="0.0.0.0/0")],
}
# The rule the toggled stream needs: its frames are UDP 10.0.0.1 -> 5001.
TOGGLE_RULE = rule("ingress", protocol="udp", lo=5001, prefix="10.0.0.0/16")
# Rules churn adds: close to the blocked stream's frames, none matching them
# (ingress IPv4 UDP 5001 from 10.0.0.1).
RULE_CATALOG = [
    rule("ingress", protocol="tcp", lo=22, prefix="0.0.0.0/0"),
    rule("ingress", protocol="tcp", lo=80, hi=443, prefix="10.0.0.0/16"),
    rule("ingress", protocol="udp", lo=5002, hi=5100, prefix="10.0.0.0/16"),
    rule("ingress", protocol="udp", lo=5001, prefix="192.0.2.0/24"),
    rule("ingress", protocol="udp", lo=1, hi=5000, prefix="10.0.0.0/8"),
    rule("ingress", protocol="icmp", prefix="10.0.0.0/16"),
    rule("ingress", "IPv6", protocol="udp", lo=5001, prefix="::/0"),
    rule("egress", protocol="udp", lo=5001),
    rule("ingress", protocol="tcp", lo=1, hi=65535, remote=SG_BLOCK),
    rule("ingress", protocol="tcp", lo=8000, hi=9000, remote=SG_ALLOW),
]
RULE_GROUPS = (SG_BLOCK, SG_ALLOW, SG_SSH)   # + the temporary groups
CHURN_PORTS = 12
CHURN_NETWORKS = ("soak-l2", "soak-sg", "soak-sg-block")
RULE_FIELDS = ("direction", "ethertype", "protocol", "port_range_min", "port_range_max",
               "remote_ip_prefix", "remote_group_id")
PORT_FIELDS = ("network", "mac", "fixed_ips", "security_groups", "port_security_enabled")


def request(api, method, params=None):
    """The whole reply (ok or not) of one request."""
    api.send(method, params)
    return api.line()


class Model:
    """The state straitd acknowledged; each method sends one request and
    records it only when the reply is ok."""

    def __init__(self):
        self.networks, self.ports, self.groups, self.fdb = {}, {}, {}, {}
        self.ops = Counter()        # acknowledged, by kind
        self.refused = Counter()    # refused as the soak meant them to be
        self.failures = []          # refused when they should not be, or accepted when they should
        self.rule_seq = 0

    def _do(self, api, op, method, params):
        r = request(api, method, params)
        if r.get("ok"):
            self.ops[op] += 1
            return r["result"]
        self.failures.append({"op": op, "method": method, "params": params,
                              "error": r.get("error")})
        log(f"UNEXPECTED REFUSAL {method}: {r.get('error')}")
        return None

    def create_network(self, api, nid, spec):
        if self._do(api, "network_create", "network.create", {"id": nid, **spec}) is not None:
            self.networks[nid] = dict(spec)

    def bind(self, api, params_list):
        one = len(params_list) == 1
        got = self._do(api, "bind" if one else "bulk_bind", "port.bind",
                       params_list[0] if one else {"ports": params_list})
        if got is None:
            return False
        for p in params_list:
            self.ports[p["id"]] = json.loads(json.dumps(p))
        if not one:
            self.ops["bind"] += len(params_list)
        return True

    def unbind(self, api, pid):
        if self._do(api, "unbind", "port.unbind", {"id": pid}) is None:
            return False
        del self.ports[pid]
        return True

    def update(self, api, pid, changes):
        if self._do(api, "port_update", "port.update", {"id": pid, **changes}) is None:
            return False
        self.ports[pid].update(json.loads(json.dumps(changes)))
        return True

    def create_group(self, api, gid, rules):
        body = [{"id": self._rule_id(), **r} for r in rules]
        if self._do(api, "group_create", "security_group.create",
                    {"id": gid, "name": gid, "rules": body}) is None:
            return False
        self.groups[gid] = {r["id"]: {k: r[k] for k in RULE_FIELDS} for r in body}
        return True

    def delete_group(self, api, gid):
        if self._do(api, "group_delete", "security_group.delete", {"id": gid}) is None:
            return False
        del self.groups[gid]
        return True

    def add_rule(self, api, gid, r):
        rid = self._rule_id()
        if self._do(api, "rule_create", "security_group_rule.create",
                    {"id": rid, "security_group_id": gid, **r}) is None:
            return None
        self.groups[gid][rid] = dict(r)
        return rid

    def delete_rule(self, api, rid):
        if self._do(api, "rule_delete", "security_group_rule.delete", {"id": rid}) is None:
            return False
        for rules in self.groups.values():
            rules.pop(rid, None)
        return True

    def fdb_add(self, api, net, mac, vtep):
        if self._do(api, "fdb_add", "tunnel.fdb.add",
                    {"network": net, "entries": [{"mac": mac, "vtep": vtep}]}) is not None:
            self.fdb.setdefault(net, {})[mac] = vtep

    def fdb_delete(self, api, net, mac):
        if self._do(api, "fdb_delete", "tunnel.fdb.delete",
                    {"network": net, "entries": [{"mac": mac}]}) is not None:
            del self.fdb[net][mac]

    def expect_refused(self, api, what, method, params):
        """A request that must be refused and change nothing (verify() checks)."""
        r = request(api, method, params)
        if r.get("ok"):
            self.failures.append({"op": f"refusal:{what}", "method": method, "params": params,
                                  "error": "accepted"})
            log(f"UNEXPECTED ACCEPT {what}: {method} {json.dumps(params)[:200]}")
        else:
            self.refused[what] += 1

    def _rule_id(self):
        self.rule_seq += 1
        return f"50a50000-0000-4000-8000-{self.rule_seq:012x}"

    def members(self, gid):
        return sorted(pid for pid, p in self.ports.items() if gid in p.get("security_groups", []))

    def rules_naming(self, gid):
        return [rid for rules in self.groups.values() for rid, r in rules.items()
                if r.get("remote_group_id") == gid]

    # -- the comparison -------------------------------------------------------------

    def verify(self, api):
        """What straitd lists against what it acknowledged: a list of differences."""
        diffs = []
        nets = {n["id"]: n for n in request(api, "network.list")["result"]["networks"]}
        _same_ids(diffs, "network", self.networks, nets)
        for nid, spec in self.networks.items():
            for k, v in spec.items():
                if nid in nets and nets[nid].get(k) != v:
                    diffs.append(f"network {nid}: {k} {nets[nid].get(k)!r}, acknowledged {v!r}")
        ports = {p["id"]: p for p in request(api, "port.list")["result"]["ports"]}
        _same_ids(diffs, "port", self.ports, ports)
        for pid, want in self.ports.items():
            if pid in ports:
                diffs += _port_diffs(pid, want, ports[pid])
        groups = request(api, "security_group.list", {})["result"]
        groups = {g["id"]: g for g in (groups.get("security_groups", groups)
                                       if isinstance(groups, dict) else groups)}
        _same_ids(diffs, "group", self.groups, groups)
        for gid, rules in self.groups.items():
            if gid in groups:
                diffs += self._group_diffs(api, gid, rules, groups[gid])
        for net, want in self.fdb.items():
            shown = request(api, "tunnel.show", {"network": net})["result"]["networks"]
            got = {e["mac"]: e["vtep"] for n in shown for e in n["fdb"] if not e.get("learned")}
            if got != want:
                diffs.append(f"tunnel fdb of {net}: {got}, acknowledged {want}")
        return diffs

    def _group_diffs(self, api, gid, rules, listed):
        diffs = []
        got = {r["id"]: {k: r.get(k) for k in RULE_FIELDS} for r in listed["rules"]}
        if got != rules:
            missing = sorted(set(rules) - set(got))
            extra = sorted(set(got) - set(rules))
            changed = sorted(r for r in set(rules) & set(got) if rules[r] != got[r])
            diffs.append(f"group {gid}: rules missing {missing}, not acknowledged {extra}, "
                         f"changed {changed}")
        shown = request(api, "security_group.show", {"id": gid})["result"]
        if sorted(shown.get("ports", [])) != self.members(gid):
            diffs.append(f"group {gid}: members {sorted(shown.get('ports', []))}, "
                         f"acknowledged {self.members(gid)}")
        return diffs


def _same_ids(diffs, what, want, got):
    for i in sorted(set(want) - set(got)):
        diffs.append(f"{what} {i}: acknowledged, not listed")
    for i in sorted(set(got) - set(want)):
        diffs.append(f"{what} {i}: listed, never acknowledged")


def _port_diffs(pid, want, got):
    diffs = []
    for k in PORT_FIELDS:
        w = want.get(k, [] if k in ("fixed_ips", "security_groups") else None)
        if k == "port_security_enabled" and w is None:
            w = bool(want.get("security_groups") or want.get("allowed_address_pairs"))
        if got.get(k) != w:
            diffs.append(f"port {pid}: {k} {got.get(k)!r}, acknowledged {w!r}")
    pairs = [p["ip_address"] for p in got.get("allowed_address_pairs", [])]
    if pairs != [p["ip_address"] for p in want.get("allowed_address_pairs", [])]:
        diffs.append(f"port {pid}: allowed_address_pairs {pairs}")
    att = {k: got.get("attach", {}).get(k) for k in want["attach"]}
    if att != want["attach"]:
        diffs.append(f"port {pid}: attach {got.get('attach')}, acknowledged {want['attach']}")
    return diffs


class Churn:
    """Random changes, one per step(), from a seeded random.Random. Each kind
    adds with the probability that a slot is free and removes otherwise (an
    Ehrenfest urn): the state wanders around half full and does not drift,
    so what grows during a soak is the switch, not its load."""

    WEIGHTS = {"port": 35, "update": 12, "rule": 27, "group": 6, "fdb": 8, "refusal": 4}
    MAX_RULES, MAX_TMP_GROUPS, FDB_MACS = 16, 6, 8

    def __init__(self, model, rng, vdir, vxlan_net):
        self.m, self.rng, self.vdir, self.vxlan_net = model, rng, vdir, vxlan_net
        self.churn_ids = [f"50a5c000-0000-4000-8000-{i:012x}" for i in range(CHURN_PORTS)]
        self.added_rules = []   # (group, rule id) churn created, still there
        self.tmp_seq = 0

    def step(self, api):
        kinds = list(self.WEIGHTS)
        kind = self.rng.choices(kinds, weights=[self.WEIGHTS[k] for k in kinds])[0]
        getattr(self, f"_{kind}")(api)
        return kind

    def _adds(self, present, slots):
        return self.rng.random() < (slots - present) / slots

    def _port_params(self, i):
        groups = self.rng.sample(self._groups(), self.rng.randint(0, 2))
        p = {"id": self.churn_ids[i], "network": self.rng.choice(CHURN_NETWORKS),
             "mac": f"02:51:00:00:00:{i + 1:02x}",
             "fixed_ips": [f"10.77.{self.rng.randint(0, 3)}.{i + 1}"],
             "attach": {"type": "vhost", "path": str(self.vdir / f"churn{i}.sock"),
                        "mode": "client"}}
        if groups:
            p["security_groups"] = groups
        return p

    def _groups(self):
        return sorted(g for g in self.m.groups if g != SG_EGRESS)

    def _free(self):
        return [i for i, pid in enumerate(self.churn_ids) if pid not in self.m.ports]

    def _port(self, api):
        """Bind (sometimes 2..4 ports in one bulk request) or unbind."""
        free = self._free()
        if not self._adds(CHURN_PORTS - len(free), CHURN_PORTS):
            bound = [pid for pid in self.churn_ids if pid in self.m.ports]
            self.m.unbind(api, self.rng.choice(bound))
            return
        bulk = len(free) >= 2 and self.rng.random() < 0.3
        n = self.rng.randint(2, min(4, len(free))) if bulk else 1
        self.m.bind(api, [self._port_params(i) for i in self.rng.sample(free, n)])

    def _update(self, api):
        bound = [pid for pid in self.churn_ids if pid in self.m.ports]
        if not bound:
            return self._port(api)
        pid = self.rng.choice(bound)
        i = self.churn_ids.index(pid)
        groups = self.rng.sample(self._groups(), self.rng.randint(0, 2))
        # port security off without groups, as a bind without them leaves it
        change = {"security_groups": groups, "port_security_enabled": bool(groups)}
        if self.rng.random() < 0.5:
            change["fixed_ips"] = [f"10.77.{self.rng.randint(0, 3)}.{i + 1}"]
        self.m.update(api, pid, change)

    def _rule(self, api):
        """Create a rule in one of the receivers' or the temporary groups
        (the same rule twice in a group: refused, as neutron refuses it), or
        delete one churn created."""
        if not self._adds(len(self.added_rules), self.MAX_RULES):
            gid, rid = self.added_rules.pop(self.rng.randrange(len(self.added_rules)))
            self.m.delete_rule(api, rid)
            return
        gid = self.rng.choice(self._groups())
        r = self.rng.choice(RULE_CATALOG)
        if r in self.m.groups[gid].values():
            self.m.expect_refused(api, "duplicate_rule", "security_group_rule.create",
                                  {"security_group_id": gid, **r})
            return
        rid = self.m.add_rule(api, gid, r)
        if rid:
            self.added_rules.append((gid, rid))

    def _group(self, api):
        """Create a temporary group, or delete one (refused while in use)."""
        tmp = [g for g in self.m.groups if g.startswith("soak-tmp-")]
        if self._adds(len(tmp), self.MAX_TMP_GROUPS):
            self.tmp_seq += 1
            rules = self.rng.sample(RULE_CATALOG, self.rng.randint(0, 3))
            self.m.create_group(api, f"soak-tmp-{self.tmp_seq}", rules)
            return
        gid = self.rng.choice(tmp)
        if self.m.members(gid) or self.m.rules_naming(gid):
            self.m.expect_refused(api, "group_in_use", "security_group.delete", {"id": gid})
            return
        if self.m.delete_group(api, gid):
            self.added_rules = [(g, r) for g, r in self.added_rules if g != gid]

    def _fdb(self, api):
        mine = [mac for mac in self.m.fdb.get(self.vxlan_net, {}) if mac.startswith("02:52:")]
        if self._adds(len(mine), self.FDB_MACS):
            k = self.rng.randint(1, self.FDB_MACS)
            self.m.fdb_add(api, self.vxlan_net, f"02:52:00:00:00:{k:02x}", f"10.99.0.{10 + k}")
        else:
            self.m.fdb_delete(api, self.vxlan_net, self.rng.choice(mine))

    def _refusal(self, api):
        """Requests that must fail whole and change nothing."""
        what = self.rng.choice(["group_in_use", "network_in_use", "bulk_one_bad",
                                "rule_unknown_group", "unbind_unknown"])
        if what == "group_in_use":
            self.m.expect_refused(api, what, "security_group.delete", {"id": SG_BLOCK})
        elif what == "network_in_use":
            self.m.expect_refused(api, what, "network.delete", {"id": "soak-l2"})
        elif what == "bulk_one_bad" and len(self._free()) >= 2:
            i, j = self.rng.sample(self._free(), 2)
            bad = self._port_params(j)
            bad["security_groups"] = ["soak-no-such-group"]
            self.m.expect_refused(api, what, "port.bind", {"ports": [self._port_params(i), bad]})
        elif what == "rule_unknown_group":
            self.m.expect_refused(api, what, "security_group_rule.create",
                                  {"security_group_id": SG_BLOCK, "direction": "ingress",
                                   "ethertype": "IPv4", "remote_group_id": "soak-no-such-group"})
        else:
            self.m.expect_refused(api, "unbind_unknown", "port.unbind",
                                  {"id": "50a5ffff-0000-4000-8000-000000000000"})
