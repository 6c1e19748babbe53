"""The host-crash fault: the runtime's host killed inside a unit, a fresh one resumed (S-TX-01, S-PART-03).

Also ``race_timers``: two more host processes race one due timer (``_nasaga_race``).

Mixed into ``SagaMachine`` only for a backend given as a runtime factory
(``SagaTarget.specialise``) and run only where ``RuntimeCapabilities.host_crash`` holds (today the
nasaga host), so the other backends keep their rules and draws. ``crash_host`` picks a unit the
wire has work for — a command delivery, a result delivery or a start — and arms the runtime's
crash point for it (``_nasaga_crash``): the participant's
step handler after it wrote its business row, or the ``at``-th eligibility check of an
orchestrator unit. If the unit reaches the point the host is killed (SIGKILL) holding its open
transaction and a fresh host attaches to the same databases; the model takes the fate "rolled
back" (both points lie before COMMIT), the caller heard nothing and the envelope stays on the
wire. The after-step comparison then reads every acknowledged fact back from the new host, and
the redelivery must take effect exactly once. A unit that never reached its point is an
ordinary unit, compared as one.
"""

from __future__ import annotations

from typing import Protocol

from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from conformance._machine import step
from conformance._violations import Violation
from conformance.saga import _world as w
from conformance.saga._base import indexes
from conformance.saga._deliveries import DECISIONS, decisions
from conformance.saga._faults import DUPLICATE, HOST_CRASH, TIMER_RACE
from conformance.saga._machine import SagaMachine
from conformance.saga._nasaga_crash import HostKilled
from conformance.saga._nasaga_race import RaceReport
from model import saga as m


class Crashable(Protocol):
    """What a runtime with ``RuntimeCapabilities.host_crash`` also offers."""

    crash: _Switch


class Racing(Protocol):
    """What a runtime with ``RuntimeCapabilities.timer_race`` also offers."""

    def race_timers(self, same_owner: bool, takeover: bool) -> RaceReport: ...


class _Switch(Protocol):
    def arm(self, point: str, at: int) -> None: ...


#: A kill costs a fresh host and a re-attached namespace (~1-2 s: nasaga's schema checks run
#: again): at most one per example, and only when the program draws it (``kill``, one in two),
#: so the ci profile stays cheap; the coverage targets need one kill of each kind per run. Both
#: bounds are per example and drawn, so a replay runs the same program.
KILLS_PER_EXAMPLE = 1
#: A race is a start, two claims and the fires on two more hosts (~0.2-0.5 s): bounded the same way.
RACES_PER_EXAMPLE = 1
rarely = st.sampled_from([True, False])
#: What the opening directs on a runtime with these faults (``HostFaultRules.opening``), in every
#: example, its kind picked by a bit of the opening's ``key``: drawn with a small chance each
#: (a sixth), Hypothesis's correlated examples left kinds in 2 of 45 (a predicted miss of 0.13).
WIRE_KINDS = ("wire-commit-reply-lost", "wire-commit-reset-before")
KILL_UNITS = ("command", "result")
RACE_KINDS = ("one-fire", "takeover")


