"""A dropped saga namespace reads back as empty (S-TX-04).

``conformance._cleanup.Namespaces.passed`` drops a passing example's saga backends' namespaces
(``impls.saga.NamespacedSagaBackend``), opens each again with its factory and hands the reopened
backend here: one transaction, rolled back, must list no command, timer, audit record, effect or
result (``model.saga.drop_namespace``: a namespace never written). The listing is judged on the
live backend before the drop: a backend whose tables are its own (SQLite in memory) may list
nothing, but a listing that names anything names the example's namespace. After the drop the
listing is not judged: the memory backend keeps an emptied namespace's registry entry until
``close`` (impls/saga/memory, in the saga mutation sample, left as it is). Nothing here draws
from Hypothesis.
"""

from __future__ import annotations

from collections.abc import Callable

from impls.saga import SagaBackend, SagaBackendError, SagaTransaction, read_only


class SagaCleanupJudge:
    """``conformance._cleanup.CleanupJudge`` for saga backends (S-TX-04). An exception out of a drop
    is counted, never judged: the saga port has no rule on what crosses a drop."""

    cleanup_rule = "S-TX-04"
    foreign_error_rule: str | None = None
    environment: tuple[type[BaseException], ...] = (SagaBackendError,)
    lists_dropped = True
    may_list_nothing = True

    def __init__(self, reached: Callable[[str], None]) -> None:
        self.reached = reached

    def holds_data(self, live: object) -> bool:
        return self.leftovers(live) is not None

    def leftovers(self, reopened: object) -> str | None:
        if not isinstance(reopened, SagaBackend):
            return None

        def listed(tx: SagaTransaction) -> str | None:
            for name, rows in (
                ("commands", tx.list_commands()),
                ("timers", tx.list_timers()),
                ("audit records", tx.list_audit()),
                ("effects", tx.list_effects()),
                ("results", tx.list_results()),
            ):
                if rows:
                    return f"{len(rows)} {name} still listed"
            return None

        # A contended database may refuse a read too (a definite rollback): it is run again, as
        # the runtime's own reads are (``read_only``), rather than left as no verdict.
        return read_only(reopened, listed)
