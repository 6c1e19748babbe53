"""A database's transient answers never end a saga run as Hypothesis's flaky error (issue 19).

Found in docs/ci-gate.md's reach measurement ("Not judged: one postgres/saga run", seed 925816591)
and reproduced with two postgres/saga ``ci`` runs side by side on one private PostgreSQL: 14 of 35
runs ended ``ERROR``, "the harness failed: FlakyFailure(... SagaBackendError(ROLLED_BACK,
'statement failed'))". Every one was the stored-row audit's own write of a raw row
(``conformance/saga/_stored_rows.py``), asked four times in a row with no pause and refused each
time with a serialization failure (PostgreSQL's SSI, beside the other run's writes in the shared
tables); 4798 statements were refused in those runs, none of them a BEGIN. No replay meets the
same refusals, so Hypothesis saw an example fail once and pass when run again, or, when the
replayed program met such an error at an earlier step than the run it followed, data generation
that "stopped drawing earlier" (``FlakyStrategyDefinition``). What these tests pin:

* the audit asks again pausing between attempts (``_base.asking_again``), and refused on every
  attempt it is an environment error (exit 2, one line), never "the harness failed";
* any read the database refused (or could not answer) on every attempt that escapes a step on a
  database other sessions write is an environment error (``SagaMachineBase.environment_reason``);
* an environment error behind Hypothesis's flaky complaint is still reported as one
  (``conformance._runner``);
* a BEGIN the database refused is logged as a refused transaction, so the unit's ``RolledBack``
  is settled as the database's refusal (S-TX-01) instead of judged against the model.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import rule

from conformance._machine import ConformanceMachine, RunContext, SuiteStats, step
from conformance._report import Verdict
from conformance._runner import RunOptions, run_suite
from conformance._suites import BackendUnderTest, suite_named
from conformance._violations import HarnessEnvironmentError
from conformance.saga import _base as base
from conformance.saga._port import TransactionLog
from conformance.saga._timing import TimedBackend
from impls.saga import SagaBackendError, SagaBackendErrorKind
from impls.saga._unit import MAX_ATTEMPTS
from impls.saga.memory._backend import MemorySagaBackend, MemoryTransaction
from impls.saga_inspect import MemorySagaInspector
from impls.sql._inspect import SqlSagaInspector
from impls.sql._server import Contention, ServerSagaBackend
from tests._planted import bare_suite

HERE = "tests.conformance.test_saga_no_flaky_environment"
REFUSED = SagaBackendError(SagaBackendErrorKind.ROLLED_BACK, "statement failed")
#: What the audit asked before the fix: four attempts in a row, so four refusals ended the example.
OLD_ATTEMPTS = 4


# -- a BEGIN the database refused ------------------------------------------------------------------

_begins_refused = [0]


class BeginRefused(MemorySagaBackend):
    """Refuses the next ``_begins_refused[0]`` BEGINs, as a contended server may (S-TX-01)."""

    def begin(self) -> MemoryTransaction:
        if _begins_refused[0]:
            _begins_refused[0] -= 1
            raise REFUSED
        return super().begin()


def begin_refused(namespace: str) -> MemorySagaBackend:
    return BeginRefused(namespace)


@pytest.mark.parametrize("refusals", [True, False])
def test_a_begin_the_database_refused_is_logged_as_a_refused_transaction(refusals: bool) -> None:
    log = TransactionLog()
    _begins_refused[0] = 1
    backend = TimedBackend(BeginRefused("begin"), SuiteStats(), log, refusals=refusals)
    with pytest.raises(SagaBackendError):
        backend.begin()
    assert log.refused == ([True] if refusals else [])


def _machine(factory: str) -> tuple[RunContext, Any]:
    suite = suite_named("saga")
    backend = BackendUnderTest(factory, "saga", {"backend": f"{HERE}:{factory}"}, None)
    context = RunContext("saga", factory, suite.make_target(backend))
    return context, context.machine_class(suite.machine())()


def test_a_start_whose_begin_the_database_refused_is_settled_as_rolled_back() -> None:
    """The runtime answers ``RolledBack`` for a unit whose BEGIN was refused (nothing started);
    unlogged, the model expected ``Started`` and the harness reported S-START-01 on a refusal that
    no replay meets."""
    _begins_refused[0] = 0
    context, machine = _machine("begin_refused")
    _begins_refused[0] = 1  # the start's own BEGIN (``Orchestrator.start_saga``: one unit)
    machine.first_start(key=1)
    assert _begins_refused == [0]
    assert "database-refused-every-attempt" in context.example_reached
    machine.teardown()
    assert context.last_failure is None


# -- a delivery the database refused on every attempt, before its handler ran -------------------

_claims_refused = [0]


class _ClaimRefused(MemoryTransaction):
    def claim_command(self, command_id: str) -> bool:
        if _claims_refused[0]:
            _claims_refused[0] -= 1
            raise REFUSED
        return super().claim_command(command_id)


class ClaimRefused(MemorySagaBackend):
    """Refuses the next ``_claims_refused[0]`` inbox claims: a delivery's first statement."""

    def begin(self) -> MemoryTransaction:
        return _ClaimRefused(self)


