"""etcd through python3-etcd3gw (its v3 JSON gateway, as straitd uses it),
with failover between endpoints and a watch that reports a broken stream
instead of ending silently."""
import base64
import json
from urllib import parse

import etcd3gw
from etcd3gw import exceptions as etcd_exc
import requests

UNAVAILABLE = (etcd_exc.ConnectionFailedError, etcd_exc.ConnectionTimeoutError,
               requests.exceptions.RequestException)


def _b64(s):
    return base64.b64encode(s.encode()).decode()


def _unb64(s):
    return base64.b64decode(s or '').decode('utf-8', 'replace')


def _range_end(prefix):
    b = bytearray(prefix.encode())
    b[-1] += 1
    return bytes(b).decode('latin-1')


class Etcd(object):
    def __init__(self, endpoints, timeout=5):
        self._clients = []
        for url in endpoints:
            u = parse.urlparse(url)
            self._clients.append(etcd3gw.Etcd3Client(
                host=u.hostname, port=u.port or 2379, protocol=u.scheme or 'http',
                timeout=timeout, api_path='/v3/'))
        self._current = 0

    def _call(self, fn):
        last = None
        for _ in self._clients:
            c = self._clients[self._current]
            try:
                return fn(c)
            except UNAVAILABLE as e:
                last = e
                self._current = (self._current + 1) % len(self._clients)
        raise last

    def put(self, key, value):
        return self._call(lambda c: c.put(key, value))

    def delete(self, key):
        return self._call(lambda c: c.delete(key))

    def get(self, key):
        values = self._call(lambda c: c.get(key))
        return values[0] if values else None

    def get_prefix(self, prefix):
        """({key: value}, revision) of every key under prefix."""
        def rng(c):
            return c.post(c.get_url('/kv/range'), json={
                'key': _b64(prefix), 'range_end': _b64(_range_end(prefix))})
        r = self._call(rng)
        kvs = {_unb64(kv['key']): _unb64(kv.get('value'))
               for kv in r.get('kvs', [])}
        return kvs, int(r.get('header', {}).get('revision', 0))

    def watch_prefix(self, prefix, start_revision, on_event, timeout=None):
        """Calls on_event(key, value or None) for every change under prefix
        from start_revision, until the stream breaks (raises) or is
        compacted (raises Compacted)."""
        c = self._clients[self._current]
        body = {'create_request': {'key': _b64(prefix),
                                   'range_end': _b64(_range_end(prefix)),
                                   'start_revision': str(start_revision)}}
        try:
            resp = c.session.post(c.get_url('/watch'), json=body, stream=True,
                                  timeout=(3, timeout))
            for line in resp.iter_lines(chunk_size=None):
                if not line:
                    continue
                msg = json.loads(line)
                if 'error' in msg:
                    raise Broken(str(msg['error']))
                res = msg.get('result', {})
                if int(res.get('compact_revision', 0) or 0) > 0:
                    raise Compacted()
                if res.get('canceled'):
                    raise Broken(res.get('cancel_reason', 'watch canceled'))
                for ev in res.get('events', []):
                    kv = ev['kv']
                    deleted = ev.get('type') == 'DELETE'
                    on_event(_unb64(kv['key']),
                             None if deleted else _unb64(kv.get('value')))
        except UNAVAILABLE as e:
            self._current = (self._current + 1) % len(self._clients)
            raise Broken(str(e))
        raise Broken('watch stream ended')


class Broken(Exception):
    pass


class Compacted(Broken):
    pass
