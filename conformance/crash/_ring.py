"""The shipped CQL store on the private three-node ring, and a ``ServiceControl`` that kills one node.

For the ``deep`` profile only (issue 14 item 6; docs/faults.md, "A three-node Cassandra ring"):
``open_ring_store`` / ``open_ring_outbox`` are ``impls.cql``'s own factories given the ring's three
contact points and a keyspace of replication factor 3 (``CqlSettings.from_endpoint``), so every
lightweight transaction runs at QUORUM/SERIAL over three replicas and needs two of them.
``ring_control`` is the ``server-crash`` seam for the ring: a cycle SIGKILLs *one* node and starts
it again on its data directory; it returns once that node's process runs again and the other two
answer CQL, so the ring serves (2 of 3) while the node replays its commit log and rejoins, and the
steps that follow run their lightweight transactions against a ring with one replica away and then
rejoining (``WriteTimeout`` / ``Unavailable`` / the driver's retry on the next host are what they
meet; the store's translations and the contract's rules as ever). Before the next kill
(``before_crash``, called by ``conformance/crash/_commit.server_crash``) the control waits until all
three nodes answer, so one node at most is ever away; the victims go round the ring (node 3, then
the seed and first contact point, then node 2). ``rejoin_s``: restart until the node itself answered.

Run it (the ring up first: ``python -m conformance.services._cassandra_ring up`` with a private
``RATCHET_SERVICES_DIR`` and ports)::

    conformance run --store conformance.crash._ring:open_ring_store \\
        --outbox conformance.crash._ring:open_ring_outbox --control conformance.crash._ring:ring_control \\
        --name cql-ring --suite durability --profile deep --time-budget 10m
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from conformance.services._cassandra_ring import NODES, RingNode, nodes
from conformance.services._process import ServiceControlError, kill_tree, port_open
from conformance.services._server import say_to
from conformance.services._settings import Settings
from impls.api import MembershipDirectory
from impls.cql import CqlMessageStore, CqlOutbox, open_cql_outbox, open_cql_store

REPLICATION_FACTOR = 3
REJOIN_TIMEOUT_S = 360.0


def _answers(node: RingNode) -> bool:
    """The node answers CQL (its port is tried first: the driver logs a whole traceback for a
    node that refuses the connection)."""
    return node.live() is not None and port_open(node.port, node.address) and node.ready()


def ring_endpoint(settings: Settings | None = None) -> str:
    """The three contact points and the keyspace's replication factor, as ``CqlSettings`` reads them."""
    ring = nodes(settings or Settings.from_env(), say_to(sys.stderr))
    contacts = ",".join(node.endpoint_text for node in ring)
    return f"{contacts}?replication_factor={REPLICATION_FACTOR}"


async def open_ring_store(namespace: str, membership: MembershipDirectory) -> CqlMessageStore:
    """The shipped CQL store on the ring (``impls.cql.open_cql_store``)."""
    return await open_cql_store(namespace, membership, endpoint=ring_endpoint())


async def open_ring_outbox(namespace: str) -> CqlOutbox:
    return await open_cql_outbox(namespace, endpoint=ring_endpoint())


class RingNodeControl:
    """``ServiceControl`` of the ring: one node at a time is killed and started again."""

    crash_profiles = ("deep",)  # a node's restart costs a minute or more on this machine

    def __init__(self, ring: list[RingNode]) -> None:
        self._ring = ring
        self._victim = NODES - 1  # node 3 first: neither the seed nor the first contact point
        self.rejoin_s: list[float] = []  # restart until the node itself answered CQL
        self.waited_s: list[float] = []  # before_crash: until every node answered

    @property
    def _node(self) -> RingNode:
        return self._ring[self._victim]

    @property
    def name(self) -> str:
        return f"cassandra ring node {self._node.index} at {self._node.endpoint_text} (of {NODES}, RF 3)"

    @property
    def data_dir(self) -> Path:
        return self._node.dir

    def durability(self) -> str:
        try:
            recorded = (self._node.dir / "durability").read_text().strip()
        except OSError:
            recorded = "unknown"
        return f"{recorded}, RF {REPLICATION_FACTOR}, QUORUM/SERIAL (the ring's other two replicas)"

    def before_crash(self) -> None:
        """Wait until every node answers (the last victim rejoined): then one kill leaves two."""
        started = time.monotonic()
        while not all(_answers(node) for node in self._ring):
            if time.monotonic() - started > REJOIN_TIMEOUT_S:
                away = ", ".join(str(n.index) for n in self._ring if not _answers(n))
                raise ServiceControlError(f"ring node(s) {away} still away after {REJOIN_TIMEOUT_S:.0f}s")
            time.sleep(1.0)
        self.waited_s.append(time.monotonic() - started)

    def pid(self) -> int:
        pid = self._node.live()
        if pid is None:
            raise ServiceControlError(f"ring node {self._node.index} is not running")
        return pid

    def kill(self) -> None:
        pid = self._node.live()
        if pid is None:
            raise ServiceControlError(f"ring node {self._node.index} is not running")
        kill_tree(pid)

    def restart(self) -> None:
        """Start the node on its data directory; return once it runs and the other two answer."""
        node = self._node
        started = time.monotonic()
        node.start()
        others = [other for other in self._ring if other is not node]
        while not all(_answers(other) for other in others) or node.live() is None:
            if node.live() is None:
                raise ServiceControlError(f"ring node {node.index} exited while starting ({node.dir}/log)")
            if time.monotonic() - started > REJOIN_TIMEOUT_S:
                raise ServiceControlError(f"the ring did not answer within {REJOIN_TIMEOUT_S:.0f}s")
            time.sleep(0.2)
        threading.Thread(target=self._until_rejoined, args=(node, started), daemon=True).start()
        self._victim = (self._victim + 1) % NODES  # the next cycle kills the next node, once this one is back

    def _until_rejoined(self, node: RingNode, started: float) -> None:
        while time.monotonic() - started < REJOIN_TIMEOUT_S:
            if node.live() is None:
                return  # killed again before it answered
            if _answers(node):
                self.rejoin_s.append(time.monotonic() - started)
                return
            time.sleep(1.0)


_control: RingNodeControl | None = None


def ring_control() -> RingNodeControl:
    """The run's one ring control (the ``control`` factory role)."""
    global _control
    if _control is None:
        _control = RingNodeControl(nodes(Settings.from_env(), say_to(sys.stderr)))
    return _control
