"""The commit contract on Apache Cassandra / ScyllaDB (cassandra-driver), with its outbox.

Lightweight transactions for every transition, the default two-step Recorded -> Outboxed ->
Committed path (no atomic capability), one shared driver session per process and contact point.
The contact point comes from ``RATCHET_CQL_CONTACT`` (default ``127.0.0.1:19042``). Theory of
operation: impls/cql/_store.py; tables: impls/cql/_schema.py.
"""

from __future__ import annotations

from impls.api import MembershipDirectory
from impls.cql._boundary import Operation, translate
from impls.cql._outbox import CqlOutbox
from impls.cql._session import CONTACT_ENV, DEFAULT_CONTACT, CqlSettings, shutdown_sessions
from impls.cql._store import CqlMessageStore


def _settings(endpoint: str | None) -> CqlSettings:
    return CqlSettings.from_endpoint(endpoint)


async def open_cql_store(
    namespace: str, membership: MembershipDirectory, endpoint: str | None = None
) -> CqlMessageStore:
    """``StoreFactory`` for the ``cql`` backend. Connects lazily: the first call reaches the server.

    ``endpoint``: a ``host:port`` contact point instead of the configured one (a fault proxy),
    optionally with ``?request_timeout_s=S`` (``CqlSettings.from_endpoint``).
    """
    return CqlMessageStore(namespace, membership, _settings(endpoint))


async def open_cql_outbox(namespace: str, endpoint: str | None = None) -> CqlOutbox:
    """``OutboxFactory`` for the ``cql`` backend."""
    return CqlOutbox(namespace, _settings(endpoint))


__all__ = [
    "CONTACT_ENV",
    "DEFAULT_CONTACT",
    "CqlMessageStore",
    "CqlOutbox",
    "CqlSettings",
    "Operation",
    "open_cql_outbox",
    "open_cql_store",
    "shutdown_sessions",
    "translate",
]
