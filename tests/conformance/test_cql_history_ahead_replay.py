"""cql/store seed 185589973 of the reach measurement (4 December), shrunk to three steps: a reply
lost on the second request of ``put_record``, the history entry's write. The CQL store writes the
entry first and then RESERVED -> RECORDED (so no RECORDED commit lacks its entry); the settling
read-back of the commit row said "did not apply", the model kept the key out of history, and the
quiescence read found the entry there: C-POST-05. The oracle now reads the conversation after an
uncertain ``put_record`` on a store without the atomic step and adopts the entry written ahead
(C-POST-11's decision, ``model.commit.record_history_ahead``)."""

from __future__ import annotations

import pytest

from conformance import FailureFile, replay
from conformance._machine import RunContext, Step

KEY = "t1/alice/m1"
PROGRAM = (
    Step("first_reserve", {"key": KEY}),
    # skip 1: the SERIAL read passes; the history entry's write runs and its answer is lost
    Step("arm_wire_fault", {"kind": "wire-reply-lost", "requests": 1, "skip": 1}),
    Step("advance_commit", {"key": KEY, "path": "atomic", "publication": "p1"}),
)


@pytest.mark.service("cassandra")
def test_a_put_record_cut_after_its_history_write_settles_with_the_entry_ahead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reached: set[str] = set()
    reach = RunContext.reach

    def spy(self: RunContext, target: str) -> None:
        reached.add(target)
        reach(self, target)

    monkeypatch.setattr(RunContext, "reach", spy)
    failure = FailureFile(
        suite="store",
        backend="cql",
        factories={
            "store": "impls.cql:open_cql_store",
            "outbox": "impls.cql:open_cql_outbox",
            "control": "conformance.crash:cassandra_control",
        },
        seed=185589973,
        profile="ci",
        faults="all",
        hypothesis_version="",
        rule_id="C-POST-05",
        message="history_page returned HistoryPage([1,2], ...); the contract says HistoryPage([2], ...)",
        context={},
        program=PROGRAM,
        service="cassandra",
    )
    result = replay(failure)
    assert not result.reproduced, result.describe()
    assert result.steps_run == len(PROGRAM) + 1  # every step and the quiescence checks
    assert "settled-history-ahead" in reached  # the cut really fell between the two writes
