"""Corrupted stored data, through a store's optional inspector port (``impls.api.StoreInspector``).

``corrupt_stored`` opens a second store of the backend on a namespace of its own (so nothing it
writes reaches the model's world), commits one message there straight through the store's API
(an uncertain answer is asked again: every call is idempotent), and then:

1. the stored form is compared with the model where reads could lie consistently: the record must
   hold the request's QIMD identity digest (C-PRE-07: a store that kept something else and
   compared it consistently would pass every read);
2. every stored value is replaced by a malformed one of the same type (``garbage``) and the key is
   read three ways — ``load_commit``, ``load_commit_for_request``, a repeat ``reserve`` — each of
   which must fail with ``MessageStoreError(CORRUPT)`` (an uncertain answer is asked again): a
   foreign exception is C-ERR-01 (the oracle's ``call_real``), another error kind C-ERR-01, a value
   (a silent default: the key read as absent, or decoded into something) the rule of the read
   that lied (``CORRUPTION_CHECKS``);
3. the original form is written back and must read as the committed message again; the side
   namespace is dropped and the store closed.

The rule runs only on a store that offers the port (a ``precondition``); the coverage targets
``stored-form-compared`` and ``corrupt-refused`` are then required.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from hypothesis.stateful import precondition, rule

from conformance._machine import ConformanceMachine, step
from conformance._outage import bounded
from conformance._violations import HarnessEnvironmentError
from conformance.commit._judge import show
from impls.api import NamespaceOwner, StoreInspector
from model.commit import (
    AuthenticatedSend,
    CommitKey,
    FrozenDeliveryInput,
    LoadedCommitted,
    MessageContent,
    MessageRecord,
    MessageStoreError,
    MessageType,
    OutboxPublication,
    ReserveCandidate,
    StoreErrorKind,
    reserve_identity_digest,
)

if TYPE_CHECKING:
    from conformance.commit._oracle import StoreOracle

TENANT, CONVERSATION = "t9", "c9"

#: The read of a corrupted key that answered with a value, and the rule that value breaks.
CORRUPTION_CHECKS: Mapping[str, str] = {
    "load_commit": "C-PRE-09",  # a decoded (or defaulted) commit is not the durable one
    "load_commit_for_request": "C-PRE-09",
    "reserve": "C-POST-01",  # read as absent: the key would be allocated again
}


def garbage(value: object) -> object:
    """A malformed value of ``value``'s type (None stays None: an absent column is not data)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, bytes):
        return b"\xff\xfe\x00garbage"
    if isinstance(value, str):
        return "\x00\ufffdgarbage"
    if isinstance(value, int):
        return -(2**31) + 7
    if isinstance(value, uuid.UUID):
        return uuid.UUID(int=7)
    return b"\xff\xfe\x00garbage"  # an object of the store's own (the memory store's values)


_ATTEMPTS = 6  # an uncertain answer (UNAVAILABLE, OUTCOME_UNKNOWN) is asked again
_PAUSE_S = 0.05  # before the second ask; doubled each time (about 3 s in all)


def holds(value: object, digest: bytes) -> bool:
    return value == digest or (isinstance(value, bytes) and digest in value)


