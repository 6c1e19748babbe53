"""Sync redis-py clients for the stream connector: embedded (fakeredis) or a real server.

The saga runtime is synchronous, so its connector is too. The fakeredis server is one per
process (like the Redis store's), and every stream name carries the caller's namespace prefix:
isolation is by key prefix, never by flushing a shared server.
"""

from __future__ import annotations

import fakeredis
import redis

from impls.endpoints import redis_url

_fake_server: fakeredis.FakeServer | None = None


def open_fakeredis_client() -> redis.Redis:
    global _fake_server
    if _fake_server is None:
        _fake_server = fakeredis.FakeServer()
    client: redis.Redis = fakeredis.FakeRedis(server=_fake_server)
    return client


def open_redis_client(url: str | None = None) -> redis.Redis:
    """A client of the real server (``RATCHET_REDIS_URL``); it is never flushed."""
    return redis.Redis.from_url(url or redis_url(), socket_timeout=5.0, socket_connect_timeout=5.0)
