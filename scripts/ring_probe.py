"""Lightweight transactions on the private three-node ring while nodes go away (issue 14 item 6).

Run after ``python -m conformance.services._cassandra_ring up`` with the same environment (a private
``RATCHET_SERVICES_DIR`` and ports): replication factor 3, QUORUM/SERIAL; one LWT with all nodes
up, node 3 killed (SIGKILL) and three LWTs, node 2 paused (SIGSTOP) and two LWTs, node 2 resumed and
one more. Each answer is printed with the store's own translation of the driver's error
(``impls.cql._boundary.translate``). Loopback only; the ring's pids come from its own pid files.
Node 3 stays down: ``... _cassandra_ring up`` starts it again on its data directory.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
import uuid

from cassandra import ConsistencyLevel
from cassandra.query import SimpleStatement

from conformance.services._cassandra_ring import nodes, ring_contact
from conformance.services._server import say_to
from conformance.services._settings import Settings
from impls.cql._boundary import Operation, translate
from impls.cql._bridge import execute
from impls.cql._session import CqlSettings, open_keyspace


async def lwt(session: object) -> str:
    key = uuid.uuid4().hex
    statement = SimpleStatement(
        f"INSERT INTO ring_probe.t (k, v) VALUES ('{key}', 1) IF NOT EXISTS",
        consistency_level=ConsistencyLevel.QUORUM,
        serial_consistency_level=ConsistencyLevel.SERIAL,
    )
    started = time.monotonic()
    try:
        page = await execute(session, statement, timeout=10.0)
    except Exception as exc:
        error = translate(exc, Operation.CONDITIONAL_WRITE)
        return f"{type(exc).__name__} -> {error.kind.value} after {time.monotonic() - started:.2f}s"
    return f"applied={page.rows[0].get('[applied]')} after {time.monotonic() - started:.2f}s"


async def main() -> None:
    settings = Settings.from_env()
    ring = nodes(settings, say_to(sys.stdout))
    pids = [node.live() for node in ring]
    if None in pids:
        raise SystemExit("the ring is not up: python -m conformance.services._cassandra_ring up")
    cql = CqlSettings(
        contact=ring_contact(settings),
        keyspace="ring_probe",
        replication={"class": "SimpleStrategy", "replication_factor": "3"},
    )
    session = (await open_keyspace(cql)).session
    table = SimpleStatement("CREATE TABLE IF NOT EXISTS ring_probe.t (k text PRIMARY KEY, v int)")
    await execute(session, table, timeout=60.0)
    print("all up:", await lwt(session))
    os.kill(pids[2], signal.SIGKILL)  # type: ignore[arg-type]
    print("node 3 killed")
    for _ in range(3):
        print("  one down:", await lwt(session))
    os.kill(pids[1], signal.SIGSTOP)  # type: ignore[arg-type]
    print("node 2 paused")
    try:
        for _ in range(2):
            print("  two away:", await lwt(session))
    finally:
        os.kill(pids[1], signal.SIGCONT)  # type: ignore[arg-type]
    print("node 2 resumed")
    await asyncio.sleep(3)
    print("  after resume:", await lwt(session))


if __name__ == "__main__":
    asyncio.run(main())
