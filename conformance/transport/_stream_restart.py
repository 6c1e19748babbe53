"""The Redis server under the stream consumers killed -9 and restarted with entries pending (fault
``redis-restart``; the machine and its after-step checks: ``_machine.py``).

Only where the suite controls the server — the target's ``stream_control`` role (a
``ServiceControl`` of ``conformance.crash``: the launcher's pid file and port for the project's
Redis, ``conformance.crash:redis_control``; a private ``LocalRedis`` in tests), the seam of
``server-crash`` and of the Kafka suite's ``broker_control`` — and only in profile ``deep``: the
project's Redis is shared by the suites a ``ci`` run runs beside this one, and killing it there
would be their outage. ``tests/conformance/test_transport_redis_restart.py`` runs it on a private
redis-server (AOF, ``appendfsync always``, as ``scripts/services`` configures the project's).

One restart (``_restart_server``, at the opening of one example in ``RESTART_ONE_IN``: ``first_start``):
on the stream of the sagas' first step (p0's) a consumer is killed after its unit's
COMMIT and before ``XACK`` (T-STREAM-01, where ``consumer-killed`` applies), another holds an entry
it has read and not yet processed, and at least one entry is not yet delivered; every stream is
read raw (entries, each group's last-delivered id and pending list with consumers and delivery
counts, the dead letters); the server is killed -9 and started again on its data directory; the
same read must give the same answer. Then the consumers carry on over their own clients, which
reconnect: the holder settles what it holds (``XACK`` after the commit, S-STREAM-04), a read
delivers exactly the undelivered entries (nothing acknowledged comes back as new, S-STREAM-01),
the other consumer claims the dead one's entry, which the inbox absorbs (S-STREAM-02, S-STREAM-03,
S-PART-02); each effect once (S-PART-03, after every step).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import initialize

from conformance._machine import step
from conformance._violations import HarnessEnvironmentError, Violation
from conformance.crash import ServiceControlError, crash_cycle
from conformance.saga import _world as w
from conformance.saga._base import unwrapped
from conformance.transport import _faults as f
from conformance.transport._base import CONSUMERS, show
from conformance.transport._faults import restart_applies
from conformance.transport._stream_rules import StreamRules
from impls.transport import Settled
from model import saga as m

#: One example in this many opens with a restart (each costs the server's AOF replay and every
#: client's reconnect): about 40 in a deep run of 2000 examples.
RESTART_ONE_IN = 50

#: What a raw read of one stream holds, part by part, and the rule a difference breaks.
PART_RULES = {
    "entries": "S-STREAM-01",  # an entry not yet delivered would never be
    "last_delivered": "S-STREAM-01",  # an entry acknowledged would be delivered again as new
    "pending": "S-STREAM-02",  # a pending entry would never be settled
    "dead_letters": "S-STREAM-06",
}


def restart_server(target: Any) -> str:
    """Kill -9 the server under the target's streams and start it on its data directory; the
    crash cycle's description. An outage is the environment's, never a verdict."""
    try:
        return crash_cycle(target.stream_control()).describe()
    except ServiceControlError as exc:
        raise HarnessEnvironmentError(f"the Redis server could not be restarted: {exc}") from exc


class StreamRestart(StreamRules):
    def __init__(self) -> None:
        super().__init__()
        why = restart_applies(self.context.target, self.context.profile)
        if why is not None:
            self.context.stats.details["transport:redis-restart"] = f"not applicable: {why}"
        #: (owner, ordinal) of the entries pending in the owner's group over a restart.
        self.pending_over_restart: set[tuple[str, int]] = set()

    @initialize(key=st.integers(0, 2), restart=st.integers(0, RESTART_ONE_IN - 1))
    @step
    def first_start(self, key: int, restart: int = 1) -> None:
        """Every example opens with a saga whose first command is on the wire; where the fault
        applies, one example in ``RESTART_ONE_IN`` (``restart`` 0: the first, simplest example a
        run draws is one of them, and shrinking keeps it) then restarts the Redis server. Drawn,
        not counted per run, so a replay of the example restarts exactly as it ran."""
        self._start(key)
        self._publish()
        if restart == 0:
            self._restart_server(w.OWNERS[0])

    def _restart_server(self, owner: str) -> None:
        if restart_applies(self.context.target, self.context.profile) is not None or not self._allows(
            f.REDIS_RESTART
        ):
            return
        holder, other = CONSUMERS[:2]
        self._publish()
        for key in range(len(w.BUSINESS_KEYS)):  # a dead consumer's, a held and an undelivered entry
            if self._undelivered(owner) >= 3:
                break
            self._start(key)
            self._publish()
        if self._allows(f.CONSUMER_KILLED) and not self.in_hand[(owner, other)]:
            self._fetch(owner, other, 1)
            if self.in_hand[(owner, other)]:
                self._process(owner, other, m.Decision.SUCCEED, "committed", True)
        if not self.in_hand[(owner, holder)]:
            self._fetch(owner, holder, 1)
        self.after_step()
        before = {o: self._raw_streams(o) for o in w.OWNERS}
        self.pending_over_restart |= {(owner, k) for k in self.streams[owner].groups[owner].pending}
        self.context.inject(f.REDIS_RESTART.name)
        self.note(restart_server(self.context.target))
        for o in w.OWNERS:
            compare_raw(self.names[o].stream, before[o], self._raw_streams(o))
        if before[owner]["pending"] and self._undelivered(owner):
            self.context.reach("pending-survived-redis-restart")
        self.after_step()
        self._carry_on(owner)

    def _carry_on(self, owner: str) -> None:
        """The consumers go on over their reconnected clients: each settles what it holds, reads
        what is left, and claims what a dead consumer left pending."""
        for consumer in CONSUMERS:
            while self.in_hand[(owner, consumer)]:
                self._process(owner, consumer, m.Decision.SUCCEED, "committed", False)
        self.after_step()
        self._fetch(owner, CONSUMERS[0], 10)
        self.after_step()
        unwrapped(StreamRules.claim)(self, owner=owner, consumer=CONSUMERS[1], expired=True)
        for consumer in CONSUMERS:
            while self.in_hand[(owner, consumer)]:
                self._process(owner, consumer, m.Decision.SUCCEED, "committed", False)

    def _settle(
        self,
        owner: str,
        ordinal: int,
        verdict: m.DeliveryVerdict,
        reason: str,
        settled: Settled,
        rule_id: str,
    ) -> None:
        super()._settle(owner, ordinal, verdict, reason, settled, rule_id)
        if settled.acknowledged and (owner, ordinal) in self.pending_over_restart:
            self.pending_over_restart.discard((owner, ordinal))
            self.context.reach("pending-settled-after-redis-restart")

    def _undelivered(self, owner: str) -> int:
        measure = m.backlog(self.streams[owner], owner)
        assert isinstance(measure, m.Backlog)
        return measure.undelivered

    def _raw_streams(self, owner: str) -> dict[str, Any]:
        return read_raw(self.client, self.names[owner].stream, self.names[owner].dead_letters)


def read_raw(client: Any, stream: str, dead_letters: str) -> dict[str, Any]:
    """One stream as the server holds it, read raw (``XRANGE``, ``XINFO GROUPS``, ``XPENDING``)."""
    pending, last = {}, {}
    groups = client.xinfo_groups(stream) if client.exists(stream) else []
    for info in groups or []:
        group = _text(info["name"])
        last[group] = _text(info["last-delivered-id"])
        rows = client.xpending_range(stream, group, "-", "+", 1000) or []
        pending[group] = sorted(
            (_text(r["message_id"]), _text(r["consumer"]), int(r["times_delivered"])) for r in rows
        )
    return {
        "entries": client.xrange(stream) or [],
        "last_delivered": last,
        "pending": pending,
        "dead_letters": client.xrange(dead_letters) or [],
    }


def compare_raw(stream: str, before: dict[str, Any], after: dict[str, Any]) -> None:
    """What the server held before the restart, it must hold after it (``PART_RULES``)."""
    for part, rule_id in PART_RULES.items():
        if after[part] != before[part]:
            raise Violation(
                rule_id,
                f"the stream's {part.replace('_', ' ')} changed over a Redis restart",
                {"stream": stream, "before": show(before[part]), "after": show(after[part])},
            )


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
