"""The saga suite catches every shipped broken runtime (examples/broken_saga_runtimes.py: metrics that
lie, a control revision skipped, references never released) within the ci profile, names the rule it
broke, shrinks the program to a few steps, and its
failure file replays to the same violation, from Python and from ``conformance replay``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conformance import FailureFile, Report, Verdict, replay, run_conformance, run_matrix
from conformance._machine import RunContext
from conformance._suites import BackendUnderTest, suite_named
from conformance.cli import main
from conformance.saga import _world as w
from conformance.saga._base import unwrapped
from examples.broken_saga_runtimes import BROKEN_SAGA_RUNTIMES
from examples.contended_saga_backend import BURST, BURST_EVERY, REFUSE_STATEMENT_EVERY, contended
from impls.saga import SagaBackendError, SagaBackendErrorKind, read_only
from impls.saga._unit import MAX_ATTEMPTS
from model import saga as m
from tests._planted import PLANTED_SHRINK_S, planted_options

# Fixed seeds whose search and shrink take few examples.
SEEDS = {
    "retry_counted_twice": 8,  # seed 1 caught it too, at 15 CPU-s against 5
    "labels_by_tenant": 1,
    "stage_per_unit": 0,
    "pause_skips_a_revision": 1,
    "references_never_released": 1,
}

#: Where each is caught: the metrics and the rows read back at quiescence; the reference walk is
#: one rule of its own (``retire_spare``).
CAUGHT_AT = {"references_never_released": "step 1"}

RunBroken = Callable[[str], Report]


@pytest.fixture(scope="module")
def run_broken(tmp_path_factory: pytest.TempPathFactory) -> RunBroken:
    """Runs the saga suite on a broken runtime once per module; the tests read facets of that run."""
    reports: dict[str, Report] = {}

    def run(factory: str) -> Report:
        if factory not in reports:
            path = f"examples.broken_saga_runtimes:{factory}"
            backend = BackendUnderTest(factory, "saga", {"runtime": path})
            failures = tmp_path_factory.mktemp(factory)
            options = planted_options(SEEDS[factory], failures)
            reports[factory] = run_matrix([(backend, suite_named("saga"))], options)
        return reports[factory]

    return run


@pytest.mark.parametrize(("factory", "rule_id"), sorted(BROKEN_SAGA_RUNTIMES.items()))
def test_broken_saga_runtime_is_caught_and_replays(
    factory: str, rule_id: str, run_broken: RunBroken, capsys: pytest.CaptureFixture[str]
) -> None:
    report = run_broken(factory)
    (result,) = report.results
    assert result.verdict is Verdict.VIOLATION, report.details()
    assert result.failure is not None
    assert result.failure.rule_id == rule_id, report.details()
    assert 1 <= len(result.failure.program) <= 6, report.details()
    at = CAUGHT_AT.get(factory, "quiescence")
    assert result.failure.at == at
    assert report.exit_code == 1

    path = result.failure.failure_file
    assert path is not None and path.exists()
    saved = FailureFile.read(path)
    assert saved.rule_id == rule_id
    assert saved.factories == {"runtime": f"examples.broken_saga_runtimes:{factory}"}
    replayed = replay(saved)
    assert replayed.reproduced and replayed.same_rule, replayed.describe()
    assert main(["replay", str(path), "--trust", "examples.broken_saga_runtimes"]) == 1
    assert f"reproduced {rule_id} at {at}" in capsys.readouterr().out


def test_a_backend_whose_database_refuses_some_commits_passes() -> None:
    """The correct runtime on a database that refuses every third COMMIT and the first statement of
    every fifth transaction, reads included (as contention does): it runs each refused unit and
    read again under the same fate, and the ledger counts every attempt it ran at the storage
    port, so no metric, outcome or row differs (S-OBS-02, S-OBS-03, S-TX-01)."""
    report = run_conformance(
        "examples.contended_saga_backend:contended",
        suites=("saga",),
        seed=6,
        database_dir=None,
        failure_dir=None,
    )
    (result,) = report.results
    assert result.verdict is Verdict.PASS, report.details()


def test_the_contended_database_refuses_a_statement_and_a_read_runs_again() -> None:
    """``contended`` refuses the first statement of every fifth transaction with a definite
    rollback, reads too (PostgreSQL's SSI may pick a read as its victim), and only the first:
    ``read_only`` runs the refused read again and answers."""
    backend = contended("contended-statement")
    try:
        for _ in range(REFUSE_STATEMENT_EVERY - 1):
            backend.begin().rollback()
        tx = backend.begin()
        with pytest.raises(SagaBackendError) as refused:
            tx.list_instances()
        assert refused.value.kind is SagaBackendErrorKind.ROLLED_BACK
        tx.rollback()
        next_one = backend.begin()  # the sixth transaction: not refused
        assert next_one.list_instances() == ()
        next_one.rollback()
        for _ in range(REFUSE_STATEMENT_EVERY - 1):
            backend.begin().rollback()
        assert read_only(backend, lambda tx: tx.list_instances()) == ()
    finally:
        backend.close()


@pytest.mark.parametrize("seed", [1, 6])
def test_a_unit_the_database_refuses_on_every_attempt_is_settled_as_rolled_back(seed: int) -> None:
    """A database that refuses three COMMITs in a row now and then: a unit meeting such a burst is
    refused on every attempt and the runtime answers RolledBack, which the model takes as the
    unit's fate (S-TX-01, decided in conformance/saga/_base.database_refused); every row read back
    must still be the model's. Seed 6 once reported S-ROUTE-02 here: the harness's own planted
    route row met a burst (see the test below)."""
    report = run_conformance(
        "examples.contended_saga_backend:refused_in_bursts",
        suites=("saga",),
        seed=seed,
        examples=30,
        database_dir=None,
        failure_dir=None,
    )
    (result,) = report.results
    assert result.verdict is not Verdict.VIOLATION, report.details()
    assert "database-refused-every-attempt" in result.stats.reached, report.details()


def test_a_commit_that_applied_but_is_reported_refused_is_caught(tmp_path: Path) -> None:
    """The negative control of that allowance: a backend whose COMMIT applied and is reported as a
    definite rollback makes the runtime run the unit again on its own writes, and the rows (or
    the outcomes) show it: the allowance never hides a write."""
    report = run_conformance(
        "examples.contended_saga_backend:applied_then_refused",
        suites=("saga",),
        seed=1,
        examples=30,
        database_dir=None,
        failure_dir=tmp_path,
        shrink_budget_s=PLANTED_SHRINK_S,
    )
    (result,) = report.results
    assert result.verdict is Verdict.VIOLATION, report.details()
    assert result.failure is not None and result.failure.failure_file is not None


def _bursts_machine() -> Any:
    """A saga machine on ``refused_in_bursts``, driven step by step by the regression tests below."""
    suite = suite_named("saga")
    path = "examples.contended_saga_backend:refused_in_bursts"
    context = RunContext(
        "saga", "bursts", suite.make_target(BackendUnderTest("bursts", "saga", {"backend": path}))
    )
    return context.machine_class(suite.machine())()


def test_a_route_row_the_database_refused_on_every_attempt_is_not_planted() -> None:
    """Seed 6 of ``refused_in_bursts`` (ci profile) reported S-ROUTE-02 at quiescence on this
    program: the harness's own invalid route row (``route_walk``, S-ROUTE-04) met a burst of three
    refused COMMITs, the plant gave up with an environment error after the model already held the
    row, and the quiescence checks then ran anyway and found the row missing. The database's
    refusal is a definite rollback (S-TX-01): the row is not planted, the model goes back, the walk
    goes on; and a step stopped part-way is never judged at quiescence (``_machine.step``)."""
    machine = _bursts_machine()
    try:
        machine.first_start(key=0)
        runtime = machine.runtime._runtime
        plant_route = runtime.plant_route

        def plant_in_a_burst(route: m.CapabilityRoute) -> bool:
            # Whatever the walks wrote before, the plant's three attempts are a whole burst.
            runtime._raw["orchestrator"].commits = BURST * (BURST_EVERY - 1)
            return bool(plant_route(route))

        runtime.plant_route = plant_in_a_burst
        machine.route_walk()
        assert any("not planted" in line for line in machine.trace), machine.trace
        assert not any(key.definition == w.UPLOAD_KEY for key in machine.model.routes.routes)
    finally:
        machine.teardown()  # quiescence: every row read back is the model's


def test_a_spare_definition_the_database_refused_is_not_walked_to_retirement() -> None:
    """Seed 0 of ``refused_in_bursts`` (ci profile) raised ``KeyError`` in ``retire_spare``: the
    spare definition's publication met a burst, the runtime answered RolledBack and the model went
    back (S-TX-01), and the walk then read the spare's catalog entry as if it had been published."""
    machine = _bursts_machine()
    try:
        machine.first_start(key=0)
        orchestrator = machine.runtime._runtime._raw["orchestrator"]
        orchestrator.commits = BURST * (BURST_EVERY - 1)  # the next three COMMITs are refused
        machine.retire_spare()
        assert w.SPARE_KEY not in machine.model.catalog.entries
    finally:
        machine.teardown()


def test_a_paused_saga_whose_resume_the_database_refused_is_resumed_again_at_quiescence() -> None:
    """Seed 2 of ``refused_in_bursts`` (ci profile) hung at quiescence: the operator's resume of a
    paused saga met a burst, the saga stayed paused (S-TX-01) and its result was deferred on every
    delivery of the settling loop (S-MGT-05). The operator now asks again."""
    machine = _bursts_machine()
    try:
        machine.first_start(key=0)
        pause = {"index": 0, "who": "operator", "expect": "none", "reuse": False, "tenant": "own"}
        machine.manage(action="pause", fate="committed", **pause)
        paused = [saga_id for saga_id in machine.model.instances if m.is_paused(machine.model, saga_id)]
        assert paused, machine.trace
        orchestrator = machine.runtime._runtime._raw["orchestrator"]
        resume_all = machine.resume_all

        def resume_in_a_burst() -> None:
            orchestrator.commits = BURST * (BURST_EVERY - 1)  # the next three COMMITs are refused
            resume_all()

        machine.resume_all = resume_in_a_burst
    finally:
        machine.teardown()  # quiescence: resumes, settles and compares every row
    assert not any(m.is_paused(machine.model, saga_id) for saga_id in machine.model.instances)


def test_a_delivery_the_database_refused_past_the_budget_is_a_dead_letter() -> None:
    """Two correct saga runs side by side on one PostgreSQL reported S-PART-01 at quiescence
    (expected ``CommandProcessed``, actual ``DeadLettered(failures=2)``): the participant's
    database refused every attempt of the same delivery twice, and the second failed try spends
    the transient budget of two (S-PART-04). The allowance for a database's definite rollback
    (S-TX-01, ``_base.database_refused``) took only ``RolledBack`` for the refused answer; the
    model's own outcome under the fate "rolled back" is the one to compare (docs/faults.md)."""
    machine = _bursts_machine()
    try:
        machine.first_start(key=0)
        machine._relay_commands(crash=False)
        owner = machine.wire.commands[0].owner
        participant = machine.runtime._runtime._raw[owner]
        for _ in range(2):
            participant.commits = BURST * (BURST_EVERY - 1)  # the next three COMMITs are refused
            machine.deliver_command(index=0, decision="succeed", fate="committed", ack_lost=False)
        assert any("DeadLettered" in line for line in machine.trace), machine.trace
        assert machine.model_parts[owner].dead_letters, machine.trace
    finally:
        machine.teardown()


def test_a_fire_the_database_refused_before_its_fence_observes_no_lateness() -> None:
    """Two correct saga runs side by side on one PostgreSQL reported S-OBS-03 at quiescence
    (lateness count expected 8, exposed 7): the database refused every attempt of a fire before
    the fence was re-verified (the timer's locking read met a lock timeout or a serialization
    failure), so the runtime observed nothing, while the ledger counted the fire from the model's
    fence. A refused COMMIT comes after the fence, a refused read before it, and the storage port
    shows the refusal, not where it came: such a fire may be observed or not (``_lateness``)."""
    machine = _bursts_machine()
    orchestrator = machine.runtime._runtime._raw["orchestrator"]
    begin = orchestrator.begin
    refusals = [MAX_ATTEMPTS]

    def refused_at_the_timer_read() -> Any:
        tx = begin()
        if refusals[0]:
            refusals[0] -= 1

            def load_timer(*_args: Any, **_kwargs: Any) -> None:
                raise SagaBackendError(SagaBackendErrorKind.ROLLED_BACK, "could not serialize access")

            tx.load_timer = load_timer
        return tx

    try:
        machine.first_start(key=0)
        machine.claim_timer(worker="w1", index=0)
        assert "w1" in machine.leases, machine.trace
        orchestrator.begin = refused_at_the_timer_read
        machine.fire_timer(worker="w1", fate="committed")
        del orchestrator.begin
        assert refusals == [0]
        assert "w1" in machine.leases, machine.trace  # refused: the lease is still held
    finally:
        machine.teardown()  # quiescence: the lateness histogram vs the ledger


def test_a_joined_start_the_database_refused_at_a_statement_counts_rolled_back() -> None:
    """Two correct saga runs side by side on one PostgreSQL reported S-OBS-04 at quiescence
    (``processing_total{unit="start"}``: rolled_back exposed 1, expected 0; started 4, expected 5):
    the database refused a statement of a joined start, and the runtime decided and counted
    ``RolledBack``; the ledger took every refused joined start for a host COMMIT refused after the
    runtime had decided ``Started``. The storage port tells the two apart (``TransactionLog``)."""
    machine = _bursts_machine()
    orchestrator = machine.runtime._runtime._raw["orchestrator"]
    begin = orchestrator.begin
    refusals = [1]

    def refused_at_the_definition_read() -> Any:
        tx = begin()
        if refusals[0]:
            refusals[0] -= 1

            def load_definition(*_args: Any, **_kwargs: Any) -> None:
                raise SagaBackendError(SagaBackendErrorKind.ROLLED_BACK, "could not serialize access")

            tx.load_definition = load_definition
        return tx

    try:
        machine.first_start(key=0)
        orchestrator.begin = refused_at_the_definition_read
        start = {"key": 1, "payload": 0, "revoked": -1, "definition": "order", "form": "declared"}
        machine.start(fate="committed", joined=True, **start)
        del orchestrator.begin
        assert refusals == [0]
        assert any("database refused" in line for line in machine.trace), machine.trace
    finally:
        machine.teardown()  # quiescence: the process counters vs the ledger


def test_a_route_re_report_the_database_refused_on_every_attempt_learns_no_generation() -> None:
    """Beside another run on one PostgreSQL a registration and then its re-report (S-ROUTE-03) were
    both refused on every attempt: the model went back (S-TX-01), yet the harness recorded the
    generation the model had computed for the re-report, and a later ``renew_route`` looked up a
    route the model never kept (``KeyError``, Hypothesis's FlakyFailure: no replay reproduced it).
    A refused re-report teaches the replica nothing; the renewal then finds no generation to use."""
    machine = _bursts_machine()
    try:
        machine.first_start(key=0)
        runtime = machine.runtime._runtime
        register = runtime.register_capability

        def register_in_a_burst(request: m.RegisterCapability) -> object:
            # Each call's three attempts are a whole burst: the report and its re-report refused.
            runtime._raw["orchestrator"].commits = BURST * (BURST_EVERY - 1)
            return register(request)

        runtime.register_capability = register_in_a_burst
        asked: list[str] = []
        set_fate = machine._set_fate
        machine._set_fate = lambda name: asked.append(name) or set_fate(name)
        key = machine._capability_key("order", 0, "r1")
        refusals = machine.refusals
        machine._register(key, 0, key.owner, w.ROUTE_LEASE_MS, "committed")
        # The re-report is a unit of its own: its fate is decided like the report's (a wire fault
        # armed for a report refused before its COMMIT meets the re-report's, ``_wire``).
        assert asked == ["committed", "committed"]
        assert machine.refusals == refusals, machine.trace  # settled as rolled back, both
        assert key not in machine.model.routes.routes
        assert key not in machine.generations or not machine.generations[key]
        runtime.register_capability = register
        for stale in (True, False):
            unwrapped(type(machine).renew_route)(
                machine, index=0, stale=stale, stranger=False, fate="committed"
            )
    finally:
        machine.teardown()  # quiescence: every row read back is the model's
