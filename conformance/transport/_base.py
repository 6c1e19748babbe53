"""What the transport rule groups share: the runtime, the model beside it, the streams, the keys.

Per example: Ratchet's saga runtime (orchestrator and participants p0, p1, each on its own
in-memory ``SagaBackend``, the transport being what is under test) beside the saga model; per
participant one command stream on the Redis under test (a fresh key prefix per example, never a
flush) with two consumer groups: the participant's own (consumers ``c1``, ``c2``) and ``audit``, a
second reader that lags, so trimming has another group's frontier to respect. Each stream has
its model, a ``DeliveryStream``; the harness maps Redis entry ids to the model's ordinals in
``XADD`` order.

The orchestrator signs with key ``k1`` (rotated to ``k2``, ``k3``... by a rule); key ``k0`` was
retired before the run, so an entry re-signed with it is an old-key envelope. The business code
answers with the decision the current rule chose; the fate hook decides the next COMMIT.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule

from conformance._faults import FaultKind
from conformance._machine import ConformanceMachine, step
from conformance._violations import HarnessEnvironmentError, Violation
from conformance.saga import _world as w
from conformance.saga._faults import COMMIT_ROLLED_BACK, COMMIT_UNKNOWN
from conformance.saga._ratchet import RatchetRuntime
from conformance.transport._faults import KAFKA_ONLY
from impls.saga import read_only
from impls.saga.memory import open_memory_saga_backend
from impls.transport import (
    InHand,
    ParticipantHandler,
    PoisonMessage,
    StreamConsumer,
    StreamNames,
    StreamPublisher,
)
from model import saga as m

GROUP_AUDIT = "audit"
CONSUMERS = ("c1", "c2")
BUSY_MS = 3_600_000  # a min-idle no entry of an example reaches: its consumer is still working
FATES = {
    "committed": m.CommitFate.COMMITTED,
    "rolled_back": m.CommitFate.ROLLED_BACK,
    "unknown_applied": m.CommitFate.UNKNOWN_APPLIED,
    "unknown_not_applied": m.CommitFate.UNKNOWN_NOT_APPLIED,
}


class ConsumerKilled(BaseException):
    """Raised from the consumer's fault hook: the process is gone at that instant."""


def initial_ring() -> m.KeyRing:
    ring = m.add_key(
        m.KeyRing(), m.SigningKey("k0", w.ORCHESTRATOR, b"retired-secret", m.KeyState.VERIFY_ONLY)
    )
    ring = m.retire(ring, "k0")
    return m.add_key(ring, m.SigningKey("k1", w.ORCHESTRATOR, b"secret-k1", m.KeyState.SIGNING))


class SagaSideRules(ConformanceMachine):
    """The saga side's rules on every transport machine, Ratchet's runtime or nasaga's: each says
    how a start is made and how the outbox goes onto its wire (``_start``, ``_publish``)."""

    @initialize(key=st.integers(0, 2))
    @step
    def first_start(self, key: int) -> None:
        """Every example opens with a saga whose first command is on the wire."""
        self._start(key)
        self._publish()

    @rule(key=st.integers(0, 2))
    @step
    def start(self, key: int) -> None:
        self._start(key)

    @rule()
    @step
    def publish_commands(self) -> None:
        self._publish()

    def _start(self, key: int) -> None:
        raise NotImplementedError

    def _publish(self) -> None:
        raise NotImplementedError


