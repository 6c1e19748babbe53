"""The transport suite on nasaga's Kafka command consumer (feature ``kafka``, crate nafka), in its host.

Theory of operation
-------------------
The backend ``nasaga-kafka`` names a target whose ``specialise`` hands the suite this machine:
same suite, fault catalog, rule IDs (S-KAFKA-*), failure files and replay. nasaga's consumer is
not stepped: it runs in nafka's hosted consumer runtime inside the host (its owner thread polls,
pauses and seeks a partition after a failure, backs off ``BACKOFF_MS``, produces dead letters to
``<topic>.DLT`` durability first, commits the contiguous done frontier every 50 ms). So every rule
that puts records on the topic then *settles*: it waits until both partitions' committed offsets
reach their ends, sampling all the while, and only then compares the end state with the model.

The world is the order saga's first step, as on Redis Streams: nasaga's orchestrator starts sagas,
its outbox dispatcher publishes each command through nafka's producer (``acks=all``, idempotent) to
p0's command topic (two partitions; the harness names a saga's partition, ``PARTITION_OF``), and
nasaga's ``SagaKafkaCommandConsumer`` of group ``work`` runs nasaga's participant on p0's
PostgreSQL database. What the business code answers is a *plan* given per saga when its command is
published (``fail`` transient failures, then succeed or reject), so the outcome does not depend on
when the consumer gets to it; the model replays each plan as ``fail`` × TRANSIENT_FAILURE then the
decision.

Checks, sampled while a settle waits (the broker read first, the outcomes after, so a sample never
blames an outcome that arrived in between): below each committed offset every command record's
unit has committed (its business row is in p0's database), every copy was absorbed (nasaga's
consume returned after its ACK), and every planted record is on the dead-letter topic with its
origin (S-KAFKA-02, S-KAFKA-03). At the end of a settle: the dead letters are exactly the planted
records (S-KAFKA-03); business facts and result outbox are the model's, each effect once
(S-PART-01, S-PART-03); in a batch where one partition's saga failed, the other partition's records
were done before the failing one was (S-KAFKA-04). A kill (``publish_planned(kill=True)``, and
once in ``kafka_walk``) arms the host's crash point ``kafka_committed`` (after the participant's
COMMIT, before nasaga's ACK and nafka's offset commit), kills the host there, starts a fresh one
on the same database and group: the record is redelivered and the inbox absorbs it (S-KAFKA-05,
S-PART-03). The group faults have modules of their own: a second nafka member joining while a unit
runs on each partition (``_nasaga_kafka_rebalance.py``, S-KAFKA-02, S-KAFKA-05) or while a
partition backs off (``_nasaga_kafka_backoff.py``, S-KAFKA-04, S-KAFKA-05), and the broker
killed and restarted under a running unit, in profile deep on a broker the suite controls
(``_nasaga_kafka_restart.py``, S-KAFKA-01, S-KAFKA-03).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable
from typing import Any

import confluent_kafka as ck
from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule

from conformance._faults import FaultKind
from conformance._machine import step
from conformance._violations import HarnessEnvironmentError, Violation
from conformance.saga import _world as w
from conformance.saga._base import unwrapped
from conformance.saga._faults import RELAY_CRASH
from conformance.saga._nasaga import NasagaRuntime
from conformance.transport import _faults as f
from conformance.transport._nasaga_kafka_checks import Plan, Sent
from conformance.transport._nasaga_kafka_restart import BrokerRestart
from conformance.transport._nasaga_kafka_world import (
    BACKOFF_MS,
    COMMAND_EVENT,
    DECISIONS,
    EVENT_HEADER,
    EXTRA_KEYS,
    FAILURE_BUDGET,
    GROUP,
    HEARTBEAT_MS,
    KEYS,
    LONG_BACKOFF_MS,
    MAX_RETRIES,
    NASAGA_KAFKA_LACKS,
    OWNER,
    PARTITION_OF,
    PARTITIONS,
    PLANTED,
    STEP,
)
from impls.nasaga import HostFailure, NasagaHostError
from impls.transport import DeadLetterReader, KafkaAdmin, KafkaTopics, TransportError
from impls.transport._kafka_records import client_config, produce_acknowledged
from model import saga as m

#: A plan for each of up to five pending sagas: a decision, then how many transient failures first.
PLANS = st.lists(
    st.tuples(st.sampled_from(["succeed", "succeed", "reject", "exhaust"]), st.integers(0, 2)),
    min_size=5,
    max_size=5,
)


class NasagaKafkaMachine(BrokerRestart):
    def __init__(self) -> None:
        super().__init__()
        details = self.context.stats.details
        details["transport:runtime"] = "nasaga"
        details["transport:connector"] = "nasaga-kafka"
        details[f.STREAMS_ONLY] = "not applicable: a Kafka connector has no pending list"
        details[f.GRPC_ONLY] = "not applicable: a Kafka backend (nasaga's gRPC is backend nasaga-grpc)"
        for kind, why in NASAGA_KAFKA_LACKS.items():
            details[f"transport:{kind}"] = f"not applicable: {why}"
        no_restart = self._restart_applies()
        if no_restart is not None:
            details[f"transport:{f.BROKER_RESTART.name}"] = f"not applicable: {no_restart}"
        self.now = 0
        ns = self.context.new_namespace()
        target: Any = self.context.target  # _nasaga_kafka_world.NasagaKafkaTarget
        self.bootstrap = str(target.bootstrap())
        self.planted_bug: str | None = target.planted_bug
        self.runtime = NasagaRuntime("postgres", ns, self.context.stats, lambda _unit: m.CommitFate.COMMITTED)
        self.runtime.extra_keys = EXTRA_KEYS
        self.model = m.OrchestratorStore(trusted_producers=frozenset(w.OWNERS))
        self.part = m.ParticipantState(w.participant_config(OWNER, transient_failure_budget=FAILURE_BUDGET))
        self.model, _ = m.publish_definition(self.model, m.PublishDefinition(w.ARTIFACT, w.DIGEST))
        self.runtime.publish_definition(w.ARTIFACT, w.DIGEST)
        change = m.ChangeLifecycle(w.KEY, m.LifecycleAction.ACTIVATE)
        self.model, _ = m.change_lifecycle(self.model, change, self.now)
        self.runtime.change_lifecycle(change, self.now)
        name = f"ratchet.{self.runtime.ns}.{OWNER}.cmd"
        self.topics = KafkaTopics(name, f"{name}.DLT")
        try:
            self.admin = KafkaAdmin(self.bootstrap)
            self.admin.create_topics(self.topics, PARTITIONS)
            self.producer = ck.Producer(client_config(self.bootstrap, acks="all", **{"linger.ms": 0}))
            self.dead = DeadLetterReader(self.bootstrap, self.topics)
            self.backoff_ms = LONG_BACKOFF_MS if self._backoff_rebalance_due() else BACKOFF_MS
            self._open_consumer()
        except (TransportError, NasagaHostError, ck.KafkaException) as exc:
            raise HarnessEnvironmentError(f"nasaga's Kafka consumer did not open: {exc}") from exc
        self.sent: dict[tuple[int, int], Sent] = {}
        self.commands: dict[str, m.CommandEnvelope] = {}  # saga id -> its command
        self.keys_started: set[int] = set()
        self.journal: list[dict[str, Any]] = []  # every entry of every host, with its epoch
        self.done_copies: set[tuple[int, int]] = set()
        self.killed: list[tuple[int, int]] = []  # records whose host died after their COMMIT
        self.walked = False
        self.exhausted: set[str] = set()  # sagas planned to spend nasaga's failure budget

    # -- the host's consumer -----------------------------------------------------------------

    def _open_consumer(self) -> None:
        self.runtime.host.call(
            "kafka_open",
            namespace=self.runtime.ns,
            bootstrap=self.bootstrap,
            topic=self.topics.commands,
            owner=OWNER,
            step=STEP,
            group=GROUP,
            client=f"c{self.runtime.crash.kills}",
            instance=f"{self.runtime.ns}-c1",
            planted_bug=self.planted_bug,
            backoff_ms=self.backoff_ms,
            heartbeat_ms=HEARTBEAT_MS,
            max_retries=MAX_RETRIES,
        )

    def _allows(self, kind: FaultKind) -> bool:
        return self.context.faults.allows(kind.name)

    # -- rules (first_start, start, publish_commands: SagaSideRules) -------------------------

    def _start(self, key: int) -> None:
        request = m.StartSaga(w.KEY, KEYS[key], json_payload=w.PAYLOADS[0])
        self.model, expected = m.start_saga(self.model, m.StartAttempt(request, self.now))
        actual = self.runtime.start_saga(request, self.now, None)
        if self.runtime.project(expected) != actual:
            raise Violation("S-START-01", "the start differs from the model", {"actual": repr(actual)})
        self.keys_started.add(key)

    def _publish(
        self,
        plans: dict[str, Plan] | None = None,
        kill: bool = False,
        hold: frozenset[str] = frozenset(),
        before_settle: Callable[[], None] | None = None,
    ) -> None:
        """The outbox through nasaga's dispatcher onto the topic, each saga with its plan; then the
        settle. ``kill``: the crash point armed once the batch is out (its first saga fails twice,
        so its COMMIT comes two back-offs later, after the arming). ``hold``: sagas whose first
        attempt waits in the handler until released; ``before_settle`` runs once the batch is out
        (the rebalance's hand-over, ``_nasaga_kafka_rebalance.py``)."""
        expected = m.pending_commands(self.model)
        actual = self.runtime.pending_commands()
        if self.runtime.project(expected) != self.runtime.project(actual):
            raise Violation("S-ORCH-02", "the outbox differs from the model", {"actual": repr(actual)[:400]})
        if not actual:
            return
        batch = {c.saga_id: (plans or {}).get(c.saga_id, ("succeed", 0)) for c in actual}
        # "exhaust": failing until nasaga's budget is spent, then dead-lettered by the runtime.
        batch = {saga: (d, FAILURE_BUDGET if d == "exhaust" else n) for saga, (d, n) in batch.items()}
        if kill:
            batch[actual[0].saga_id] = ("succeed", 2)
        wire = {
            saga: {
                "decision": "rejected" if d == "reject" else "succeeded",
                "fail": n,
                "partition": PARTITION_OF[saga],
                "hold": saga in hold,
            }
            for saga, (d, n) in batch.items()
        }
        reply = self.runtime.host.call("kafka_dispatch", namespace=self.runtime.ns, plans=wire)
        for command in actual:
            self.model, _ = m.mark_command_published(self.model, command.command_id)
            self.runtime.mark_command_published(command.command_id)
            decision, fail = batch[command.saga_id]
            for _ in range(fail):
                delivery = m.CommandDelivery(command, w.ORCHESTRATOR, m.Decision.TRANSIENT_FAILURE)
                self.part, _ = m.handle_command(self.part, delivery)
            if decision == "exhaust":
                self.exhausted.add(command.saga_id)  # the model dead-lettered it at its last failure
            else:
                delivery = m.CommandDelivery(command, w.ORCHESTRATOR, DECISIONS[decision])
                self.part, _ = m.handle_command(self.part, delivery)
            self.commands[command.saga_id] = command
        self._record(reply, actual)
        if before_settle is not None:
            before_settle()
        if kill:
            self._kill_and_resume(actual[0].saga_id)
            batch = {}  # the plans died with the host
        self._settle(batch)

    def _record(self, reply: Any, actual: tuple[m.CommandEnvelope, ...]) -> None:
        published = []
        for sent in reply["published"]:
            envelope = json.loads(sent["payload"])
            command = self.runtime._command(envelope)
            self.runtime.commands.setdefault(command.command_id, envelope)
            at = (int(sent["partition"]), int(sent["offset"]))
            kind = "exhausted" if str(sent["saga"]) in self.exhausted else "command"
            self.sent[at] = Sent(*at, str(sent["saga"]), kind, str(sent["payload"]).encode())
            published.append(command.command_id)
            if at[0] != PARTITION_OF[command.saga_id]:
                raise Violation(
                    "S-KAFKA-01", "a command went to another partition than named", {"at": repr(at)}
                )
        if published != [c.command_id for c in actual]:
            raise Violation(
                "S-KAFKA-01",
                "the topic got other commands than the outbox held",
                {"expected": repr([c.command_id for c in actual]), "actual": repr(published)},
            )

    @initialize(key=st.integers(0, 2), choices=PLANS)
    def first_start(self, key: int, choices: list[Plan] | None = None) -> None:
        """Every example opens the same way, through recorded rules (so its program replays as
        it ran): a saga started, the outbox published with a drawn plan, then the directed walk.
        Hypothesis's swarm testing switches rules off per example, and with a handful of examples
        a rule or the walk went unrun in a fixed-seed run (final11, final12); here each is reached
        in every example by construction (issue 19, item 4)."""
        self.start(key=key)
        self.publish_planned(choices=choices or [], kill=False)
        self.kafka_walk()

    @rule(choices=PLANS, kill=st.booleans())
    @step
    def publish_planned(self, choices: list[Plan], kill: bool) -> None:
        """The outbox published with a plan per saga: fail transiently, then succeed or reject;
        or (``kill``) with the host killed after the first unit's COMMIT."""
        if kill:
            self._kill_after_commit()
            return
        pending = self.runtime.pending_commands()
        plans = {c.saga_id: choice for c, choice in zip(pending, choices, strict=False)}
        failing = {PARTITION_OF[s] for s, (_, n) in plans.items() if n}
        healthy = {PARTITION_OF[s] for s, (_, n) in plans.items() if not n}
        if failing and not self._allows(f.SLOW_PARTITION):
            plans = {s: (d, 0) for s, (d, _) in plans.items()}
        elif healthy - failing and failing:
            self.context.inject(f.SLOW_PARTITION.name)
        self._publish(plans)

    def _slow_partition(self) -> None:
        """Directed: a saga on each partition in one batch, the first failing twice (S-KAFKA-04)."""
        free = [k for k in range(len(KEYS)) if k not in self.keys_started]
        by_partition = {PARTITION_OF[self._saga(k)]: k for k in reversed(free)}
        if len(by_partition) < PARTITIONS or not self._allows(f.SLOW_PARTITION):
            return
        slow, fast = by_partition[0], by_partition[1]
        self._start(slow)
        self._start(fast)
        self.context.inject(f.SLOW_PARTITION.name)
        self._publish({self._saga(slow): ("succeed", 2)})  # the other saga succeeds at once

    def _kill_after_commit(self) -> None:
        """The host killed after a unit's COMMIT and before its offset commit (T-KAFKA-01)."""
        free = [k for k in range(len(KEYS)) if k not in self.keys_started]
        if not self._allows(f.KAFKA_CONSUMER_KILLED) or not (free or self.runtime.pending_commands()):
            return
        if not self.runtime.pending_commands():
            self._start(free[0])
        self._publish(kill=True)

    def _republish(self) -> None:
        """A publish retried after its reply was lost: a second record of the same command, which
        the inbox must absorb."""
        originals = [s for s in self.sent.values() if s.kind == "command"]
        if not originals or not self._allows(RELAY_CRASH):
            return
        self.context.inject(RELAY_CRASH.name)
        last = max(originals, key=lambda s: (s.offset, s.partition))
        at = self._produce(last.payload, last.partition)
        self.sent[at] = Sent(*at, last.saga, "copy", last.payload)
        command = self.commands[last.saga]
        self.part, _ = m.handle_command(
            self.part, m.CommandDelivery(command, w.ORCHESTRATOR, m.Decision.SUCCEED)
        )
        self._settle({})

    @rule(how=st.sampled_from(["copy", *sorted(PLANTED)]), partition=st.integers(0, PARTITIONS - 1))
    @step
    def plant_record(self, how: str, partition: int) -> None:
        """A record nasaga's publisher did not write: a copy of a published command (absorbed by
        the inbox), or a planted one (dead-lettered durably before its offset moves)."""
        if how == "copy":
            self._republish()
            return
        kind, _ = PLANTED[how]
        originals = [s for s in self.sent.values() if s.kind == "command"]
        if not originals or not self._allows(kind):
            return
        self.context.inject(kind.name)
        if how == "poison":
            payload = b"\x00not an envelope"
        else:
            envelope = json.loads(max(originals, key=lambda s: s.offset).payload)
            envelope["command_id"] = str(uuid.uuid4())  # its identity no longer derives
            payload = json.dumps(envelope).encode()
        at = self._produce(payload, partition)
        self.sent[at] = Sent(*at, "", how, payload)
        self._settle({})

    @step
    def kafka_walk(self) -> None:
        """Directed, once per example from ``first_start`` (as ``stream_walk`` on Redis Streams):
        a second member joining mid-unit (the first examples of a run), a slow partition beside a
        healthy one, a back-off held across a rebalance (a run's first examples, until reached), a copy of a
        published command, each kind of planted record, the broker restarted mid-unit (profile
        deep, a broker of the suite's), and the host killed after a COMMIT; through the rules' own
        bodies, checks between them."""
        if self.walked:
            return
        self.walked = True
        self._rebalance_mid_unit()  # first: its keys are the last ones, and a plant shows sooner
        self.after_step()
        self._slow_partition()
        self.after_step()
        self._backoff_rebalance()
        self.after_step()
        free = [k for k in range(len(KEYS)) if k not in self.keys_started][1:]  # one left for the kill
        if free:
            self._start(free[0])
            self._publish({self._saga(free[0]): ("exhaust", 0)})
            self.after_step()
        self._republish()
        self.after_step()
        for how in sorted(PLANTED):
            unwrapped(NasagaKafkaMachine.plant_record)(self, how=how, partition=len(self.sent) % PARTITIONS)
            self.after_step()
        self._restart_broker()
        self.after_step()
        self._kill_after_commit()

    # -- helpers -----------------------------------------------------------------------------

    @staticmethod
    def _saga(key: int) -> str:
        return m.saga_id_for(w.KEY.tenant, w.KEY.workflow, KEYS[key])

    def _produce(self, payload: bytes, partition: int) -> tuple[int, int]:
        try:
            return produce_acknowledged(
                self.producer, self.topics.commands, payload, [(EVENT_HEADER, COMMAND_EVENT)], partition
            )
        except TransportError as exc:
            raise HarnessEnvironmentError(f"the broker refused a record: {exc}") from exc

    def _kill_and_resume(self, saga: str) -> None:
        """The host stops at ``kafka_committed`` once ``saga``'s unit committed and is killed there;
        a fresh host on the same database reopens the consumer in the same group, which redelivers
        from the committed offset (``_settle`` then sees the redelivery absorbed)."""
        signal = self.runtime.crash.signal_path("kafka_committed")
        self.runtime.host.call("arm_crash_point", point="kafka_committed", at=1, signal_path=str(signal))
        try:
            self.runtime.host.call("kafka_wait", ms=20_000, kill_at=signal, timeout=40)
        except NasagaHostError as exc:
            if exc.failure is not HostFailure.KILLED:
                raise
        else:
            self.runtime.host.call("disarm_crash_point")
            rows = self.runtime.host.effects(self.runtime.ns, OWNER)
            if any(str(r["saga_id"]) == saga for r in rows):
                # The unit committed before the point was armed (a very slow host call): no kill.
                self.note("kill: the unit committed before its crash point was armed")
                return
            raise Violation("S-KAFKA-02", "no unit committed within 20 s of its command's publication", {})
        self.context.inject(f.KAFKA_CONSUMER_KILLED.name)
        self.killed = [at for at, s in self.sent.items() if s.saga == saga and s.kind == "command"]
        self.runtime.crash.resume_after_kill()
        try:
            self._open_consumer()
        except NasagaHostError as exc:
            raise HarnessEnvironmentError(f"nasaga's Kafka consumer did not reopen: {exc}") from exc

    def after_step(self) -> None:
        """Every rule settles (see ``_settle``); one more sample here, cheap."""
        try:
            self._sample()
        except TransportError as exc:
            raise HarnessEnvironmentError(f"the broker did not answer: {exc}") from exc

    def at_quiescence(self) -> None:
        self._publish()
        self._settle({})

    def close(self) -> None:
        try:
            if self.runtime.host.alive():
                self.runtime.host.call("kafka_close", namespace=self.runtime.ns)
        except NasagaHostError:
            pass
        finally:
            for closing in (
                self.dead.close,
                lambda: self.producer.flush(5),
                lambda: self.admin.delete_topics(self.topics),
            ):
                with contextlib.suppress(Exception):
                    closing()
            self.runtime.close()
