"""The outbox under the commit suite, and the non-atomic commit's legal intermediate state.

* Each shipped broken outbox (examples/broken_outboxes.py) is caught with its rule ID, shrunk, and
  its failure file replays through ``conformance replay``.
* A store without the atomic step whose second step fails leaves OUTBOXED + publication, which the
  contract allows (C-POST-06): the harness accepts it and adopts it, on the in-memory two-step
  example and on the real CQL store with its second step withheld. The same store claiming the
  atomic step is reported (C-POST-05).
* The ledger's checks can fail: a publication the outbox never gave (C-POST-04), an entry for a key
  never reserved (C-POST-07).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from conformance import FailureFile, Verdict, replay, run_conformance
from conformance._machine import RunContext
from conformance._suites import BackendUnderTest, suite_named
from conformance._violations import Violation
from conformance.cli import main
from conformance.commit import _vocabulary as v
from conformance.commit._commit_machine import CommitMachine
from conformance.commit._oracle import HaltExample, ObservedStore
from conformance.commit._store_machine import StoreMachine
from examples.broken_outboxes import BROKEN_OUTBOXES
from impls.api import MembershipDirectory
from impls.cql import CqlMessageStore, CqlSettings
from model.commit import (
    CommitIntent,
    CommitStage,
    CommittedMessage,
    MessageStoreError,
    OutboxPublication,
    StoreErrorKind,
)

SEED = 20_240_601
#: Seconds Hypothesis may shrink where a test needs the rule and a short program, not Hypothesis's
#: smallest one: the runner's replay pass still makes the program 1-minimal (``RunOptions.minimize``).
#: Unbounded, lists_one_page spent 26 examples (3.6 CPU-s) shrinking a 1-step program, the atomic
#: claim 199 (4.3 CPU-s); at 2 s, 4 and 28 examples, the same rule and program length.
RULE_SHRINK_S = 2.0


@pytest.mark.parametrize(("factory", "rule_id"), sorted(BROKEN_OUTBOXES.items()))
def test_broken_outbox_is_caught_and_replays(
    factory: str, rule_id: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = run_conformance(
        "impls.memory:open_store",
        outbox_factory=f"examples.broken_outboxes:{factory}",
        backend=factory,
        suites=("commit",),
        seed=SEED,
        failure_dir=tmp_path,
        database_dir=None,
        shrink_budget_s=RULE_SHRINK_S,
    )
    (result,) = report.results
    assert result.verdict is Verdict.VIOLATION, report.details()
    assert result.failure is not None
    assert result.failure.rule_id == rule_id, report.details()
    assert 1 <= len(result.failure.program) <= 10, report.details()
    assert report.exit_code == 1

    path = result.failure.failure_file
    assert path is not None and path.exists()
    saved = FailureFile.read(path)
    assert saved.factories["outbox"] == f"examples.broken_outboxes:{factory}"
    assert replay(saved).same_rule
    capsys.readouterr()
    assert main(["replay", str(path), "--trust", "examples.broken_outboxes"]) == 1
    assert f"reproduced {rule_id}" in capsys.readouterr().out
    assert main(["replay", str(path), "--outbox", "impls.memory:open_outbox"]) == 0
    assert "did not reproduce" in capsys.readouterr().out


def test_a_lost_outbox_ack_is_committed_with_the_first_entry(tmp_path: Path) -> None:
    """The outbox appends, its answer is lost; the committer re-reads, re-publishes and gets the first
    entry, which is what the store commits. A non-idempotent outbox fails the same program."""
    program = [
        {"rule": "arm_outbox_fault", "args": {"kind": "outbox-ack-lost", "calls": 1}},
        {"rule": "send", "args": {"key": "t1/alice/m1", "variant": "same"}},
    ]

    def failure(outbox: str) -> FailureFile:
        return FailureFile.from_json(
            {
                "format": "ratchet-failure/1",
                "suite": "commit",
                "backend": "memory",
                "factories": {"store": "impls.memory:open_store", "outbox": outbox},
                "rule_id": "C-POST-07",
                "message": "written by hand",
                "program": program,
            }
        )

    fine = replay(failure("impls.memory:open_outbox"))
    assert not fine.reproduced, fine.describe()
    broken = replay(failure("examples.broken_outboxes:republish_appends_new_entry"))
    assert broken.same_rule and broken.steps_run == 2, broken.describe()
    assert "re-publish of t1/alice/m1" in broken.describe()


def _store_machine(store_factory: str | Callable[..., Any]) -> tuple[StoreMachine, RunContext]:
    """The store machine on ``store_factory``, built as a run or a replay builds it."""
    suite = suite_named("store")
    backend = BackendUnderTest(
        "two-step", "commit", {"store": store_factory, "outbox": "impls.memory:open_outbox"}
    )
    context = RunContext(suite.name, backend.name, suite.make_target(backend))
    return cast(StoreMachine, context.machine_class(suite.machine())()), context


def test_an_uncertain_two_step_commit_may_stop_at_outboxed() -> None:
    """C-POST-06: the second step of the default path fails; OUTBOXED + publication is accepted,
    adopted by the model, and finished by mark_committed."""
    machine, context = _store_machine("examples.two_step_store:second_step_fails")
    try:
        machine.first_reserve(key="t1/alice/m1")
        machine.reserve(key="t1/alice/m2", variant="same")
        for key in ("t1/alice/m1", "t1/alice/m2"):
            machine.put_record(key=key)
        machine.mark_published_and_committed(key="t1/alice/m1", publication="p1")  # both steps
        machine.mark_published_and_committed(key="t1/alice/m2", publication="p2")  # first only
        oracle = machine.oracle
        entry = oracle.state.commits[v.parse_key("t1/alice/m2")]
        assert entry.stage is CommitStage.OUTBOXED
        assert entry.publication == v.publication("p2")
        assert "settled-outboxed" in context.stats.reached
        machine.mark_committed(key="t1/alice/m2")
        assert oracle.state.commits[v.parse_key("t1/alice/m2")].stage is CommitStage.COMMITTED
    finally:
        machine.teardown()


class CqlLosesSecondStep(CqlMessageStore):
    """The real CQL store; its combined call on ``t1/alice/m2`` applies the first step, then fails."""

    async def mark_published_and_committed(
        self, intent: CommitIntent, publication: OutboxPublication
    ) -> CommittedMessage:
        if intent.key != v.parse_key("t1/alice/m2"):
            return await super().mark_published_and_committed(intent, publication)
        await self.mark_outbox_published(intent, publication)
        raise MessageStoreError(StoreErrorKind.UNAVAILABLE, "mark_committed timed out", intent.key)


async def cql_loses_second_step(namespace: str, membership: MembershipDirectory) -> CqlMessageStore:
    return CqlLosesSecondStep(namespace, membership, CqlSettings())


@pytest.mark.service("cassandra")
def test_cql_two_step_commit_may_stop_at_outboxed() -> None:
    """C-POST-06 on the store that declares no atomic step: OUTBOXED as Cassandra holds it is accepted."""
    machine, context = _store_machine(cql_loses_second_step)
    try:
        assert not machine.oracle.capabilities.atomic_publish_and_commit
        machine.first_reserve(key="t1/alice/m1")
        machine.reserve(key="t1/alice/m2", variant="same")
        for key in ("t1/alice/m1", "t1/alice/m2"):
            machine.put_record(key=key)
        machine.mark_published_and_committed(key="t1/alice/m1", publication="p1")
        machine.mark_published_and_committed(key="t1/alice/m2", publication="p2")
        assert machine.oracle.state.commits[v.parse_key("t1/alice/m2")].stage is CommitStage.OUTBOXED
        assert "settled-outboxed" in context.stats.reached
        machine.mark_committed(key="t1/alice/m2")
    finally:
        machine.teardown()


def test_an_atomic_store_that_stops_at_outboxed_is_a_partial_write() -> None:
    """C-POST-05: the same store declaring the atomic step may not leave OUTBOXED behind."""
    machine, _ = _store_machine("examples.two_step_store:claims_atomic_second_step_fails")
    try:
        machine.first_reserve(key="t1/alice/m1")
        machine.reserve(key="t1/alice/m2", variant="same")
        for key in ("t1/alice/m1", "t1/alice/m2"):
            machine.put_record(key=key)
        machine.mark_published_and_committed(key="t1/alice/m1", publication="p1")
        with pytest.raises(Violation) as caught:
            machine.mark_published_and_committed(key="t1/alice/m2", publication="p2")
        assert caught.value.rule_id == "C-POST-05"
        assert "neither the state before" in caught.value.message
    finally:
        machine.failed = True  # no quiescence checks after a violation
        machine.teardown()


def test_two_step_stores_pass_both_suites_and_reach_the_intermediate_state() -> None:
    """The whole ci run on the two-step store whose second step fails: no violation, full coverage,
    and the legal OUTBOXED outcome was met and accepted."""
    report = run_conformance(
        "examples.two_step_store:second_step_fails",
        backend="two-step",
        suites=("store", "commit"),
        seed=SEED,
        database_dir=None,
        failure_dir=None,
    )
    assert report.ok, report.details()
    store, commit = report.results
    assert store.stats.details["atomic_publish_and_commit"] == "False"
    assert "settled-outboxed" in store.stats.reached
    assert "crash-at:M-COMMIT-05" in commit.stats.reached


def test_the_atomic_claim_is_caught_by_the_run() -> None:
    report = run_conformance(
        "examples.two_step_store:claims_atomic_second_step_fails",
        backend="claims-atomic",
        suites=("store",),
        seed=SEED,
        database_dir=None,
        failure_dir=None,
        shrink_budget_s=RULE_SHRINK_S,
    )
    (result,) = report.results
    assert result.verdict is Verdict.VIOLATION
    assert result.failure is not None and result.failure.rule_id == "C-POST-05", report.details()


def _commit_machine() -> CommitMachine:
    suite = suite_named("commit")
    backend = BackendUnderTest(
        "memory", "commit", {"store": "impls.memory:open_store", "outbox": "impls.memory:open_outbox"}
    )
    context = RunContext(suite.name, backend.name, suite.make_target(backend))
    return cast(CommitMachine, context.machine_class(suite.machine())())


def test_a_store_publication_the_outbox_never_acknowledged_is_c_post_04() -> None:
    """The ledger check can fail: a RECORDED key marked with a publication the outbox never gave."""
    machine = _commit_machine()
    try:
        machine.arm_crash(point="M-COMMIT-03")
        machine.send(key="t1/alice/m1", variant="same")  # dies before publishing: RECORDED
        key = v.parse_key("t1/alice/m1")
        intent = machine.oracle.intents[key]
        machine.run(ObservedStore(machine.oracle).mark_outbox_published(intent, v.publication("p1")))
        with pytest.raises(Violation) as caught:
            machine.after_step()
        assert caught.value.rule_id == "C-POST-04"
        assert "never acknowledged an entry" in caught.value.message
    finally:
        machine.failed = True
        machine.teardown()


def test_an_entry_for_a_key_never_reserved_is_c_post_07() -> None:
    machine = _commit_machine()
    try:
        never = v.parse_key("t2/bob/m4")
        publication = machine.run(machine.outbox_oracle.real.publish(v.never_reserved_intent(never)))
        with pytest.raises(HaltExample) as caught:
            machine.outbox_oracle.acknowledged(never, publication)
        assert caught.value.violation.rule_id == "C-POST-07"
        assert "never reserved" in caught.value.violation.message
    finally:
        machine.failed = True
        machine.teardown()
