"""The door between the Redis adapter and redis-py: every server round trip passes through here.

Two jobs, each done in exactly one place:

* error translation (C-ERR-01): redis-py, socket and event-loop failures become
  ``MessageStoreError`` with a detail of our own; no server text, key or script leaves;
* counting round trips, so the benchmark and the tests can say how many each store call costs.

Scripts run as EVALSHA; when the server does not know the script (first use, a restart, SCRIPT
FLUSH) the same call falls back to EVAL, which also caches it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis.exceptions
from redis.asyncio import Redis

from impls.redis._scripts import Script
from model.commit import CommitKey, MessageStoreError, StoreErrorKind

Arg = bytes | str | int


def _translated(error: Exception, key: CommitKey | None) -> MessageStoreError:
    """What a redis-py, socket or event-loop failure means to the contract (C-ERR-01)."""
    if isinstance(error, redis.exceptions.ResponseError):
        # A key of the wrong type is stored data we cannot read; any other error reply (OOM,
        # BUSY, READONLY, a script error) is the server refusing the call right now.
        if str(error).startswith("WRONGTYPE"):
            return MessageStoreError(StoreErrorKind.CORRUPT, "stored data has an unexpected shape", key)
        return MessageStoreError(StoreErrorKind.UNAVAILABLE, "the server refused the call", key)
    # Connection refused or reset, timeouts, protocol errors, a closed client: the call may or
    # may not have applied, which is what UNAVAILABLE says.
    return MessageStoreError(StoreErrorKind.UNAVAILABLE, "the server did not answer", key)


_UNLINK_BATCH = 500
_SCAN_COUNT = 1000


def glob_escape(text: bytes) -> bytes:
    """``text`` as a literal in a Redis glob pattern."""
    out = bytearray()
    for byte in text:
        if byte in b"*?[]\\":
            out += b"\\"
        out.append(byte)
    return bytes(out)


class Gateway:
    """One redis-py client, its round-trip counter and its error door."""

    def __init__(self, client: Redis) -> None:
        self._client = client
        self._closed = False
        self.round_trips = 0
        #: Every key a script was given. Scripts may only touch the keys they are given (the
        #: cluster rule our scripts keep), and only scripts write, so this is all this client wrote.
        self.keys_given: set[bytes] = set()

    def _check_open(self, key: CommitKey | None) -> None:
        if self._closed:
            raise MessageStoreError(StoreErrorKind.UNAVAILABLE, "the store is closed", key)

    async def run(
        self, script: Script, keys: Sequence[bytes], args: Sequence[Arg], key: CommitKey | None = None
    ) -> Any:
        """Run ``script`` once on the server (one round trip, two if the script was not cached)."""
        self._check_open(key)
        self.keys_given.update(keys)
        # try/except inline rather than a context manager: this is every commit's hot path.
        try:
            try:
                self.round_trips += 1
                return await self._execute("EVALSHA", script.sha, len(keys), *keys, *args)
            except redis.exceptions.NoScriptError:
                self.round_trips += 1
                return await self._execute("EVAL", script.source, len(keys), *keys, *args)
        except MessageStoreError:
            raise
        except Exception as error:
            raise _translated(error, key) from None

    async def command(self, *args: Arg, key: CommitKey | None = None) -> Any:
        """One plain command, one round trip."""
        self._check_open(key)
        try:
            self.round_trips += 1
            return await self._execute(*args)
        except MessageStoreError:
            raise
        except Exception as error:
            raise _translated(error, key) from None

    async def drop_prefix(self, prefix: bytes) -> None:
        """UNLINK every key this client's scripts were given under ``prefix``, or, for a client
        that wrote nothing (one opened only to clean up), every key the server has under it."""
        mine = sorted(k for k in self.keys_given if k.startswith(prefix))
        found = mine if mine else await self.scan(glob_escape(prefix) + b"*")
        for start in range(0, len(found), _UNLINK_BATCH):
            await self.command("UNLINK", *found[start : start + _UNLINK_BATCH])
        self.keys_given.difference_update(mine)

    async def scan(self, pattern: bytes) -> list[bytes]:
        """Every key matching ``pattern`` (SCAN, so the server is never blocked)."""
        cursor: Arg = b"0"
        found: list[bytes] = []
        while True:
            cursor, page = await self.command("SCAN", cursor, b"MATCH", pattern, b"COUNT", _SCAN_COUNT)
            found.extend(bytes(k) for k in page)
            if int(cursor) == 0:
                return found

    async def _execute(self, *args: Arg) -> Any:
        # redis-py leaves execute_command unannotated; this is its one typed call site.
        return await self._client.execute_command(*args)  # type: ignore[no-untyped-call]

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._client.aclose()
        except Exception as error:
            raise _translated(error, None) from None
