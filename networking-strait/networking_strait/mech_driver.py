"""StraitMechanismDriver: binds ports to hosts whose straitd is alive in etcd
and publishes what those switches need, through the journal (journal.py).

Binding: vnic_type normal, on a vlan, flat or vxlan segment, on a host whose
straitd holds its liveness key (PREFIX/states/HOST/alive) and offers the
segment (the physnet, or a VTEP for vxlan). vif_type vhostuser: QEMU is the
socket's server (vhostuser_mode "server"), straitd the client; the socket is
vhu + the first 11 characters of the port id in the host's socket directory
(nova's naming, which straitd's libvirt mapping also reads). No OVS plug.

Publishing (in neutron's transaction, so a rollback publishes nothing):
  - a port bound to a Strait host: its document under the host (a trunk's
    subport: its parent and VLAN instead of a socket, trunk_driver.py);
  - a port unbound, deleted, or moved: its document under the old host goes;
  - a security group created, changed (a rule added or removed) or deleted:
    its document, with every rule.
"""
from neutron_lib.api.definitions import portbindings
from neutron_lib.callbacks import events
from neutron_lib.callbacks import registry
from neutron_lib.callbacks import resources
from neutron_lib import constants as n_const
from neutron_lib.plugins import directory
from neutron_lib.plugins.ml2 import api
from oslo_log import log as logging
from oslo_serialization import jsonutils

from neutron.db import provisioning_blocks
from neutron.db import segments_db
from neutron.objects import ports as port_obj
from neutron.objects.qos import policy as policy_object
from neutron.plugins.ml2 import db as ml2_db

from networking_strait import config
from networking_strait import etcd as etcd_lib
from networking_strait import journal
from networking_strait import keys
from networking_strait import qos_driver
from networking_strait import trunk_driver

LOG = logging.getLogger(__name__)

NAME = 'strait'
NETWORK_TYPES = ('flat', 'vlan', 'vxlan')
RULE_FIELDS = ('id', 'direction', 'ethertype', 'protocol', 'port_range_min',
               'port_range_max', 'remote_ip_prefix', 'remote_group_id')


def carries(alive, physnet, vlan):
    """Whether the host's physnet carries the VLAN ([physnets.NAME]
    vlan_ranges of its straitd; none given: every VLAN)."""
    ranges = alive.get('vlan_ranges', {}).get(physnet)
    return ranges is None or any(lo <= vlan <= hi for lo, hi in ranges)


def socket_path(alive, port_id):
    d = alive.get('vhost_socket_dir') or '/run/strait/vhost'
    return '%s/vhu%s' % (d.rstrip('/'), port_id[:11])


def port_doc(ctx, port, seg, details, net):
    """The document of a port bound to a Strait host (docs/openstack.md)."""
    doc = {
        'id': port['id'],
        'mac_address': port['mac_address'],
        'fixed_ips': [ip['ip_address'] for ip in port.get('fixed_ips', [])],
        'allowed_address_pairs': [
            {'ip_address': p['ip_address'],
             'mac_address': p.get('mac_address') or port['mac_address']}
            for p in port.get('allowed_address_pairs', [])],
        'port_security_enabled': port.get('port_security_enabled', True),
        'security_groups': (port.get('security_groups', [])
                            if port.get('port_security_enabled', True) else []),
        'network': {'id': net['id'],
                    'network_type': seg[api.NETWORK_TYPE],
                    'physical_network': seg.get(api.PHYSICAL_NETWORK),
                    'segmentation_id': seg.get(api.SEGMENTATION_ID),
                    'mtu': net.get('mtu')},
        'vhostuser_socket': details[portbindings.VHOST_USER_SOCKET],
        'vhostuser_mode': details[portbindings.VHOST_USER_MODE],
        'device_owner': port.get('device_owner'),
        'device_id': port.get('device_id'),
        # the rules of its QoS policy, else of its network's (neutron's precedence)
        'qos': qos_driver.rules_doc(qos_policy(ctx, port, net)),
    }
    # A trunk's subport (the trunk driver bound it as one).
    sub = (trunk_driver.subport_of(ctx, port['id'])
           if port.get('device_owner') == trunk_driver.SUBPORT_OWNER else None)
    if sub:  # its frames travel on its parent's socket, tagged
        del doc['vhostuser_socket'], doc['vhostuser_mode']
        doc['trunk'] = {'parent': sub[0], 'segmentation_type': 'vlan',
                        'segmentation_id': sub[1]}
    return doc


