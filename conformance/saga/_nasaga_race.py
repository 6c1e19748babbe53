"""Two nasaga hosts racing the same durable timers, with fencing (issue 20, item 4; S-TIMER-02).

Theory of operation
-------------------
Two host processes of their own (not the run's main host, which the crash fault kills) attach to
one *race namespace* per run, where the world's order definition is published and activated.
Each race starts a probe saga there; its step-timeout timer is due exactly ``timeout_ms`` later.
At that harness time both hosts claim due timers *at the same moment* (two threads, one request
each, in flight together), as the same timer owner or as two owners; then either both fire
what they hold, or the lease runs out first and the loser takes the timer over while the winner
still holds its token, and both fire at that same harness time. What must hold, as decided in
docs/nasaga-findings.md N-04 (nasaga fences by token equality plus lease expiry; its tokens are
random, so the model's "strictly increasing tokens" does not apply):

* no timer is in both claims (the lease is exclusive while it runs);
* the probe's timer is claimed by exactly one host at the due time;
* after the takeover, the stale holder's fire is refused (``skipped_fencing_lost``) and the new
  holder's applies; without one, the holder's fire applies;
* each timer is fired at most once overall, and the probe saga took the timeout exactly once
  (``CANCELLING`` or, for the world's resolve-only step, ``WAITING_RESOLUTION``, with one cancel
  or resolve command in the outbox).

The probes are nasaga's own sagas on real timers; the model does not follow them (the saga
model's timer rules do not apply to nasaga: N-03), so this is a property check beside the model.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import attrs

from conformance._violations import HarnessEnvironmentError, Violation
from conformance.saga import _world as w
from conformance.saga._nasaga_terms import nasaga_definition
from impls.nasaga import Engine, NasagaHost, NasagaHostError, TimerClaim

T = TypeVar("T")
#: Every race runs at the same harness times: a probe started at ``START_MS``, its timer due one
#: step timeout (100 ms) later, a takeover ``LEASE_MS`` after that. The follow-up timers earlier
#: probes left (their cancel/resolve timeouts, due a step timeout after their fire or later) are
#: never due then, so each race meets its own probe's timer only and costs the same as the first.
START_MS = 10_000_000
LEASE_MS = 40
STEP = 0  # the probe's first step (its timer is the one raced)


@attrs.define
class RaceWorld:
    hosts: tuple[NasagaHost, NasagaHost]
    namespace: str
    probes: itertools.count[int] = attrs.field(factory=itertools.count)


_WORLDS: dict[tuple[str, str], RaceWorld] = {}


def _world(engine: Engine, dsn: str) -> RaceWorld:
    world = _WORLDS.get((engine, dsn))
    if world is not None and all(h.alive() for h in world.hosts):
        return world
    namespace = f"race{os.getpid()}x{len(_WORLDS)}"
    try:
        first = NasagaHost.start(engine, dsn=dsn, timeout=60.0)
        second = NasagaHost.start(engine, dsn=dsn, timeout=60.0)
        first.open_namespace(namespace, list(w.OWNERS))
        second.open_namespace(namespace, list(w.OWNERS), mode="attach")
        first.publish_definition(namespace, nasaga_definition(w.ARTIFACT))
        first.activate_definition(namespace, w.KEY.tenant, w.KEY.workflow, w.KEY.version)
        second.call("refresh_registry", namespace=namespace)
    except NasagaHostError as exc:
        raise HarnessEnvironmentError(f"the timer-race hosts did not start: {exc}") from exc
    if not _WORLDS:
        atexit.register(_close_worlds)
    world = RaceWorld((first, second), namespace)
    _WORLDS[(engine, dsn)] = world
    return world


def _close_worlds() -> None:
    for world in _WORLDS.values():
        first, second = world.hosts
        second.close()
        if first.alive():
            with contextlib.suppress(NasagaHostError):
                first.close_namespace(world.namespace, drop=True)
        first.close()
    _WORLDS.clear()


def _together(first: Callable[[], T], second: Callable[[], T]) -> tuple[T, T]:
    """Both calls in flight at once (each host answers one request at a time)."""
    answers: list[Any] = [None, None]
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def run(index: int, body: Callable[[], T]) -> None:
        barrier.wait()
        try:
            answers[index] = body()
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i, b)) for i, b in enumerate((first, second))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return answers[0], answers[1]


@attrs.frozen
class RaceReport:
    winner: int  # which host claimed the probe's timer
    takeover: bool
    fires: Mapping[str, tuple[str, ...]]  # timer id -> outcomes, both hosts
    tokens: tuple[str, ...]


def race(engine: Engine, dsn: str, same_owner: bool, takeover: bool) -> RaceReport:
    """One race (module doc); raises ``Violation`` for a broken fencing rule."""
    world = _world(engine, dsn)
    try:
        return _race(world, same_owner, takeover)
    except NasagaHostError as exc:
        if exc.is_environment:
            raise HarnessEnvironmentError(f"a timer-race host failed: {exc}") from exc
        raise


def _race(world: RaceWorld, same_owner: bool, takeover: bool) -> RaceReport:
    first, second = world.hosts
    ns = world.namespace
    saga_id = f"probe-{next(world.probes)}"
    start = START_MS
    first.start_saga(
        ns,
        saga_id=saga_id,
        tenant=w.KEY.tenant,
        workflow=w.KEY.workflow,
        version=w.KEY.version,
        business_key=saga_id,
        now_ms=start,
        payload={"probe": saga_id},
    )
    due = start + w.ARTIFACT.steps[STEP].timeout_ms
    owners = ("racer", "racer") if same_owner else ("racer-a", "racer-b")
    claims = _together(
        lambda: first.claim_due_timers(ns, owners[0], now_ms=due, lease_ms=LEASE_MS),
        lambda: second.claim_due_timers(ns, owners[1], now_ms=due, lease_ms=LEASE_MS),
    )
    held = [{t.timer_id for t in c.timers} for c in claims]
    if held[0] & held[1]:
        raise Violation(
            "S-TIMER-02",
            "two hosts hold a lease on one timer at once",
            {"timers": ",".join(sorted(held[0] & held[1]))},
        )
    probe = [
        t.timer_id for c in claims for t in c.timers if t.saga_id == saga_id and t.kind == "step-timeout"
    ]
    if len(probe) != 1:
        raise Violation(
            "S-TIMER-02", "the due timer was not claimed by exactly one host", {"claimed": ",".join(probe)}
        )
    winner = 0 if probe[0] in held[0] else 1
    now, spent = due, list[tuple[int, TimerClaim]]()
    if takeover:
        now = due + LEASE_MS  # the winner's lease has just run out; the loser takes over
        loser = 1 - winner
        retaken = world.hosts[loser].claim_due_timers(ns, owners[loser], now_ms=now, lease_ms=LEASE_MS)
        if probe[0] not in {t.timer_id for t in retaken.timers}:
            raise Violation("S-TIMER-02", "an expired lease was not taken over", {"timer": probe[0]})
        spent.append((loser, claims[loser]))
        claims = (retaken, claims[1]) if loser == 0 else (claims[0], retaken)
    fires = _fire_all(world, claims, now)
    _check(world, saga_id, probe[0], fires, takeover, winner)
    for index, claim in [*enumerate(claims), *spent]:
        world.hosts[index].call("drop_claim", namespace=ns, claim=claim.claim)
    return RaceReport(winner, takeover, fires, tuple(c.token for c in claims))


def _fire_all(
    world: RaceWorld, claims: tuple[TimerClaim, TimerClaim], now: int
) -> dict[str, tuple[str, ...]]:
    """Both hosts fire every timer they hold, together (after a takeover the old winner still
    fires with its old token)."""
    ns = world.namespace

    def fire(index: int) -> list[tuple[str, str]]:
        host, claim = world.hosts[index], claims[index]
        return [
            (t.timer_id, host.fire_timer(ns, claim.claim, t.timer_id, now_ms=now).outcome)
            for t in claim.timers
        ]

    done = _together(lambda: fire(0), lambda: fire(1))
    outcomes: dict[str, list[str]] = {}
    for answers in done:
        for timer, outcome in answers:
            outcomes.setdefault(timer, []).append(outcome)
    return {timer: tuple(sorted(o)) for timer, o in outcomes.items()}


def _check(
    world: RaceWorld,
    saga_id: str,
    timer: str,
    fires: Mapping[str, tuple[str, ...]],
    takeover: bool,
    winner: int,
) -> None:
    for timer_id, outcomes in fires.items():
        if outcomes.count("applied") > 1:
            raise Violation(
                "S-TIMER-02", "one timer fired twice", {"timer": timer_id, "outcomes": list(outcomes)}
            )
    expected = ("applied", "skipped_fencing_lost") if takeover else ("applied",)
    if fires.get(timer) != expected:
        raise Violation(
            "S-TIMER-02",
            "the raced timer's fires are not one applied (and the stale holder's refused)",
            {"timer": timer, "outcomes": list(fires.get(timer, ())), "takeover": takeover, "winner": winner},
        )
    host = world.hosts[0]
    instance = host.load_instance(world.namespace, w.KEY.tenant, saga_id)
    status = None if instance is None else instance.status
    # The timeout's transition: a cancel barrier, or resolution for a resolve-only step
    # (docs/nasaga.md, "Timeouts and attempts"); either way one command, issued once.
    issued = [
        row
        for row in host.read_outbox(world.namespace, "orchestrator")
        if row.saga_id == saga_id and row.kind == "command" and row.phase in ("cancel", "resolve")
    ]
    if status not in ("CANCELLING", "WAITING_RESOLUTION") or len(issued) != 1:
        raise Violation(
            "S-TIMER-05",
            "the probe saga did not take its timeout exactly once",
            {"status": str(status), "timeout_commands": len(issued)},
        )
