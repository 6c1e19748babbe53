"""nasaga's Redis Streams connector in its host (``--backend nasaga-redis-stream``): messages per
second through nasaga's publisher and consumer beside the raw ``XADD`` / ``XREADGROUP`` / ``XACK``
floor on the same Redis, measured in the same run.

One host (PostgreSQL), one namespace, one definition of one step (p0's, as bench/_nasaga_grpc_bench.py);
the host opens nasaga's stream set (``stream_open``, hosts/nasaga/src/transport.rs: HMAC key ``b1``,
one consumer ``c1`` of group ``work``). Slices alternate between

- the floor: batches of ``BATCH`` entries of a command's size, ``XADD`` each, one ``XREADGROUP``,
  one ``XACK`` (bench/_transport_bench.py's ``floor_batch``, from this process); and
- the connector: ``BATCH`` sagas started beforehand (untimed), then nasaga's outbox dispatcher
  publishing their commands through ``SagaRedisStreamPublisher`` (``stream_dispatch``: the outbox
  read and marked on PostgreSQL, each command signed and ``XADD``-ed), then ``poll_once`` rounds of
  ``SagaRedisStreamCommandConsumer`` (``stream_poll``: claim, read, verify, the participant's
  transaction on PostgreSQL, ``XACK``) until all are acknowledged. A message counts once acknowledged.

Each host call is one JSON line over the host's pipe, so the connector's figure includes that
round trip per dispatch and per poll round (two or three per batch), not per message. Sequential:
per-message costs, not a capacity. Nothing is checked against a target.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from bench._figures import Tally
from bench._nasaga_grpc_bench import BATCH, DEFINITION, SLICES, TENANT, WORKFLOW, _Sagas
from bench._saga_floor import sync_timed_loop
from impls.endpoints import redis_url
from impls.nasaga import NasagaHost
from impls.transport import open_redis_client

SECRET = b"bench-secret"


def nasaga_stream_slices(seconds: float, floor_batch: Any) -> tuple[Tally, Tally]:
    """(floor, connector) tallies of one run; ``floor_batch(client, key)`` is one floor batch."""
    host = NasagaHost.start("postgres", timeout=60.0)
    ns = f"bench_{uuid.uuid4().hex[:10]}"
    client = open_redis_client()
    floor_key = f"ratchet:{ns}:{{floor}}"
    keys = [floor_key]
    try:
        host.open_namespace(ns, ["p0"])
        host.publish_definition(ns, DEFINITION)
        host.call("activate_definition", namespace=ns, tenant=TENANT, workflow=WORKFLOW, version=1)
        opened = host.call(
            "stream_open",
            namespace=ns,
            redis_url=redis_url(),
            prefix=f"ratchet:{ns}",
            routes=[{"owner": "p0", "step": "reserve"}],
            consumers=["c1"],
            group="work",
            min_idle_ms=60_000,  # nothing is left pending: no claim takes anything
            signing={"key_id": "b1", "secret": SECRET.hex()},
            verifying={"b1": SECRET.hex()},
        )
        keys += [opened["streams"]["p0"]["stream"], opened["streams"]["p0"]["dead_letters"]]
        client.xgroup_create(floor_key, "g", id="0", mkstream=True)
        sagas = _Sagas(host, ns)
        floor, mine = Tally(), Tally()
        for _ in range(SLICES):
            floor.add(sync_timed_loop(lambda: floor_batch(client, floor_key), seconds / SLICES))
            mine = _connector_slice(host, ns, sagas, seconds / SLICES, mine)
        return Tally(floor.count * BATCH, floor.elapsed, floor.cpu), mine
    finally:
        try:
            host.call("stream_close", namespace=ns)
            client.delete(*keys)
            markers = list(client.scan_iter(match=f"ratchet:{ns}:*"))
            if markers:
                client.delete(*markers)
            host.close_namespace(ns, drop=True)
        finally:
            client.close()
            host.close()


def _connector_slice(host: NasagaHost, ns: str, sagas: _Sagas, seconds: float, tally: Tally) -> Tally:
    count, elapsed, cpu = tally.count, tally.elapsed, tally.cpu
    spent = 0.0
    while spent < seconds:
        started = len(sagas.batch())  # untimed: the starts are the orchestrator's, not the connector's
        wall, proc = time.perf_counter(), time.process_time()
        published = int(host.call("stream_dispatch", namespace=ns)["published"])
        if published != started:
            raise RuntimeError(f"nasaga's dispatcher published {published} of {started} commands")
        acked = 0
        for _ in range(4 * BATCH):
            report = host.call("stream_poll", namespace=ns, owner="p0", consumer="c1")
            acked += int(report["acked"])
            if int(report["dead_lettered"]) or int(report["retained"]):
                raise RuntimeError(f"nasaga's consumer did not acknowledge every command: {report}")
            if acked >= published:
                break
        else:
            raise RuntimeError(f"nasaga's consumer acknowledged {acked} of {published} commands")
        took = time.perf_counter() - wall
        spent += took
        count, elapsed, cpu = count + acked, elapsed + took, cpu + time.process_time() - proc
    return Tally(count, elapsed, cpu)
