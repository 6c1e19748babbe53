"""Stores that pass every fault above the seam and are caught only by faults on the wire.

Each is the shipped store for a real server with one line of its defence against a lost answer
taken out. Above the seam (``response-lost``, ``failed-before``) the harness loses an answer
*after* the store call returned, so the store never runs a request twice; on the wire the
driver's own retry does (redis-py re-sends a command after a reset), or the driver's own error
reaches the store (cassandra-driver's timeout on a lightweight transaction). Run them on the real
service, through the fault proxy::

    conformance run --store examples.wire_stores:resend_not_idempotent --service redis --suite store
    conformance run --store examples.wire_stores:cql_timeout_not_applied --service cassandra --suite store

=========================  =========  ==========================================================
factory                    rule       the bug
=========================  =========  ==========================================================
resend_not_idempotent      C-POST-01  ``reserve`` ignores its reserve token: when redis-py
                                      re-sends the script after a lost reply, the second run
                                      finds the key it just created and answers "in flight"
                                      instead of "created"; the caller never learns it was the
                                      one that allocated the coordinates
cql_timeout_not_applied    C-POST-01  the CQL store's reserve takes a lightweight transaction
                                      the driver gave up on (a lost connection, a client
                                      timeout, a Paxos ``WriteTimeout``) as one that did not
                                      apply: it starts a new attempt under a new reserve token,
                                      and the commit row its first batch did create then reads
                                      as somebody else's reservation ("in flight")
=========================  =========  ==========================================================

``WIRE_STORES`` maps each factory to the service it needs and the rule the harness must report.
"""

from __future__ import annotations

import uuid
from typing import Any

from impls.api import MembershipDirectory
from impls.cql import CqlMessageStore, CqlSettings
from impls.redis import RedisMessageStore, redis_client
from impls.redis._codec import IntentEncoding
from model.commit import (
    AuthenticatedSend,
    CommitIntent,
    CommitStage,
    FrozenDeliveryInput,
    MessageStoreError,
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


class CqlTimeoutNotApplied(CqlMessageStore):
    """C-POST-01: a conditional batch the driver gave up on is taken as one that did not apply.

    The shipped store keeps one reserve token per call and settles an uncertain batch by its next
    SERIAL read: the commit row holding its own token is its own reservation (``ReserveCreated``).
    This one treats the driver's error (``NoHostAvailable`` after a reset connection,
    ``OperationTimedOut``, a CAS ``WriteTimeout``) as a definite "not applied", like a lost race,
    and begins the next round as a new attempt with a new token.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._void: set[uuid.UUID] = set()  # tokens of batches this store took for "not applied"

    async def _create(self, keyspace: Any, intent: CommitIntent, state: Any, token: uuid.UUID) -> bool:
        try:
            return await super()._create(keyspace, intent, state, token)
        except MessageStoreError as exc:
            if not exc.kind.is_uncertain:
                raise
            self._void.add(token)  # the bug: no answer is taken for "the condition did not hold"
            return False

    async def _reserve_round(
        self,
        keyspace: Any,
        request: AuthenticatedSend,
        delivery: FrozenDeliveryInput,
        candidate: ReserveCandidate,
        attempt: Any,
    ) -> Any:
        outcome = await super()._reserve_round(keyspace, request, delivery, candidate, attempt)
        if attempt.token in self._void:
            self._void.discard(attempt.token)
            attempt.token = uuid.uuid4()  # "that batch never happened": a fresh attempt
        return outcome


async def cql_timeout_not_applied(
    namespace: str, membership: MembershipDirectory, endpoint: str | None = None
) -> CqlMessageStore:
    return CqlTimeoutNotApplied(namespace, membership, CqlSettings.from_endpoint(endpoint))


WIRE_STORES = {
    "resend_not_idempotent": ("redis", "C-POST-01"),
    "cql_timeout_not_applied": ("cassandra", "C-POST-01"),
}
