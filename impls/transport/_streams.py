"""The Redis Streams connector: signed publishing, a consumer-group consumer, its lifecycle.

A ``StreamConsumer`` reads with ``XREADGROUP`` (S-STREAM-01), takes over idle entries with
``XAUTOCLAIM`` (S-STREAM-03), verifies each entry's HMAC signature before anything else
(S-STREAM-05), hands authentic envelopes to a ``DeliveryHandler`` (Ratchet's runtime) and maps
the outcome's verdict to the stream: ``ACK`` -> ``XACK`` (S-STREAM-04), ``REDELIVER`` -> leave it
pending (S-STREAM-02), ``DEAD_LETTER`` -> one server-side script that acknowledges and copies the
entry to the dead-letter stream together (S-STREAM-06).

The acknowledgement is sent only after the handler returned, that is after the unit's COMMIT
answered or the inbox absorbed a duplicate. A consumer that dies in between leaves the entry
pending; whoever claims it meets the inbox, which knows (the fault point ``T-STREAM-01`` sits
exactly there, for the harness).

Lifecycle: ``start`` creates the group (idempotent), ``ready`` reaches Redis *and* the engine,
``poll_once`` is one turn of the loop (claim idle entries, read new ones, process each),
``run`` loops until ``drain``, which stops taking new entries and lets the entries in hand
finish; ``stop`` closes. Redis errors stop at this door as ``TransportError``.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import redis

from model.saga import DeliveryVerdict, EnvelopeRefused, KeyRing, sign, verify

from . import _wire
from ._handlers import DeliveryHandler, PoisonMessage

#: The killable instant: the handler answered (committed or absorbed), nothing settled yet.
AFTER_HANDLER = "T-STREAM-01"

FaultHook = Callable[[str, str], None]


def no_faults(_point: str, _entry_id: str) -> None:
    return None


class TransportError(Exception):
    """The stream server failed a call; what was durable before it stays durable."""


@attrs.frozen
class StreamNames:
    """A stream and its dead letters; the hash tag keeps both in one cluster slot (the script
    touches both keys)."""

    stream: str
    dead_letters: str

    @classmethod
    def of(cls, prefix: str, name: str) -> StreamNames:
        base = f"{prefix}:{{{name}}}"
        return cls(f"{base}:entries", f"{base}:dead")


# KEYS[1] stream, KEYS[2] dead letters; ARGV: group, entry id, reason. XACK first: only the call
# that removed the entry from the pending list copies it, so a dead letter happens once even when
# two consumers race on one claimed entry, and never without its acknowledgement (S-STREAM-06).
DEAD_LETTER_SCRIPT = """
local acked = redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
if acked == 1 then
  local fields = {'source', ARGV[2], 'group', ARGV[1], 'reason', ARGV[3]}
  local entry = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])
  if entry[1] then
    for _, value in ipairs(entry[1][2]) do table.insert(fields, value) end
  end
  redis.call('XADD', KEYS[2], '*', unpack(fields))
end
return acked
"""


@attrs.frozen
class InHand:
    """One entry a consumer was given and has not processed yet."""

    entry_id: str
    fields: Mapping[bytes, bytes]


@attrs.frozen
class Settled:
    """What became of one entry: the verdict, the runtime's outcome (``None`` when refused before
    the handler), why it was dead-lettered, and whether this call removed it from the pending list."""

    entry_id: str
    verdict: DeliveryVerdict
    outcome: object | None
    reason: str
    acknowledged: bool
    principal: str | None


class Lifecycle(enum.Enum):
    NEW = "new"
    RUNNING = "running"
    DRAINING = "draining"
    STOPPED = "stopped"


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


@attrs.define
class StreamPublisher:
    """Signs with the producer's current key and appends (``XADD``); returns the entry id."""

    client: redis.Redis
    names: StreamNames
    producer: str
    keys: Callable[[], KeyRing]

    def publish(self, body: bytes) -> str:
        envelope = sign(self.keys(), self.producer, body)
        if envelope is None:
            raise TransportError(f"{self.producer} has no signing key")
        return self.append_raw(_wire.to_fields(envelope))

    def append_raw(self, fields: Mapping[bytes, bytes]) -> str:
        try:
            return _text(self.client.xadd(self.names.stream, dict(fields)))  # type: ignore[arg-type]
        except redis.RedisError as exc:
            raise TransportError(f"XADD failed: {exc}") from exc


