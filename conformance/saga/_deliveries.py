"""The at-least-once wire: relays, deliveries, duplicates, reordering, forgeries (S-ORCH-*, S-PART-*)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import rule

from conformance._machine import step
from conformance._violations import Violation
from conformance.saga import _world as w
from conformance.saga._base import fates, indexes, unwrapped
from conformance.saga._faults import ACK_LOST, DUPLICATE, EFFECT_UNCERTAIN, FORGED, RELAY_CRASH, REORDER
from conformance.saga._forged_commands import ForgedCommandRules
from model import saga as m

DECISIONS = {d.value: d for d in m.Decision}
#: The decision that makes a participant answer what its gate already recorded.
REPLAYED = {
    m.ResultKind.SUCCEEDED: m.Decision.SUCCEED,
    m.ResultKind.REJECTED: m.Decision.REJECT,
    m.ResultKind.UNKNOWN: m.Decision.UNKNOWN,
}
decisions = st.sampled_from(["succeed"] * 3 + ["reject", "unknown", "unknown", "transient_failure"])
# Faults drawn as arguments of the delivery rules too, not only as rules of their own: swarm
# testing switches whole rules off for an example, and the delivery rules are the ones that
# every example with a saga in it keeps on, so rare faults stay reachable in every profile.
relays = st.sampled_from(["ok", "ok", "ok", "crash"])
forgeries = st.sampled_from(["none", "none", "none", "owner", "digest", "producer"])


class DeliveryRules(ForgedCommandRules):
    if TYPE_CHECKING:

        def _start(self, key: int, payload: int, revoked: int, fate: str) -> object: ...  # StartRules

    # -- transport -----------------------------------------------------------------------

    @rule(crash=st.booleans())
    @step
    def relay_commands(self, crash: bool) -> None:
        self._relay_commands(crash)

    def _relay_commands(self, crash: bool) -> None:
        crash = crash and self._allows(RELAY_CRASH)
        expected = m.pending_commands(self.model)
        actual = self.runtime.pending_commands()
        self.expect("S-ORCH-02", expected, actual)
        for command in actual:
            self.wire.commands.append(command)
            if crash:
                self.context.inject(RELAY_CRASH.name)
                break  # died after publishing, before recording it: the next relay publishes again
            self.model, _ = m.mark_command_published(self.model, command.command_id)
            self.runtime.mark_command_published(command.command_id)
            self.undo_if_refused()  # still unpublished: the next relay publishes it again

    def _compensation_answer(self, command: m.CommandEnvelope, chosen: m.Decision) -> m.Decision:
        """What a compensation is answered where the runtime differs from the model (N-09).

        A runtime without ``unconfirmed_compensations`` cannot leave one unknown (nasaga resolves
        it in the compensating direction): it is answered as succeeded. One without
        ``gate_replays_retried_compensations`` reopens a refused compensation that the operator
        retried and runs it again (nasaga, under the retry's recovery operation): it is answered
        with the verdict the model's gate replays (S-PART-03), the reopening being out of scope
        (docs/nasaga-findings.md N-09, N-17)."""
        if command.phase is not m.Phase.COMPENSATE:
            return chosen
        if chosen is m.Decision.UNKNOWN and not self.caps.unconfirmed_compensations:
            chosen = m.Decision.SUCCEED
        record = self.model_parts[command.owner].gate.get(command.effect_id)
        if record is not None and not self.caps.gate_replays_retried_compensations:
            chosen = REPLAYED[record.kind]
        return chosen

    @rule(index=indexes, decision=decisions, fate=fates, ack_lost=st.booleans(), relay=relays)
    @step
    def deliver_command(
        self, index: int, decision: str, fate: str, ack_lost: bool, relay: str = "ok"
    ) -> None:
        self._relay_commands(crash=relay == "crash")
        if not self.wire.commands:
            return
        position = self._pick(index, len(self.wire.commands))
        command = self.wire.commands[position]
        owner = command.owner
        chosen = self._compensation_answer(command, DECISIONS[decision])
        if chosen is m.Decision.UNKNOWN:
            if self._allows(EFFECT_UNCERTAIN):
                self.context.inject(EFFECT_UNCERTAIN.name)
            else:
                chosen = m.Decision.SUCCEED
        _, probe = m.handle_command(
            self.model_parts[owner],
            m.CommandDelivery(command, w.ORCHESTRATOR, chosen, m.CommitFate.COMMITTED),
        )
        if isinstance(probe, m.DuplicateCommand) and not self._allows(DUPLICATE):
            self.wire.commands.pop(position)  # the transport drops what was already absorbed
            return
        commit = self._set_fate(fate)
        before = self.model_parts[owner]
        self.model_parts[owner], expected = m.handle_command(
            before, m.CommandDelivery(command, w.ORCHESTRATOR, chosen, commit)
        )
        actual = self.runtime.handle_command(owner, command, w.ORCHESTRATOR, chosen)
        self.fate = m.CommitFate.COMMITTED
        # Refused on every attempt: one failed try, which may spend the budget (S-PART-04, S-TX-01).
        refused = m.CommandDelivery(command, w.ORCHESTRATOR, chosen, m.CommitFate.ROLLED_BACK)
        refused_parts, refused_outcome = m.handle_command(before, refused)
        if self.database_refused(commit, actual, refused_outcome):
            self.model_parts[owner], expected = refused_parts, refused_outcome
            self.refated()
        elif isinstance(refused_outcome, m.DeadLettered) and self.database_refused(commit, actual):
            # The try was counted, and then the dead letter's own transaction refused on every
            # attempt: not recorded, so not answered (S-PART-04, ``Participant._failed``).
            self.model_parts[owner] = m.dead_letter_unrecorded(refused_parts, command.command_id)
            expected = m.RolledBack()
            self.refated()
        rule_id = {
            m.MessageRefused: "S-PART-05",
            m.DuplicateCommand: "S-PART-02",
            m.DeadLettered: "S-PART-04",
        }.get(type(expected), "S-PART-01")
        if isinstance(expected, m.CommandProcessed) and expected.absorbed:
            rule_id = "S-PART-03"
            self.context.reach("absorbed-by-gate")
        self.expect(rule_id, expected, actual)
        if isinstance(expected, m.DuplicateCommand):
            self.context.inject(DUPLICATE.name)
        if expected.verdict is not m.DeliveryVerdict.REDELIVER:
            if ack_lost and self._allows(ACK_LOST):
                self.context.inject(ACK_LOST.name)
            else:
                self.wire.commands.pop(position)

    reordered = False  # set on the example's machine by ``reorder_walk``

    @rule()
    @step
    def reorder_walk(self) -> None:
        """Once per example: two commands on the wire and the later one delivered first, through
        ``deliver_command``'s own body (answered succeed, committed, acknowledged), so the
        participant and the orchestrator meet an envelope ahead of an earlier one (S-PART-01,
        S-ORCH-02). Sagas of business keys not started yet are started (committed) until two
        commands are pending. ``deliver_command`` picks out of order only when its drawn index meets
        two pending envelopes: on PostgreSQL a ci run of 100 examples reached ``fault:reorder`` in 4
        of 105 (docs/ci-gate.md). Until it has delivered one out of order, it tries again when drawn."""
        if self.reordered or not self._allows(REORDER):
            return
        self._relay_commands(crash=False)
        for key, business_key in enumerate(w.BUSINESS_KEYS):
            if len(self.wire.commands) >= 2:
                break
            if m.saga_id_for(w.KEY.tenant, w.KEY.workflow, business_key) in self.model.receipts:
                continue
            self._start(key, 0, -1, "committed")
            self.after_step()  # the checks a program runs between two steps
            self._relay_commands(crash=False)
        if len(self.wire.commands) < 2:
            return
        self.reordered = True
        deliver = unwrapped(type(self).deliver_command)
        deliver(self, index=len(self.wire.commands) - 1, decision="succeed", fate="committed", ack_lost=False)

    def _pick(self, index: int, pending: int) -> int:
        """The envelope delivered next: any of those pending (a reorder), or the head."""
        if not self._allows(REORDER):
            return 0
        position = index % pending
        if position:
            self.context.inject(REORDER.name)
        return position

    @rule(crash=st.booleans())
    @step
    def relay_results(self, crash: bool) -> None:
        self._relay_results(crash)

    def _relay_results(self, crash: bool) -> None:
        crash = crash and self._allows(RELAY_CRASH)
        for owner in w.OWNERS:
            expected = tuple(
                r for r in self.model_parts[owner].outbox if r.message_id not in self.results_published
            )
            actual = self.runtime.pending_results(owner)
            self.expect("S-PART-01", expected, actual)
            for result in actual:
                self.wire.results.append((owner, result))
                if crash:
                    self.context.inject(RELAY_CRASH.name)
                    return
                self.results_published.add(result.message_id)
                self.runtime.mark_result_published(owner, result.message_id)
                if self.undo_if_refused():  # still unpublished: the next relay publishes it again
                    self.results_published.discard(result.message_id)

    @rule(index=indexes, fate=fates, ack_lost=st.booleans(), relay=relays, forge=forgeries)
    @step
    def deliver_result(
        self, index: int, fate: str, ack_lost: bool, relay: str = "ok", forge: str = "none"
    ) -> None:
        self._relay_results(crash=relay == "crash")
        if not self.wire.results:
            return
        position = self._pick(index, len(self.wire.results))
        producer, envelope = self.wire.results[position]
        _, probe = m.handle_result(
            self.model, m.ResultDelivery(envelope, producer, self.now, m.CommitFate.COMMITTED)
        )
        if isinstance(probe, m.DuplicateResult) and not self._allows(DUPLICATE):
            self.wire.results.pop(position)  # the transport drops what was already absorbed
            return
        if forge != "none" and self._allows(FORGED):
            self._forge(producer, envelope, forge)  # a forged twin arrives first
        outcome = self._deliver_result(producer, envelope, fate)
        if outcome.verdict is not m.DeliveryVerdict.REDELIVER:
            if ack_lost and self._allows(ACK_LOST):
                self.context.inject(ACK_LOST.name)
            else:
                self.wire.results.pop(position)

    def _deliver_result(self, producer: str, envelope: m.ResultEnvelope, fate: str) -> m.ResultOutcome:
        commit = self._set_fate(fate)
        before = self.model
        self.model, expected = m.handle_result(before, m.ResultDelivery(envelope, producer, self.now, commit))
        actual = self.runtime.handle_result(envelope, producer, self.now)
        self.fate = m.CommitFate.COMMITTED
        if self.database_refused(commit, actual):
            refused = m.ResultDelivery(envelope, producer, self.now, m.CommitFate.ROLLED_BACK)
            self.model, expected = m.handle_result(before, refused)
            self.refated()
        rule_id = {
            m.MessageRefused: "S-ORCH-01",
            m.DuplicateResult: "S-ORCH-03",
            m.StaleResult: "S-ORCH-04",
            m.ResultDeferred: "S-MGT-05",
        }.get(type(expected), "S-ORCH-02")
        self.expect(rule_id, expected, actual)
        if isinstance(expected, m.DuplicateResult):
            self.context.inject(DUPLICATE.name)
        return expected

    @rule(index=indexes, how=st.sampled_from(["owner", "digest", "producer"]))
    @step
    def forge_result(self, index: int, how: str) -> None:
        """A forged twin of a genuine result: it must claim nothing (S-ORCH-01, S-DLV-03); and one of
        a pending command, forged the same way, which the participant must refuse (S-PART-05)."""
        if not self._allows(FORGED):
            return
        if self.wire.commands:
            self.forge_command(self.wire.commands[index % len(self.wire.commands)], how)
        self._relay_results(crash=False)
        if not self.wire.results:
            return
        producer, envelope = self.wire.results[index % len(self.wire.results)]
        self._forge(producer, envelope, how)

    def _forge(self, producer: str, envelope: m.ResultEnvelope, how: str) -> None:
        self.context.inject(FORGED.name)
        if how == "owner":
            other = w.OWNERS[1 - w.OWNERS.index(envelope.owner)]
            forged, producer = attrs.evolve(envelope, owner=other), other
        elif how == "digest":
            forged = attrs.evolve(envelope, definition_digest="0" * 64)
        else:
            forged, producer = envelope, "mallory"
        claimed_before = envelope.message_id in self.model.inbox
        self._deliver_result(producer, forged, "committed")
        claimed = self.runtime.result_claimed(envelope.message_id)
        if claimed != claimed_before:
            raise Violation(
                "S-ORCH-01",
                "a refused message took its genuine twin's inbox key",
                {"message_id": envelope.message_id},
            )
