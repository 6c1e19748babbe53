"""Stores that pass every fault above the seam and are caught only by faults on the wire.

Each is the shipped store for a real server with one line of its defence against a lost answer
taken out. Above the seam (``response-lost``, ``failed-before``) the harness loses an answer
*after* the store call returned, so the store never runs a request twice; on the wire the
driver's own retry does (redis-py re-sends a command after a reset), or the driver's own error
reaches the store (cassandra-driver's timeout on a lightweight transaction). Run them on the real
service, through the fault proxy::

    conformance run --store examples.wire_stores:resend_not_idempotent --service redis --suite store

=========================  =========  ==========================================================
factory                    rule       the bug
=========================  =========  ==========================================================
resend_not_idempotent      C-POST-01  ``reserve`` ignores its reserve token: when redis-py
                                      re-sends the script after a lost reply, the second run
                                      finds the key it just created and answers "in flight"
                                      instead of "created"; the caller never learns it was the
                                      one that allocated the coordinates
=========================  =========  ==========================================================

``WIRE_STORES`` maps each factory to the service it needs and the rule the harness must report.
"""

from __future__ import annotations

from typing import Any

from impls.api import MembershipDirectory
from impls.redis import RedisMessageStore, redis_client
from impls.redis._codec import IntentEncoding
from model.commit import (
    AuthenticatedSend,
    CommitIntent,
    CommitStage,
    FrozenDeliveryInput,
    ReserveCandidate,
    ReserveCreated,
    ReserveInFlight,
    ReserveResult,
)


class ResendNotIdempotent(RedisMessageStore):
    """C-POST-01: a re-sent reserve script is taken for somebody else's earlier reservation.

    The shipped store writes a fresh reserve token with every new commit, and a reserve that finds
    a RESERVED key holding its own token knows the script ran before (a re-send) and still answers
    ``ReserveCreated``. This one answers as if the token were not there.
    """

    _fresh = False

    async def reserve(
        self, request: AuthenticatedSend, delivery: FrozenDeliveryInput, candidate: ReserveCandidate
    ) -> ReserveResult:
        self._fresh = False
        result = await super().reserve(request, delivery, candidate)
        if isinstance(result, ReserveCreated) and not self._fresh:
            # Created by an earlier run of this very script (redis-py re-sent it): the bug.
            return ReserveInFlight(result.intent, CommitStage.RESERVED, None)
        return result

    def _remember(
        self, intent: CommitIntent, commit_name: bytes, conversation: bytes, encoding: IntentEncoding
    ) -> Any:
        self._fresh = True  # the script created the commit on this run (the first one)
        return super()._remember(intent, commit_name, conversation, encoding)


async def resend_not_idempotent(
    namespace: str, membership: MembershipDirectory, endpoint: str | None = None
) -> RedisMessageStore:
    return ResendNotIdempotent(redis_client(endpoint), namespace, membership)


WIRE_STORES = {"resend_not_idempotent": ("redis", "C-POST-01")}
