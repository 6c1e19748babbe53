"""Rules on the command streams: publish, plant bad entries, fetch, claim, process, audit, trim.

Every rule drives the real connector (``impls.transport``) and the delivery model
(``model.saga`` ``DeliveryStream``) with the same input and compares what comes back; the
participant's transaction is compared with ``model.saga.handle_command`` as in the saga suite.
"""

from __future__ import annotations

from typing import Any

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import rule

from conformance._machine import step
from conformance._violations import Violation
from conformance.saga import _world as w
from conformance.saga._faults import RELAY_CRASH
from conformance.transport import _faults as f
from conformance.transport._base import (
    BUSY_MS,
    CONSUMERS,
    GROUP_AUDIT,
    ConsumerKilled,
    TransportMachineBase,
    show,
)
from impls.saga.codec import command_to_blob
from impls.transport import InHand, Settled, to_fields
from model import saga as m

owners = st.sampled_from(w.OWNERS)
consumers = st.sampled_from(CONSUMERS)
#: ``failing``: the business code fails transiently on every try, until the budget dead-letters it.
decisions = st.sampled_from(["succeed"] * 4 + ["reject", "unknown", "transient_failure", "failing"])
fates = st.sampled_from(["committed"] * 5 + ["rolled_back", "unknown_applied", "unknown_not_applied"])
PLANTED = {  # how -> (fault kind, the refusal the consumer must give)
    "unsigned": (f.UNSIGNED_ENVELOPE, "unsigned"),
    "forged": (f.FORGED_ENVELOPE, "bad_signature"),
    "old_key": (f.OLD_KEY_ENVELOPE, "retired_key"),
    "poison": (f.POISON, "undecodable"),
}
SETTLE_RULE = {
    m.Acknowledged: "S-STREAM-04",
    m.DeadLetterRecorded: "S-STREAM-06",
    m.NotPending: "S-STREAM-04",
}


