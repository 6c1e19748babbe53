"""Saga units at the wire: round trips per unit and units per second, nasaga beside Ratchet's runtime.

Both runtimes reach the same PostgreSQL through the harness's fault proxy (``conformance.wire``,
never armed here), which counts every payload request it forwards by its first word (``BEGIN``,
``COMMIT``, ``INSERT``, ``SELECT``, ...; ``_protocols``). A request is one round trip: psycopg
(Ratchet's SQL saga backend) and sqlx (nasaga) each wait for an answer before the next, so a
statement is one request, or two when sqlx first prepares it (Parse/Describe, then Bind/Execute).
The count is the same method for both, in the same run; the SQL backend's own statement counter
(section 6) says the same for Ratchet. PostgreSQL's ``pg_stat_statements`` is not loaded on the
project's server, so the wire is where both can be counted alike.

Units, each fresh and replayed, as in ``_saga_cost``: ``start`` (a new business key), ``start
again`` (the same request: already exists), ``command`` (the first step's command executed,
``SUCCEED``), ``command again`` (a duplicate). Rates: sequential fresh starts, then the commands
they dispatched, on one namespace; nasaga's are calls through its host (one JSON line each way).
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import attrs

from bench._figures import Spread
from bench._saga_throughput import saga_factory
from bench._saga_workload import (
    PARTICIPANT,
    business_key,
    command_for,
    opened,
    participant,
    ready_orchestrator,
    start_request,
)
from bench._workload import new_namespace
from conformance.backends import SagaBackendSpec
from conformance.saga import _world as w
from conformance.saga._nasaga_terms import nasaga_definition
from conformance.wire import FaultProxy, route
from model.saga import Decision, saga_id_for

UNITS = ("start", "start again", "command", "command again")


@attrs.frozen
class WireUnitCost:
    backend: str
    unit: str
    round_trips: Spread  # payload requests per unit at the proxy
    by_label: dict[str, float]  # median per first word
    units_per_second: Spread | None  # fresh units only


@attrs.frozen
class _Driver:
    """One runtime's four units, by serial number ``n`` (``business_key(n)``)."""

    start: Callable[[int], object]
    command: Callable[[int], object]


def _counted(proxy: FaultProxy, body: Callable[[], object]) -> Counter[str]:
    before = Counter(proxy.requests)
    body()
    after = Counter(proxy.requests)
    after.subtract(before)
    return +after


@contextmanager
def _ratchet(spec: SagaBackendSpec, endpoint: str) -> Iterator[_Driver]:
    opener: Callable[..., Any] = saga_factory(spec)
    factory = functools.partial(opener, endpoint=endpoint)
    with opened(factory, new_namespace()) as (orch_db, part_db):
        orchestrator, part = ready_orchestrator(orch_db), participant(part_db)

        def command(n: int) -> object:
            return part.handle_command(command_for(n), w.ORCHESTRATOR, Decision.SUCCEED)

        yield _Driver(lambda n: orchestrator.start_saga(start_request(n), 0), command)


@contextmanager
def _nasaga(endpoint: str) -> Iterator[_Driver]:
    from impls.nasaga import NasagaHost

    host = NasagaHost.start("postgres", dsn=endpoint, timeout=60.0)
    ns = f"b{new_namespace()}"[:30]
    try:
        host.open_namespace(ns, list(w.OWNERS))
        host.publish_definition(ns, nasaga_definition(w.ARTIFACT))
        host.activate_definition(ns, w.KEY.tenant, w.KEY.workflow, w.KEY.version)
        envelopes: dict[str, Any] = {}

        def start(n: int) -> object:
            key = business_key(n)
            saga_id = saga_id_for(w.KEY.tenant, w.KEY.workflow, key)
            return host.start_saga(
                ns,
                saga_id=saga_id,
                tenant=w.KEY.tenant,
                workflow=w.KEY.workflow,
                version=w.KEY.version,
                business_key=key,
                now_ms=0,
                payload={"qty": 1},
            )

        def command(n: int) -> object:
            saga_id = saga_id_for(w.KEY.tenant, w.KEY.workflow, business_key(n))
            if saga_id not in envelopes:
                for row in host.read_outbox(ns, "orchestrator"):
                    if row.kind == "command" and row.saga_id is not None:
                        envelopes.setdefault(row.saga_id, row.envelope)
            return host.deliver_command(ns, PARTICIPANT, envelopes[saga_id], "succeeded")

        yield _Driver(start, command)
    finally:
        if host.alive():
            host.close_namespace(ns, drop=True)
        host.close()


def _loop(call: Callable[[int], object], first: int, seconds: float, most: int | None) -> tuple[int, Spread]:
    done, began = 0, time.perf_counter()
    while time.perf_counter() - began < seconds and (most is None or done < most):
        call(first + done)
        done += 1
    return done, Spread.of([done / (time.perf_counter() - began)])


def measure_wire(spec: SagaBackendSpec, repeats: int, rate_seconds: float) -> tuple[WireUnitCost, ...]:
    """Round trips per unit (``repeats`` of each) and fresh-unit rates, through one proxy."""
    wire = route("postgres")
    proxy = wire.proxy
    driver_cm = _nasaga(wire.endpoint) if spec.role == "runtime" else _ratchet(spec, wire.endpoint)
    counts: dict[str, list[Counter[str]]] = {u: [] for u in UNITS}
    rates: dict[str, Spread] = {}
    with driver_cm as driver:
        driver.start(0)
        driver.command(0)  # warm-up: connections, prepared statements
        for n in range(1, repeats + 1):
            counts["start"].append(_counted(proxy, functools.partial(driver.start, n)))
            counts["start again"].append(_counted(proxy, functools.partial(driver.start, n)))
            counts["command"].append(_counted(proxy, functools.partial(driver.command, n)))
            counts["command again"].append(_counted(proxy, functools.partial(driver.command, n)))
        first = repeats + 1
        started, rates["start"] = _loop(driver.start, first, rate_seconds, None)
        _, rates["command"] = _loop(driver.command, first, rate_seconds, started)  # their commands
    return tuple(
        WireUnitCost(
            spec.name,
            unit,
            Spread.of([float(sum(c.values())) for c in counts[unit]]),
            {
                label: float(sorted(c[label] for c in counts[unit])[len(counts[unit]) // 2])
                for label in sorted({k for c in counts[unit] for k in c})
            },
            rates.get(unit),
        )
        for unit in UNITS
    )
