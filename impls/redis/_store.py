"""``RedisMessageStore``: the commit contract on redis.asyncio, one server-side script per call.

Each transition is one Lua script (``_scripts``): all checks first, then every write, so a call
either applies whole or not at all, and Recorded + publication -> Committed is one atomic step
(C-POST-05). Reads are one round trip each: ``load_commit*`` a single HGETALL, the history page
and the recovery scan a script. Key names are in ``_keys``, the hash layout in ``_codec``, and
every redis-py call goes through ``_gateway`` (error translation, round-trip count).
"""

from __future__ import annotations

import secrets
from typing import Any

import attrs
from redis.asyncio import Redis

from impls.api import MembershipDirectory
from impls.redis import _codec, _scripts
from impls.redis._gateway import Gateway
from impls.redis._inspect import RedisInspector
from impls.redis._keys import (
    ALL_NAMESPACES,
    INTERNAL_TEXT,
    Keys,
    addressable,
    key_of_member,
    member,
    namespace_of,
    valid_namespace,
)
from model.commit import (
    MAX_SCAN_ITEMS,
    AuthenticatedSend,
    CommitIntent,
    CommitKey,
    CommitStage,
    CommittedMessage,
    ConversationId,
    FrozenDeliveryInput,
    HistoryPage,
    HistoryQuery,
    LoadedCommit,
    MessageRecord,
    MessageStoreError,
    OutboxPublication,
    ReserveCandidate,
    ReserveCommitted,
    ReserveCreated,
    ReserveInFlight,
    ReserveResult,
    StoreCapabilities,
    StoreErrorKind,
    TimestampMillis,
    UserId,
    history_query_problem,
    identity_matches,
    request_problem,
    reserve_identity_digest,
    reserve_problem,
)

_CAPABILITIES = StoreCapabilities(atomic_publish_and_commit=True)

# Script status -> what the contract calls it (C-ERR-01).
_REFUSALS = {
    b"not-found": (StoreErrorKind.NOT_FOUND, "no commit under this key"),
    b"intent-mismatch": (StoreErrorKind.INTENT_MISMATCH, "intent differs from the reserved one"),
    b"publication-mismatch": (
        StoreErrorKind.PUBLICATION_MISMATCH,
        "a different publication is already durable",
    ),
    b"corrupt": (StoreErrorKind.CORRUPT, "stored data has an unexpected shape"),
    b"bad-timestamp": (StoreErrorKind.INVALID_ARGUMENT, "accepted_at_ms is out of range"),
}
_MISSING = {b"record": "no durable record yet", b"publication": "no durable outbox publication yet"}


@attrs.frozen
class CommitHashFootprint:
    """What a commit hash costs on the server (for the benchmark and the compact-format test)."""

    encoding: str  # OBJECT ENCODING: "listpack" or "hashtable"
    memory_usage: int  # MEMORY USAGE in bytes, key name included
    fields: int


@attrs.frozen
class _IntentWire:
    """What every transition of one intent sends, encoded once (see ``RedisMessageStore._wire``)."""

    keys: list[bytes]  # commit, recovery index, history index, history data
    identity: bytes
    coordinates: bytes
    conversation: bytes
    encoding: _codec.IntentEncoding
    member: bytes


def _fail(kind: StoreErrorKind, detail: str, key: CommitKey | None = None) -> MessageStoreError:
    return MessageStoreError(kind, detail, key)


def _status(reply: Any, key: CommitKey | None) -> tuple[bytes, list[Any]]:
    if not isinstance(reply, list) or not reply or not isinstance(reply[0], bytes):
        raise _fail(StoreErrorKind.CORRUPT, "the server answered with an unexpected shape", key)
    return reply[0], reply[1:]


def _refusal(status: bytes, rest: list[Any], key: CommitKey | None) -> MessageStoreError:
    if status == b"missing-evidence" and rest and rest[0] in _MISSING:
        return _fail(StoreErrorKind.MISSING_EVIDENCE, _MISSING[rest[0]], key)
    kind, detail = _REFUSALS.get(status, (StoreErrorKind.CORRUPT, "the server answered unexpectedly"))
    return _fail(kind, detail, key)