def qos_policy(ctx, port, net):
    policy_id = port.get('qos_policy_id') or (net or {}).get('qos_policy_id')
    return policy_object.QosPolicy.get_object(ctx, id=policy_id) if policy_id else None


class StraitMechanismDriver(api.MechanismDriver):

    def initialize(self):
        c = config.conf()
        self.prefix = c.etcd_prefix
        self.etcd = etcd_lib.Etcd(c.etcd_endpoints)
        journal.create_table()
        for rtype, ev in ((resources.SECURITY_GROUP, events.PRECOMMIT_CREATE),
                          (resources.SECURITY_GROUP, events.PRECOMMIT_UPDATE),
                          (resources.SECURITY_GROUP, events.PRECOMMIT_DELETE),
                          (resources.SECURITY_GROUP_RULE, events.PRECOMMIT_CREATE),
                          (resources.SECURITY_GROUP_RULE, events.PRECOMMIT_DELETE)):
            registry.subscribe(self._group_changed, rtype, ev)
        # neutron's trunk and QoS plugins (service_plugins = trunk,qos) find
        # them on their start.
        self.trunk_driver = trunk_driver.StraitTrunkDriver.create()
        self.qos_driver = qos_driver.StraitQosDriver(self._republish)
        LOG.info('networking-strait: etcd %s, prefix %s', c.etcd_endpoints, self.prefix)

    def get_workers(self):
        return [journal.JournalWorker()]

    # ---- binding ----------------------------------------------------------

    def _alive(self, host):
        try:
            v = self.etcd.get(keys.alive(self.prefix, host))
        except etcd_lib.UNAVAILABLE as e:
            LOG.warning('networking-strait: etcd unreachable, cannot tell whether '
                        'straitd on %s is alive: %s', host, e)
            return None
        if v is None:
            return None
        try:
            return jsonutils.loads(v)
        except ValueError:
            return None

    def bind_port(self, context):
        port = context.current
        vnic = port.get(portbindings.VNIC_TYPE, portbindings.VNIC_NORMAL)
        if vnic != portbindings.VNIC_NORMAL:
            return
        alive = self._alive(context.host)
        if alive is None:
            LOG.warning('networking-strait: not binding port %s to host %s: no '
                        'straitd alive there (%s)', port['id'], context.host,
                        keys.alive(self.prefix, context.host))
            return
        offered = set(alive.get('network_types', []))
        for seg in context.segments_to_bind:
            ntype = seg[api.NETWORK_TYPE]
            if ntype not in NETWORK_TYPES or ntype not in offered:
                LOG.warning('networking-strait: port %s, host %s: segment %s is '
                            '%s, straitd there offers %s', port['id'],
                            context.host, seg[api.ID], ntype, sorted(offered))
                continue
            if ntype != 'vxlan' and seg[api.PHYSICAL_NETWORK] not in alive.get('physnets', []):
                LOG.warning('networking-strait: port %s, host %s: straitd there '
                            'has no physnet %s (it has %s)', port['id'],
                            context.host, seg[api.PHYSICAL_NETWORK],
                            alive.get('physnets', []))
                continue
            if ntype == 'vlan' and not carries(alive, seg[api.PHYSICAL_NETWORK],
                                               seg[api.SEGMENTATION_ID]):
                LOG.warning('networking-strait: port %s, host %s: physnet %s '
                            'there carries VLANs %s, not %s', port['id'],
                            context.host, seg[api.PHYSICAL_NETWORK],
                            alive['vlan_ranges'][seg[api.PHYSICAL_NETWORK]],
                            seg[api.SEGMENTATION_ID])
                continue
            context.set_binding(
                seg[api.ID], portbindings.VIF_TYPE_VHOST_USER,
                {portbindings.CAP_PORT_FILTER: True,
                 portbindings.VHOST_USER_MODE: portbindings.VHOST_USER_MODE_SERVER,
                 portbindings.VHOST_USER_OVS_PLUG: False,
                 portbindings.VHOST_USER_SOCKET: socket_path(alive, port['id'])})
            return

    # ---- ports ------------------------------------------------------------

    @staticmethod
    def _ours(binding_levels, vif_type):
        return (vif_type == portbindings.VIF_TYPE_VHOST_USER and binding_levels and
                binding_levels[-1][api.BOUND_DRIVER] == NAME)

    def _port_doc(self, context, original=False):
        port = context.original if original else context.current
        seg = context.original_bottom_bound_segment if original else context.bottom_bound_segment
        details = context.original_vif_details if original else context.vif_details
        return port_doc(context._plugin_context, port, seg, details, context.network.current)

    def _republish(self, ctx, port_id):
        """Port port_id's document again, from the database (a QoS policy it
        uses changed), if it is bound to a Strait host."""
        plugin = directory.get_plugin()
        port = plugin.get_port(ctx, port_id)
        host = port.get(portbindings.HOST_ID)
        if port.get(portbindings.VIF_TYPE) != portbindings.VIF_TYPE_VHOST_USER or not host:
            return
        levels = ml2_db.get_binding_level_objs(ctx, port_id, host)
        if not levels or levels[-1].driver != NAME:
            return
        seg = segments_db.get_segment_by_id(ctx, levels[-1].segment_id)
        net = plugin.get_network(ctx, port['network_id'])
        doc = port_doc(ctx, port, seg, port[portbindings.VIF_DETAILS], net)
        journal.put(ctx.session, keys.port(self.prefix, host, port_id), doc)

    def _publish_port(self, context, deleting=False):
        session = context._plugin_context.session
        port = context.current
        now = (not deleting and context.host and
               self._ours(context.binding_levels, context.vif_type))
        was = (context.original is not None and context.original_host and
               self._ours(context.original_binding_levels, context.original_vif_type))
        if was and (not now or context.original_host != context.host):
            journal.delete(session, keys.port(self.prefix, context.original_host, port['id']))
        if deleting and context.host and self._ours(context.binding_levels, context.vif_type):
            journal.delete(session, keys.port(self.prefix, context.host, port['id']))
        if now:
            doc = self._port_doc(context)
            # An update that leaves the document as it was sends nothing.
            if not (was and context.original_host == context.host and
                    self._port_doc(context, original=True) == doc):
                journal.put(session, keys.port(self.prefix, context.host, port['id']), doc)
            self._block_until_up(context)

    def _block_until_up(self, context):
        """ACTIVE once straitd says the port is up (journal.JournalWorker),
        again after each DOWN."""
        port = context.current
        owner = port.get('device_owner', '')
        if port['status'] != n_const.PORT_STATUS_ACTIVE and (
                owner.startswith('compute:') or owner == trunk_driver.SUBPORT_OWNER):
            provisioning_blocks.add_provisioning_component(
                context._plugin_context, port['id'], resources.PORT,
                provisioning_blocks.L2_AGENT_ENTITY)

    @staticmethod
    def _status_only(context):
        """Whether the update changes the port's status and nothing else (the
        journal worker's, from straitd's states)."""
        if context.original is None or context.host != context.original_host:
            return False
        same = ('status', 'updated_at', 'revision_number')
        return ({k: v for k, v in context.current.items() if k not in same} ==
                {k: v for k, v in context.original.items() if k not in same})

    @staticmethod
    def _memberships(port):
        """Group id -> the addresses `port` gives it as a remote group: its
        fixed IPs and allowed address pairs, wherever it is bound (or not)."""
        if not port or not port.get('port_security_enabled', True):
            return {}
        addrs = sorted({ip['ip_address'] for ip in port.get('fixed_ips', [])} |
                       {p['ip_address'] for p in port.get('allowed_address_pairs', [])})
        return {g: addrs for g in port.get('security_groups', [])} if addrs else {}

    def _publish_memberships(self, context, deleting=False):
        session = context._plugin_context.session
        port_id = context.current['id']
        was = self._memberships(context.current if deleting else context.original)
        now = {} if deleting else self._memberships(context.current)
        for g in was.keys() - now.keys():
            journal.delete(session, keys.member(self.prefix, g, port_id))
        for g, addrs in now.items():
            if was.get(g) != addrs:
                journal.put(session, keys.member(self.prefix, g, port_id),
                            {'port': port_id, 'addresses': addrs})

    def create_port_precommit(self, context):
        self._publish_port(context)
        self._publish_memberships(context)

    def update_port_precommit(self, context):
        # A status change publishes nothing (and building the document would
        # load the network inside neutron's ACTIVE transaction).
        if self._status_only(context):
            if self._ours(context.binding_levels, context.vif_type):
                self._block_until_up(context)
            return
        self._publish_port(context)
        self._publish_memberships(context)

    def update_port_postcommit(self, context):
        # A trunk's parent bound to a host, moved or unbound: its subports follow.
        if context.original is not None and context.host != context.original_host:
            trunk_driver.bind_subports_of(context._plugin_context,
                                          context.current['id'], context.host or '')

    def update_network_precommit(self, context):
        # A network's QoS policy changed: its ports without a policy of
        # their own take the new one's rules.
        before = (context.original or {}).get('qos_policy_id')
        if context.current.get('qos_policy_id') == before:
            return
        ctx = context._plugin_context
        for p in port_obj.Port.get_objects(ctx, network_id=context.current['id']):
            if not p.qos_policy_id:
                self._republish(ctx, p.id)

    def delete_port_precommit(self, context):
        self._publish_port(context, deleting=True)
        self._publish_memberships(context, deleting=True)

    # ---- security groups ----------------------------------------------------

    def _group_changed(self, resource, event, trigger, payload):
        ctx = payload.context
        if resource == resources.SECURITY_GROUP:
            group_id = payload.resource_id
        else:
            group_id = ((payload.metadata or {}).get('security_group_id') or
                        (payload.latest_state or {}).get('security_group_id'))
        if not group_id:
            return
        key = keys.group(self.prefix, group_id)
        if resource == resources.SECURITY_GROUP and event == events.PRECOMMIT_DELETE:
            journal.delete(ctx.session, key)
            return
        gone = payload.resource_id if (resource == resources.SECURITY_GROUP_RULE and
                                       event == events.PRECOMMIT_DELETE) else None
        state = payload.latest_state if resource == resources.SECURITY_GROUP else None
        if state and 'security_group_rules' in state:  # as created or updated
            rules, name = state['security_group_rules'], state.get('name', '')
        else:  # a rule added or removed: the group's rules as they are now
            plugin = directory.get_plugin()
            rules = plugin.get_security_group_rules(
                ctx, filters={'security_group_id': [group_id]})
            name = plugin.get_security_group(ctx, group_id, fields=['name']).get('name', '')
            # The rule being created is not among them yet.
            if resource == resources.SECURITY_GROUP_RULE and event == events.PRECOMMIT_CREATE:
                rules = [r for r in rules if r['id'] != payload.resource_id]
                rules.append(payload.latest_state)
        LOG.debug('networking-strait: %s %s: group %s, %d rule(s)', resource, event,
                  group_id, len(rules))
        journal.put(ctx.session, key, {
            'id': group_id,
            'name': name,
            'rules': [{f: r.get(f) for f in RULE_FIELDS}
                      for r in rules if r['id'] != gone],
        })
