"""Killing the nasaga host in the middle of a unit and resuming on a fresh one (issue 20, item 4).

Theory of operation
-------------------
The harness arms one of the host's crash points (``hosts/nasaga/src/faults.rs``: ``step``, the
participant's handler after it wrote its business row; ``eligibility``, the host's eligibility
check of an orchestrator unit at its n-th arrival) before one unit call. If the call reaches the
point, the host stops there holding its open transaction and signals through a file; the client
sees the file while it waits for the answer and sends SIGKILL (``NasagaHost.call(kill_at=...)``).
Both points lie before nasaga sends COMMIT (nasaga checks eligibility around the body and once
before deciding to commit, never while COMMIT is in flight: ``run_authorized_for``,
``rt/transaction.rs:85``), so the killed unit's writes are never committed: the model takes the
fate "rolled back" and the caller, which never heard back, leaves the envelope on the wire.

A fresh host process is then started on the same databases and the namespace is attached again
(``open_namespace mode=attach``: nasaga's catalog is reloaded from the database). Everything the
old host acknowledged must still be there and nothing of the killed unit: the after-step
comparison reads instances, the command outbox, each participant's business facts and result
outbox back from the new host, and the redelivery of the envelope must take effect exactly once
(S-PART-03, S-TX-01). A call that never reached its point is an ordinary call, judged as one.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs

from conformance._violations import HarnessEnvironmentError
from impls.nasaga import HostFailure, NasagaHost, NasagaHostError

T = TypeVar("T")


@attrs.frozen
class HostKilled:
    """The unit's answer when the host was killed at its crash point: nobody heard back."""

    where: str  # "<point> <arrival> <pid>", as the host signalled it


@attrs.define
class CrashSwitch:
    """One runtime's crash point: armed for the next unit call, then cleared."""

    host: NasagaHost
    namespace: str
    owners: Sequence[str]
    #: nasaga's ``OrchestratorConfig`` for the namespace (``namespace_config``): the host keeps it
    #: in memory, so the fresh host is given it again.
    config: Mapping[str, Any] = attrs.field(factory=dict)
    armed: tuple[str, int] | None = None
    kills: int = 0
    #: Called once the fresh host is attached: its process metrics start again from zero.
    resumed: Callable[[], None] = lambda: None
    _dir: Path = attrs.field(factory=lambda: Path(tempfile.mkdtemp(prefix="nsg-crash-")))

    def arm(self, point: str, at: int) -> None:
        self.armed = (point, at)

    def run(self, body: Callable[[dict[str, Any]], T]) -> T | HostKilled:
        """``body(extra)`` is one host call; ``extra`` carries ``kill_at`` when a point is armed."""
        if self.armed is None:
            return body({})
        point, at = self.armed
        self.armed = None
        signal = self._dir / f"crash-{self.kills}-{point}-{at}"
        signal.unlink(missing_ok=True)
        self.host.call("arm_crash_point", point=point, at=at, signal_path=str(signal))
        try:
            answer = body({"kill_at": signal})
        except NasagaHostError as exc:
            if exc.failure is HostFailure.KILLED:
                self.kills += 1
                self._resume()
                # The host's own text names the point; the armed one when it could not be read.
                where = exc.message if exc.message.split()[:1] == [point] else f"{point} {at}"
                return HostKilled(where)
            if not exc.is_environment:
                self.host.call("disarm_crash_point")  # refused before the point: disarm it
            raise
        self.host.call("disarm_crash_point")  # the call never reached the point
        return answer

    def signal_path(self, point: str) -> Path:
        """A fresh signal file for a point the caller arms itself (a point reached in the
        background, as nasaga's Kafka consumer's ``kafka_committed``: ``_nasaga_kafka``)."""
        signal = self._dir / f"crash-{self.kills}-{point}"
        signal.unlink(missing_ok=True)
        return signal

    def resume_after_kill(self) -> None:
        """The host was killed at a point the caller armed: counted, and a fresh one attached."""
        self.kills += 1
        self._resume()

    def _resume(self) -> None:
        """A fresh host on the same databases; the namespace attached again."""
        try:
            self.host.restart()
            self.host.open_namespace(self.namespace, list(self.owners), mode="attach", config=self.config)
            self.resumed()
        except NasagaHostError as exc:
            raise HarnessEnvironmentError(f"the nasaga host did not come back after a kill: {exc}") from exc

    def close(self) -> None:
        with contextlib.suppress(OSError):
            for path in self._dir.iterdir():
                path.unlink()
            self._dir.rmdir()
