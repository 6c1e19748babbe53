"""The flaky cql/store C-POST-11 of ``make test`` at seed 20261130 (session 11), forced: a
``wire-reply-lost`` that fell on the lightweight transaction of ``mark_committed`` made it fail
after the history expiry was written (impls/cql writes it first, so a commit never lacks it) but,
when the lost request never ran, before OUTBOXED -> COMMITTED. The read-back of the commit row
said "did not apply", the model kept the entry readable forever, and the quiescence read a day on
found it expired. Whether the request ran was timing; here ``wire-reset-before`` past the first two
requests (SERIAL read, expiry write) resets the conditional write before the server sees it, every
time. The oracle now probes the history at the due expiry and adopts the expiry registered ahead
(C-POST-06, ``conformance/commit/_expiry_ahead.py``)."""

from __future__ import annotations

import pytest

from conformance import FailureFile, replay
from conformance._machine import RunContext, Step

KEY = "t2/alice/m2"
PROGRAM = (
    Step("first_reserve", {"key": KEY}),
    Step("put_record", {"key": KEY}),
    Step("mark_outbox_published", {"key": KEY, "publication": "p1"}),
    # skip 2: READ_COMMIT (SERIAL) and EXPIRE_HISTORY pass; the MARK_COMMITTED LWT is reset unsent
    Step("arm_wire_fault", {"kind": "wire-reset-before", "requests": 1, "skip": 2}),
    Step("mark_committed", {"key": KEY}),
)


@pytest.mark.service("cassandra")
def test_a_mark_committed_cut_after_its_expiry_write_settles_with_the_expiry_ahead(
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
        seed=20261130,
        profile="ci",
        faults="all",
        hypothesis_version="",
        rule_id="C-POST-11",
        message="history_page returned HistoryPage([], ...); the contract says HistoryPage([1], ...)",
        context={},
        program=PROGRAM,
        service="cassandra",
    )
    result = replay(failure)
    assert not result.reproduced, result.describe()
    assert result.steps_run == len(PROGRAM) + 1  # every step and the quiescence checks
    # The interleaving really happened: the call failed between the two writes, and was adopted.
    assert "settled-expiry-ahead" in reached
