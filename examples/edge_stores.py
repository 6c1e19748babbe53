"""Stores wrong in the ways issue 15's checks look for: each is a shipped store with one line changed.

=========================  =========  =========  ====================================================
factory                    service    rule       the bug
=========================  =========  =========  ====================================================
leaks_script_text          (none)     C-ERR-01   a conflict's detail carries the Redis command and
                                                 the raw key member it read (no namespace in it:
                                                 the namespace-only scan passed it)
noop_readiness             redis      C-PRE-06   ``readiness`` returns at once and never reaches
                                                 the server (caught with the server partitioned)
=========================  =========  =========  ====================================================

Run one::

    conformance run --store examples.edge_stores:leaks_script_text --suite store
    conformance run --store examples.edge_stores:noop_readiness --service redis --suite store

``EDGE_STORES`` maps each factory to ``(service or None, suite, rule)``.
"""

from __future__ import annotations

from impls.api import MembershipDirectory
from impls.redis import RedisMessageStore, fakeredis_client, redis_client
from impls.redis._keys import member
from model.commit import (
    AuthenticatedSend,
    FrozenDeliveryInput,
    MessageStoreError,
    ReserveCandidate,
    ReserveResult,
    StoreErrorKind,
)


class LeaksScriptText(RedisMessageStore):
    """C-ERR-01: the conflict names the command it ran and the raw member of the key it read."""

    async def reserve(
        self, request: AuthenticatedSend, delivery: FrozenDeliveryInput, candidate: ReserveCandidate
    ) -> ReserveResult:
        try:
            return await super().reserve(request, delivery, candidate)
        except MessageStoreError as error:
            if error.kind is not StoreErrorKind.IDENTITY_CONFLICT:
                raise
            raw = member(request.commit_key)
            raise MessageStoreError(
                error.kind, f"HGET {raw!r} identity: another request owns this key", error.key
            ) from None


class NoopReadiness(RedisMessageStore):
    """C-PRE-06: ready without asking anyone."""

    async def readiness(self) -> None:
        return None


async def leaks_script_text(namespace: str, membership: MembershipDirectory) -> RedisMessageStore:
    return LeaksScriptText(fakeredis_client(), namespace, membership)


async def noop_readiness(
    namespace: str, membership: MembershipDirectory, endpoint: str | None = None
) -> RedisMessageStore:
    return NoopReadiness(redis_client(endpoint), namespace, membership)


EDGE_STORES: dict[str, tuple[str | None, str, str]] = {
    "leaks_script_text": (None, "store", "C-ERR-01"),
    "noop_readiness": ("redis", "store", "C-PRE-06"),
}
