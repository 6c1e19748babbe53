"""Management actions and the business query API beside the model (S-MGT-01..10).

``manage`` draws an action (or a read: ``query_sagas``), an operator (fully permitted, without
the action's permission, or
with an invalid context), an expectation (none, the current revisions, a stale one), a fresh or
a reused operation id, the saga's own tenant or another, and a COMMIT fate; sagas in manual
intervention are preferred for the retries and the close, paused ones for resume, so every
action is applied as well as refused. ``query_sagas`` reads one saga, a page of the tenant's
sagas by status, or a saga's audit trail, and compares it with the model's answer. At quiescence
the operator resumes every paused saga (``resume_all``), so results and timers flow again.
"""

from __future__ import annotations

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from conformance._machine import step
from conformance._violations import HarnessEnvironmentError
from conformance.saga import _world as w
from conformance.saga._base import ASK_AGAIN_TRIES, SagaMachineBase, asking_again, fates, indexes, unwrapped
from model import saga as m

OPERATOR = m.ManagementContext("ops-1", "harness: operator action")
#: Who acts: the full operator, one without any permission, one with no reason (S-MGT-01).
CONTEXTS = {
    "operator": OPERATOR,
    "unpermitted": m.ManagementContext("ops-2", "no rights", frozenset({m.Permission.READ_AUDIT})),
    "no-reason": m.ManagementContext("ops-3", ""),
}
OTHER_TENANT = "other-tenant"
RECOVERY = frozenset(
    {
        m.ManagementAction.RETRY_COMPENSATION,
        m.ManagementAction.RETRY_RESOLUTION,
        m.ManagementAction.MANUAL_CLOSE,
    }
)

_RULE = {
    m.ManagementContextInvalid: "S-MGT-01",
    m.PermissionDenied: "S-MGT-01",
    m.ManagedSagaNotFound: "S-MGT-02",
    m.ManagementReplayed: "S-MGT-03",
    m.OperationConflict: "S-MGT-03",
    m.StaleSnapshot: "S-MGT-04",
}
_ACTION_RULE = {
    m.ManagementAction.PAUSE: "S-MGT-05",
    m.ManagementAction.RESUME: "S-MGT-05",
    m.ManagementAction.RETRY_RESOLUTION: "S-MGT-06",
    m.ManagementAction.RETRY_COMPENSATION: "S-MGT-07",
    m.ManagementAction.MANUAL_CLOSE: "S-MGT-08",
}


