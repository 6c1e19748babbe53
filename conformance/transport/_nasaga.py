"""The transport suite on nasaga's Redis Streams connector (feature ``redis-stream``), in its host.

Theory of operation
-------------------
The backend ``nasaga-redis-stream`` names a target whose ``specialise`` hands the suite this
machine instead of the one over Ratchet's connectors: same suite, same fault catalog, same model
(``model.saga`` ``DeliveryStream``), same rule IDs, failure files and replay; the rules are the
moves nasaga's connector offers. Its consumer has one move, ``poll_once``: ``XAUTOCLAIM`` of idle
entries from its cursor, then ``XREADGROUP``, then each entry's closed verdict (``XACK``, the
DLT+XACK script, or left pending). A ``poll`` rule is that round; the model replays it as
``claim_idle`` + ``read_group`` + one ``settle_entry`` per entry, the participant's transaction as
``handle_command``. The consumers' ``min_idle_ms`` is 1 and every poll waits 2 ms first, so every
pending entry is idle to the claim, as the model's ``min_idle_ms=0``.

The world is the order saga's first step: the orchestrator (nasaga's, via ``NasagaRuntime``)
starts sagas, its outbox dispatcher publishes through nasaga's ``SagaRedisStreamPublisher`` to
p0's command stream (HMAC ``k1``), consumers ``c1``, ``c2`` of group ``work`` run nasaga's
participant on p0's database; a second group ``audit`` lags. Results stay in p0's outbox: the
orchestrator's side of the wire is the saga suite's (over gRPC: backend ``nasaga-grpc``,
``_nasaga_grpc.py``).

What nasaga's connector cannot be told, the rules do not draw and the gate does not ask
(``NASAGA_LACKS``): no hook between COMMIT and ``XACK`` (consumer-killed), a keyring frozen per
consumer (key-rotated), COMMIT fates (nasaga owns its transactions), gRPC faults (backend
``nasaga-grpc``'s). nasaga's safe trim keeps each group's last-delivered entry (docs/nasaga-findings.md
N-45): the frontier is compared as nasaga computes it, ``nasaga_frontier``.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import rule

from conformance._faults import FaultKind
from conformance._machine import step
from conformance._violations import HarnessEnvironmentError, Violation
from conformance.saga import _world as w
from conformance.saga._base import unwrapped
from conformance.saga._faults import RELAY_CRASH
from conformance.saga._nasaga import NasagaRuntime
from conformance.saga._port import model_participant
from conformance.transport import _faults as f
from conformance.transport._base import SagaSideRules
from conformance.transport._nasaga_world import (
    AUDIT,
    CONSUMERS,
    DECISIONS,
    GROUP,
    NASAGA_LACKS,
    OWNER,
    PLANTED,
    SECRET,
    STEP,
    nasaga_frontier,
    nasaga_signature,
)
from model import saga as m


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NasagaStreamMachine(SagaSideRules):
    def __init__(self) -> None:
        super().__init__()
        details = self.context.stats.details
        details["transport:runtime"] = "nasaga"
        for kind, why in NASAGA_LACKS.items():
            details[f"transport:{kind}"] = f"not applicable: {why}"
        details[f.KAFKA_ONLY] = "not applicable: Redis Streams has no partitions or offsets"
        self.now = 0
        ns = self.context.new_namespace()
        target: Any = self.context.target  # _nasaga_target.NasagaTransportTarget
        # nasaga owns its transactions' fates here (no fault proxy on this machine's database).
        self.runtime = NasagaRuntime("postgres", ns, self.context.stats, lambda _unit: m.CommitFate.COMMITTED)
        self.model = m.OrchestratorStore(trusted_producers=frozenset(w.OWNERS))
        self.part = m.ParticipantState(
            w.participant_config(OWNER, transient_failure_budget=w.NO_DEAD_LETTERS)
        )
        self.model, _ = m.publish_definition(self.model, m.PublishDefinition(w.ARTIFACT, w.DIGEST))
        self.runtime.publish_definition(w.ARTIFACT, w.DIGEST)
        change = m.ChangeLifecycle(w.KEY, m.LifecycleAction.ACTIVATE)
        self.model, _ = m.change_lifecycle(self.model, change, self.now)
        self.runtime.change_lifecycle(change, self.now)
        try:
            self.client = target.open_client()
            self.client.ping()
            opened = self.runtime.host.call(
                "stream_open",
                namespace=self.runtime.ns,
                redis_url=target.redis_url,
                prefix=f"ratchet:{self.runtime.ns}",
                routes=[{"owner": OWNER, "step": STEP}],
                consumers=list(CONSUMERS),
                group=GROUP,
                min_idle_ms=1,
                signing={"key_id": "k1", "secret": SECRET.hex()},
                verifying={"k1": SECRET.hex()},
            )
        except Exception as exc:
            raise HarnessEnvironmentError(f"nasaga's stream connector did not open: {exc}") from exc
        self.stream = str(opened["streams"][OWNER]["stream"])
        self.dead = str(opened["streams"][OWNER]["dead_letters"])
        self.client.xgroup_create(self.stream, AUDIT, id="0", mkstream=True)
        self.log = m.create_group(m.create_group(m.DeliveryStream(), GROUP), AUDIT)
        self.ordinal: dict[str, int] = {}  # Redis entry id -> model ordinal
        self.events: dict[str, int] = {}  # planted event id -> ordinal
        self.commands: dict[int, m.CommandEnvelope] = {}
        self.fields: dict[int, dict[bytes, bytes]] = {}
        self.bad: dict[int, str] = {}  # ordinal -> nasaga's reason
        self.retained: set[int] = set()  # ordinals a failing handler left pending

    # -- helpers ---------------------------------------------------------------------------

    def _allows(self, kind: FaultKind) -> bool:
        return self.context.faults.allows(kind.name)

    def _appended(self, entry_id: str, message_id: str) -> int:
        self.log, ordinal = m.append(self.log, message_id)
        self.ordinal[entry_id] = ordinal
        return ordinal

    def _sync(self) -> None:
        """New entries nasaga's publisher wrote, in ``XADD`` order, into the model."""
        last = max(self.ordinal, key=lambda i: self.ordinal[i], default="0-0")
        for raw_id, fields in self.client.xrange(self.stream, f"({last}" if last != "0-0" else "-") or []:
            entry_id = _text(raw_id)
            if entry_id in self.ordinal:
                continue
            envelope = json.loads(fields[b"payload"])
            command = self.runtime._command(envelope)
            self.runtime.commands.setdefault(command.command_id, envelope)
            ordinal = self._appended(entry_id, command.command_id)
            self.commands[ordinal], self.fields[ordinal] = command, dict(fields)

    def _publish(self) -> None:
        expected = m.pending_commands(self.model)
        actual = self.runtime.pending_commands()
        if self.runtime.project(expected) != self.runtime.project(actual):
            raise Violation("S-ORCH-02", "the outbox differs from the model", {"actual": repr(actual)[:400]})
        self.runtime.host.call("stream_dispatch", namespace=self.runtime.ns)
        for command in actual:
            self.model, _ = m.mark_command_published(self.model, command.command_id)
            self.runtime.mark_command_published(command.command_id)
        known = len(self.commands)
        self._sync()
        published = [self.commands[k].command_id for k in sorted(self.commands)][known:]
        if published != [c.command_id for c in actual]:
            raise Violation(
                "S-STREAM-01",
                "the stream got other commands than the outbox held",
                {"expected": repr([c.command_id for c in actual]), "actual": repr(published)},
            )

    # -- rules (first_start, start, publish_commands: SagaSideRules) -------------------------

    def _start(self, key: int) -> None:
        request = m.StartSaga(w.KEY, w.BUSINESS_KEYS[key], json_payload=w.PAYLOADS[0])
        self.model, expected = m.start_saga(self.model, m.StartAttempt(request, self.now))
        actual = self.runtime.start_saga(request, self.now, None)
        if self.runtime.project(expected) != actual:
            raise Violation("S-START-01", "the start differs from the model", {"actual": repr(actual)})

    @rule()
    @step
    def republish(self) -> None:
        """A publish retried after its reply was lost: a second entry with the same event id
        (nasaga's own at-least-once note), which the inbox must absorb."""
        if not self.commands or not self._allows(RELAY_CRASH):
            return
        self.context.inject(RELAY_CRASH.name)
        ordinal = max(self.commands)
        entry_id = _text(self.client.xadd(self.stream, self.fields[ordinal]))
        copy = self._appended(entry_id, self.commands[ordinal].command_id)
        self.commands[copy], self.fields[copy] = self.commands[ordinal], self.fields[ordinal]

    @rule(how=st.sampled_from(sorted(PLANTED)))
    @step
    def plant_entry(self, how: str) -> None:
        """An entry nasaga's publisher did not write: dead-lettered before any handler (S-STREAM-05)."""
        kind, reason = PLANTED[how]
        if not self.commands or not self._allows(kind):
            return
        self.context.inject(kind.name)
        event_id = str(uuid.uuid4())
        payload = b"\x00not an envelope" if how == "poison" else self.fields[max(self.commands)][b"payload"]
        fields: dict[str, bytes | str] = {"event": "saga.command", "event_id": event_id, "payload": payload}
        key = SECRET if how == "poison" else b"not the secret"
        fields["key_id"] = "k0" if how == "old_key" else "k1"
        if how != "unsigned":
            fields["sig"] = nasaga_signature(key, self.stream, event_id, "saga.command", payload)
        entry_id = _text(self.client.xadd(self.stream, fields))
        ordinal = self._appended(entry_id, f"planted:{how}")
        self.events[event_id] = ordinal
        self.bad[ordinal] = reason

    @rule(consumer=st.sampled_from(CONSUMERS), decision=st.sampled_from(["succeed"] * 3 + ["reject", "fail"]))
    @step
    def poll(self, consumer: str, decision: str) -> None:
        self._poll(consumer, DECISIONS[decision])

    def _poll(self, consumer: str, decision: m.Decision) -> None:
        time.sleep(0.002)  # every pending entry idle past the consumers' 1 ms (module doc)
        held = {k: p.consumer for k, p in self.log.groups[GROUP].pending.items()}
        log, claimed = m.claim_idle(self.log, m.ClaimIdle(GROUP, consumer, 0, self.now, 10))
        assert isinstance(claimed, m.Delivered)
        stolen = [d for d in claimed.deliveries if held.get(d.entry_id) != consumer]
        if stolen and not self._allows(f.CLAIMED_WHILE_WORKING):
            return
        self.log = log
        expect = {"acked": 0, "dead_lettered": 0, "retained": 0, "reclaimed": len(claimed.deliveries)}
        handler_runs = self._settle_all(claimed, consumer, decision, expect)
        self.log, fresh = m.read_group(self.log, m.ReadGroup(GROUP, consumer, 10, self.now))
        assert isinstance(fresh, m.Delivered)
        handler_runs += self._settle_all(fresh, consumer, decision, expect)
        report = self.runtime.host.call(
            "stream_poll",
            namespace=self.runtime.ns,
            owner=OWNER,
            consumer=consumer,
            decision=self.runtime_decision(decision),
        )
        actual = {k: int(report[k]) for k in expect}
        self.note(
            f"poll: model {expect} handler {handler_runs}, nasaga {actual} handler {report['handler_calls']}"
        )
        if actual != expect:
            rule_id = "S-STREAM-03" if actual["reclaimed"] != expect["reclaimed"] else "S-STREAM-04"
            raise Violation(
                rule_id,
                "the round settled otherwise than the model",
                {"expected": repr(expect), "actual": repr(actual)},
            )
        if int(report["handler_calls"]) != handler_runs:
            raise Violation(
                "S-STREAM-05",
                "the handler ran another number of times than the model's genuine deliveries",
                {"expected": handler_runs, "actual": int(report["handler_calls"])},
            )
        if stolen:
            self.context.inject(f.CLAIMED_WHILE_WORKING.name)

    @staticmethod
    def runtime_decision(decision: m.Decision) -> str:
        from conformance.saga._nasaga_terms import DECISION

        return DECISION[decision]

    def _settle_all(
        self, delivered: m.Delivered, consumer: str, decision: m.Decision, expect: dict[str, int]
    ) -> int:
        runs = 0
        for d in delivered.deliveries:
            if d.entry_id in self.bad:
                verdict, reason = m.DeliveryVerdict.DEAD_LETTER, self.bad[d.entry_id]
            else:
                command, before = self.commands[d.entry_id], self.part
                delivery = m.CommandDelivery(command, w.ORCHESTRATOR, decision)
                self.part, outcome = m.handle_command(before, delivery)
                runs += m.Stage.HANDLER in m.command_stages(before, command, outcome)
                verdict, reason = outcome.verdict, ""
                if isinstance(outcome, m.DuplicateCommand) and d.deliveries == 1:
                    self.context.reach("duplicate-entry-absorbed")
                if verdict is m.DeliveryVerdict.REDELIVER:
                    self.retained.add(d.entry_id)
                elif d.entry_id in self.retained:
                    self.context.reach("retained-entry-redelivered")  # left pending, then settled
            self.log, _ = m.settle_entry(self.log, m.SettleEntry(GROUP, d.entry_id, verdict, reason))
            key = {
                m.DeliveryVerdict.ACK: "acked",
                m.DeliveryVerdict.DEAD_LETTER: "dead_lettered",
                m.DeliveryVerdict.REDELIVER: "retained",
            }
            expect[key[verdict]] += 1
            if verdict is m.DeliveryVerdict.DEAD_LETTER:
                self.context.reach(f"dead-letter:{reason}")
        return runs

    @rule(count=st.integers(1, 4))
    @step
    def audit(self, count: int) -> None:
        """The second group reads and acknowledges without handling, at its own pace."""
        self._audit(count)

    def _audit(self, count: int) -> None:
        reply: Any = self.client.xreadgroup(AUDIT, "a1", {self.stream: ">"}, count=count)
        got = [_text(e[0]) for _, entries in reply or [] for e in entries]
        self.log, expected = m.read_group(self.log, m.ReadGroup(AUDIT, "a1", count, self.now))
        assert isinstance(expected, m.Delivered)
        if [self.ordinal.get(i, -1) for i in got] != [d.entry_id for d in expected.deliveries]:
            raise Violation(
                "S-STREAM-01", "the audit group read other entries than the model", {"actual": repr(got)}
            )
        for entry_id in got:
            self.client.xack(self.stream, AUDIT, entry_id)
            self.log, _ = m.settle_entry(
                self.log, m.SettleEntry(AUDIT, self.ordinal[entry_id], m.DeliveryVerdict.ACK)
            )

    @rule(catch_up=st.integers(0, 3))
    @step
    def trim(self, catch_up: int) -> None:
        """nasaga's ``safe_trim_by_group_frontier`` after the audit group read ``catch_up`` (S-STREAM-07)."""
        if catch_up:
            self._audit(catch_up)
        lagging = any(
            isinstance(b, m.Backlog) and b.total for b in (m.backlog(self.log, g) for g in self.log.groups)
        )
        if lagging and not self._allows(f.TRIM_UNDER_LAG):
            return
        if lagging:
            self.context.inject(f.TRIM_UNDER_LAG.name)
        frontier = nasaga_frontier(self.log)
        removed = int(
            self.runtime.host.call("stream_trim", namespace=self.runtime.ns, owner=OWNER)["removed"]
        )
        self.log, expected = m.trim(self.log, m.Trim(frontier))
        assert isinstance(expected, m.Trimmed)
        if removed != len(expected.removed):
            raise Violation(
                "S-STREAM-07",
                "the trim removed another number of entries than nasaga's frontier allows",
                {"expected": len(expected.removed), "actual": removed, "frontier": frontier},
            )
        if lagging and removed:
            self.context.reach("trimmed-under-lag")

    @rule()
    @step
    def backlog(self) -> None:
        read = self.runtime.host.call("stream_backlog", namespace=self.runtime.ns, owner=OWNER, now_ms=0)
        measure = m.backlog(self.log, GROUP)
        assert isinstance(measure, m.Backlog)
        if int(read["pending"]) != measure.pending:
            raise Violation(
                "S-STREAM-08",
                "the backlog's pending count differs from the model",
                {"expected": measure.pending, "actual": int(read["pending"])},
            )

    # -- checks ----------------------------------------------------------------------------

    def after_step(self) -> None:
        """The stream read raw against the model: entries (S-STREAM-07), each group's cursor and
        pending list (S-STREAM-01, -02, -04), the dead letters (S-STREAM-06); the participant's
        business facts and result outbox (S-PART-01, S-PART-03)."""
        present = [self.ordinal.get(_text(i), -1) for i, _ in self.client.xrange(self.stream) or []]
        expected = [e.entry_id for e in self.log.entries]
        if present != expected:
            missing = sorted(set(expected) - set(present))
            raise Violation(
                "S-STREAM-07" if missing else "S-STREAM-01",
                "entries a group still needed are gone" if missing else "the stream's entries differ",
                {"expected": repr(expected), "actual": repr(present)},
            )
        letters = []
        for _, fields in self.client.xrange(self.dead) or []:
            source = self.events.get(_text(fields[b"event_id"]), -1)
            letters.append((source, _text(fields[b"reason"])))
        want = [(d.entry_id, d.reason) for d in self.log.dead_letters]
        if letters != want:
            raise Violation(
                "S-STREAM-06",
                "the dead letters differ from the model",
                {"expected": repr(want), "actual": repr(letters)},
            )
        infos = {_text(i["name"]): i for i in self.client.xinfo_groups(self.stream) or []}
        for group, state in self.log.groups.items():
            last = _text(infos[group]["last-delivered-id"]) if group in infos else "0-0"
            if (0 if last == "0-0" else self.ordinal.get(last, -1)) != state.last_delivered:
                raise Violation(
                    "S-STREAM-01", "a group's last-delivered id differs", {"group": group, "actual": last}
                )
            rows = self.client.xpending_range(self.stream, group, "-", "+", 1000) or []
            real = {
                self.ordinal.get(_text(r["message_id"]), -1): (
                    _text(r["consumer"]),
                    int(r["times_delivered"]),
                )
                for r in rows
            }
            held = {k: (p.consumer, p.deliveries) for k, p in state.pending.items()}
            if set(real) & {d.entry_id for d in self.log.dead_letters if d.group == group}:
                raise Violation("S-STREAM-06", "a dead-lettered entry is still pending", {"group": group})
            if real != held:
                lost = sorted(set(held) - set(real))
                raise Violation(
                    "S-STREAM-04" if lost else "S-STREAM-02",
                    "entries were acknowledged without their unit's verdict"
                    if lost
                    else "a pending list differs",
                    {"group": group, "expected": repr(held), "actual": repr(real)},
                )
        facts = self.runtime.observe_participant(OWNER)
        if len(set(facts.effects)) != len(facts.effects):
            raise Violation("S-PART-03", "an effect took effect twice", {"effects": list(facts.effects)})
        model = self.runtime.project(model_participant(self.part))
        if facts != model:
            raise Violation(
                "S-PART-01",
                "business facts or result outbox differ from the model",
                {"actual": repr(facts)[:400]},
            )

    def at_quiescence(self) -> None:
        """Every entry settled in both groups; nasaga's trim then leaves only the last entry every
        group delivered (S-STREAM-02, S-STREAM-07; N-45)."""
        self._publish()
        for _ in range(20):
            group = self.log.groups[GROUP]
            if not group.pending and group.last_delivered == self.log.last_id:
                break
            self._poll("c1", m.Decision.SUCCEED)
        else:
            raise Violation("S-STREAM-02", "entries stayed pending with faults stopped", {})
        while m.backlog(self.log, AUDIT) != m.Backlog(0, 0):
            self._audit(50)
        unwrapped(type(self).trim)(self, catch_up=0)
        left = int(self.client.xlen(self.stream))
        if left != min(1, self.log.last_id) or len(self.log.entries) != left:
            raise Violation(
                "S-STREAM-07", "a finished stream was not trimmed to its last entry", {"left": left}
            )
        self.after_step()

    def close(self) -> None:
        try:
            self.runtime.host.call("stream_close", namespace=self.runtime.ns)
            self.client.delete(self.stream, self.dead)
            markers = list(self.client.scan_iter(match=f"{self.stream.rsplit(':', 1)[0]}:dlt-marker:*"))
            if markers:
                self.client.delete(*markers)
        except Exception:
            pass
        finally:
            self.client.close()
            self.runtime.close()
