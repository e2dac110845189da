"""neutron's QoS on Strait hosts (service_plugins = qos, ML2 extension_drivers
= qos): the rules of a port's policy (its own, else its network's) travel in
its document as "qos" (mech_driver.port_doc), and straitd polices and marks
by them (docs/api.md "QoS").

This driver tells neutron's QoS plugin which rules Strait enforces on
vhostuser ports: bandwidth_limit and packet_rate_limit in both directions,
and dscp_marking (no minimum_* guarantees: the switch polices, it does not
schedule). When a policy's rules change, every port bound to a Strait host
that uses it (its own policy, or its network's) gets its document again,
in the same transaction.
"""
from neutron_lib.api.definitions import portbindings
from neutron_lib import constants
from neutron_lib.db import constants as db_consts
from neutron_lib.services.qos import base
from neutron_lib.services.qos import constants as qos_consts

from neutron.objects import ports as port_obj

from networking_strait import config

NAME = 'strait'

SUPPORTED_RULES = {
    qos_consts.RULE_TYPE_BANDWIDTH_LIMIT: {
        qos_consts.MAX_KBPS: {'type:range': [0, db_consts.DB_INTEGER_MAX_VALUE]},
        qos_consts.MAX_BURST: {'type:range': [0, db_consts.DB_INTEGER_MAX_VALUE]},
        qos_consts.DIRECTION: {'type:values': constants.VALID_DIRECTIONS}},
    qos_consts.RULE_TYPE_PACKET_RATE_LIMIT: {
        qos_consts.MAX_KPPS: {'type:range': [0, db_consts.DB_INTEGER_MAX_VALUE]},
        qos_consts.MAX_BURST_KPPS: {'type:range': [0, db_consts.DB_INTEGER_MAX_VALUE]},
        qos_consts.DIRECTION: {'type:values': constants.VALID_DIRECTIONS}},
    qos_consts.RULE_TYPE_DSCP_MARKING: {
        qos_consts.DSCP_MARK: {'type:values': constants.VALID_DSCP_MARKS}},
}


def rules_doc(policy):
    """A policy's rules as straitd's port "qos" takes them."""
    out = []
    for r in policy.rules if policy else []:
        if r.rule_type == qos_consts.RULE_TYPE_BANDWIDTH_LIMIT:
            out.append({'type': r.rule_type, 'direction': r.direction,
                        'max_kbps': r.max_kbps, 'max_burst_kbps': r.max_burst_kbps or 0})
        elif r.rule_type == qos_consts.RULE_TYPE_PACKET_RATE_LIMIT:
            out.append({'type': r.rule_type, 'direction': r.direction,
                        'max_kpps': r.max_kpps, 'max_burst_kpps': r.max_burst_kpps or 0})
        elif r.rule_type == qos_consts.RULE_TYPE_DSCP_MARKING:
            out.append({'type': r.rule_type, 'dscp_mark': r.dscp_mark})
    return sorted(out, key=lambda x: (x['type'], x.get('direction', '')))


class StraitQosDriver(base.DriverBase):

    def __init__(self, republish):
        super().__init__(NAME, [portbindings.VIF_TYPE_VHOST_USER], [portbindings.VNIC_NORMAL],
                         SUPPORTED_RULES, requires_rpc_notifications=False)
        self._republish = republish

    @property
    def is_loaded(self):
        return config.strait_loaded()

    def update_policy_precommit(self, context, policy):
        ports = set(policy.get_bound_ports())
        for net in policy.get_bound_networks():
            ports |= {p.id for p in port_obj.Port.get_objects(context, network_id=net)
                      if not p.qos_policy_id}
        for port_id in sorted(ports):
            self._republish(context, port_id)