@attrs.define
class StreamConsumer:
    client: redis.Redis
    names: StreamNames
    group: str
    consumer: str
    keys: Callable[[], KeyRing]
    handler: DeliveryHandler
    fault_hook: FaultHook = no_faults
    #: An entry whose consumer has been silent this long is taken over by ``poll_once``.
    min_idle_ms: int = 30_000
    #: A handler that keeps raising is a poison message after this many deliveries.
    max_deliveries: int = 5
    state: Lifecycle = Lifecycle.NEW
    _script: Any = None
    _stop: threading.Event = attrs.field(factory=threading.Event)

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        try:
            self.client.xgroup_create(self.names.stream, self.group, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise TransportError(f"XGROUP CREATE failed: {exc}") from exc
        except redis.RedisError as exc:
            raise TransportError(f"XGROUP CREATE failed: {exc}") from exc
        self._script = self.client.register_script(DEAD_LETTER_SCRIPT)
        self.state = Lifecycle.RUNNING

    def ready(self) -> bool:
        """Running, the group exists on the server, and the engine's database answers."""
        if self.state is not Lifecycle.RUNNING:
            return False
        try:
            groups = self.client.xinfo_groups(self.names.stream)
        except redis.RedisError:
            return False
        return any(_text(g["name"]) == self.group for g in groups) and self.handler.ready()

    def drain(self) -> None:
        """Take no new entries; the loop finishes what it holds and ``run`` returns."""
        if self.state is Lifecycle.RUNNING:
            self.state = Lifecycle.DRAINING
        self._stop.set()

    def stop(self) -> None:
        self.drain()
        self.state = Lifecycle.STOPPED

    def run(self, idle_sleep_s: float = 0.05, count: int = 16) -> None:
        """The consumer loop (a thread of its host) until ``drain``."""
        while not self._stop.is_set():
            if not self.poll_once(count):
                self._stop.wait(idle_sleep_s)

    def poll_once(self, count: int = 16) -> list[Settled]:
        """One turn: take over idle entries, read new ones, process all of them."""
        if self.state is not Lifecycle.RUNNING:
            return []
        batch = self.claim(self.min_idle_ms, count) + self.fetch(count)
        return [self.process(entry) for entry in batch]

    # -- the three steps of a turn (public: the harness interleaves them) --------------------

    def fetch(self, count: int) -> list[InHand]:
        """``XREADGROUP GROUP g c COUNT n STREAMS s >``: new entries, now pending here."""
        try:
            reply: Any = self.client.xreadgroup(
                self.group, self.consumer, {self.names.stream: ">"}, count=count
            )
        except redis.RedisError as exc:
            raise TransportError(f"XREADGROUP failed: {exc}") from exc
        return [InHand(_text(i), f) for _, entries in reply or [] for i, f in entries if f is not None]

    def claim(self, min_idle_ms: int, count: int) -> list[InHand]:
        """``XAUTOCLAIM`` from the start of the pending list, following the cursor."""
        cursor, claimed = "0-0", list[InHand]()
        try:
            while len(claimed) < count:
                reply: Any = self.client.xautoclaim(
                    self.names.stream, self.group, self.consumer, min_idle_ms, cursor, count=count
                )
                cursor = _text(reply[0])
                claimed += [InHand(_text(i), f) for i, f in reply[1] if f is not None]
                if cursor == "0-0":
                    break
        except redis.RedisError as exc:
            raise TransportError(f"XAUTOCLAIM failed: {exc}") from exc
        return claimed[:count]

    def process(self, entry: InHand) -> Settled:
        """Verify, hand over, settle by the verdict (module docstring)."""
        envelope = _wire.from_fields(entry.fields)
        if envelope is None:
            return self._dead_letter(entry, "malformed", None, None)
        verified = verify(self.keys(), envelope)
        if isinstance(verified, EnvelopeRefused):
            return self._dead_letter(entry, verified.problem.value, None, None)
        principal = verified.producer
        try:
            outcome = self.handler.handle(envelope.body, principal)
        except PoisonMessage:
            return self._dead_letter(entry, "undecodable", None, principal)
        except Exception:
            # A handler bug or an outage: redeliver, unless this entry already failed too often.
            if self._deliveries(entry.entry_id) >= self.max_deliveries:
                return self._dead_letter(entry, "poison", None, principal)
            return Settled(
                entry.entry_id, DeliveryVerdict.REDELIVER, None, "handler_failed", False, principal
            )
        self.fault_hook(AFTER_HANDLER, entry.entry_id)
        verdict = outcome.verdict
        if verdict is DeliveryVerdict.ACK:
            return Settled(entry.entry_id, verdict, outcome, "", self._ack(entry.entry_id), principal)
        if verdict is DeliveryVerdict.DEAD_LETTER:
            return self._dead_letter(entry, type(outcome).__name__, outcome, principal)
        return Settled(entry.entry_id, verdict, outcome, "", False, principal)

    # -- settling ---------------------------------------------------------------------------

    def _ack(self, entry_id: str) -> bool:
        try:
            return int(self.client.xack(self.names.stream, self.group, entry_id)) == 1
        except redis.RedisError as exc:
            raise TransportError(f"XACK failed: {exc}") from exc

    def _dead_letter(
        self, entry: InHand, reason: str, outcome: object | None, principal: str | None
    ) -> Settled:
        try:
            acked = self._script(
                keys=[self.names.stream, self.names.dead_letters], args=[self.group, entry.entry_id, reason]
            )
        except redis.RedisError as exc:
            raise TransportError(f"dead-letter script failed: {exc}") from exc
        return Settled(
            entry.entry_id, DeliveryVerdict.DEAD_LETTER, outcome, reason, int(acked) == 1, principal
        )

    def _deliveries(self, entry_id: str) -> int:
        try:
            rows = self.client.xpending_range(self.names.stream, self.group, entry_id, entry_id, 1)
        except redis.RedisError as exc:
            raise TransportError(f"XPENDING failed: {exc}") from exc
        return int(rows[0]["times_delivered"]) if rows else 0
