"""Backends that pass every fault above the seam and lose what they acknowledged below it.

==============================  ===========  ====================================================
factory                         rule broken  the bug
==============================  ===========  ====================================================
``in_process_store``            C-POST-08    its durable state is the store object's dicts:
                                             a reopened store on the namespace finds nothing
``nondurable_redis_store``      C-POST-08    the Redis store on a server with no AOF and no
(+ ``nondurable_redis_outbox``,              snapshots (what the project's services ran until
``nondurable_redis_control``)                issue 14): an acknowledged commit is gone after kill -9
==============================  ===========  ====================================================

``in_process_store`` runs as a third-party store (``--store examples.durability_bugs:in_process_store
--suite durability``); ``reopen`` catches it. The non-durable Redis is a private ``redis-server`` this
module starts on a free port (one per process, stopped at exit) and declares as its service control,
so ``server-crash`` may kill it; the shared services are never touched.
"""

from __future__ import annotations

import atexit

from conformance.crash import LocalRedis
from impls.api import MembershipDirectory
from impls.memory import MemoryMessageStore
from impls.redis import open_redis_outbox, open_redis_store
from impls.redis._outbox import RedisOutbox
from impls.redis._store import RedisMessageStore

DURABILITY_BUGS = {
    "in_process_store": "C-POST-08",
    "nondurable_redis_store": "C-POST-08",
}

_server: LocalRedis | None = None


async def in_process_store(namespace: str, membership: MembershipDirectory) -> MemoryMessageStore:
    """A correct store in every call, whose only copy of the data is this object."""
    return MemoryMessageStore(namespace, membership)


def nondurable_redis_control() -> LocalRedis:
    """The private non-durable redis-server (started on first use) as a ``ServiceControl``."""
    global _server
    if _server is None:
        _server = LocalRedis(durable=False).start()
        atexit.register(_server.stop)
    return _server


async def nondurable_redis_store(namespace: str, membership: MembershipDirectory) -> RedisMessageStore:
    return await open_redis_store(namespace, membership, endpoint=nondurable_redis_control().url)


async def nondurable_redis_outbox(namespace: str) -> RedisOutbox:
    return await open_redis_outbox(namespace, endpoint=nondurable_redis_control().url)
