"""``RedisOutbox``: publications are entries of one Redis Stream per namespace.

``publish`` is one script: if the dedupe hash already names an entry for this commit key it is
returned, otherwise XADD appends the event and the entry id is recorded in the same atomic step.
So a committer that dies at M-COMMIT-04 and publishes again gets the same ``OutboxPublication``,
and two different publications can never both look committed (C-POST-07). ``entries`` reads the
stream back (``ListableOutbox``), a page of ``XRANGE`` at a time.
"""

from __future__ import annotations

from redis.asyncio import Redis

from impls.api import OutboxEntry
from impls.redis import _codec, _scripts
from impls.redis._gateway import Gateway
from impls.redis._keys import Keys, member, valid_namespace
from impls.redis._store import list_namespaces
from model.commit import CommitIntent, MessageStoreError, OutboxPublication, StoreErrorKind

_ENTRIES_PAGE = 1000


class RedisOutbox:
    """An ``impls.api.Outbox`` and ``ListableOutbox`` on a Redis Stream; errors leave as
    ``MessageStoreError``."""

    def __init__(self, client: Redis, namespace: str) -> None:
        if not valid_namespace(namespace):
            raise MessageStoreError(
                StoreErrorKind.INVALID_ARGUMENT, "namespace must be printable and free of braces"
            )
        # The logical name publications carry. It names the stream within the namespace; the
        # compact committed hash omits it (see _codec), so it is the codec's DEFAULT_STREAM.
        self.stream = _codec.DEFAULT_STREAM
        self._keys = Keys(namespace)
        self._gateway = Gateway(client)

    @property
    def round_trips(self) -> int:
        return self._gateway.round_trips

    async def publish(self, intent: CommitIntent) -> OutboxPublication:
        key = intent.key
        reply = await self._gateway.run(
            _scripts.PUBLISH,
            [self._keys.outbox_dedupe, self._keys.outbox_stream],
            [member(key), *_codec.outbox_event_fields(intent)],
            key,
        )
        if isinstance(reply, bytes):  # the entry id
            return OutboxPublication(self.stream, reply.decode())
        raise MessageStoreError(StoreErrorKind.CORRUPT, "the outbox holds data of an unexpected shape", key)

    async def entries(self) -> list[OutboxEntry]:
        """Every entry of the stream, oldest first, each with the commit key its record names."""
        found: list[OutboxEntry] = []
        start = b"-"
        while True:
            page = await self._gateway.command(
                "XRANGE", self._keys.outbox_stream, start, b"+", b"COUNT", _ENTRIES_PAGE
            )
            with _codec.decoding("outbox entry"):
                for entry_id, fields in page:
                    key = _codec.outbox_entry_key(fields)
                    found.append(OutboxEntry(key, OutboxPublication(self.stream, bytes(entry_id).decode())))
            if len(page) < _ENTRIES_PAGE:
                return found
            start = b"(" + bytes(page[-1][0])

    async def readiness(self) -> None:
        """A PING round trip on every call."""
        pong = await self._gateway.command("PING")
        if pong is not True and pong not in (b"PONG", "PONG"):
            raise MessageStoreError(StoreErrorKind.UNAVAILABLE, "the server answered PING unexpectedly")

    async def drop_namespace(self) -> None:
        """``impls.api.NamespaceOwner``: UNLINK the namespace's keys (see ``RedisMessageStore``)."""
        await self._gateway.drop_prefix(self._keys.prefix)

    async def namespaces(self) -> list[str]:
        return await list_namespaces(self._gateway)

    async def close(self) -> None:
        await self._gateway.close()
