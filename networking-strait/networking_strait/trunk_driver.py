"""neutron's trunk service plugin on Strait hosts (VLAN-aware VMs).

A trunk's parent is a port the mechanism driver binds like any other (the
VM's vhost-user NIC). Its subports have no device of their own: straitd
takes the parent's frames tagged with a subport's VLAN as the subport's,
and tags what it sends to one. So a subport is bound to its parent's host
(device_owner trunk:subport, as neutron's agent-based drivers do), and the
mechanism driver publishes its document with "trunk": {"parent",
"segmentation_id"} instead of a socket. It goes ACTIVE when straitd reports
it up, which is when its parent's guest is there.

Subports added to a trunk whose parent is bound are bound at once; a trunk
created before its VM boots gets them bound when the parent is
(bind_subports_of, from the mechanism driver). Subports removed, or the
trunk deleted, are unbound: their documents leave the host.
"""
from neutron_lib.api.definitions import portbindings
from neutron_lib.callbacks import events
from neutron_lib.callbacks import registry
from neutron_lib.callbacks import resources
from neutron_lib import context as n_context
from neutron_lib.plugins import directory
from neutron_lib.services.trunk import constants as trunk_consts
from oslo_log import log as logging

from neutron.objects import trunk as trunk_objects
from neutron.services.trunk.drivers import base as trunk_base

from networking_strait import config

LOG = logging.getLogger(__name__)

NAME = 'strait'
SUBPORT_OWNER = trunk_consts.TRUNK_SUBPORT_OWNER


def subport_of(context, port_id):
    """(parent port id, VLAN) when the port is a trunk's subport, else None."""
    sub = trunk_objects.SubPort.get_object(context, port_id=port_id)
    if sub is None:
        return None
    trunk = trunk_objects.Trunk.get_object(context, id=sub.trunk_id)
    if trunk is None:
        return None
    return trunk.port_id, sub.segmentation_id


def _parent_host(context, trunk):
    port = directory.get_plugin().get_port(context, trunk.port_id)
    return port.get(portbindings.HOST_ID) or ''


def _bind(context, port_ids, host):
    plugin = directory.get_plugin()
    owner = trunk_consts.TRUNK_SUBPORT_OWNER if host else ''
    for port_id in port_ids:
        try:
            plugin.update_port(context, port_id,
                               {'port': {portbindings.HOST_ID: host,
                                         'device_owner': owner}})
        except Exception:  # one subport's failure leaves the others bound
            LOG.exception('networking-strait: subport %s to host %r', port_id, host)
            return False
    return True


def bind_subports_of(context, parent_id, host):
    """The parent port's binding changed: its trunk's subports follow it."""
    trunk = trunk_objects.Trunk.get_object(context, port_id=parent_id)
    if trunk is None or not trunk.sub_ports:
        return
    ok = _bind(context, [s.port_id for s in trunk.sub_ports], host)
    trunk.update(status=(trunk_consts.TRUNK_ACTIVE_STATUS if ok and host else
                         trunk_consts.TRUNK_DOWN_STATUS if ok else
                         trunk_consts.TRUNK_DEGRADED_STATUS))


class StraitTrunkHandler(object):

    def _added(self, trunk, subports):
        ctx = n_context.get_admin_context()
        host = _parent_host(ctx, trunk)
        if not host:
            return  # bound with the parent (bind_subports_of)
        ok = _bind(ctx, [s.port_id for s in subports], host)
        trunk.update(status=trunk_consts.TRUNK_ACTIVE_STATUS if ok else
                     trunk_consts.TRUNK_DEGRADED_STATUS)

    def _removed(self, subports):
        _bind(n_context.get_admin_context(), [s.port_id for s in subports], '')

    def trunk_event(self, resource, event, trigger, payload):
        trunk = payload.states[0] if event == events.AFTER_DELETE else payload.latest_state
        if event == events.AFTER_CREATE and trunk.sub_ports:
            self._added(trunk, trunk.sub_ports)
        elif event == events.AFTER_DELETE and trunk.sub_ports:
            self._removed(trunk.sub_ports)

    def subport_event(self, resource, event, trigger, payload):
        subports = payload.metadata['subports']
        if event == events.AFTER_CREATE:
            self._added(payload.latest_state, subports)
        elif event == events.AFTER_DELETE:
            self._removed(subports)


class StraitTrunkDriver(trunk_base.DriverBase):

    @property
    def is_loaded(self):
        return config.strait_loaded()

    @registry.receives(resources.TRUNK_PLUGIN, [events.AFTER_INIT])
    def register(self, resource, event, trigger, payload=None):
        super().register(resource, event, trigger, payload=payload)
        self._handler = StraitTrunkHandler()
        for ev in (events.AFTER_CREATE, events.AFTER_DELETE):
            registry.subscribe(self._handler.trunk_event, resources.TRUNK, ev)
            registry.subscribe(self._handler.subport_event, resources.SUBPORTS, ev)

    @classmethod
    def create(cls):
        return cls(NAME, (portbindings.VIF_TYPE_VHOST_USER,),
                   (trunk_consts.SEGMENTATION_TYPE_VLAN,), None,
                   can_trunk_bound_port=True)
