"""Durable timers with fencing tokens.

Each dispatched command has one timeout timer. A worker *claims* a due timer and gets a
lease with a fencing token that no other claim used (S-TIMER-03; the model draws it from one
table-wide counter, so its tokens also increase, which the rule does not require). Renew,
release and complete (the timeout transition in the orchestrator transaction) carry the token;
they succeed only while it is the timer's current lease token and the lease has not expired
(S-TIMER-01). A worker that lost authority — its lease taken over, or simply run out, whether
or not anyone claimed since — is refused with ``StaleFencingToken`` and no change (S-TIMER-02,
S-TIMER-04; seed: 失权 worker 不能继续推进, docs/nasaga-findings.md N-04).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

import attrs

from ._canonical import derive_id
from ._canonical import memoised_id as _ids
from ._errors import NoSuchTimer, StaleFencingToken, TimerLeased, TimerNotDue


@_ids
def timer_id_for(command_id: str) -> str:
    """The timeout timer of one command (S-ID-01)."""
    return derive_id("tmr", command_id)


@attrs.frozen
class Lease:
    worker: str
    token: int
    expires_ms: int


@attrs.frozen
class Timer:
    timer_id: str
    saga_id: str
    command_id: str
    due_ms: int
    lease: Lease | None = None


@attrs.frozen
class TimerTable:
    timers: Mapping[str, Timer] = attrs.field(factory=dict)
    #: The last fencing token handed out; never decreases, survives timer removal.
    last_token: int = attrs.field(default=0, validator=attrs.validators.ge(0))


def next_token(last_token: int) -> int:
    """The fencing token after ``last_token``: one no claim used before (S-TIMER-03).

    pre: last_token >= 0
    post: __return__ > last_token
    """
    return last_token + 1


def fence_holds(timer: Timer, token: int, now_ms: int) -> bool:
    """True iff ``token`` is the timer's current, unexpired lease token (S-TIMER-01, S-TIMER-04).

    post: __return__ <= (timer.lease is not None and timer.lease.token == token)
    post: not __return__ or (timer.lease is not None and now_ms < timer.lease.expires_ms)
    """
    lease = timer.lease
    return lease is not None and lease.token == token and now_ms < lease.expires_ms


@attrs.frozen
class ClaimTimer:
    timer_id: str
    worker: str
    now_ms: int
    lease_ms: int = attrs.field(validator=attrs.validators.gt(0))


@attrs.frozen
class TimerClaimed:
    timer_id: str
    token: int
    lease_expires_ms: int


ClaimOutcome: TypeAlias = TimerClaimed | NoSuchTimer | TimerNotDue | TimerLeased


def claim_timer(table: TimerTable, request: ClaimTimer) -> tuple[TimerTable, ClaimOutcome]:
    """Lease a due timer whose previous lease (if any) expired (S-TIMER-01, S-TIMER-03).

    post: not isinstance(__return__[1], TimerClaimed) or __return__[1].token > table.last_token
    post: isinstance(__return__[1], TimerClaimed) or __return__[0] == table
    """
    timer = table.timers.get(request.timer_id)
    if timer is None:
        return table, NoSuchTimer(request.timer_id)
    if request.now_ms < timer.due_ms:
        return table, TimerNotDue(timer.timer_id, timer.due_ms)
    if timer.lease is not None and request.now_ms < timer.lease.expires_ms:
        return table, TimerLeased(timer.timer_id, timer.lease.expires_ms)
    token = next_token(table.last_token)
    lease = Lease(request.worker, token, request.now_ms + request.lease_ms)
    leased = attrs.evolve(timer, lease=lease)
    return (
        TimerTable({**table.timers, timer.timer_id: leased}, token),
        TimerClaimed(timer.timer_id, token, lease.expires_ms),
    )


def check_fence(
    table: TimerTable, timer_id: str, token: int, now_ms: int
) -> Timer | NoSuchTimer | StaleFencingToken:
    """The timer if ``token`` is its current unexpired lease token, else the typed refusal
    (S-TIMER-02, S-TIMER-04: an expired lease lost its authority even if nobody took over)."""
    timer = table.timers.get(timer_id)
    if timer is None:
        return NoSuchTimer(timer_id)
    if not fence_holds(timer, token, now_ms):
        current = None if timer.lease is None else timer.lease.token
        return StaleFencingToken(timer_id, token, current)
    return timer


@attrs.frozen
class RenewTimer:
    timer_id: str
    token: int
    now_ms: int
    lease_ms: int = attrs.field(validator=attrs.validators.gt(0))


@attrs.frozen
class TimerRenewed:
    timer_id: str
    token: int
    lease_expires_ms: int


def renew_timer(
    table: TimerTable, request: RenewTimer
) -> tuple[TimerTable, TimerRenewed | NoSuchTimer | StaleFencingToken]:
    """Extend the lease of the current token holder (S-TIMER-01, S-TIMER-02, S-TIMER-04).

    post: isinstance(__return__[1], TimerRenewed) or __return__[0] == table
    """
    fenced = check_fence(table, request.timer_id, request.token, request.now_ms)
    if not isinstance(fenced, Timer):
        return table, fenced
    assert fenced.lease is not None  # check_fence guarantees a lease
    expires = max(fenced.lease.expires_ms, request.now_ms + request.lease_ms)
    renewed = attrs.evolve(fenced, lease=attrs.evolve(fenced.lease, expires_ms=expires))
    return (
        attrs.evolve(table, timers={**table.timers, fenced.timer_id: renewed}),
        TimerRenewed(fenced.timer_id, request.token, expires),
    )


@attrs.frozen
class ReleaseTimer:
    timer_id: str
    token: int
    now_ms: int


@attrs.frozen
class TimerReleased:
    timer_id: str


def release_timer(
    table: TimerTable, request: ReleaseTimer
) -> tuple[TimerTable, TimerReleased | NoSuchTimer | StaleFencingToken]:
    """Give a lease back without firing; the timer becomes claimable (S-TIMER-01, S-TIMER-04).

    post: isinstance(__return__[1], TimerReleased) or __return__[0] == table
    """
    fenced = check_fence(table, request.timer_id, request.token, request.now_ms)
    if not isinstance(fenced, Timer):
        return table, fenced
    released = attrs.evolve(fenced, lease=None)
    return (
        attrs.evolve(table, timers={**table.timers, fenced.timer_id: released}),
        TimerReleased(fenced.timer_id),
    )


def schedule_timer(table: TimerTable, timer: Timer) -> TimerTable:
    """Add a timer (inside the orchestrator transaction that dispatched its command)."""
    return attrs.evolve(table, timers={**table.timers, timer.timer_id: timer})


def remove_timer(table: TimerTable, timer_id: str) -> TimerTable:
    """Drop a timer whose command was answered or timed out; the token counter stays."""
    if timer_id not in table.timers:
        return table
    return attrs.evolve(table, timers={k: v for k, v in table.timers.items() if k != timer_id})


def due_timers(table: TimerTable, now_ms: int) -> tuple[Timer, ...]:
    """Timers a worker could claim at ``now_ms``, in (due, id) order."""
    ready = [
        t
        for t in table.timers.values()
        if t.due_ms <= now_ms and (t.lease is None or t.lease.expires_ms <= now_ms)
    ]
    return tuple(sorted(ready, key=lambda t: (t.due_ms, t.timer_id)))
