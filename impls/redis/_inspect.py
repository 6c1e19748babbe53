"""The Redis store's ``impls.api.StoreInspector`` (a commit key's hash, read and replaced raw) and
``impls.api.LegacyImport`` (a committed message written in the pre-upgrade full format).

Harness-only (docs/backend-authors.md): ``HGETALL`` of the commit hash, and ``DEL`` + ``HSET`` of a
whole replacement, through the store's gateway (so errors leave as ``MessageStoreError``). Field
names are the codec's one-byte names, decoded as Latin-1; values stay bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from impls.redis import _codec
from model.commit import (
    CommitKey,
    CommittedMessage,
    FrozenDeliveryInput,
    MessageRecord,
    MessageStoreError,
    StoreErrorKind,
)

if TYPE_CHECKING:
    from impls.redis._gateway import Gateway
    from impls.redis._keys import Keys


class RedisInspector:
    """Mixed into ``RedisMessageStore``."""

    if TYPE_CHECKING:
        _gateway: Gateway
        _keys: Keys

    async def read_raw(self, key: CommitKey) -> dict[str, object] | None:
        reply = await self._gateway.command("HGETALL", self._keys.commit(key), key=key)
        if not reply:
            return None
        return {bytes(name).decode("latin-1"): bytes(value) for name, value in dict(reply).items()}

    async def write_raw(self, key: CommitKey, fields: Mapping[str, object]) -> None:
        name = self._keys.commit(key)
        flat: list[bytes] = []
        for field, value in fields.items():
            if not isinstance(value, bytes):
                raise MessageStoreError(StoreErrorKind.INVALID_ARGUMENT, "hash values are bytes", key)
            flat += [field.encode("latin-1"), value]
        self._gateway.keys_given.add(name)  # dropped with the namespace like every key written
        await self._gateway.command("DEL", name, key=key)
        if flat:
            await self._gateway.command("HSET", name, *flat, key=key)

    async def import_legacy(
        self, message: CommittedMessage, identity: bytes, record: MessageRecord, delivery: FrozenDeliveryInput
    ) -> None:
        """The hash the code before the upgrade wrote at COMMITTED, field by field (C-PRE-10)."""
        key, coordinates, content = message.key, message.coordinates, record.content
        fields: dict[bytes, bytes] = {
            _codec.LEGACY_STAGE: _codec.LEGACY_COMMITTED,
            _codec.LEGACY_IDENTITY: identity,
            _codec.LEGACY_CONVERSATION: message.conversation.encode(),
            _codec.LEGACY_MESSAGE_SEQ: b"%d" % coordinates.message_seq,
            _codec.LEGACY_CONVERSATION_SEQ: b"%d" % coordinates.conversation_seq,
            _codec.LEGACY_ACCEPTED_AT: b"%d" % coordinates.accepted_at_ms,
            b"device": record.device.encode(),
            b"message_type": content.message_type.value.encode(),
            b"custom_type": (content.custom_type or "").encode(),
            b"body": content.body,
            b"mentions": ",".join(record.mentions).encode(),
            b"reply_to": b"" if record.reply_to is None else b"%d" % record.reply_to,
            b"recipients": ",".join(delivery.recipients).encode(),
            b"membership_version": b"%d" % delivery.membership_version,
            b"retention_ms": b"%d" % delivery.retention_ms,
            _codec.LEGACY_STREAM: message.publication.stream.encode(),
            _codec.LEGACY_ENTRY_ID: message.publication.entry_id.encode(),
        }
        await self.write_raw(key, {name.decode("latin-1"): value for name, value in fields.items()})
        for counter, value in (
            (self._keys.message_seq(key.tenant), coordinates.message_seq),
            (self._keys.conversation_seq(key.tenant, message.conversation), coordinates.conversation_seq),
        ):
            self._gateway.keys_given.add(counter)
            current = await self._gateway.command("GET", counter, key=key)
            if current is None or int(current) < value:
                await self._gateway.command("SET", counter, b"%d" % value, key=key)