class SagaSideBase(SagaSideRules):
    """The saga side every transport machine on Ratchet's runtime shares: runtime, model, keys,
    fate and business seams."""

    def __init__(self) -> None:
        super().__init__()
        # Ratchet's runtime decides its COMMITs through this machine's fate hook (saga fault kinds).
        self.context.stats.details["runtime:injectable_fates"] = "True"
        self.ns = self.context.new_namespace()
        self.now = 0
        self.fate = m.CommitFate.COMMITTED
        self.decision = m.Decision.SUCCEED
        self.killing: set[str] = set()  # entries (by the connector's id) whose consumer dies at its point
        self.runtime = RatchetRuntime(open_memory_saga_backend, self.ns, self._fate, self.context.stats)
        self.model = m.OrchestratorStore(trusted_producers=frozenset(w.OWNERS), quota_limit=w.QUOTA_LIMIT)
        self.parts = {o: m.ParticipantState(w.participant_config(o)) for o in w.OWNERS}
        self.ring = initial_ring()
        self.keys_made = 1
        self.bad_ids: set[str] = set()  # command ids of forged commands: must never be claimed
        self.reached_handler: list[tuple[str, str]] = []  # (owner, command id) of every handler call

    # -- seams ----------------------------------------------------------------------------

    def _keys(self) -> m.KeyRing:
        return self.ring

    def _fate(self, _unit: str) -> m.CommitFate:
        fate, self.fate = self.fate, m.CommitFate.COMMITTED
        return fate

    def _business(self, _command: m.CommandEnvelope) -> m.Decision:
        return self.decision

    def _allows(self, kind: FaultKind) -> bool:
        return self.context.faults.allows(kind.name)

    def _set_fate(self, name: str) -> m.CommitFate:
        fate = FATES[name]
        kind = {m.CommitFate.COMMITTED: None, m.CommitFate.ROLLED_BACK: COMMIT_ROLLED_BACK}.get(
            fate, COMMIT_UNKNOWN
        )
        if kind is not None and not self._allows(kind):
            fate = m.CommitFate.COMMITTED
        elif kind is not None:
            self.context.inject(kind.name)
        self.fate = fate
        return fate

    # -- the saga side ----------------------------------------------------------------------

    def _setup_catalog(self) -> None:
        self.model, _ = m.publish_definition(self.model, m.PublishDefinition(w.ARTIFACT, w.DIGEST))
        self.runtime.publish_definition(w.ARTIFACT, w.DIGEST)
        change = m.ChangeLifecycle(w.KEY, m.LifecycleAction.ACTIVATE)
        self.model, _ = m.change_lifecycle(self.model, change, self.now)
        self.runtime.change_lifecycle(change, self.now)

    def _start(self, key: int) -> None:
        request = m.StartSaga(w.KEY, w.BUSINESS_KEYS[key % len(w.BUSINESS_KEYS)], json_payload=w.PAYLOADS[0])
        self.model, expected = m.start_saga(self.model, m.StartAttempt(request, self.now))
        self.expect("S-START-01", expected, self.runtime.start_saga(request, self.now, None))

    def _publish(self) -> None:
        """The relay: every pending command onto the wire, then marked published (S-ORCH-02)."""
        expected = m.pending_commands(self.model)
        actual = self.runtime.pending_commands()
        self.expect("S-ORCH-02", expected, actual)
        for command in actual:
            self._put_on_wire(command)
            self.model, _ = m.mark_command_published(self.model, command.command_id)
            self.runtime.mark_command_published(command.command_id)

    def _put_on_wire(self, command: m.CommandEnvelope) -> None:
        """One command onto this machine's connector (a stream entry, a Kafka record)."""
        raise NotImplementedError

    def expect(self, rule_id: str, expected: object, actual: object) -> None:
        self.note(f"model: {show(expected)}")
        self.note(f"runtime: {show(actual)}")
        if expected != actual:
            raise Violation(
                rule_id,
                "the connector's outcome differs from the model's",
                {"expected": show(expected), "actual": show(actual)},
            )

    def _check_participant(self, owner: str) -> None:
        """No planted command reached a handler or an inbox (S-STREAM-05); business facts and
        result outboxes are the model's, each effect once (S-PART-01, S-PART-03)."""
        reached = sorted(cid for o, cid in self.reached_handler if cid in self.bad_ids)
        claimed = sorted(cid for cid in self.bad_ids if self._claimed(owner, cid))
        if reached or claimed:
            raise Violation(
                "S-STREAM-05",
                "an unauthenticated message reached the handler or the inbox",
                {"reached_handler": show(reached), "claimed": show(claimed)},
            )
        facts = self.runtime.observe_participant(owner)
        if len(set(facts.effects)) != len(facts.effects):
            raise Violation(
                "S-PART-03", "an effect took effect twice", {"owner": owner, "effects": list(facts.effects)}
            )
        if facts.effects != tuple(self.parts[owner].effects):
            raise Violation(
                "S-PART-01",
                "business facts differ from the model",
                {"owner": owner, "actual": list(facts.effects)},
            )
        if facts.results != tuple(self.parts[owner].outbox):
            raise Violation("S-PART-01", "the result outbox differs from the model", {"owner": owner})

    def _claimed(self, owner: str, command_id: str) -> bool:
        part = self.runtime.parts[owner]
        return bool(read_only(part.backend, lambda tx: tx.command_claimed(command_id)))  # dead letters too


