"""Two cuts between the CQL store's two tables, forced: each a lost request on the wire that fell
between a history write and the commit row's conditional write, left the commit row as before the
call while the history already held the write, and was adopted once the oracle read the
conversation back (``conformance/commit/_expiry_ahead.py``).

* ``expiry-ahead``, the flaky cql/store C-POST-11 of ``make test`` at seed 20261130 (session 11): a
  ``wire-reply-lost`` on the lightweight transaction of ``mark_committed`` made it fail after the
  history expiry was written (impls/cql writes it first, so a commit never lacks it) but, when the
  lost request never ran, before OUTBOXED -> COMMITTED. Whether the request ran was timing; here
  ``wire-reset-before`` past the first two requests (SERIAL read, expiry write) resets the
  conditional write before the server sees it, every time (C-POST-06).
* ``history-ahead``, cql/store seed 185589973 of the reach measurement (4 December), shrunk to three
  steps: a reply lost on the second request of ``put_record``, the history entry's write, which
  impls/cql makes before RESERVED -> RECORDED. The model kept the key out of history and the
  quiescence read found the entry: C-POST-05 on every replay (C-POST-11's decision,
  ``model.commit.record_history_ahead``).
"""

from __future__ import annotations

import pytest

from conformance import FailureFile, replay
from conformance._machine import RunContext, Step

CASES = {
    "expiry-ahead": (
        20261130,
        "C-POST-11",
        "settled-expiry-ahead",
        (
            Step("first_reserve", {"key": "t2/alice/m2"}),
            Step("put_record", {"key": "t2/alice/m2"}),
            Step("mark_outbox_published", {"key": "t2/alice/m2", "publication": "p1"}),
            # skip 2: READ_COMMIT (SERIAL) and EXPIRE_HISTORY pass; the MARK_COMMITTED LWT is reset
            Step("arm_wire_fault", {"kind": "wire-reset-before", "requests": 1, "skip": 2}),
            Step("mark_committed", {"key": "t2/alice/m2"}),
        ),
    ),
    "history-ahead": (
        185589973,
        "C-POST-05",
        "settled-history-ahead",
        (
            Step("first_reserve", {"key": "t1/alice/m1"}),
            # skip 1: the SERIAL read passes; the history entry's write runs and its answer is lost
            Step("arm_wire_fault", {"kind": "wire-reply-lost", "requests": 1, "skip": 1}),
            Step("advance_commit", {"key": "t1/alice/m1", "path": "atomic", "publication": "p1"}),
        ),
    ),
}


@pytest.mark.service("cassandra")
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_call_cut_between_the_two_tables_settles_with_the_write_ahead(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed, rule_id, adopted, program = CASES[case]
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
        seed=seed,
        profile="ci",
        faults="all",
        hypothesis_version="",
        rule_id=rule_id,
        message=f"{case}: a history page other than the model's",
        context={},
        program=program,
        service="cassandra",
    )
    result = replay(failure)
    assert not result.reproduced, result.describe()
    assert result.steps_run == len(program) + 1  # every step and the quiescence checks
    assert adopted in reached  # the cut really fell between the two writes, and was adopted
