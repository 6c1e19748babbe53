"""The shipped CQL store on the private three-node ring, and a ``ServiceControl`` that kills one node.

For the ``deep`` profile only (issue 14 item 6; docs/faults.md, "A three-node Cassandra ring"):
``open_ring_store`` / ``open_ring_outbox`` are ``impls.cql``'s own factories given the ring's three
contact points and a keyspace of replication factor 3 (``CqlSettings.from_endpoint``), so every
lightweight transaction runs at QUORUM/SERIAL over three replicas and needs two of them.
``ring_control`` is the ``server-crash`` seam for the ring: a cycle SIGKILLs *one* node and starts
it again on its data directory; it returns once that node's process runs again and the other two
answer CQL, so the ring serves (2 of 3) while the node replays its commit log and rejoins, and the
examples that follow run their LWTs against a ring with one replica away, then back (``WriteTimeout``,
``Unavailable`` and the driver's retry on the next host are what they meet, S-TX/C-ERR as ever).
At most one node is ever away: a node still rejoining is the next cycle's victim again; only when
all three answer does the victim move on to the next node (the seed and control-connection host
too). ``rejoin_s`` keeps how long each restarted node took to answer CQL itself.

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
from conformance.services._process import ServiceControlError, kill_tree
from conformance.services._server import say_to
from conformance.services._settings import Settings
from impls.api import MembershipDirectory
from impls.cql import CqlMessageStore, CqlOutbox, open_cql_outbox, open_cql_store

REPLICATION_FACTOR = 3
REJOIN_TIMEOUT_S = 360.0


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
        self._lock = threading.Lock()
        self.rejoin_s: list[float] = []

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

    def pid(self) -> int:
        """The victim's pid: the node still away, if one is, else the node after the last victim."""
        with self._lock:
            away = [i for i, node in enumerate(self._ring) if node.live() is None or not node.ready()]
            if len(away) > 1:
                numbers = ", ".join(str(i + 1) for i in away)
                raise ServiceControlError(f"ring nodes {numbers} are away: not killing another one")
            if away:
                self._victim = away[0]
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
        while not all(other.ready() for other in others) or node.live() is None:
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
            if node.ready():
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