class TransportMachineBase(SagaSideBase):
    def __init__(self) -> None:
        super().__init__()
        self.context.stats.details["transport:connector"] = "streams"
        self.context.stats.details[KAFKA_ONLY] = "not applicable: Redis Streams has no partitions or offsets"
        ns, target = self.ns, self.context.target
        try:
            self.client = target.open_client()
            self.client.ping()
        except Exception as exc:
            raise HarnessEnvironmentError(f"the stream server did not answer: {exc}") from exc
        self.names = {o: StreamNames.of(f"ratchet:{ns}", f"cmd-{o}") for o in w.OWNERS}
        self.streams = {
            o: m.create_group(m.create_group(m.DeliveryStream(), o), GROUP_AUDIT) for o in w.OWNERS
        }
        self.publishers = {
            o: StreamPublisher(self.client, self.names[o], w.ORCHESTRATOR, self._keys) for o in w.OWNERS
        }
        self.consumers: dict[tuple[str, str], StreamConsumer] = {}
        for owner in w.OWNERS:
            for name in CONSUMERS:
                handler = _Spy(ParticipantHandler(self.runtime.parts[owner], self._business), self, owner)
                consumer = target.consumer(
                    self.client, self.names[owner], owner, name, self._keys, handler, fault_hook=self._hook
                )
                consumer.start()
                self.consumers[(owner, name)] = consumer
            self.client.xgroup_create(self.names[owner].stream, GROUP_AUDIT, id="0", mkstream=True)
        self.admins = {o: target.admin(self.client, self.names[o]) for o in w.OWNERS}
        #: Redis entry id -> model ordinal, per stream, and back.
        self.ordinal: dict[str, dict[str, int]] = {o: {} for o in w.OWNERS}
        self.real: dict[str, dict[int, str]] = {o: {} for o in w.OWNERS}
        #: Entries the harness planted (ordinal -> expected refusal) and what they carried.
        self.bad: dict[str, dict[int, str]] = {o: {} for o in w.OWNERS}
        self.in_hand: dict[tuple[str, str], list[InHand]] = {k: [] for k in self.consumers}
        self.commands: dict[str, dict[int, m.CommandEnvelope]] = {o: {} for o in w.OWNERS}
        self.killed: set[tuple[str, int]] = set()  # (owner, ordinal) whose consumer died holding it
        self._setup_catalog()

    def _hook(self, point: str, entry_id: str) -> None:
        if entry_id in self.killing:
            self.killing.discard(entry_id)
            self.note(f"{point}: consumer killed at {entry_id}")
            raise ConsumerKilled(point)

    def close(self) -> None:
        try:
            for consumer in self.consumers.values():
                consumer.stop()
            keys = [k for n in self.names.values() for k in (n.stream, n.dead_letters)]
            self.client.delete(*keys)  # this example's own keys only; the server is never flushed
        except Exception:
            pass
        finally:
            self.client.close()
            self.runtime.close()


def show(value: Any) -> str:
    return repr(value)[:600]


class _Spy:
    """Passes through to the real handler and records every call that reached it."""

    def __init__(self, inner: ParticipantHandler, machine: TransportMachineBase, owner: str) -> None:
        self.inner, self.machine, self.owner = inner, machine, owner

    def handle(self, body: bytes, principal: str) -> m.CommandOutcome:
        with contextlib.suppress(PoisonMessage):  # a poison body: the handler itself will say so
            self.machine.reached_handler.append((self.owner, self.inner.message_id(body)))
        return self.inner.handle(body, principal)

    def message_id(self, body: bytes) -> str:
        return self.inner.message_id(body)

    def ready(self) -> bool:
        return self.inner.ready()


Handler = Callable[[bytes, str], object]
