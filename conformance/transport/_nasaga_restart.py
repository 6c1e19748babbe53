"""The Redis server killed -9 and restarted under nasaga's Redis Streams connector with entries
pending (fault ``redis-restart``; the machine: ``_nasaga.py``; the fault on Ratchet's connector and
where it applies: ``_stream_restart.py``).

At the opening of one example in ``RESTART_ONE_IN`` (``first_start``), where the target has a
``stream_control`` and the profile is ``deep``: a poll whose business code fails leaves p0's
entry pending in ``c2``'s name (delivered once), a second saga puts an undelivered entry behind it,
the stream is read raw, the server is killed and started again on its data directory, and the same
read must give the same answer (entries and dead letters, each group's cursor and pending list:
S-STREAM-01, S-STREAM-02, S-STREAM-06). Then nasaga's consumer ``c1`` polls over the host's own
Redis client (nadis), which must reconnect by itself: its round claims the pending entry, reads
the undelivered one, runs each unit once and acknowledges it after its commit, all compared with
the model as every ``poll`` is (S-STREAM-03, S-STREAM-04, S-PART-03). A round the host answers with
an error after the restart leaves its entries pending, which the contract allows; the next round
must deliver them, else the connector did not survive the restart (S-STREAM-02). nasaga's first
round after a restart fails (``XAUTOCLAIM failed: broken pipe``) and the next one succeeds:
docs/nasaga-findings.md N-48, counted in ``transport:failed_polls_after_redis_restart``.
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import initialize

from conformance._machine import step
from conformance._violations import HarnessEnvironmentError, Violation
from conformance.transport import _faults as f
from conformance.transport._faults import restart_applies
from conformance.transport._nasaga import NasagaStreamMachine
from conformance.transport._nasaga_world import GROUP
from conformance.transport._stream_restart import RESTART_ONE_IN, compare_raw, read_raw, restart_server
from impls.nasaga import NasagaHostError
from model import saga as m

#: Rounds nasaga's consumer may answer with an error after a restart before it counts as not
#: having survived it (its client reconnecting on the next command is survival).
ROUNDS_AFTER_RESTART = 3


class NasagaRestartMachine(NasagaStreamMachine):
    def __init__(self) -> None:
        super().__init__()
        why = restart_applies(self.context.target, self.context.profile)
        if why is not None:
            self.context.stats.details["transport:redis-restart"] = f"not applicable: {why}"

    @initialize(key=st.integers(0, 2), restart=st.integers(0, RESTART_ONE_IN - 1))
    @step
    def first_start(self, key: int, restart: int = 1) -> None:
        """Every example opens with a saga whose first command is on the wire; one in
        ``RESTART_ONE_IN`` (the first a run draws among them) then takes the opening walk, with the
        Redis server's restart where the fault applies (``_restart_server``)."""
        self._start(key)
        self._publish()
        if restart == 0:
            self._restart_server()

    def _restart_server(self) -> None:
        """The opening walk: an entry left pending by a failing poll of ``c2``, one undelivered,
        the restart where it applies, then ``c1``'s poll claims the one and reads the other. Without
        the restart (profile ``ci``) the walk runs all the same: it makes ``claimed-while-working``
        certain in the first example of a run (12 examples left it to chance)."""
        restarting = restart_applies(self.context.target, self.context.profile) is None and self._allows(
            f.REDIS_RESTART
        )
        if not self.log.groups[GROUP].pending:
            self._poll("c2", m.Decision.TRANSIENT_FAILURE)  # pending in c2's name, delivered once
        for key in range(3):
            if self._undelivered():
                break
            self._start(key)
            self._publish()
        self.after_step()
        held = set(self.log.groups[GROUP].pending)
        if not restarting:
            self._poll("c1", m.Decision.SUCCEED)
            return
        before = read_raw(self.client, self.stream, self.dead)
        self.context.inject(f.REDIS_RESTART.name)
        self.note(restart_server(self.context.target))
        compare_raw(self.stream, before, read_raw(self.client, self.stream, self.dead))
        if held and self._undelivered():
            self.context.reach("pending-survived-redis-restart")
        self.after_step()
        errors: list[str] = []
        for _ in range(ROUNDS_AFTER_RESTART):
            saved = self.log, self.part, set(self.retained)
            try:
                self._poll("c1", m.Decision.SUCCEED)
                break
            except NasagaHostError as exc:  # the round failed as a whole: the model's undone
                if exc.is_environment:  # a crashed or hung host is no verdict on nasaga
                    raise HarnessEnvironmentError(f"the nasaga host failed: {exc}") from exc
                self.log, self.part, self.retained = saved
                errors.append(str(exc))
                self.note(f"poll after the restart: {exc}")
                self.after_step()
        else:
            self._failed_rounds(len(errors))
            raise Violation(
                "S-STREAM-02",
                "nasaga's consumer delivered nothing after a Redis restart: its pending and "
                "undelivered entries are never settled",
                {"rounds": ROUNDS_AFTER_RESTART, "errors": repr(errors)[:600]},
            )
        self._failed_rounds(len(errors))
        if held - set(self.log.groups[GROUP].pending):
            self.context.reach("pending-settled-after-redis-restart")

    def _failed_rounds(self, count: int) -> None:
        """The rounds after a restart that failed before one succeeded, the most in this run (N-48)."""
        details = self.context.stats.details
        before = int(details.get("transport:failed_polls_after_redis_restart", "0"))
        details["transport:failed_polls_after_redis_restart"] = str(max(before, count))

    def _undelivered(self) -> int:
        measure = m.backlog(self.log, GROUP)
        assert isinstance(measure, m.Backlog)
        return measure.undelivered
