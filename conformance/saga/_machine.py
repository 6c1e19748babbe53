"""Runtime level: orchestrator + participants + timer workers beside the model, under faults.

Every rule drives the runtime under test (``conformance/saga/_port.py``: Ratchet's own runtime
over a ``SagaBackend``, or another runtime such as nasaga in its host) and the model
(``model.saga``) with the same input and the same injected fate, and compares the outcomes value
for value at the resolution the runtime shows. ``after_step`` reads the runtime's durable facts
back and compares them with the model's state: instances and journal (S-ORCH-02, S-STEP-08),
command outbox (S-ORCH-02), timers and their fences (S-TIMER-01), each participant's business
facts and result outbox (S-PART-01, S-PART-03). At quiescence the world is driven without faults
until nothing is in flight (the operator first resumes paused sagas), and every saga must be
Completed, Compensated, ManuallyClosed or awaiting manual intervention (S-STEP-07).

The rules live in groups: starts (``_starts``), catalog and routes (``_catalog_rules``), the wire
(``_deliveries``), the clock and timers (``_timer_rules``), management and queries
(``_management_rules``). Faults are rules and arguments: a
COMMIT that rolls back or whose answer is lost (``fate``), an ACK lost after a committed delivery
(the envelope stays on the wire and is redelivered), a relay that dies between publishing and
recording it (duplicates), envelopes picked in any order, forged results, a participant effect
left uncertain, a timer worker that loses its lease to another while it still holds its token,
lifecycle moves racing starts. Each honours the run's fault filter (``--faults``): a fault the
filter does not allow is not injected (the step still runs, fault-free), so a replay with the
same filter runs the same program. Duplicates are a consequence of other faults (lost ACKs,
relay crashes); without ``duplicate`` the transport drops an envelope already absorbed instead
of delivering it again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from hypothesis.stateful import initialize

from conformance._violations import Violation
from conformance.saga import _world as w
from conformance.saga._base import indexes, show, unwrapped
from conformance.saga._catalog_rules import CatalogRules
from conformance.saga._deliveries import DeliveryRules
from conformance.saga._management_rules import ManagementRules
from conformance.saga._metrics_checks import check_metrics
from conformance.saga._port import (
    CatalogObservation,
    Observation,
    ParticipantObservation,
    model_catalog,
    model_observation,
    model_participant,
)
from conformance.saga._starts import StartRules
from conformance.saga._stored_rows import audit_stored_rows, inspected
from conformance.saga._timer_rules import TimerRules
from model import saga as m

#: At quiescence the fake services answer the charge (step 1, executed) by business key, so
#: every terminal status is reached through its legitimate path in every example: k1 succeeds
#: (Completed), k2 is rejected (reserve compensated: Compensated), k3 stays unconfirmable and
#: the step's policy asks for manual intervention (Awaiting manual intervention).
SETTLED_CHARGE = {
    m.saga_id_for(w.KEY.tenant, w.KEY.workflow, key): decision
    for key, decision in zip(w.BUSINESS_KEYS, ("succeed", "reject", "unknown"), strict=True)
}


_K2, _K3 = (m.saga_id_for(w.KEY.tenant, w.KEY.workflow, key) for key in w.BUSINESS_KEYS[1:3])
#: Commands the wire loses in the hand-over round at quiescence: k2's compensation of the
#: reserve and k3's resolve polls, until their budgets are spent (``SagaMachine._settle``).
LOST_AT_SETTLE = {_K2: m.Phase.COMPENSATE, _K3: m.Phase.RESOLVE}


class SagaMachine(StartRules, CatalogRules, DeliveryRules, TimerRules, ManagementRules):
    #: A subclass whose own opening activates the upload and starts it (``HostFaultRules``).
    opening_uploads = False

    def __init__(self) -> None:
        super().__init__()
        self._catalog_setup()
        # What saga_targets reads: which of the stored-row audit's targets apply (S-TX-03).
        inspectors = [inspector for _, _, inspector in inspected(self.raw_runtime)]
        decodes = any(inspector.decodes for inspector in inspectors)
        rows = "decodes" if decodes else "values" if inspectors else "none"
        self.context.stats.details["stored-rows"] = rows

    @initialize(key=indexes)
    def opening(self, key: int) -> None:
        """Every example opens the same way, through recorded steps (so its program replays as it
        ran; this rule is not one itself): the first start (``first_start``), its first command's
        forged twins (``forge_walk``) and ``forge_result`` once, then, on a runtime with
        management, the management walk (``manage_walk``: every refusal and both pause and resume
        once). Swarm testing switches
        rules off per example: a ci run's reach of what ``manage`` and ``forge_result`` draw
        rarely hung on the seed (docs/ci-gate.md, "reach"; issue 19, item 4)."""
        self.first_start(key=key)
        self.forge_walk()
        # The rule itself once, on the same command (nothing relayed yet: no state moves); drawn,
        # one seed's 107 PostgreSQL and MariaDB examples never ran it (docs/ci-gate.md, "reach").
        self.forge_result(index=0, how=w.DRAWN_FORGERIES[key % len(w.DRAWN_FORGERIES)])
        if self.caps.management:
            self.manage_walk()
        if key % 2 and not self.opening_uploads:
            # In half the examples (the other half keeps the upload a candidate): the upload
            # definition activated and a schema-declared non-JSON start of it (S-START-08;
            # drawn, sqlite/saga first reached it in example 164 of one ci run's 200).
            self.catalog(op="activate_upload", index=0)
            self.start(key=key, payload=0, revoked=-1, fate="committed", definition="upload")
        elif self.caps.routes:
            # The other half, the upload still a candidate: the route walk, whose invalid route row
            # blocks its activation (S-ROUTE-04; drawn, postgres/saga first met it as late as
            # example 66 of 100: docs/ci-gate.md, "reach").
            self.route_walk()

    # -- checks ----------------------------------------------------------------------------

    def after_step(self) -> None:
        actual = self.runtime.observe()
        expected = cast(Observation, self.runtime.project(model_observation(self.model)))
        if actual.instances != expected.instances:
            raise Violation(
                "S-ORCH-02",
                "instances differ from the model",
                {"expected": show(dict(expected.instances)), "actual": show(dict(actual.instances))},
            )
        if actual.journal != expected.journal:
            raise Violation(
                "S-STEP-08",
                "journal differs from the model",
                {"expected": show(list(expected.journal)), "actual": show(list(actual.journal))},
            )
        for saga_id in {e.saga_id for e in actual.journal}:
            problems = m.journal_violations([e for e in actual.journal if e.saga_id == saga_id])
            if problems:
                raise Violation("S-STEP-08", "illegal journal", {"problems": list(problems)})
        if actual.outbox != expected.outbox:
            raise Violation(
                "S-ORCH-02",
                "command outbox differs from the model",
                {"expected": show(dict(expected.outbox)), "actual": show(dict(actual.outbox))},
            )
        _same_where_shown("S-ORCH-02", "outboxed commands", expected.commands, actual.commands)
        _same_where_shown("S-MGT-05", "control states or revisions", expected.controls, actual.controls)
        if actual.timers != expected.timers:
            raise Violation(
                "S-TIMER-01",
                "timers differ from the model",
                {"expected": show(dict(expected.timers)), "actual": show(dict(actual.timers))},
            )
        if self.catalog_touched:
            self._compare_catalog()
            self.catalog_touched = False
        for owner in w.OWNERS:
            self._compare_participant(owner)
        for instance in self.model.instances.values():
            if instance.status in m.SETTLED_STATUSES:
                self.context.reach(f"terminal:{instance.status.name}")

    def _compare_participant(self, owner: str) -> None:
        facts = self.runtime.observe_participant(owner)
        state = cast(ParticipantObservation, self.runtime.project(model_participant(self.model_parts[owner])))
        if len(set(facts.effects)) != len(facts.effects):
            raise Violation(
                "S-PART-03", "an effect took effect twice", {"owner": owner, "effects": list(facts.effects)}
            )
        if facts.effects != state.effects:
            raise Violation(
                "S-PART-01",
                "business facts differ from the model",
                {"owner": owner, "expected": list(state.effects), "actual": list(facts.effects)},
            )
        if facts.results != state.results:
            raise Violation(
                "S-PART-01",
                "result outbox differs from the model",
                {"owner": owner, "expected": show(state.results), "actual": show(facts.results)},
            )

    def _compare_catalog(self) -> None:
        """Definition and capability rows read raw vs the model: refused publications and route
        operations wrote nothing, committed ones exactly their rows (S-CAT-01, S-CAT-04, S-ROUTE-02)."""
        actual = self.runtime.observe_catalog()
        expected = cast(CatalogObservation, self.runtime.project(model_catalog(self.model)))
        if actual.seals != expected.seals:
            raise Violation(
                "S-CAT-01",
                "published definitions differ from the model",
                {"expected": show(sorted(expected.seals)), "actual": show(sorted(actual.seals))},
            )
        if actual.lifecycles != expected.lifecycles:
            raise Violation(
                "S-CAT-04",
                "definition lifecycles differ from the model",
                {"expected": show(dict(expected.lifecycles)), "actual": show(dict(actual.lifecycles))},
            )
        if actual.routes != expected.routes:
            raise Violation(
                "S-ROUTE-02",
                "capability routes differ from the model",
                {"expected": show(dict(expected.routes)), "actual": show(dict(actual.routes))},
            )

    def _settle(self, handover: bool = False) -> None:
        """Deliver and fire without faults until every saga is settled (or 40 rounds passed).

        ``handover``: the rounds before an operator takes over (management with its recovery
        actions): ``LOST_AT_SETTLE`` commands are lost on the wire and k3's reserve is left
        unconfirmed, so an unconfirmed compensation (k2) and an unresolved effect (k3) reach the
        operator. Without timers nothing times a lost command out: k3's resolve polls are then
        answered unknown until its budget is spent (the same hand-over, S-STEP-05), and k2's
        compensation is refused (S-STEP-06; nasaga's ``halted``, N-09) when the journal's length is
        odd, else compensated: a retried refusal stays refused in the model (S-PART-03), so the
        parity keeps both ``terminal:COMPENSATED`` and the retry reachable, and a replay of the
        program takes the same path.
        """
        released = False
        for _ in range(40):
            self.leases.clear()
            # once a saga finished while others wait on their next command (S-CAT-11)
            released = released or self.release_beside_pending()
            self._relay_commands(crash=False)
            while self.wire.commands:
                head = self.wire.commands[0]
                lost = handover and LOST_AT_SETTLE.get(head.saga_id) is head.phase
                if lost and self.caps.timers:
                    self.wire.commands.pop(0)  # lost in transit: its timeout takes over
                    continue
                charge = head.step_index == 1 and head.phase is m.Phase.EXECUTE
                decision = SETTLED_CHARGE.get(head.saga_id, "succeed") if charge else "succeed"
                if lost and head.phase is m.Phase.RESOLVE:
                    decision = "unknown"  # no timer: each poll says unknown until the budget is spent
                if lost and head.phase is m.Phase.COMPENSATE and len(self.model.journal) % 2:
                    decision = "reject"  # no timer: refused, the same hand-over (every other program)
                if (
                    handover
                    and head.saga_id == _K3
                    and head.step_index == 0
                    and head.phase is m.Phase.EXECUTE
                ):
                    decision = "unknown"
                unwrapped(type(self).deliver_command)(
                    self, index=0, decision=decision, fate="committed", ack_lost=False
                )
            self._relay_results(crash=False)
            while self.wire.results:
                unwrapped(type(self).deliver_result)(self, index=0, fate="committed", ack_lost=False)
            if all(i.status in m.SETTLED_STATUSES for i in self.model.instances.values()):
                break
            if not self.caps.timers:
                continue  # nothing fires: every saga must end on its deliveries alone
            self.now += 1000
            for timer in m.due_timers(self.model.timers, self.now):
                self.leases["recovery"] = (timer.timer_id, 0)
                self.model, claimed = m.claim_timer(
                    self.model, m.ClaimTimer(timer.timer_id, "recovery", self.now, w.LEASE_MS)
                )
                self.expect(
                    "S-TIMER-03",
                    claimed,
                    self.runtime.claim_timer(timer.timer_id, "recovery", self.now, w.LEASE_MS),
                )
                if isinstance(claimed, m.TimerClaimed):
                    self.leases["recovery"] = (timer.timer_id, claimed.token)
                    unwrapped(type(self).fire_timer)(self, worker="recovery", fate="committed")
            self.after_step()

    def at_quiescence(self) -> None:
        """Drive without faults until nothing is in flight; every saga must be terminal (S-STEP-07).

        Business keys never started get their saga now (when the catalog still admits starts),
        and the charge is answered per ``SETTLED_CHARGE``: each terminal status is then reached
        by the runtime's own paths in every example, and the coverage gate does not hang on
        which rules swarm testing happened to switch on.
        """
        self.fate = m.CommitFate.COMMITTED
        planted: set[tuple[str, str]] = set()
        # Malformed stored rows are refused as CORRUPT (S-TX-03), while timers are still stored.
        audit_stored_rows(self, planted)
        for key, business_key in enumerate(w.BUSINESS_KEYS):
            if m.saga_id_for(w.KEY.tenant, w.KEY.workflow, business_key) not in self.model.receipts:
                self._start(key, 0, -1, "committed")
        if self.caps.quota and self.model.quota_used.get(w.KEY.tenant, 0) >= w.QUOTA_LIMIT:
            self._start(3, 0, -1, "committed")  # the fourth key: beyond the quota (S-START-13)
        upload = self.model.catalog.entries[w.UPLOAD_KEY]
        if upload.lifecycle is m.Lifecycle.ACTIVE and not any(
            i.definition == w.UPLOAD_KEY for i in self.model.instances.values()
        ):
            self._start(0, 0, -1, "committed", "upload")  # its schema-declared raw input (S-START-11)
        self.revoke_at_each_checkpoint()  # each eligibility checkpoint says no once (S-START-04)
        self.conflict_on_both_sides()  # replays with digests before and after the stored one (S-START-02)
        self.catalog_touched = True
        self.pause_one()  # one pause and its resume in every example, revisions read back (S-MGT-05)
        self.resume_all()  # a paused saga defers everything until its operator resumes it (S-MGT-05)
        if self.caps.management and self.caps.business_queries:
            # Paged while every key's saga is held: the settle may release finished ones (S-CAT-11).
            self.query_sagas("list", 0, "operator")  # limit 1: a second page (S-MGT-10)
        self.after_step()
        self._settle(handover=self.caps.management and self.caps.recovery_actions)
        for _ in range(2):  # the operator takes over what awaits manual intervention (S-MGT-06..08)
            if self.operate_manual():
                self._settle()
        self.query_all()  # the business query API over the settled world (S-MGT-09, S-MGT-10)
        for instance in self.model.instances.values():
            if instance.status not in m.SETTLED_STATUSES:
                raise Violation(
                    "S-STEP-07",
                    "a saga did not settle (terminal or awaiting manual intervention)",
                    {"saga_id": instance.saga_id, "status": instance.status.value},
                )
            self.context.reach(f"terminal:{instance.status.name}")
        for saga_id, stored in self.runtime.observe().instances.items():
            if stored.status not in m.SETTLED_STATUSES:
                raise Violation("S-STEP-07", "a stored saga is not settled", {"saga_id": saga_id})
        audit_stored_rows(self, planted)  # the kinds stored only now: audit rows (S-TX-03)
        check_metrics(self)  # the metrics against the harness's ledger (S-OBS-*)
        self.release_settled()  # every finished saga goes, the others are refused (S-CAT-11)


def _same_where_shown(
    rule_id: str, what: str, expected: Mapping[str, object] | None, actual: Mapping[str, object] | None
) -> None:
    """An optional ``Observation`` field (None: the runtime does not show it, as nasaga's port)
    is compared only where both sides show it."""
    if None not in (expected, actual) and expected != actual:
        raise Violation(
            rule_id,
            f"{what} differ from the model",
            {"expected": show(dict(expected or {})), "actual": show(dict(actual or {}))},
        )