class CorruptRules(ConformanceMachine):
    """Mixed into the store machine; uses its oracle and clock."""

    if TYPE_CHECKING:
        oracle: StoreOracle
        now: int

        def call(self, coro: Any) -> Any: ...

    def __init__(self) -> None:
        self._inspected: tuple[object, bool] | None = None
        super().__init__()
        self.corrupted = 0
        self.context.stats.details.setdefault("inspector", str(self.inspectable()))

    def inspectable(self) -> bool:
        # A precondition, asked at every step: an isinstance against a runtime-checkable
        # protocol walks its members each time, so the answer is kept per store object.
        real = self.oracle.real
        if self._inspected is None or self._inspected[0] is not real:
            self._inspected = (real, isinstance(real, StoreInspector))
        return self._inspected[1]

    @precondition(lambda self: self.inspectable())
    @rule()
    @step
    def corrupt_stored(self) -> None:
        """C-ERR-01, C-PRE-07: a committed key's stored form holds its QIMD digest; malformed, every
        read of it is CORRUPT (never a foreign exception, never a silent default); restored, it
        reads as committed again."""
        self.corrupted += 1
        send = AuthenticatedSend(
            TENANT,
            "alice",
            "d1",
            CONVERSATION,
            f"k{self.corrupted}",
            MessageContent(MessageType.TEXT, b"to be corrupted"),
        )
        self.call(self._corrupt(send))

    async def _corrupt(self, send: AuthenticatedSend) -> None:
        """On a store of its own namespace, so nothing of it reaches the model's world."""
        target: Any = self.context.target
        real: Any = await target.open_store(self.context.new_namespace(), self.oracle.membership)
        try:
            await self._on(real, send)
        finally:
            # Under the watchdog like every backend call: a frozen server is an outage, not a hang.
            if isinstance(real, NamespaceOwner):
                with contextlib.suppress(MessageStoreError):
                    await bounded("the inspected store's drop", real.drop_namespace(), self.context)
            with contextlib.suppress(MessageStoreError):
                await bounded("the inspected store's close", real.close(), self.context)

    async def _settled(self, real: Any, op: str, key: CommitKey, call: Callable[[], Awaitable[Any]]) -> Any:
        """``call`` (idempotent) until it answers other than uncertainly; C-ERR-01 checks included."""
        result: Any = None
        for attempt in range(_ATTEMPTS):
            result = await self.oracle.call_real(op, key, call)
            if not (isinstance(result, MessageStoreError) and result.kind.is_uncertain):
                return result
            # A driver that saw a reset marks the server down and reconnects on its own policy
            # (cassandra-driver: up to 1 s apart); asked again at once, it only says so again.
            await asyncio.sleep(_PAUSE_S * 2**attempt)
        raise HarnessEnvironmentError(f"corrupt_stored: {op} stayed unavailable: {result}")

    async def _on(self, real: Any, send: AuthenticatedSend) -> None:
        oracle, key = self.oracle, send.commit_key
        delivery = FrozenDeliveryInput(CONVERSATION, ("alice",), 1, 3_600_000)
        candidate = ReserveCandidate(MessageRecord.from_send(send), self.now)
        publication = OutboxPublication("ratchet-conformance", f"{key.client_message_id}-0")

        async def setup(op: str, call: Callable[[], Awaitable[Any]]) -> Any:
            result = await self._settled(real, op, key, call)
            if isinstance(result, MessageStoreError):
                raise oracle.fail(
                    "C-POST-03", f"corrupt_stored: {op} of a fresh key failed: {show(result)}", op=op
                )
            return result

        reserved = await setup("reserve", lambda: real.reserve(send, delivery, candidate))
        intent = reserved.intent
        await setup("put_record", lambda: real.put_record(intent))
        if oracle.atomic:
            message = await setup(
                "mark_published_and_committed", lambda: real.mark_published_and_committed(intent, publication)
            )
        else:
            await setup("mark_outbox_published", lambda: real.mark_outbox_published(intent, publication))
            message = await setup("mark_committed", lambda: real.mark_committed(intent))
        raw = await setup("read_raw", lambda: real.read_raw(key))
        await self._check_corrupted(real, send, delivery, candidate, message, raw)

    async def _check_corrupted(
        self,
        real: Any,
        send: AuthenticatedSend,
        delivery: FrozenDeliveryInput,
        candidate: ReserveCandidate,
        message: Any,
        raw: dict[str, object] | None,
    ) -> None:
        oracle, key = self.oracle, send.commit_key

        async def setup(op: str, call: Callable[[], Awaitable[Any]]) -> None:
            result = await self._settled(real, op, key, call)
            if isinstance(result, MessageStoreError):
                raise oracle.fail("C-ERR-01", f"the inspector's {op} failed: {show(result)}", op=op)

        if raw is None:
            raise oracle.fail("C-POST-03", f"the inspector finds nothing stored for the committed key {key}")
        digest = reserve_identity_digest(send)
        if not any(holds(value, digest) for value in raw.values()):
            raise oracle.fail(
                "C-PRE-07",
                f"the stored form of {self._name(key)} does not hold the request's QIMD digest "
                f"(fields {sorted(raw)})",
            )
        self.context.reach("stored-form-compared")
        await setup(
            "write_raw", lambda: real.write_raw(key, {name: garbage(value) for name, value in raw.items()})
        )
        self.note(f"corrupt_stored: every stored value of {self._name(key)} replaced by garbage")
        for op, read in (
            ("load_commit", lambda: real.load_commit(key, CONVERSATION)),
            ("load_commit_for_request", lambda: real.load_commit_for_request(send)),
            ("reserve", lambda: real.reserve(send, delivery, candidate)),
        ):
            result = await self._settled(real, op, key, read)
            self.note(f"  {op}({self._name(key)}) on corrupted data -> {show(result)}")
            if not isinstance(result, MessageStoreError):
                raise oracle.fail(
                    CORRUPTION_CHECKS[op],
                    f"{op} answered {show(result)} for a corrupted commit; the answer is CORRUPT",
                    op=op,
                )
            if result.kind is not StoreErrorKind.CORRUPT:
                raise oracle.fail(
                    "C-ERR-01",
                    f"{op} failed as {result.kind.value} for a corrupted commit, not corrupt",
                    op=op,
                )
        self.context.reach("corrupt-refused")
        await setup("write_raw", lambda: real.write_raw(key, raw))
        restored = await self._settled(real, "load_commit", key, lambda: real.load_commit(key, CONVERSATION))
        if restored != LoadedCommitted(message):
            raise oracle.fail(
                "C-PRE-09", f"restored to its stored form, {self._name(key)} reads as {show(restored)}"
            )

    @staticmethod
    def _name(key: CommitKey) -> str:
        return f"{key.tenant}/{key.sender}/{key.client_message_id}"