class HostFaultRules(SagaMachine):
    opening_uploads = True  # its opening does, drawn, with the relay crash after (below)
    kills = 0
    races = 0

    @initialize(key=indexes, upload=st.booleans(), answer=st.sampled_from(["succeed", "reject"]))
    def opening(self, key: int, upload: bool, answer: str) -> None:
        """The saga opening (``SagaMachine.opening``), then, on this runtime only, what a random
        program met in a tenth of its examples or fewer (nasaga-pg, 104 ci examples: a wire
        COMMIT reply lost in 7, a kill in a participant's step in 13, a timer race to one fire in
        15, a non-JSON start and sagas of two tenants at a scrape in 19, a conflicting publication
        in none of 20; docs/ci-gate.md "reach"), through the same recorded rules a program draws,
        so it replays as it ran: a publication conflicting with the order definition (S-CAT-03,
        refused, nothing changes) and an invalid one (S-DEF-01); in half the examples the upload
        definition activated and a schema-declared non-JSON start of it (another tenant:
        S-START-08, S-OBS-03), its command published by a relay that dies before recording it,
        published again and the later copy delivered first with its ACK lost; then a kill
        inside a participant's step or inside the eligibility check of the orchestrator's result
        unit (S-TX-01, S-PART-03), a wire fault on the redelivery's COMMIT (S-TX-02) and a
        two-host timer race to one fire or a takeover (S-TIMER-02, N-04), each kind picked by a
        bit of ``key``. Each rule keeps its per-example bound (``KILLS_PER_EXAMPLE``,
        ``RACES_PER_EXAMPLE``), so the program draws no second kill or race. The first command is
        answered as drawn (``answer``): always succeeding, it left the first saga's reserve to
        compensate at quiescence, and ``terminal:COMPENSATED`` fell from 6 of 20 examples to 3
        of 51."""
        super().opening(key=key)
        self.catalog(op="republish", index=1)  # a conflicting digest under the order key: refused
        self.catalog(op="invalid", index=key)  # an invalid definition: refused
        if upload:
            self.catalog(op="activate_upload", index=0)
            self.start(key=key, payload=0, revoked=-1, fate="committed", definition="upload")
            # Its command: the relay dies after publishing it, the next relay publishes it again,
            # and the second copy is delivered first (a reorder) with its ACK lost.
            self.relay_commands(crash=True)
            self.deliver_command(index=1, decision=answer, fate="committed", ack_lost=True)
        # The kill first, then the wire fault on the redelivery of the envelope it left on the
        # wire: a command killed in its step, or a result killed in its eligibility check (after
        # the command's first delivery put it there).
        kill = KILL_UNITS[key // 2 % 2]
        if kill == "result":
            self.deliver_command(index=0, decision=answer, fate="committed", ack_lost=False)
        if self.caps.host_crash:
            self.crash_host(unit=kill, at=1, index=0, decision=answer, kill=True)
        arm = getattr(self, "arm_wire_fault", None)  # the wire rule (_wire), with a fault proxy
        if arm is not None:
            arm(kind=WIRE_KINDS[key % 2])
            if kill == "result":
                self.deliver_result(index=0, fate="committed", ack_lost=False)
            else:
                self.deliver_command(index=0, decision=answer, fate="committed", ack_lost=False)
        if self.caps.timer_race:
            takeover = RACE_KINDS[key // 4 % 2] == "takeover"
            self.race_timers(same_owner=key % 2 == 0, takeover=takeover, race=True)

    def _crash(self, point: str, at: int) -> None:
        runtime: Crashable = self.runtime  # type: ignore[assignment]
        runtime.crash.arm(point, at)

    def _killed(self, unit: str, answer: HostKilled) -> None:
        self.kills += 1
        self.context.inject(HOST_CRASH.name)
        self.context.reach(f"host-crash:{answer.where.split()[0]}")
        self.note(f"{unit}: the host was killed at its crash point ({answer.where}); a fresh host resumed")

    @precondition(lambda self: self.caps.host_crash)
    @rule(
        unit=st.sampled_from(["command", "command", "result", "start"]),
        at=st.integers(1, 4),
        index=indexes,
        decision=decisions,
        kill=rarely,
    )
    @step
    def crash_host(self, unit: str, at: int, index: int, decision: str, kill: bool = True) -> None:
        """Kill the host inside one unit (issue 20 item 4); judge what the fresh host shows."""
        if not kill or not self._allows(HOST_CRASH) or self.kills >= KILLS_PER_EXAMPLE:
            return
        if unit == "command":
            self._crash_command(index, decision, relay_crash=at == 4)
        elif unit == "result":
            self._crash_result(index, at)
        else:
            self._crash_start(index, at)

    @precondition(lambda self: self.caps.timer_race)
    @rule(same_owner=st.booleans(), takeover=st.booleans(), race=rarely)
    @step
    def race_timers(self, same_owner: bool, takeover: bool, race: bool = True) -> None:
        """Two host processes race one due timer (``_nasaga_race``: exclusive leases, one fire,
        a stale holder refused after a takeover; S-TIMER-02 as decided in N-04)."""
        if not race or not self._allows(TIMER_RACE) or self.races >= RACES_PER_EXAMPLE:
            return
        self.races += 1
        racing: Racing = self.runtime  # type: ignore[assignment]
        report = racing.race_timers(same_owner, takeover)
        self.context.inject(TIMER_RACE.name)
        self.context.reach("timer-race:takeover-fenced" if takeover else "timer-race:one-fire")
        self.note(f"timer race: host {report.winner} won; fires {dict(report.fires)}")

    def _crash_command(self, index: int, decision: str, relay_crash: bool = False) -> None:
        """``relay_crash`` (``at`` is a crash arrival for results and starts only): the relay dies
        after publishing the first pending command and before recording it (``RELAY_CRASH``), and
        its restart publishes it again, so the killed unit picks from a wire holding a copy."""
        if relay_crash:
            self._relay_commands(crash=True)
        self._relay_commands(crash=False)
        if not self.wire.commands:
            return
        position = self._pick(index, len(self.wire.commands))  # a non-head envelope: a reorder
        command = self.wire.commands[position]
        owner = command.owner
        chosen = DECISIONS[decision]
        if chosen is m.Decision.UNKNOWN:
            chosen = m.Decision.SUCCEED  # the effect-uncertain fault is the delivery rule's
        delivery = m.CommandDelivery(command, w.ORCHESTRATOR, chosen, m.CommitFate.COMMITTED)
        _, probe = m.handle_command(self.model_parts[owner], delivery)
        if isinstance(probe, m.DuplicateCommand) and not self._allows(DUPLICATE):
            self.wire.commands.pop(position)
            return
        self._crash("step", 1)
        actual = self.runtime.handle_command(owner, command, w.ORCHESTRATOR, chosen)
        if isinstance(actual, HostKilled):
            killed = m.CommandDelivery(command, w.ORCHESTRATOR, chosen, m.CommitFate.ROLLED_BACK)
            self.model_parts[owner], expected = m.handle_command(self.model_parts[owner], killed)
            if not isinstance(expected, m.RolledBack):
                # nasaga ran the step handler for a command the model never lets take effect.
                raise Violation(
                    "S-PART-02" if isinstance(expected, m.DuplicateCommand) else "S-PART-05",
                    "the participant ran its step for a command the model does not execute",
                    {"model": repr(expected)[:300], "command": command.command_id},
                )
            self._killed(f"command {command.command_id}", actual)
            return  # never acknowledged: the envelope stays on the wire
        self.model_parts[owner], expected = m.handle_command(self.model_parts[owner], delivery)
        self.expect("S-PART-01", expected, actual)
        if expected.verdict is not m.DeliveryVerdict.REDELIVER:
            self.wire.commands.pop(position)

    def _crash_result(self, index: int, at: int) -> None:
        self._relay_results(crash=False)
        if not self.wire.results:
            return
        position = self._pick(index, len(self.wire.results))
        producer, envelope = self.wire.results[position]
        delivery = m.ResultDelivery(envelope, producer, self.now, m.CommitFate.COMMITTED)
        _, probe = m.handle_result(self.model, delivery)
        if isinstance(probe, m.DuplicateResult) and not self._allows(DUPLICATE):
            self.wire.results.pop(position)
            return
        self._crash("eligibility", at)
        actual = self.runtime.handle_result(envelope, producer, self.now)
        if isinstance(actual, HostKilled):
            killed = m.ResultDelivery(envelope, producer, self.now, m.CommitFate.ROLLED_BACK)
            self.model, _ = m.handle_result(self.model, killed)  # nothing of it committed
            self._killed(f"result {envelope.message_id}", actual)
            return
        self.model, expected = m.handle_result(self.model, delivery)
        self.expect("S-ORCH-02", expected, actual)
        if expected.verdict is not m.DeliveryVerdict.REDELIVER:
            self.wire.results.pop(position)

    def _crash_start(self, index: int, at: int) -> None:
        business_key = w.BUSINESS_KEYS[index % len(w.BUSINESS_KEYS)]
        request = m.StartSaga(w.KEY, business_key, json_payload=w.PAYLOADS[index % len(w.PAYLOADS)])
        self._crash("eligibility", at)
        actual = self.runtime.start_saga(request, self.now, None)
        fate = m.CommitFate.ROLLED_BACK if isinstance(actual, HostKilled) else m.CommitFate.COMMITTED
        self.model, expected = m.start_saga(self.model, m.StartAttempt(request, self.now, commit=fate))
        if isinstance(actual, HostKilled):
            self._killed(f"start {business_key}", actual)
            return
        self.expect("S-START-01", expected, actual)
