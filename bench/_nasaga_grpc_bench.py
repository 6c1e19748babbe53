"""nasaga's gRPC transport in its host (``--backend nasaga-grpc``): messages per second through
nasaga's ``SagaCommandTransport.Deliver`` beside a unary floor on the same mTLS channel.

One host (PostgreSQL), one namespace, one definition of one step (p0's); the host's listeners with
the run's own certificates (``grpc_open``, hosts/nasaga/src/grpc.rs). Slices alternate between

- the floor: ``grpc.health.v1.Health/Check`` on nagrpc's listener, the one unary RPC nasaga's
  listener answers without its engine; and
- the connector: commands of sagas started beforehand (untimed, in batches of ``BATCH``), each
  delivered once as the orchestrator: nasaga's binding check, decoding, the participant's
  transaction on PostgreSQL (inbox, step, result outbox), the receipt. A message counts once its
  ``committed`` receipt arrived.

Both are sequential on one connection: per-message costs, not a capacity. Nothing is checked.
"""

from __future__ import annotations

import json
import time
import uuid

from bench._figures import Tally
from bench._saga_floor import sync_timed_loop
from impls.nasaga import NasagaHost
from impls.nasaga._grpc import NasagaGrpcClient, NasagaReceipt, NasagaReceiptKind, Service, open_listeners
from impls.transport import Pki

SLICES = 4
BATCH = 16
TENANT, WORKFLOW = "bench", "single"
DEFINITION = {
    "workflow": WORKFLOW,
    "version": 1,
    "tenant": TENANT,
    "steps": [
        {
            "name": "reserve",
            "owner": "p0",
            "compensation": "compensable",
            "cancel_mode": "local-fenceable",
            "resolution": "forbidden",
            "timeout_ms": 60_000,
            "timeout_policy": "accept-late-success",
        }
    ],
}


class _Sagas:
    """Commands of sagas started in batches, outside the timed part."""

    def __init__(self, host: NasagaHost, ns: str) -> None:
        self.host, self.ns = host, ns
        self.after = 0
        self.ready: list[bytes] = []

    def batch(self) -> list[bytes]:
        for _ in range(BATCH):
            saga = f"b{uuid.uuid4().hex[:16]}"
            self.host.start_saga(
                self.ns,
                saga_id=saga,
                tenant=TENANT,
                workflow=WORKFLOW,
                version=1,
                business_key=saga,
                now_ms=time.time_ns() // 1_000_000,
                payload={"n": 1},
            )
        fresh = self.host.read_outbox(self.ns, "orchestrator", after_id=self.after)
        rows = [r for r in fresh if r.kind == "command"]
        self.after = max([self.after, *(r.id for r in rows)])
        return [json.dumps(r.envelope).encode() for r in rows]


def nasaga_grpc_slices(seconds: float) -> tuple[Tally, Tally]:
    """(floor, connector) tallies of one run."""
    pki = Pki.create(("orchestrator", "p0"))
    host = NasagaHost.start("postgres", timeout=60.0)
    ns = f"bench_{uuid.uuid4().hex[:10]}"
    client: NasagaGrpcClient | None = None
    try:
        host.open_namespace(ns, ["p0"])
        host.publish_definition(ns, DEFINITION)
        host.call("activate_definition", namespace=ns, tenant=TENANT, workflow=WORKFLOW, version=1)
        opened = open_listeners(host, ns, pki, "orchestrator", ("p0",))
        address = f"127.0.0.1:{opened['listeners']['command:p0']}"
        client = NasagaGrpcClient(address, pki.ca.pem, pki.clients["orchestrator"])
        sagas = _Sagas(host, ns)
        floor, mine = Tally(), Tally()
        for _ in range(SLICES):
            floor.add(sync_timed_loop(lambda: _check(client.serving()), seconds / SLICES))
            mine = _connector_slice(client, sagas, seconds / SLICES, mine)
        host.call("grpc_close", namespace=ns)
        return floor, mine
    finally:
        if client is not None:
            client.close()
        try:
            host.close_namespace(ns, drop=True)
        finally:
            host.close()


def _check(ok: bool) -> None:
    if not ok:
        raise RuntimeError("nasaga's listener stopped serving")


def _connector_slice(client: NasagaGrpcClient, sagas: _Sagas, seconds: float, tally: Tally) -> Tally:
    committed = NasagaReceipt(NasagaReceiptKind.COMMITTED)
    count, elapsed, cpu = tally.count, tally.elapsed, tally.cpu
    spent = 0.0
    while spent < seconds:
        bodies = sagas.batch()
        wall, proc = time.perf_counter(), time.process_time()
        for body in bodies:
            answer = client.deliver(Service.COMMAND, body)
            if answer != committed:
                raise RuntimeError(f"nasaga answered {answer!r}, not committed")
        took = time.perf_counter() - wall
        spent += took
        count, elapsed, cpu = count + len(bodies), elapsed + took, cpu + time.process_time() - proc
    return Tally(count, elapsed, cpu)
