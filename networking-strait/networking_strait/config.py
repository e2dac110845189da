"""[ml2_strait] in neutron's ml2_conf.ini."""
from oslo_config import cfg

OPTS = [
    cfg.ListOpt('etcd_endpoints', default=['http://127.0.0.1:2379'],
                help='etcd client URLs (its v3 JSON gateway), tried in turn.'),
    cfg.StrOpt('etcd_prefix', default='/strait',
               help='Key prefix; straitd.toml [etcd] prefix must be the same.'),
    cfg.FloatOpt('journal_poll_interval', default=0.05,
                 help='Seconds between looks at the journal when it is empty.'),
]

cfg.CONF.register_opts(OPTS, 'ml2_strait')


def conf():
    return cfg.CONF.ml2_strait


def strait_loaded():
    """Whether ML2 runs this driver ("strait" among mechanism_drivers): what
    the trunk and QoS plugins ask their drivers (is_loaded)."""
    try:
        return 'strait' in cfg.CONF.ml2.mechanism_drivers
    except cfg.NoSuchOptError:
        return False