def claim_refused(namespace: str) -> MemorySagaBackend:
    return ClaimRefused(namespace)


def _refused_on_every_attempt(fate: str) -> tuple[RunContext, Any, Callable[..., None]]:
    """A machine on ``claim_refused`` whose first command was delivered (succeed, planned ``fate``)
    and refused at the inbox claim on every attempt; with ``deliver_command``'s own body."""
    _claims_refused[0] = 0
    context, machine = _machine("claim_refused")
    machine.first_start(key=1)
    machine._relay_commands(crash=False)
    assert machine.wire.commands
    _claims_refused[0] = MAX_ATTEMPTS  # every attempt of the next delivery
    deliver = base.unwrapped(type(machine).deliver_command)
    deliver(machine, index=0, decision="succeed", fate=fate, ack_lost=False)
    assert _claims_refused == [0]
    return context, machine, deliver


def test_a_delivery_refused_before_its_handler_on_every_attempt_may_observe_no_handler() -> None:
    """Two postgres/saga runs side by side: S-OBS-02, "participant_handler observed 6 attempts, the
    harness ran 10 (and up to 8 retried)", flaky. The ledger counted the handler of each delivery
    refused on every attempt as run; refused at the inbox claim, it never ran."""
    context, machine, _ = _refused_on_every_attempt("committed")
    assert "database-refused-every-attempt" in context.example_reached
    machine.teardown()  # quiescence checks the metrics against the ledger (S-OBS-02)
    assert context.last_failure is None


@pytest.mark.parametrize("fate", ["unknown_not_applied", "rolled_back", "committed", "unknown_applied"])
def test_a_delivery_refused_on_every_attempt_spends_its_budget_under_any_planned_fate(fate: str) -> None:
    """S-PART-04, S-TX-01: a delivery the database refused on every attempt never reached COMMIT, so
    its planned fate never came into play: it is one rolled-back try, which the participant counts
    against the transient budget. Settled only under a fate that sends COMMIT, a delivery planned
    "unknown, not applied" went back to the model's state before it (no try counted), and the next
    transient failure dead-lettered in the runtime but not in the model (two postgres/saga runs side
    by side: S-PART-01, model ``RolledBack()``, runtime ``DeadLettered(failures=2)``)."""
    context, machine, deliver = _refused_on_every_attempt(fate)
    # The budget is 2 (``_world.participant_config``): the first transient failure dead-letters.
    deliver(machine, index=0, decision="transient_failure", fate="committed", ack_lost=False)
    assert "database-refused-every-attempt" in context.example_reached
    machine.teardown()
    assert context.last_failure is None


# -- the stored-row audit's own reads and writes ------------------------------------------------


Refuses = Callable[[type[Any], str, int], list[int]]


@pytest.fixture(name="inspector_refuses")
def _inspector_refuses(monkeypatch: pytest.MonkeyPatch) -> Iterator[Refuses]:
    """``inspector_refuses(cls, method, n)``: ``cls.method`` refused ``n`` times, then as it was."""

    def arm(cls: type[Any], method: str, times: int) -> list[int]:
        left = [times]
        original = getattr(cls, method)

        @functools.wraps(original)
        def refused(self: Any, *args: Any) -> Any:
            if left[0]:
                left[0] -= 1
                refuse(self)
            return original(self, *args)

        monkeypatch.setattr(cls, method, refused)
        return left

    def refuse(inspector: Any) -> None:
        backend = getattr(inspector, "_backend", None)
        if isinstance(backend, ServerSagaBackend):
            # The driver's own serialization failure instead of the UPDATE (the driver door): the
            # backend classifies it, as it did PostgreSQL's beside another run.
            backend.faults.statements.append(Contention.SERIALIZATION_FAILURE)
            return
        raise REFUSED

    yield arm


def memory(namespace: str) -> MemorySagaBackend:
    return MemorySagaBackend(namespace)


