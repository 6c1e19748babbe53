"""What every saga rule group shares: the runtime under test, the model beside it, the wire, the clock.

The rule groups (``_starts``, ``_routes_rules``, ``_deliveries``, ``_timers``) each subclass
``SagaMachineBase``; ``_machine.SagaMachine`` composes them with the checks (``_checks``).
Hypothesis collects rules across the whole class, sorted by name, so the split changes no
program a seed draws.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import attrs
from hypothesis import strategies as st

from conformance._faults import FaultKind
from conformance._machine import ConformanceMachine
from conformance._violations import Violation
from conformance.saga import _world as w
from conformance.saga._cleanup_judge import SagaCleanupJudge
from conformance.saga._faults import COMMIT_ROLLED_BACK, COMMIT_UNKNOWN
from conformance.saga._metrics_checks import observed
from conformance.saga._port import RuntimeCapabilities, SagaRuntime
from impls.saga import SagaBackendError, SagaBackendErrorKind
from model import saga as m

#: What a database that other sessions write answers a read on its own (S-TX-01: contention; or
#: it went away): the runtime's queries and the harness's reads raise it once every attempt was
#: refused. Escaped from a step, it is the environment's (``SagaMachineBase.environment_reason``).
TRANSIENT = frozenset({SagaBackendErrorKind.ROLLED_BACK, SagaBackendErrorKind.UNAVAILABLE})

FATES = {
    "committed": m.CommitFate.COMMITTED,
    "rolled_back": m.CommitFate.ROLLED_BACK,
    "unknown_applied": m.CommitFate.UNKNOWN_APPLIED,
    "unknown_not_applied": m.CommitFate.UNKNOWN_NOT_APPLIED,
}
fates = st.sampled_from(["committed"] * 5 + ["rolled_back", "unknown_applied", "unknown_not_applied"])
indexes = st.integers(0, 7)


#: Times the harness asks again for one of its own writes (the catalog set-up, the operator's
#: resume at quiescence) that the database refused on every attempt, pausing ``ASK_AGAIN_PAUSE_S``
#: doubling between them (about 6 s in all): two runs side by side on one server's tables refused
#: five in a row without a pause (serializable scans conflict until one side lets the other finish).
ASK_AGAIN_TRIES = 8
ASK_AGAIN_PAUSE_S = 0.05


def asking_again() -> Iterator[int]:
    """The attempt numbers of a harness write the database may refuse (S-TX-01), pausing before
    every attempt after the first; the caller breaks out once one was not refused."""
    for attempt in range(ASK_AGAIN_TRIES):
        if attempt:
            time.sleep(ASK_AGAIN_PAUSE_S * 2 ** (attempt - 1))
        yield attempt


def unwrapped(method: Any) -> Any:
    # Quiescence drives the rules' bodies without recording them as program steps.
    while hasattr(method, "__wrapped__"):
        method = method.__wrapped__
    return method


def show(value: Any) -> str:
    return repr(value)[:600]


class SagaMachineBase(ConformanceMachine):
    def __init__(self) -> None:
        super().__init__()
        ns = self.context.new_namespace()
        self.fate = m.CommitFate.COMMITTED
        runtime = self.context.target.open(ns, self._fate, self.context.stats)
        self.caps: RuntimeCapabilities = runtime.capabilities
        details = self.context.stats.details
        details["runtime-lacks"] = ",".join(self.caps.missing())
        for name, value in attrs.asdict(self.caps).items():
            details[f"runtime:{name}"] = str(value)  # what FaultKind.requires reads
        self.model = m.OrchestratorStore(
            trusted_producers=frozenset(w.OWNERS),
            quota_limit=w.QUOTA_LIMIT if self.caps.quota else None,
            quota_mode=m.QuotaMode.IN_FLIGHT if self.caps.quota_in_flight else m.QuotaMode.ADMITTED,
            operation_scope=m.OperationScope.SAGA
            if self.caps.operation_ids_per_saga
            else m.OperationScope.FAMILY,
        )
        budget = {} if self.caps.dead_letters else {"transient_failure_budget": w.NO_DEAD_LETTERS}
        self.model_parts = {
            owner: m.ParticipantState(w.participant_config(owner, **budget)) for owner in w.OWNERS
        }
        # The ledger starts from this model: a first unit the database refuses sends the model
        # back to it, with its quota limit and trusted producers (S-TX-01, docs/faults.md).
        self.runtime: SagaRuntime = observed(self, runtime)
        #: The runtime as opened, not observed: the stored-row audit reads its backends (S-TX-03).
        self.raw_runtime: object = runtime
        self.results_published: set[str] = set()
        self.wire = w.Wire()
        self.now = 0
        self.leases: dict[str, tuple[str, int]] = {}
        #: Route generations each replica learnt from its receipts, oldest first.
        self.generations: dict[m.CapabilityKey, list[int]] = {}
        #: Only catalog and route steps write definition and capability rows; the after-step
        #: comparison of those rows runs after them (and at quiescence), not after every step.
        self.catalog_touched = True
        self.route_walked = False  # CatalogRules.route_walk: once per example
        #: Calls the database refused on every attempt, the model sent back (``undo_if_refused``).
        self.refusals = 0

    def _fate(self, _unit: str) -> m.CommitFate:
        fate, self.fate = self.fate, m.CommitFate.COMMITTED
        return fate

    def _allows(self, kind: FaultKind) -> bool:
        return self.context.faults.allows(kind.name)

    def _set_fate(self, name: str) -> m.CommitFate:
        """The fate the next COMMIT meets; only a runtime whose COMMITs the harness decides
        in-process takes an injected one (``RuntimeCapabilities.injectable_fates``)."""
        fate = FATES[name]
        kind = {m.CommitFate.COMMITTED: None, m.CommitFate.ROLLED_BACK: COMMIT_ROLLED_BACK}.get(
            fate, COMMIT_UNKNOWN
        )
        if kind is not None and not (self.caps.injectable_fates and self._allows(kind)):
            fate = m.CommitFate.COMMITTED
        elif kind is not None:
            self.context.inject(kind.name)
        self.fate = fate
        return fate

    def database_refused(self, commit: m.CommitFate, actual: object, refused: object | None = None) -> bool:
        """S-TX-01: whether the unit the runtime just ran (planned fate ``commit``) was rolled back
        by the database itself, on every attempt.

        A database refuses a COMMIT with a definite rollback (PostgreSQL's serialization failure
        ``40001`` at COMMIT, a deadlock, MariaDB's lock wait timeout): nothing of the transaction
        applies, and by the database's own semantics that is a rollback, not an unknown outcome
        (the seed: "COMMIT 发出后的成功或结果不明继续按数据库事务语义返回"; only an *unconfirmable*
        commit must never become an ordinary retry). The runtime may run the unit again, a bounded
        number of times (``impls.saga.run_unit``); when every attempt was refused it answers
        ``RolledBack``, which is true of what is durable. So the unit is settled as ``ROLLED_BACK``,
        whatever fate was planned, when the runtime says rolled back *and* the last transaction it
        began in the call was refused by the database (the storage port's ``TransactionLog``, kept
        by the metrics ledger): an attempt the database refused never met its fate, and a refusal
        at COMMIT replaced it (an answer to be lost after a COMMIT the database refused instead).
        Settled only under the fates that send COMMIT, a delivery planned "unknown, not applied"
        and refused on every attempt went back to the model's state before it, while the
        participant counted the try against its transient budget (S-PART-04): the next transient
        failure dead-lettered in the runtime only. The after-step comparison then reads every row
        back: nothing of the unit may show. A runtime that owns its connections (no log) gets no
        such allowance.

        ``refused`` is the model's outcome of the call under the fate "rolled back", when that is
        not ``RolledBack`` itself: a participant whose delivery fails past its transient budget
        answers ``DeadLettered`` (S-PART-04), whoever rolled the try back (the harness's fate or
        the database on every attempt).
        """
        # A dead letter is recorded by a transaction of its own after the refused try.
        if self.refused_before(anywhere=isinstance(refused, m.DeadLettered)) is None:
            return False
        if actual != self.runtime.project(m.RolledBack() if refused is None else refused):
            return False
        self.note("the database refused the unit's last attempt too: settled as rolled back (S-TX-01)")
        self.context.reach("database-refused-every-attempt")
        return True

    def refused_before(
        self, anywhere: bool = False
    ) -> tuple[m.OrchestratorStore, dict[str, m.ParticipantState]] | None:
        """The model's state before the last call, if the database refused that call's last
        transaction (``anywhere``: any of its transactions; ``_metrics_checks.Ledgered.refused_call``);
        None when it did not, or when the runtime keeps no transaction log."""
        refused_call = getattr(self.runtime, "refused_call", None)
        return refused_call(anywhere) if callable(refused_call) else None

    def undo_if_refused(self) -> bool:
        """After a runtime call that answers nothing (a publication mark): if the database refused
        its unit on every attempt, nothing of it applied, and the model goes back to its state
        before the call (S-TX-01, as in ``database_refused``)."""
        before = self.refused_before()
        if before is None:
            return False
        self.model, self.model_parts = before
        self.refusals += 1
        self.refated()
        self.note("the database refused every attempt of the unit: nothing of it applied (S-TX-01)")
        self.context.reach("database-refused-every-attempt")
        return True

    def refated(self) -> None:
        """The rule settled the model again after ``database_refused``: the metrics ledger
        (``_metrics_checks.observed``) keeps the model's state for the next call, so it reads it again."""
        resync = getattr(self.runtime, "resync", None)
        if callable(resync):
            resync()

    def expect(self, rule_id: str, expected: object, actual: object) -> None:
        """The runtime's outcome must be the model's, at the resolution the runtime shows."""
        projected = self.runtime.project(expected)
        # Shown only when the trace is read (a failure): the outcomes are frozen values.
        self.note(lambda: f"model: {show(projected)}")
        self.note(lambda: f"runtime: {show(actual)}")
        if projected != actual and actual == self.runtime.project(m.RolledBack()) and self.undo_if_refused():
            # A unit with no fate in the model (a claim, a catalog write) that the database refused
            # on every attempt: nothing of it happened (S-TX-01).
            return
        if projected != actual:
            raise Violation(
                rule_id,
                "the runtime's outcome differs from the model's",
                {"expected": show(projected), "actual": show(actual)},
            )

    def environment_reason(self, error: Exception) -> str | None:
        """A ``SagaBackendError`` the database answered on every attempt of a read (refused, or
        unreachable) on a database that other sessions write is no verdict: two runs side by side
        on one PostgreSQL refused the stored-row audit's write four times in a row, and the
        example's end was "the harness failed" that no replay reproduced (Hypothesis's
        ``FlakyFailure``, or ``FlakyStrategyDefinition`` when the replayed program ended earlier
        than the run it followed). On a backend whose state lives in its object nothing else
        writes, so such an error is the backend's own, left to fail as it does."""
        if not (isinstance(error, SagaBackendError) and error.kind in TRANSIENT):
            return None
        if not getattr(self.raw_runtime, "refusals", False):
            return None
        return (
            f"the database answered {error.kind.value} ({error.detail}) on every attempt of a call "
            "the harness had to complete (other sessions writing its tables, or an outage): no verdict"
        )

    def cleanup_judge(self) -> SagaCleanupJudge:
        """S-TX-04: a dropped backend namespace, opened again, lists nothing (``_cleanup_judge``)."""
        return SagaCleanupJudge(self.context.reach)

    def close(self) -> None:
        self.runtime.close()
