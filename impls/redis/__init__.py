"""The Redis ``MessageStore`` and ``Outbox`` on redis.asyncio, unchanged on fakeredis and Redis 7.

Factories (``conformance.backends`` names them):

* ``open_fakeredis_store`` / ``open_fakeredis_outbox``: the embedded default. All fakeredis
  clients of this process share one ``FakeServer``, so a store and an outbox opened for the same
  namespace see the same data; each call gets its own client.
* ``open_redis_store`` / ``open_redis_outbox``: a real server at ``RATCHET_REDIS_URL`` (default
  ``redis://127.0.0.1:16379/0``, what ``scripts/services up redis`` starts), or at the ``endpoint``
  URL they are given (URL options such as ``socket_timeout`` override the client's defaults).

Layout: keys in ``_keys``, hash codec in ``_codec``, scripts in ``_scripts``, and the only place
redis-py is called, with error translation and round-trip counting, in ``_gateway``.
"""

from __future__ import annotations

import fakeredis
from redis.asyncio import Redis
from redis.asyncio.retry import Retry  # the asyncio one: the sync Retry never awaits, so never retries
from redis.backoff import ExponentialBackoff

from impls import endpoints
from impls.api import MembershipDirectory
from impls.endpoints import SERVICES
from impls.redis._outbox import RedisOutbox
from impls.redis._store import CommitHashFootprint, RedisMessageStore

REDIS_URL_ENV = SERVICES["redis"].env_var
DEFAULT_REDIS_URL = SERVICES["redis"].default

_fake_server: fakeredis.FakeServer | None = None


def redis_url() -> str:
    return endpoints.redis_url()


def fakeredis_client() -> Redis:
    """A new client of this process's one ``FakeServer`` (Lua scripts run on lupa)."""
    global _fake_server
    if _fake_server is None:
        _fake_server = fakeredis.FakeServer()
    client: Redis = fakeredis.FakeAsyncRedis(server=_fake_server)
    return client


def redis_client(url: str | None = None) -> Redis:
    """A new client of a real server. Connection errors are retried twice, briefly: a retry may
    re-send a script that already ran, which every script tolerates (see ``_scripts``)."""
    return Redis.from_url(
        url or redis_url(),
        retry=Retry(ExponentialBackoff(cap=0.2, base=0.02), retries=2),
        socket_connect_timeout=2.0,
        socket_timeout=10.0,
    )


async def open_fakeredis_store(namespace: str, membership: MembershipDirectory) -> RedisMessageStore:
    return RedisMessageStore(fakeredis_client(), namespace, membership)


async def open_fakeredis_outbox(namespace: str) -> RedisOutbox:
    return RedisOutbox(fakeredis_client(), namespace)


async def open_redis_store(
    namespace: str, membership: MembershipDirectory, endpoint: str | None = None
) -> RedisMessageStore:
    """``endpoint``: a ``redis://`` URL instead of the configured one (the harness's fault proxy)."""
    return RedisMessageStore(redis_client(endpoint), namespace, membership)


async def open_redis_outbox(namespace: str, endpoint: str | None = None) -> RedisOutbox:
    return RedisOutbox(redis_client(endpoint), namespace)


__all__ = [
    "DEFAULT_REDIS_URL",
    "REDIS_URL_ENV",
    "CommitHashFootprint",
    "RedisMessageStore",
    "RedisOutbox",
    "fakeredis_client",
    "open_fakeredis_outbox",
    "open_fakeredis_store",
    "open_redis_outbox",
    "open_redis_store",
    "redis_client",
    "redis_url",
]
