"""The Redis store's ``impls.api.StoreInspector``: a commit key's hash, read and replaced raw.

Harness-only (docs/backend-authors.md): ``HGETALL`` of the commit hash, and ``DEL`` + ``HSET`` of a
whole replacement, through the store's gateway (so errors leave as ``MessageStoreError``). Field
names are the codec's one-byte names, decoded as Latin-1; values stay bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from model.commit import CommitKey, MessageStoreError, StoreErrorKind

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