class StreamRules(TransportMachineBase):
    def _put_on_wire(self, command: m.CommandEnvelope) -> None:
        entry_id = self.publishers[command.owner].publish(command_to_blob(command))
        ordinal = self._appended(command.owner, entry_id, command.command_id)
        self.commands[command.owner][ordinal] = command

    @rule(owner=owners)
    @step
    def republish(self, owner: str) -> None:
        """The relay died after ``XADD`` and before recording it: the command goes out again."""
        genuine = list(self.commands[owner].values())
        if not self._allows(RELAY_CRASH) or not genuine:
            return
        self.context.inject(RELAY_CRASH.name)
        command = genuine[-1]
        entry_id = self.publishers[owner].publish(command_to_blob(command))
        self.commands[owner][self._appended(owner, entry_id, command.command_id)] = command

    def _appended(self, owner: str, entry_id: str, message_id: str) -> int:
        self.streams[owner], ordinal = m.append(self.streams[owner], message_id)
        self.ordinal[owner][entry_id] = ordinal
        self.real[owner][ordinal] = entry_id
        return ordinal

    @rule(owner=owners, how=st.sampled_from(sorted(PLANTED)))
    @step
    def plant_entry(self, owner: str, how: str) -> None:
        """An entry no genuine producer wrote: it must be dead-lettered before any handler (S-STREAM-05)."""
        kind, reason = PLANTED[how]
        genuine = list(self.commands[owner].values())
        if not self._allows(kind) or not genuine:
            return
        self.context.inject(kind.name)
        base = genuine[-1]
        attempt = base.attempt + 50  # a well-formed new attempt the runtime would accept if it got it
        forged = attrs.evolve(base, attempt=attempt, command_id=m.command_id_for(base.effect_id, attempt))
        body = command_to_blob(forged)
        signer = self.ring.signing_key(w.ORCHESTRATOR)
        assert signer is not None
        if how == "unsigned":
            envelope = m.SignedEnvelope(body, w.ORCHESTRATOR, None, None)
        elif how == "forged":
            sig = m.signature_for(b"not the secret", signer.key_id, w.ORCHESTRATOR, body)
            envelope = m.SignedEnvelope(body, w.ORCHESTRATOR, signer.key_id, sig)
        elif how == "old_key":
            sig = m.signature_for(b"retired-secret", "k0", w.ORCHESTRATOR, body)
            envelope = m.SignedEnvelope(body, w.ORCHESTRATOR, "k0", sig)
        else:
            signed = m.sign(self.ring, w.ORCHESTRATOR, b"\x00not an envelope")
            assert signed is not None
            envelope = signed
        self.bad_ids.add(forged.command_id)
        entry_id = self.publishers[owner].append_raw(to_fields(envelope))
        ordinal = self._appended(owner, entry_id, f"planted:{how}")
        self.bad[owner][ordinal] = reason

    @rule()
    @step
    def rotate_key(self) -> None:
        """The orchestrator signs with a new key; entries signed with the old one still
        verify (S-STREAM-09)."""
        if not self._allows(f.KEY_ROTATED):
            return
        self.context.inject(f.KEY_ROTATED.name)
        self.keys_made += 1
        key_id = f"k{self.keys_made}"
        self.ring = m.rotate(self.ring, w.ORCHESTRATOR, key_id, f"secret-{key_id}".encode())

    @rule(owner=owners, consumer=consumers, count=st.integers(1, 3))
    @step
    def fetch(self, owner: str, consumer: str, count: int) -> None:
        self._publish()
        self._fetch(owner, consumer, count)

    def _fetch(self, owner: str, consumer: str, count: int) -> None:
        real = self.consumers[(owner, consumer)].fetch(count)
        self.streams[owner], expected = m.read_group(
            self.streams[owner], m.ReadGroup(owner, consumer, count, self.now)
        )
        self._compare_delivered("S-STREAM-01", owner, expected, real)
        self.in_hand[(owner, consumer)] += real

    @rule(owner=owners, consumer=consumers, expired=st.booleans())
    @step
    def claim(self, owner: str, consumer: str, expired: bool) -> None:
        """``XAUTOCLAIM``: with ``expired`` every pending entry counts as idle, else none
        does (S-STREAM-03)."""
        held_elsewhere = {
            e.entry_id
            for (o, c), entries in self.in_hand.items()
            if o == owner and c != consumer
            for e in entries
        }
        pending = {self.real[owner][k] for k in self.streams[owner].groups[owner].pending}
        stealing = expired and bool(held_elsewhere & pending)
        if stealing and not self._allows(f.CLAIMED_WHILE_WORKING):
            return
        min_idle = 0 if expired else BUSY_MS
        real = self.consumers[(owner, consumer)].claim(min_idle, 10)
        request = m.ClaimIdle(owner, consumer, min_idle, self.now, 10)
        self.streams[owner], expected = m.claim_idle(self.streams[owner], request)
        self._compare_delivered("S-STREAM-03", owner, expected, real)
        if not expired and pending:
            self.context.reach("busy-claim-took-nothing")
        if stealing:
            self.context.inject(f.CLAIMED_WHILE_WORKING.name)
        mine = self.in_hand[(owner, consumer)]
        taken = {e.entry_id for e in real}
        self.in_hand[(owner, consumer)] = [e for e in mine if e.entry_id not in taken] + real

    def _compare_delivered(
        self, rule_id: str, owner: str, expected: m.ReadOutcome, real: list[InHand]
    ) -> None:
        assert isinstance(expected, m.Delivered)
        got = [self.ordinal[owner].get(e.entry_id, -1) for e in real]
        want = [d.entry_id for d in expected.deliveries]
        self.note(f"delivered: model {want}, stream {got}")
        if got != want:
            raise Violation(
                rule_id,
                "the stream delivered other entries than the model",
                {"expected": show(want), "actual": show(got)},
            )

    @rule(
        owner=owners,
        consumer=consumers,
        decision=decisions,
        fate=fates,
        kill=st.sampled_from([False] * 3 + [True]),
    )
    @step
    def process(self, owner: str, consumer: str, decision: str, fate: str, kill: bool) -> None:
        if not self.in_hand[(owner, consumer)]:
            self._fetch(owner, consumer, 1)  # a consumer with nothing in hand reads first
        tries = w.participant_config(owner).transient_failure_budget if decision == "failing" else 1
        chosen = m.Decision.TRANSIENT_FAILURE if decision == "failing" else m.Decision(decision)
        killing = kill and self._allows(f.CONSUMER_KILLED)
        for _ in range(tries):
            if self.in_hand[(owner, consumer)]:
                self._process(owner, consumer, chosen, fate, killing)

    def _process(self, owner: str, consumer: str, decision: m.Decision, fate: str, kill: bool) -> None:
        entry = self.in_hand[(owner, consumer)].pop(0)
        ordinal = self.ordinal[owner][entry.entry_id]
        connector = self.consumers[(owner, consumer)]
        if ordinal in self.bad[owner]:
            reason = self.bad[owner][ordinal]
            self._settle(
                owner, ordinal, m.DeliveryVerdict.DEAD_LETTER, reason, connector.process(entry), "S-STREAM-05"
            )
            return
        command = self.commands[owner][ordinal]
        if kill:
            self.killing.add(entry.entry_id)
        self.decision = decision
        commit = self._set_fate(fate)
        self.parts[owner], expected = m.handle_command(
            self.parts[owner], m.CommandDelivery(command, w.ORCHESTRATOR, decision, commit)
        )
        try:
            settled = connector.process(entry)
        except ConsumerKilled:
            self.context.inject(f.CONSUMER_KILLED.name)
            self.in_hand[(owner, consumer)] = []  # its process is gone, and its memory with it
            self.killed.add((owner, ordinal))
            return
        finally:
            self.killing.discard(entry.entry_id)
            self.fate, self.decision = m.CommitFate.COMMITTED, m.Decision.SUCCEED
        self.expect(_outcome_rule(expected), expected, settled.outcome)
        if isinstance(expected, m.DuplicateCommand) and (owner, ordinal) in self.killed:
            self.context.reach("redelivery-after-kill-absorbed")
        reason = type(expected).__name__ if expected.verdict is m.DeliveryVerdict.DEAD_LETTER else ""
        self._settle(owner, ordinal, expected.verdict, reason, settled, "S-STREAM-04")
        if expected.verdict is m.DeliveryVerdict.REDELIVER:
            self.in_hand[(owner, consumer)].append(entry)  # still pending here: this consumer tries again

    def _settle(
        self,
        owner: str,
        ordinal: int,
        verdict: m.DeliveryVerdict,
        reason: str,
        settled: Settled,
        rule_id: str,
    ) -> None:
        request = m.SettleEntry(owner, ordinal, verdict, reason)
        self.streams[owner], outcome = m.settle_entry(self.streams[owner], request)
        acknowledged = isinstance(outcome, m.Acknowledged | m.DeadLetterRecorded)
        expected = (verdict, reason if verdict is m.DeliveryVerdict.DEAD_LETTER else "", acknowledged)
        actual = (
            settled.verdict,
            settled.reason if settled.verdict is m.DeliveryVerdict.DEAD_LETTER else "",
            settled.acknowledged,
        )
        if expected != actual:
            raise Violation(
                SETTLE_RULE.get(type(outcome), rule_id) if expected[:2] == actual[:2] else rule_id,
                "the entry was settled otherwise than the model settles it",
                {"entry": ordinal, "expected": list(map(str, expected)), "actual": list(map(str, actual))},
            )
        if isinstance(outcome, m.DeadLetterRecorded):
            self.context.reach(f"dead-letter:{reason}")

    @rule(owner=owners, count=st.integers(1, 4))
    @step
    def audit(self, owner: str, count: int) -> None:
        """The second group reads and acknowledges without handling: it lags behind at its own pace."""
        self._audit(owner, count)

    def _audit(self, owner: str, count: int) -> None:
        stream = self.names[owner].stream
        reply: Any = self.client.xreadgroup(GROUP_AUDIT, "a1", {stream: ">"}, count=count)
        got = [e[0].decode() for _, entries in reply or [] for e in entries]
        self.streams[owner], expected = m.read_group(
            self.streams[owner], m.ReadGroup(GROUP_AUDIT, "a1", count, self.now)
        )
        assert isinstance(expected, m.Delivered)
        if [self.ordinal[owner][i] for i in got] != [d.entry_id for d in expected.deliveries]:
            raise Violation(
                "S-STREAM-01", "the audit group read other entries than the model", {"actual": got}
            )
        for entry_id in got:
            self.client.xack(stream, GROUP_AUDIT, entry_id)
            request = m.SettleEntry(GROUP_AUDIT, self.ordinal[owner][entry_id], m.DeliveryVerdict.ACK)
            self.streams[owner], _ = m.settle_entry(self.streams[owner], request)

    @rule(owner=owners, catch_up=st.integers(0, 3))
    @step
    def trim(self, owner: str, catch_up: int = 0) -> None:
        """The audit group reads ``catch_up`` entries, then ``XTRIM MINID`` at the frontier over
        both groups (S-STREAM-07)."""
        if catch_up:
            self._audit(owner, catch_up)
        stream = self.streams[owner]
        lagging = any(
            isinstance(b, m.Backlog) and b.total for b in (m.backlog(stream, g) for g in stream.groups)
        )
        if lagging and not self._allows(f.TRIM_UNDER_LAG):
            return
        if lagging:
            self.context.inject(f.TRIM_UNDER_LAG.name)
        removed = self.admins[owner].safe_trim()
        self.streams[owner], expected = m.trim(stream, m.Trim(m.trim_frontier(stream)))
        assert isinstance(expected, m.Trimmed)
        if removed != len(expected.removed):
            raise Violation(
                "S-STREAM-07",
                "the trim removed another number of entries than the frontier allows",
                {"expected": len(expected.removed), "actual": removed, "frontier": m.trim_frontier(stream)},
            )
        if lagging and removed:
            self.context.reach("trimmed-under-lag")

    @rule(owner=owners)
    @step
    def backlog(self, owner: str) -> None:
        actual = {b.group: (b.undelivered, b.pending) for b in self.admins[owner].backlog()}
        expected = {}
        for group in self.streams[owner].groups:
            measure = m.backlog(self.streams[owner], group)
            assert isinstance(measure, m.Backlog)
            expected[group] = (measure.undelivered, measure.pending)
        if actual != expected:
            raise Violation(
                "S-STREAM-08",
                "the backlog differs from the model",
                {"expected": str(expected), "actual": str(actual)},
            )


def _outcome_rule(expected: object) -> str:
    rules = {m.MessageRefused: "S-PART-05", m.DuplicateCommand: "S-PART-02", m.DeadLettered: "S-PART-04"}
    return rules.get(type(expected), "S-PART-01")