class RedisMessageStore(RedisInspector):
    """An ``impls.api.MessageStore`` on one Redis (or fakeredis) server, inside one namespace."""

    def __init__(self, client: Redis, namespace: str, membership: MembershipDirectory) -> None:
        if not valid_namespace(namespace):
            raise _fail(StoreErrorKind.INVALID_ARGUMENT, "namespace must be printable and free of braces")
        self.namespace = namespace
        self._gateway = Gateway(client)
        self._keys = Keys(namespace)
        self._membership = membership
        self._last_wire: tuple[CommitIntent, _IntentWire] | None = None

    internal_text = INTERNAL_TEXT  # C-ERR-01 (impls/redis/_keys.py)

    @property
    def capabilities(self) -> StoreCapabilities:
        return _CAPABILITIES

    @property
    def round_trips(self) -> int:
        """Server round trips this store has made so far; diff it around a call to count one."""
        return self._gateway.round_trips

    # --- reserve ----------------------------------------------------------------------------

    async def reserve(
        self,
        request: AuthenticatedSend,
        delivery: FrozenDeliveryInput,
        candidate: ReserveCandidate,
    ) -> ReserveResult:
        """C-POST-01, C-POST-02, C-PRE-02, C-PRE-03, C-ERR-04: one script, one allocation per key.

        The reserve token written with a new commit lets a re-sent script recognise its own
        reservation and still answer ``ReserveCreated``.
        """
        key = request.commit_key
        problem = reserve_problem(request, delivery, candidate)
        if problem is None and candidate.record != MessageRecord.from_send(request):
            problem = "candidate record is not the canonical record of the request"
        if problem is not None:
            raise _fail(StoreErrorKind.INVALID_ARGUMENT, problem, key)
        identity = reserve_identity_digest(request)
        encoding = _codec.intent_encoding(candidate.record, delivery)
        token = secrets.token_bytes(8)
        commit_name = self._keys.commit(key)
        conversation = _codec.text(request.conversation)
        reply = await self._gateway.run(
            _scripts.RESERVE,
            [
                commit_name,
                self._keys.message_seq(request.tenant),
                self._keys.conversation_seq(request.tenant, request.conversation),
                self._keys.recovery,
            ],
            [
                identity,
                conversation,
                encoding.record,
                candidate.record.content.body,
                encoding.delivery,
                token,
                str(candidate.accepted_at_ms),
                member(key),
                encoding.fingerprint,
            ],
            key,
        )
        if isinstance(reply, bytes):  # the new commit's coordinates
            intent = CommitIntent(
                key=key,
                identity=identity,
                coordinates=_codec.coordinates_from_field(reply),
                record=candidate.record,
                delivery=delivery,
            )
            self._remember(intent, commit_name, conversation, encoding)
            return ReserveCreated(intent)
        status, rest = _status(reply, key)
        if status != b"exists":
            raise _refusal(status, rest, key)
        stored = _codec.commit_from_hash(key, _codec.hash_from_reply(rest))
        if stored is None:
            raise _fail(StoreErrorKind.CORRUPT, "the server answered unexpectedly", key)
        if not identity_matches(stored.identity, request):
            raise _fail(StoreErrorKind.IDENTITY_CONFLICT, "another request owns this key", key)
        if stored.stage is CommitStage.COMMITTED:
            return ReserveCommitted(stored.message(key))
        assert stored.intent is not None
        if stored.token == token and stored.stage is CommitStage.RESERVED:
            return ReserveCreated(stored.intent)  # our own reservation, seen again after a re-send
        return ReserveInFlight(stored.intent, stored.stage, stored.publication)

    # --- the stage transitions ----------------------------------------------------------------

    async def _transition(
        self, operation: bytes, intent: CommitIntent, publication: OutboxPublication | None
    ) -> tuple[CommitStage, OutboxPublication | None]:
        """Run the transition script; returns the stage reached and the durable publication.

        The script compares the intent by identity, coordinates, conversation and the fingerprint
        of record, body and delivery (C-POST-03); only a commit reserved before fingerprints
        existed makes it ask again with the whole intent (one more round trip, once per call).
        """
        key = intent.key
        if not addressable(key):  # never reserved, so absent
            raise _fail(StoreErrorKind.NOT_FOUND, "no commit under this key", key)
        wire = self._wire(intent)
        if operation == b"put_record":
            particular = _codec.history_meta_to_field(intent)
        elif operation == b"mark_outbox_published":
            particular = b""
        else:
            particular = b"%d" % (intent.coordinates.accepted_at_ms + intent.delivery.retention_ms)
        keys = wire.keys
        args: list[bytes | str] = [
            operation,
            wire.identity,
            wire.coordinates,
            wire.conversation,
            wire.encoding.fingerprint,
            b"" if publication is None else _codec.pack_publication(publication),
            wire.member,
            particular,
        ]
        reply = await self._gateway.run(_scripts.TRANSITION, keys, args, key)
        if not isinstance(reply, bytes) and _status(reply, key)[0] == b"need-intent":
            args += [wire.encoding.record, intent.record.content.body, wire.encoding.delivery]
            reply = await self._gateway.run(_scripts.TRANSITION, keys, args, key)
        if isinstance(reply, bytes):
            return _codec.stage_reached(reply, publication)
        raise _refusal(*_status(reply, key), key)

    def _wire(self, intent: CommitIntent) -> _IntentWire:
        """The committer hands one frozen intent object to every step of a commit, so the last
        one's encoding is kept and reused when the very same object comes back."""
        last = self._last_wire
        if last is not None and last[0] is intent:
            return last[1]
        return self._remember(
            intent,
            self._keys.commit(intent.key),
            _codec.text(intent.conversation),
            _codec.intent_encoding(intent.record, intent.delivery),
        )

    def _remember(
        self, intent: CommitIntent, commit_name: bytes, conversation: bytes, encoding: _codec.IntentEncoding
    ) -> _IntentWire:
        key = intent.key
        wire = _IntentWire(
            keys=[
                commit_name,
                self._keys.recovery,
                self._keys.history_index(key.tenant, intent.conversation),
                self._keys.history_data(key.tenant, intent.conversation),
            ],
            identity=intent.identity,
            coordinates=_codec.coordinates_to_field(intent.coordinates),
            conversation=conversation,
            encoding=encoding,
            member=member(key),
        )
        self._last_wire = (intent, wire)
        return wire

    def _committed(
        self, intent: CommitIntent, reached: tuple[CommitStage, OutboxPublication | None]
    ) -> CommittedMessage:
        stage, publication = reached
        if stage is not CommitStage.COMMITTED or publication is None:
            raise _fail(StoreErrorKind.CORRUPT, "the server answered unexpectedly", intent.key)
        return CommittedMessage(intent.key, intent.conversation, intent.coordinates, publication)

    async def put_record(self, intent: CommitIntent) -> None:
        """C-PRE-04, C-POST-03: RESERVED -> RECORDED plus the history entry; retries converge."""
        await self._transition(b"put_record", intent, None)

    async def mark_outbox_published(self, intent: CommitIntent, publication: OutboxPublication) -> None:
        """C-POST-03: RECORDED -> OUTBOXED; the same publication again converges."""
        await self._transition(b"mark_outbox_published", intent, publication)

    async def mark_published_and_committed(
        self, intent: CommitIntent, publication: OutboxPublication
    ) -> CommittedMessage:
        """C-POST-04, C-POST-05: Recorded/Outboxed + publication -> Committed in one script."""
        reached = await self._transition(b"mark_published_and_committed", intent, publication)
        return self._committed(intent, reached)

    async def mark_committed(self, intent: CommitIntent) -> CommittedMessage:
        """C-POST-03: OUTBOXED -> COMMITTED; refused without record and publication evidence."""
        reached = await self._transition(b"mark_committed", intent, None)
        return self._committed(intent, reached)

    # --- reads ------------------------------------------------------------------------------

    async def _load(self, key: CommitKey) -> _codec.StoredCommit | None:
        if not addressable(key):
            return None
        fields = await self._gateway.command("HGETALL", self._keys.commit(key), key=key)
        if not isinstance(fields, dict):
            raise _fail(StoreErrorKind.CORRUPT, "the server answered with an unexpected shape", key)
        return _codec.commit_from_hash(key, fields)

    async def load_commit(self, key: CommitKey, conversation_id: ConversationId) -> LoadedCommit | None:
        """C-PRE-09: one HGETALL; either format; another conversation's key conflicts."""
        stored = await self._load(key)
        if stored is None:
            return None
        if stored.conversation != conversation_id:
            raise _fail(StoreErrorKind.IDENTITY_CONFLICT, "key belongs to another conversation", key)
        return stored.loaded(key)

    async def load_commit_for_request(self, request: AuthenticatedSend) -> LoadedCommit | None:
        """C-PRE-03, C-PRE-07, C-PRE-09: QIMD digests compare by digest, legacy QIMC byte for byte."""
        key = request.commit_key
        problem = request_problem(request)
        if problem is not None:
            raise _fail(StoreErrorKind.INVALID_ARGUMENT, problem, key)
        stored = await self._load(key)
        if stored is None:
            return None
        if not identity_matches(stored.identity, request):
            raise _fail(StoreErrorKind.IDENTITY_CONFLICT, "another request owns this key", key)
        return stored.loaded(key)

    async def scan_recoverable_commits(
        self, older_than: TimestampMillis, max_items: int
    ) -> list[CommitIntent]:
        """C-POST-02: one script over the recovery index, ordered by (accepted_at_ms, key)."""
        if not 1 <= max_items <= MAX_SCAN_ITEMS:
            raise _fail(StoreErrorKind.INVALID_ARGUMENT, f"max_items must be 1..{MAX_SCAN_ITEMS}")
        reply = await self._gateway.run(
            _scripts.SCAN_RECOVERABLE,
            [self._keys.recovery],
            [str(older_than), max_items, self._keys.commit_prefix],
        )
        status, rest = _status(reply, None)
        if status != b"ok":
            raise _refusal(status, rest, None)
        intents: list[CommitIntent] = []
        with _codec.decoding("recovery index"):
            at = 0
            while at < len(rest):
                key = key_of_member(rest[at])
                count = int(rest[at + 1])
                stored = _codec.commit_from_hash(key, _codec.hash_from_reply(rest[at + 2 : at + 2 + count]))
                at += 2 + count
                if stored is None or stored.intent is None:
                    raise ValueError("a recovery candidate without an in-flight commit")
                intents.append(stored.intent)
        return intents

    async def history_page(self, query: HistoryQuery) -> HistoryPage:
        """C-PRE-05, C-POST-11: authorize in-process, then one script reads the page."""
        problem = history_query_problem(query)
        if problem is not None:
            raise _fail(StoreErrorKind.INVALID_ARGUMENT, problem)
        members = await _members(self._membership, query)
        if query.actor not in members:
            raise _fail(StoreErrorKind.NOT_A_MEMBER, "actor is not a member of the conversation")
        reply = await self._gateway.run(
            _scripts.HISTORY_PAGE,
            [
                self._keys.history_index(query.tenant, query.conversation),
                self._keys.history_data(query.tenant, query.conversation),
                self._keys.conversation_seq(query.tenant, query.conversation),
            ],
            [
                query.direction.value,
                "" if query.anchor is None else str(query.anchor),
                query.limit,
                query.max_bytes,
                str(query.as_of_ms),
            ],
        )
        status, rest = _status(reply, None)
        if status != b"ok":
            raise _refusal(status, rest, None)
        with _codec.decoding("history page"):
            through, available_from, has_more, *flat = rest
            if len(flat) % 2:
                raise ValueError("odd entry list")
            entries = tuple(
                _codec.history_entry_from_fields(flat[n], flat[n + 1]) for n in range(0, len(flat), 2)
            )
            return HistoryPage(
                direction=query.direction,
                anchor=query.anchor,
                limit=query.limit,
                max_bytes=query.max_bytes,
                entries=entries,
                has_more=int(has_more) == 1,
                available_from=int(available_from) if available_from else None,
                available_through=int(through),
            )

    # --- operations -------------------------------------------------------------------------

    async def readiness(self) -> None:
        """C-PRE-06: a PING round trip on every call; no cached answer."""
        pong = await self._gateway.command("PING")
        if pong is not True and pong not in (b"PONG", "PONG"):
            raise _fail(StoreErrorKind.UNAVAILABLE, "the server answered PING unexpectedly")

    async def commit_hash_footprint(self, key: CommitKey) -> CommitHashFootprint | None:
        """Encoding and MEMORY USAGE of one commit hash (real Redis; a benchmark aid, 3 round trips)."""
        name = self._keys.commit(key)
        fields = await self._gateway.command("HLEN", name, key=key)
        if not fields:
            return None
        encoding = await self._gateway.command("OBJECT", "ENCODING", name, key=key)
        usage = await self._gateway.command("MEMORY", "USAGE", name, "SAMPLES", "0", key=key)
        return CommitHashFootprint(
            encoding=encoding.decode() if isinstance(encoding, bytes) else str(encoding),
            memory_usage=int(usage),
            fields=int(fields),
        )

    async def drop_namespace(self) -> None:
        """``impls.api.NamespaceOwner``: UNLINK the namespace's keys (those this store's scripts
        were given; every key under the prefix when it wrote none)."""
        await self._gateway.drop_prefix(self._keys.prefix)

    async def namespaces(self) -> list[str]:
        return await list_namespaces(self._gateway)

    async def close(self) -> None:
        await self._gateway.close()


async def list_namespaces(gateway: Gateway) -> list[str]:
    """Every namespace with keys on the server (a SCAN of the whole keyspace: for cleaning up)."""
    return sorted({ns for k in await gateway.scan(ALL_NAMESPACES) if (ns := namespace_of(k)) is not None})


async def _members(membership: MembershipDirectory, query: HistoryQuery) -> frozenset[UserId]:
    """The conversation's members; a failing directory is an unavailable dependency (C-ERR-01)."""
    try:
        return await membership.members(query.tenant, query.conversation)
    except MessageStoreError:
        raise
    except Exception:
        raise _fail(StoreErrorKind.UNAVAILABLE, "the membership directory did not answer") from None