def postgres(namespace: str) -> ServerSagaBackend:
    from impls.sql import open_postgres_saga_backend

    return open_postgres_saga_backend(namespace)


#: (factory, its inspector, the inspector call refused). The memory backend keeps objects, so its
#: audit reads the stored form and plants nothing; on PostgreSQL the write of the malformed row is
#: the call that met the refusals in the side-by-side runs.
AUDITED = [
    pytest.param("memory", MemorySagaInspector, "read_raw", id="memory-read"),
    pytest.param(
        "postgres", SqlSagaInspector, "write_raw", id="postgres-write", marks=pytest.mark.service("postgres")
    ),
    pytest.param(
        "postgres", SqlSagaInspector, "read_raw", id="postgres-read", marks=pytest.mark.service("postgres")
    ),
]


@pytest.mark.parametrize(("factory", "inspector", "method"), AUDITED)
def test_the_audit_asks_again_past_four_refusals_of_its_own_call(
    factory: str, inspector: type[Any], method: str, inspector_refuses: Refuses
) -> None:
    context, machine = _machine(factory)
    machine.first_start(key=1)
    left = inspector_refuses(inspector, method, OLD_ATTEMPTS)
    machine.teardown()  # quiescence runs the audit: its first such call meets the refusals
    assert left == [0]
    assert context.last_failure is None and context.step_error is None
    assert "stored-form-compared" in context.example_reached
    if inspector.decodes:
        assert "corrupt-row-refused" in context.example_reached


@pytest.mark.parametrize(("factory", "inspector", "method"), AUDITED)
def test_an_audit_call_refused_on_every_attempt_is_an_environment_error(
    factory: str,
    inspector: type[Any],
    method: str,
    inspector_refuses: Refuses,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(base, "ASK_AGAIN_PAUSE_S", 0.0)  # the attempts, not their pauses
    context, machine = _machine(factory)
    machine.first_start(key=1)
    inspector_refuses(inspector, method, 10**6)
    with pytest.raises(HarnessEnvironmentError, match=f"stored-row audit's own {method} on every one"):
        machine.teardown()
    assert context.last_failure is None
    assert isinstance(context.step_error, HarnessEnvironmentError)


# -- a read refused on every attempt, escaped from a step -------------------------------------


@pytest.mark.parametrize(
    ("in_process", "raised"), [(False, HarnessEnvironmentError), (True, SagaBackendError)]
)
def test_a_read_refused_on_every_attempt_is_the_environments_where_others_write(
    in_process: bool, raised: type[Exception]
) -> None:
    """``read_only`` raises once every attempt was refused (S-TX-01: queries have no fate); out of a
    step that is no verdict on a shared database. Where nothing else writes, the backend's own."""
    suite = suite_named("saga")
    backend = BackendUnderTest("memory", "saga", {"backend": f"{HERE}:memory"}, None, in_process=in_process)
    context = RunContext("saga", "memory", suite.make_target(backend))

    class Refused(context.machine_class(suite.machine())):  # type: ignore[misc]
        @step
        def read_refused(self) -> None:
            raise REFUSED

    machine = Refused()
    with pytest.raises(raised):
        machine.read_refused()
    assert isinstance(context.step_error, raised)
    machine.teardown()
    assert context.last_failure is None


# -- an environment error behind Hypothesis's flaky complaint ---------------------------------------

_programs: list[tuple[int, ...]] = []


class _ReplayMeetsTheOutage(ConformanceMachine):
    """Each example's program, recorded; a step whose program so far is a strict prefix of an
    earlier example's meets an environment error: a replayed prefix that the run before it went
    past, as the contended server's refusal met a replay and not the run it followed."""

    def __init__(self) -> None:
        super().__init__()
        _programs.append(())

    @rule(n=st.integers(0, 3))
    @step
    def poke(self, n: int) -> None:
        now = _programs[-1] = (*_programs[-1], n)
        if any(len(p) > len(now) and p[: len(now)] == now for p in _programs[:-1]):
            raise HarnessEnvironmentError("the database refused the harness's read on every attempt")


def test_an_environment_error_behind_a_flaky_data_generation_is_reported_as_one() -> None:
    _programs.clear()
    suite = bare_suite("replayed", "a machine whose replayed prefixes meet an outage", _ReplayMeetsTheOutage)
    options = RunOptions(seed=1, examples=20, failure_dir=None, database_dir=None)
    result = run_suite(suite, BackendUnderTest("replayed", "commit", {}, None), options)
    assert result.verdict is Verdict.ERROR
    assert result.error == "the database refused the harness's read on every attempt", result.error
