"""C-PRE-06: the committer's readiness reaches the store and the outbox (rules of the commit machine).

An outbox that is down makes readiness UNAVAILABLE, and the outbox must have been asked; live
backends make it ready. Behind the fault proxy a driver may still be reconnecting after a healed
fault, so an UNAVAILABLE there is asked again, bounded (``_reconnect``), before it is judged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hypothesis.stateful import rule

from conformance._machine import ConformanceMachine, step
from conformance.commit._faults import OUTBOX_DOWN
from conformance.commit._judge import OUTBOX_CHECKS
from conformance.commit._reconnect import readiness_again, unavailable
from impls.commit import MessageCommitter
from model.commit import CommitError, CommitErrorKind


class ReadinessRules(ConformanceMachine):
    """Mixed into the commit machine; uses its world (oracle, outbox oracle, committer, drive)."""

    if TYPE_CHECKING:
        oracle: Any
        outbox_oracle: Any

        def committer(self, gate: Any = None) -> MessageCommitter: ...

        def drive(self, body: Any) -> Any: ...

    @rule()
    @step
    def readiness(self) -> None:
        """C-PRE-06: the committer's readiness reaches the store and the outbox; an outbox that is down
        makes it UNAVAILABLE, a live one ready."""
        self._readiness()

    @rule()
    @step
    def readiness_outbox_down(self) -> None:
        """C-PRE-06, directed so every ci run reaches it (docs/ci-gate.md): down for one call, asked."""
        if self.context.faults.allows(OUTBOX_DOWN.name):
            self.outbox_oracle.arm(OUTBOX_DOWN, 1)
            self._readiness()

    def _readiness(self) -> None:
        down = self.outbox_oracle.down
        outages = self.context.stats.faults[OUTBOX_DOWN.name]
        outcome = self.drive(lambda gate: self.committer(gate).readiness())
        error = outcome.error
        if error is not None and not isinstance(error, CommitError):
            raise self.oracle.fail("C-ERR-02", f"readiness raised {error!r}"[:300]).violation
        assert error is None or isinstance(error, CommitError)  # (narrowed by the check above)
        if down:
            asked = self.context.stats.faults[OUTBOX_DOWN.name] > outages
            if not asked and self.oracle.wire is not None and unavailable(error):
                # The store's driver was still reconnecting after a healed wire fault, so the
                # committer never got as far as the outbox: ask again (bounded) until it does.
                asked_before = outages
                error = self.run(
                    readiness_again(
                        lambda: self.committer(None).readiness(),
                        error,
                        settled=lambda: self.context.stats.faults[OUTBOX_DOWN.name] > asked_before,
                    )
                )
                asked = self.context.stats.faults[OUTBOX_DOWN.name] > outages
            if asked and isinstance(error, CommitError) and error.kind is CommitErrorKind.UNAVAILABLE:
                self.context.reach("readiness-refused:outbox-down")
                return
            answer = "ready" if error is None else error.kind.value
            raise self.oracle.fail(
                OUTBOX_CHECKS["readiness-ignored-outbox"],
                f"readiness answered {answer} while the outbox was down"
                + ("" if asked else ", without asking the outbox"),
            ).violation
        if error is not None and self.oracle.wire is not None:
            # Behind the fault proxy a healed fault can leave the driver reconnecting (one reset marks
            # cassandra-driver's only host down): readiness must come back once it has, bounded.
            error = self.run(readiness_again(lambda: self.committer(None).readiness(), error))
        if error is not None:
            raise self.oracle.fail("C-PRE-06", f"readiness failed on live backends: {error}").violation
        self.context.reach("rule:C-PRE-06")