class ManagementRules(SagaMachineBase):
    def __init__(self) -> None:
        super().__init__()
        #: Operation ids drawn so far (reused ones must replay or conflict, S-MGT-03).
        self.operations: list[str] = []

    def _target(self, action: m.ManagementAction, index: int) -> str | None:
        """A saga the action can apply to when there is one, else any saga."""
        ids = sorted(self.model.instances)
        if not ids:
            return None
        if action is m.ManagementAction.RESUME:
            fitting = [s for s in ids if m.is_paused(self.model, s)]
        elif action is m.ManagementAction.PAUSE:
            fitting = [s for s in ids if not m.is_paused(self.model, s)]
        else:
            manual = m.SagaStatus.AWAITING_MANUAL_INTERVENTION
            fitting = [s for s in ids if self.model.instances[s].status is manual]
        pool = fitting if fitting and index % 4 else ids
        return pool[index % len(pool)]

    def _manage(self, request: m.Manage, expect: str = "none") -> object:
        before = self.model
        self.model, expected = m.manage(before, request)
        actual = self.runtime.manage(request, expect)
        self.fate = m.CommitFate.COMMITTED
        if self.database_refused(request.commit, actual):
            refused = attrs.evolve(request, commit=m.CommitFate.ROLLED_BACK)
            self.model, expected = m.manage(before, refused)
            self.refated()
        rule_id = _RULE.get(type(expected), _ACTION_RULE[request.action])
        self.expect(rule_id, expected, actual)
        if isinstance(expected, m.ManagementApplied):
            self.context.reach(f"manage:{request.action.value}:applied")
        elif isinstance(expected, m.RolledBack) and request.action is m.ManagementAction.MANUAL_CLOSE:
            self.context.reach("manage:manual_close:not-committed")
        else:
            self.context.reach(f"manage:{type(expected).__name__}")
        return expected

    @precondition(lambda self: self.caps.management)
    @rule(
        action=st.sampled_from([a.value for a in m.ManagementAction] + ["get", "list", "audit"]),
        index=indexes,
        who=st.sampled_from(["operator"] * 8 + ["unpermitted", "no-reason"]),
        expect=st.sampled_from(["none"] * 3 + ["current", "stale"]),
        reuse=st.sampled_from([False] * 4 + [True]),
        tenant=st.sampled_from(["own"] * 9 + ["other"]),
        fate=fates,
    )
    @step
    def manage(
        self,
        action: str,
        index: int,
        who: str,
        expect: str,
        reuse: bool,
        tenant: str,
        fate: str,
    ) -> None:
        if action in ("get", "list", "audit"):  # a read of the business query API instead
            if self.caps.business_queries:
                self.query_sagas(action, index, "unpermitted" if who == "unpermitted" else "operator")
            return
        kind = m.ManagementAction(action)
        if kind in RECOVERY and not self.caps.recovery_actions:
            kind = m.ManagementAction.PAUSE if index % 2 else m.ManagementAction.RESUME
        saga_id = self._target(kind, index)
        if saga_id is None:
            return
        instance = self.model.instances[saga_id]
        control = m.control_of(self.model, saga_id)
        expectation = {
            "none": m.NO_EXPECTATION,
            "current": m.Expectation(instance.revision, control.revision),
            "stale": m.Expectation(instance.revision - 1, control.revision),
        }[expect]
        if reuse and self.operations:
            operation_id = self.operations[index % len(self.operations)]
        else:
            operation_id = f"op-{len(self.operations) + 1}"
            self.operations.append(operation_id)
        request = m.Manage(
            kind,
            CONTEXTS[who],
            instance.definition.tenant if tenant == "own" else OTHER_TENANT,
            saga_id,
            operation_id,
            expectation,
            self.now,
        )
        if self._close_cannot_commit(request):
            self._manage(attrs.evolve(request, commit=m.CommitFate.ROLLED_BACK), expect)
            return
        self._manage(attrs.evolve(request, commit=self._set_fate(fate)), expect)

    @step
    def manage_walk(self) -> None:
        """Once per example, from the opening (``SagaMachine.opening``), on the first saga: every
        refusal a management request can meet, each from one deviation of a valid pause (no
        permission, no reason: S-MGT-01; another tenant: S-MGT-02; a stale expectation: S-MGT-04),
        then the pause applied, replayed under its operation id (S-MGT-03), refused a second time
        (a precondition) and the resume applied (S-MGT-05). ``manage`` draws each of these in a
        few per cent of examples, too rarely for a ci run to count on (docs/ci-gate.md)."""
        manage = unwrapped(type(self).manage)
        pause, resume = m.ManagementAction.PAUSE.value, m.ManagementAction.RESUME.value
        for who, expect, tenant in (
            ("unpermitted", "none", "own"),
            ("no-reason", "none", "own"),
            ("operator", "none", "other"),
            ("operator", "stale", "own"),
            ("operator", "current", "own"),
        ):
            manage(self, pause, 1, who, expect, False, tenant, "committed")
        applied = len(self.operations) - 1
        manage(self, pause, applied, "operator", "current", True, "own", "committed")
        manage(self, pause, 0, "operator", "none", False, "own", "committed")
        manage(self, resume, 1, "operator", "none", False, "own", "committed")

    def _close_cannot_commit(self, request: m.Manage) -> bool:
        """True for a close the model would apply on a runtime whose close never commits
        (``RuntimeCapabilities.manual_close`` off: finding N-01, nasaga-pgsql's guard cannot decode
        its own ``EXISTS``). Such a close is still asked for, with the model told its unit rolls
        back: the runtime must run every check before the write (permission, tenant, replay,
        expectation, status, all compared on the refusals), then answer "not committed" and leave
        everything as it was: the instance in manual intervention, no operation or audit row (the
        after-step read-back, S-TX-01, S-MGT-09). Its refusals are asked for like any other."""
        if request.action is not m.ManagementAction.MANUAL_CLOSE or self.caps.manual_close:
            return False
        _, probe = m.manage(self.model, request)
        return isinstance(probe, m.ManagementApplied)

    def query_sagas(self, kind: str, index: int, who: str) -> None:
        """The business query API vs the model (S-MGT-09, S-MGT-10)."""
        ids = sorted(self.model.instances)
        context = CONTEXTS[who]
        tenant = w.KEY.tenant
        saga_id = ids[index % len(ids)] if ids else "absent"
        if kind == "get":
            expected: object = m.get_saga(self.model, m.GetSaga(context, tenant, saga_id))
            actual = self.runtime.get_saga(m.GetSaga(context, tenant, saga_id))
        elif kind == "list":
            statuses = [
                None,
                frozenset({m.SagaStatus.AWAITING_MANUAL_INTERVENTION}),
                frozenset(m.SETTLED_STATUSES),
            ]
            request = m.ListSagas(
                context, tenant, statuses[index % 3], None, 1 + index % 3
            )  # index 0: all, 1 a page
            expected = m.list_sagas(self.model, request)
            actual = self.runtime.list_sagas(request)
            if isinstance(expected, m.SagaPage) and expected.next_after is not None:
                request = m.ListSagas(context, tenant, request.statuses, expected.next_after, request.limit)
                self.expect("S-MGT-10", expected, actual)
                expected, actual = m.list_sagas(self.model, request), self.runtime.list_sagas(request)
                self.context.reach("query:next-page")
        else:
            expected = m.read_audit(self.model, m.ReadAudit(context, tenant, saga_id))
            actual = self.runtime.read_audit(m.ReadAudit(context, tenant, saga_id))
            if isinstance(expected, m.AuditTrail) and expected.management:
                self.context.reach("query:audit-with-records")
        self.expect("S-MGT-09" if kind == "audit" else "S-MGT-10", expected, actual)

    def pause_one(self) -> None:
        """The operator pauses the first unsettled saga that is not paused, with the revisions it
        reads (S-MGT-04, S-MGT-05), so that every example applies a pause and its resume; the
        control rows are then read back against the model (``after_step``)."""
        if not self.caps.management:
            return
        for saga_id in sorted(self.model.instances):
            instance = self.model.instances[saga_id]
            if instance.status in m.SETTLED_STATUSES or m.is_paused(self.model, saga_id):
                continue
            control = m.control_of(self.model, saga_id)
            request = m.Manage(
                m.ManagementAction.PAUSE,
                OPERATOR,
                instance.definition.tenant,
                saga_id,
                f"pause-{saga_id}-{control.revision}",
                m.Expectation(instance.revision, control.revision),
                self.now,
            )
            self._manage(request, "current")
            self.after_step()
            return

    def resume_all(self) -> None:
        """The operator resumes every paused saga (at quiescence: results and timers flow again)."""
        if not self.caps.management:
            return
        for saga_id in sorted(self.model.instances):
            if not m.is_paused(self.model, saga_id):
                continue
            for _ in asking_again():
                # A contended database may refuse the resume on every attempt of one call (S-TX-01):
                # the operator asks again, since a saga left paused defers its results for ever.
                tenant = self.model.instances[saga_id].definition.tenant
                operation_id = f"resume-{saga_id}-{m.control_of(self.model, saga_id).revision}"
                self._manage(
                    m.Manage(
                        m.ManagementAction.RESUME, OPERATOR, tenant, saga_id, operation_id, now_ms=self.now
                    )
                )
                if not m.is_paused(self.model, saga_id):
                    break  # checked after the call: asking_again pauses before the next attempt
            if m.is_paused(self.model, saga_id):
                raise HarnessEnvironmentError(
                    f"the database refused the operator's resume of a paused saga {ASK_AGAIN_TRIES} times"
                )

    def operate_manual(self) -> bool:
        """At quiescence the operator handles every saga awaiting manual intervention by its
        evidence: an unconfirmed compensation is retried, an unresolved effect of a resolving step
        polled again, anything else closed; then replays its first action (S-MGT-03, -06..08).
        True when something was dispatched or changed."""
        if not (self.caps.management and self.caps.recovery_actions):
            return False
        manual = m.SagaStatus.AWAITING_MANUAL_INTERVENTION
        applied: list[m.Manage] = []
        for saga_id in sorted(self.model.instances):
            instance = self.model.instances[saga_id]
            if instance.status is not manual:
                continue
            found = m.manual_step(instance.steps)
            artifact = self.model.catalog.entries[instance.definition].artifact
            action = m.ManagementAction.MANUAL_CLOSE
            if found is not None and found[1] is m.StepStatus.COMPENSATION_UNCONFIRMED:
                action = m.ManagementAction.RETRY_COMPENSATION
            elif found is not None and artifact.steps[found[0]].uncertain_policy is m.UncertainPolicy.RESOLVE:
                action = m.ManagementAction.RETRY_RESOLUTION
            operation_id = f"settle-{action.value}-{saga_id}"
            request = m.Manage(
                action, OPERATOR, instance.definition.tenant, saga_id, operation_id, now_ms=self.now
            )
            if self._close_cannot_commit(request):
                # Asked, and rolled back (N-01): it stays awaiting manual intervention, settled
                # (S-STEP-07).
                self._manage(attrs.evolve(request, commit=m.CommitFate.ROLLED_BACK))
                continue
            if isinstance(self._manage(request), m.ManagementApplied):
                applied.append(request)
        if applied:
            self._manage(applied[0])  # the same operation again: replayed, nothing written
        self.after_step()
        return bool(applied)

    def query_all(self) -> None:
        """Every saga's view and audit trail, and the tenant's sagas page by page, vs the model."""
        if not (self.caps.management and self.caps.business_queries):
            return
        for index in range(len(self.model.instances)):
            self.query_sagas("get", index, "operator")
            self.query_sagas("audit", index, "operator")
        self.query_sagas("list", 0, "operator")
