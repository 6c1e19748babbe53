"""A three-node Cassandra ring on 127.0.0.1, 127.0.0.2 and 127.0.0.3, for the ``deep`` profile.

Each node is the launcher's ``Cassandra`` with its own directory (``<services>/cassandra-ring-N``),
its own listen and native address (127.0.0.N: the three share the storage and CQL ports, each on its
own loopback address) and its own JMX port (``RATCHET_CASSANDRA_JMX_PORT`` + N - 1, which binds on
127.0.0.1 for all of them). Tokens are spaced evenly (one per node), the first node is the seed,
and every node starts with ``auto_bootstrap: false``: an empty ring needs no streaming. The
keyspace the harness creates on it asks for replication factor 3, so QUORUM and SERIAL need two
live replicas: one node stopped leaves every lightweight transaction possible (and the driver
retrying elsewhere), two stopped (or one paused while a Paxos round waits on it) give real
``Unavailable`` / CAS ``WriteTimeout``.

``python -m conformance.services._cassandra_ring up|down|status`` (start order: seed first, then the others);
``RATCHET_SERVICES_DIR`` and the port variables as for ``scripts/services``. Never the shared
single node: this ring lives in its own directories, and ``down`` stops only the pids it wrote.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

from conformance.services._cassandra import Cassandra
from conformance.services._probe import probe
from conformance.services._process import pid_from_file, pid_matches
from conformance.services._server import Say, say_to
from conformance.services._settings import Settings

NODES = 3
_TOKEN_SPAN = 2**64


def node_address(index: int) -> str:
    return f"127.0.0.{index}"


def ring_contact(settings: Settings) -> str:
    """The contact point a client of the ring is given (the seed; the driver finds the others)."""
    return f"{node_address(1)}:{settings.main_port('cassandra')}"


class RingNode(Cassandra):
    """Node ``index`` (1-based) of the ring."""

    def __init__(self, settings: Settings, say: Say, index: int) -> None:
        super().__init__(settings, say)
        self.index = index

    @property
    def dir(self) -> Path:
        return self.settings.root / f"cassandra-ring-{self.index}"

    @property
    def address(self) -> str:
        return node_address(self.index)

    @property
    def endpoint_text(self) -> str:
        return f"{self.address}:{self.port}"

    @property
    def jmx_port(self) -> int:
        return self.settings.port("RATCHET_CASSANDRA_JMX_PORT") + self.index - 1

    @property
    def token(self) -> int:
        return -(2**63) + (self.index - 1) * (_TOKEN_SPAN // NODES)

    def write_conf(self) -> None:
        super().write_conf()
        storage = self.settings.port("RATCHET_CASSANDRA_STORAGE_PORT")
        text = self.yaml.read_text()
        text = text.replace("cluster_name: ratchet", "cluster_name: ratchet-ring")
        text = text.replace("initial_token: 0", f"initial_token: {self.token}")
        text = re.sub(r"listen_address: .*", f"listen_address: {self.address}", text)
        text = re.sub(r"rpc_address: .*", f"rpc_address: {self.address}", text)
        text = re.sub(r'seeds: ".*"', f'seeds: "{node_address(1)}:{storage}"', text)
        # The node's view of its peers: gossip, not a snitch of data centres.
        self.yaml.write_text(text)

    def jvm_options(self) -> list[str]:
        jmx = "-Dcassandra.jmx.local.port="
        out: list[str] = []
        for option in super().jvm_options():
            if option.startswith(jmx):
                option = f"{jmx}{self.jmx_port}"
            elif option.startswith("-Dcassandra.ring_delay_ms="):
                option = "-Dcassandra.ring_delay_ms=2000"
            elif option.startswith("-Dcassandra.skip_wait_for_gossip_to_settle"):
                continue  # peers to meet: gossip settles before the node serves
            out.append(option)
        return out

    def ready(self) -> bool:
        return probe("cassandra", timeout=5.0, endpoint=self.endpoint_text) is None

    def live(self) -> int | None:
        pid = pid_from_file(self.pid_file)
        return pid if pid_matches(pid, self.marker()) else None


def nodes(settings: Settings, say: Say) -> list[RingNode]:
    return [RingNode(settings, say, index) for index in range(1, NODES + 1)]


def start_node(node: RingNode, timeout_s: float = 300.0) -> float:
    """Start one node (if it is not running) and wait until it answers CQL; the seconds it took."""
    started = time.monotonic()
    if node.live() is None:
        node.start()
    while not node.ready():
        if node.live() is None:
            raise node.fail(f"ring node {node.index} exited while starting")
        if time.monotonic() - started > timeout_s:
            raise node.fail(f"ring node {node.index} did not answer within {timeout_s:.0f}s")
        time.sleep(1.0)
    return time.monotonic() - started


def stop_node(node: RingNode) -> None:
    pid = node.live()
    if pid is not None:
        node.stop(pid)


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    say = say_to(sys.stdout)
    settings = Settings.from_env()
    ring = nodes(settings, say)
    command = args[0] if args else "status"
    if command == "up":
        for node in ring:
            seconds = start_node(node)
            say(f"ring node {node.index} ({node.endpoint_text}) answers after {seconds:.1f}s")
    elif command == "down":
        for node in reversed(ring):
            stop_node(node)
    elif command != "status":
        say("usage: scripts/services ring up|down|status")
        return 2
    down = 0
    for node in ring:
        pid = node.live()
        memory = f", RSS {_rss_mib(pid):.0f} MiB" if pid is not None else ""
        say(f"ring node {node.index} ({node.endpoint_text}): {'up' if pid else 'down'}{memory}")
        down += pid is None
    # As ``scripts/services status``: 3 when a node is down (after ``down``, that is the point).
    return 3 if down and command == "status" else 0


if __name__ == "__main__":
    raise SystemExit(main())
