"""The etcd keys neutron and straitd share, under one prefix ([ml2_strait]
etcd_prefix here, [etcd] prefix in straitd.toml). straitd reads and writes
the same layout (control/etcd/intake.h):

  PREFIX/nodes/HOST/ports/PORT_ID    desired: a port bound to HOST (ours)
  PREFIX/global/secgroups/GROUP_ID   desired: a security group (ours)
  PREFIX/global/remote_group/GROUP_ID/PORT_ID
                                     desired: the addresses port PORT_ID, on
                                     whichever host, gives group GROUP_ID as
                                     a remote group (ours)
  PREFIX/states/HOST/alive           straitd's liveness, lease-backed (its)
  PREFIX/states/HOST/ports/PORT_ID   straitd's state of a port (its)
  PREFIX/states/HOST/secgroups/GROUP_ID
                                     the group revision straitd enforces (its)
"""


def port(prefix, host, port_id):
    return '%s/nodes/%s/ports/%s' % (prefix, host, port_id)


def group(prefix, group_id):
    return '%s/global/secgroups/%s' % (prefix, group_id)


def member(prefix, group_id, port_id):
    return '%s/global/remote_group/%s/%s' % (prefix, group_id, port_id)


def alive(prefix, host):
    return '%s/states/%s/alive' % (prefix, host)


def states(prefix):
    return '%s/states/' % prefix


def parse_state(prefix, key):
    """(host, port_id) of a port state key, or None for any other key."""
    rest = key[len(states(prefix)):] if key.startswith(states(prefix)) else ''
    parts = rest.split('/')
    if len(parts) == 3 and parts[1] == 'ports' and parts[0] and parts[2]:
        return parts[0], parts[2]
    return None
