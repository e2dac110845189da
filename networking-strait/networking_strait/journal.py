"""The journal between neutron's database and etcd.

Every change the driver publishes is a row of strait_etcd_journal, written in
the same database transaction as neutron's own change (the driver's
*_precommit hooks and security-group PRECOMMIT callbacks). A worker process
(JournalWorker, started by neutron-server after it forks) writes the rows to
etcd in order and deletes each once etcd has it. So:
  - nothing neutron committed is lost: a row survives a crash of
    neutron-server, and the worker of the next one replays it (a put or a
    delete of a whole document: replaying one twice is harmless);
  - nothing neutron rolled back reaches etcd;
  - with etcd down, rows wait and the worker retries; they go out in order
    once etcd answers.
The same worker watches the states straitd writes back and completes
neutron's L2 provisioning block of a port straitd reports up (the port goes
ACTIVE and neutron tells nova network-vif-plugged), puts a port straitd
refused in ERROR, and one whose guest went away DOWN.
"""
import threading

from neutron_lib.callbacks import resources
from neutron_lib import constants as n_const
from neutron_lib import context as n_context
from neutron_lib.db import api as db_api
from neutron_lib.db import model_base
from neutron_lib.plugins import directory
from neutron_lib import worker
from oslo_log import log as logging
from oslo_serialization import jsonutils
import sqlalchemy as sa

from neutron.db import models_v2
from neutron.db import provisioning_blocks
from neutron.plugins.ml2 import models as ml2_models

from networking_strait import config
from networking_strait import etcd as etcd_lib
from networking_strait import keys

LOG = logging.getLogger(__name__)


class JournalRow(model_base.BASEV2):
    __tablename__ = 'strait_etcd_journal'
    id = sa.Column(sa.BigInteger().with_variant(sa.Integer(), 'sqlite'),
                   primary_key=True, autoincrement=True)
    key = sa.Column(sa.String(1024), nullable=False)
    value = sa.Column(sa.Text, nullable=True)  # NULL: delete the key


def create_table():
    """The journal's table, if missing (the driver's initialize())."""
    engine = db_api.get_context_manager().writer.get_engine()
    JournalRow.__table__.create(engine, checkfirst=True)


def put(session, key, value):
    """Within neutron's transaction: `key` gets `value` (a dict) in etcd."""
    session.add(JournalRow(key=key, value=jsonutils.dumps(value, sort_keys=True)))


def delete(session, key):
    session.add(JournalRow(key=key, value=None))


class JournalWorker(worker.BaseWorker):
    def __init__(self):
        super(JournalWorker, self).__init__(worker_process_count=1,
                                            desc='networking-strait journal')
        self._stop = threading.Event()
        self._threads = []

    def start(self, **kwargs):
        super(JournalWorker, self).start(**kwargs)
        for fn in (self._push_loop, self._state_loop):
            t = threading.Thread(target=fn, daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self):
        self._stop.set()

    def wait(self):
        for t in self._threads:
            t.join()

    @staticmethod
    def reset():
        pass

    # Rows to etcd, oldest first.
    def _push_loop(self):
        c = config.conf()
        etcd = etcd_lib.Etcd(c.etcd_endpoints)
        ctx = n_context.get_admin_context()
        failing = False
        while not self._stop.is_set():
            try:
                with db_api.CONTEXT_READER.using(ctx):
                    rows = [(r.id, r.key, r.value) for r in
                            ctx.session.query(JournalRow)
                            .order_by(JournalRow.id).limit(200)]
            except Exception:
                LOG.exception('networking-strait: reading the journal')
                self._stop.wait(1)
                continue
            if not rows:
                self._stop.wait(c.journal_poll_interval)
                continue
            done = []
            try:
                for rid, key, value in rows:
                    if value is None:
                        etcd.delete(key)
                    else:
                        etcd.put(key, value)
                    done.append(rid)
                if failing:
                    LOG.info('networking-strait: etcd answers again')
                failing = False
            except etcd_lib.UNAVAILABLE as e:
                if not failing:
                    LOG.warning('networking-strait: etcd unreachable, %d journal '
                                'row(s) wait: %s', len(rows) - len(done), e)
                failing = True
            if done:
                with db_api.CONTEXT_WRITER.using(ctx):
                    ctx.session.query(JournalRow).filter(
                        JournalRow.id.in_(done)).delete(synchronize_session=False)
            if failing:
                self._stop.wait(1)

    # States straitd writes, to neutron's port status.
    def _state_loop(self):
        c = config.conf()
        etcd = etcd_lib.Etcd(c.etcd_endpoints)
        prefix = keys.states(c.etcd_prefix)
        while not self._stop.is_set():
            try:
                kvs, rev = etcd.get_prefix(prefix)
                for k, v in kvs.items():
                    self._on_state(k, v)
                etcd.watch_prefix(prefix, rev + 1, self._on_state)
            except etcd_lib.Compacted:
                continue
            except (etcd_lib.Broken,) + etcd_lib.UNAVAILABLE as e:
                LOG.debug('networking-strait: state watch: %s', e)
                self._stop.wait(0.5)
            except Exception:
                LOG.exception('networking-strait: state watch')
                self._stop.wait(1)

    def _on_state(self, key, value):
        where = keys.parse_state(config.conf().etcd_prefix, key)
        if not where or value is None:
            return
        host, port_id = where
        try:
            st = jsonutils.loads(value)
        except ValueError:
            LOG.warning('networking-strait: %s: state is not JSON', key)
            return
        state = st.get('state')
        if state not in ('up', 'down', 'error'):
            return  # bound: nothing for neutron to do yet
        ctx = n_context.get_admin_context()
        # Two small queries, not plugin.get_port(): the whole port with its
        # extensions is built by neutron's whole machinery, on the way to ACTIVE.
        with db_api.CONTEXT_READER.using(ctx):
            bound = ctx.session.query(ml2_models.PortBinding.host).filter_by(
                port_id=port_id, status=n_const.ACTIVE).first()
            row = ctx.session.query(models_v2.Port.status).filter_by(id=port_id).first()
        if not bound or not row:
            return  # gone meanwhile
        if bound[0] != host:
            return  # what a host it left says of it
        plugin = directory.get_plugin()
        if state == 'up':
            if provisioning_blocks.is_object_blocked(ctx, port_id, resources.PORT):
                provisioning_blocks.provisioning_complete(
                    ctx, port_id, resources.PORT,
                    provisioning_blocks.L2_AGENT_ENTITY)
        elif state == 'error':
            LOG.error('networking-strait: straitd on %s refused port %s: %s',
                      host, port_id, st.get('reason'))
            plugin.update_port_status(ctx, port_id, n_const.PORT_STATUS_ERROR,
                                      host=host)
        elif state == 'down' and row[0] == n_const.PORT_STATUS_ACTIVE:
            plugin.update_port_status(ctx, port_id, n_const.PORT_STATUS_DOWN,
                                      host=host)
