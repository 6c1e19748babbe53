"""The launcher: bring the project's servers up on loopback, report them, stop them.

Theory of operation
-------------------
Each server is one ``Server`` subclass in a module of its own (``_redis``, ``_postgres``,
``_mariadb``, ``_cassandra``, ``_kafka``): its Debian packages, its directory under the services
directory, its pid file and the command-line marker that makes a pid *ours*, how it starts (with the
durable or the fast configuration) and how it stops. What is the same for all is here:

- ``up``: install what is missing (``_apt``), then for each server: already ours and answering ->
  nothing; ours but not answering yet -> wait; the endpoint answered by some other process (another
  checkout's) -> use it; a port taken by anything else -> refuse; else start it. Readiness is a real
  client request through the harness's own probe (``conformance.services.probe``, the drivers),
  never an open port. The JVMs boot slowest: they are launched first and waited for last.
- ``down``: stop our instance (a server of another checkout is left alone), remove a stale pid file.
- ``status``: one line per server; false when one is down.
- Runs are serialised by a lock file in the services directory; servers never inherit it.

``restart`` (the crash suite's way back after kill -9) is ``up`` of one server, quietly.
"""

from __future__ import annotations

import contextlib
import fcntl
import sys
import time
from collections.abc import Iterator, Sequence
from typing import TextIO

from conformance.services._apt import install_packages
from conformance.services._cassandra import Cassandra
from conformance.services._kafka import Kafka
from conformance.services._mariadb import MariaDB
from conformance.services._postgres import Postgres
from conformance.services._probe import probe
from conformance.services._process import (
    ServiceControlError,
    cpu_seconds,
    pid_from_file,
    port_open,
    port_owner,
)
from conformance.services._redis import Redis
from conformance.services._server import Say, Server, log_tail, say_to
from conformance.services._settings import Settings
from impls.endpoints import SERVICE_NAMES


def servers(settings: Settings, say: Say) -> dict[str, Server]:
    kinds: tuple[type[Server], ...] = (Redis, Postgres, MariaDB, Cassandra, Kafka)
    return {kind.name: kind(settings, say) for kind in kinds}


PORT_RELEASE_S = 5.0
ALL_SERVERS = ("redis", "postgres", "mariadb", "cassandra", "kafka")


def resolve(names: Sequence[str]) -> list[str]:
    """``all`` expanded, names checked, order kept, duplicates dropped."""
    wanted = list(names) or ["all"]
    if "all" in wanted:
        wanted = list(ALL_SERVERS)
    for name in wanted:
        if name not in ALL_SERVERS:
            raise ServiceControlError(f"unknown service '{name}' (expected: {' '.join(ALL_SERVERS)} or all)")
    return list(dict.fromkeys(wanted))


@contextlib.contextmanager
def locked(settings: Settings, say: Say) -> Iterator[None]:
    settings.root.mkdir(parents=True, exist_ok=True)
    with (settings.root / ".lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say("waiting for another scripts/services run to finish")
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _launch(server: Server) -> float | None:
    """Make sure it is launched; the time it was started at, or None when nothing is to be waited for."""
    pid = server.live_pid()
    if pid is not None:
        if server.ready():
            server.say(f"{server.name}: already up (pid {pid}, {server.endpoint_text})")
            server.check_durability()
            return None
        server.say(f"{server.name}: process {pid} is running but not answering yet; waiting for it")
        return time.monotonic()
    foreign = server.foreign()
    if foreign is not None:
        server.say(f"{server.name}: {server.endpoint_text} already answers, served by {foreign}; using it")
        return None
    for port in server.settings.service_ports(server.name):
        # A server just killed (the crash suite's kill -9) may hold its ports a moment longer.
        deadline = time.monotonic() + PORT_RELEASE_S
        while port_open(port) and time.monotonic() < deadline:
            time.sleep(0.1)
        if port_open(port):
            raise ServiceControlError(
                f"{server.name}: port {port} on 127.0.0.1 is already taken by "
                f"{port_owner(port) or 'another process'} (not the instance under {server.settings.root}); "
                "stop that first"
            )
    server.say(f"{server.name}: starting on {server.endpoint_text} (data under {server.dir})")
    server.dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    server.start()
    return started


def _wait(server: Server, started: float | None) -> None:
    """Until it answers a real client request (short polls: a restart after kill -9 waits here)."""
    if started is None:
        return
    deadline = started + server.ready_timeout_s
    gone_since: float | None = None
    while True:
        if server.ready():
            pid = server.live_pid()
            elapsed = time.monotonic() - started
            server.say(f"{server.name}: up (pid {pid or '?'}, {server.endpoint_text}) after {elapsed:.1f}s")
            return
        if server.live_pid() is None:
            # Redis daemonizes and writes its pid file a moment after the launcher returns.
            gone_since = gone_since or time.monotonic()
            if time.monotonic() - gone_since > 1.0:
                raise server.fail("process exited before it became ready")
        else:
            gone_since = None
        if time.monotonic() >= deadline:
            raise server.fail(f"not ready after {server.ready_timeout_s:.0f}s")
        time.sleep(0.1)


def up(names: Sequence[str], settings: Settings | None = None, say: Say | None = None) -> None:
    """Install when missing, start and wait for ``names`` (``all`` by default)."""
    settings = settings or Settings.from_env()
    say = say or say_to(sys.stdout)
    wanted = resolve(names)
    known = servers(settings, say)
    chosen = [known[name] for name in wanted]
    begin = time.monotonic()
    with locked(settings, say):
        install_packages([pkg for server in chosen for pkg in server.packages()], say)
        started = {server.name: _launch(server) for server in chosen if server.jvm}
        for server in chosen:
            if not server.jvm:
                _wait(server, _launch(server))
        for server in chosen:
            if server.jvm:
                _wait(server, started[server.name])
    say(f"all requested services are up ({time.monotonic() - begin:.1f}s): {' '.join(wanted)}")


def down(names: Sequence[str], settings: Settings | None = None, say: Say | None = None) -> None:
    settings = settings or Settings.from_env()
    say = say or say_to(sys.stdout)
    known = servers(settings, say)
    with locked(settings, say):
        for name in resolve(names):
            server = known[name]
            pid = server.live_pid()
            if pid is None:
                foreign = server.foreign()
                if foreign is not None:
                    say(
                        f"{name}: not started from here; {server.endpoint_text} is served by {foreign}, "
                        "left alone"
                    )
                elif pid_from_file(server.pid_file) is not None:
                    say(f"{name}: not running (removing stale pid file)")
                    server.pid_file.unlink(missing_ok=True)
                else:
                    say(f"{name}: not running")
                continue
            begin = time.monotonic()
            say(f"{name}: stopping pid {pid}{_cpu_text(pid)}")
            server.stop(pid)
            say(f"{name}: stopped after {time.monotonic() - begin:.1f}s")


def _cpu_text(pid: int) -> str:
    """The server's CPU time so far (what make test's budget is spent on besides the harness)."""
    seconds = cpu_seconds(pid)
    return "" if seconds is None else f" (CPU {seconds:.1f}s)"


def status(names: Sequence[str], settings: Settings | None = None, out: TextIO | None = None) -> bool:
    """One line per server; True when every one answers."""
    settings = settings or Settings.from_env()
    out = out or sys.stdout
    known = servers(settings, say_to(sys.stderr))
    all_up = True
    for name in resolve(names):
        server = known[name]
        pid = server.live_pid()
        if pid is None:
            foreign = server.foreign()
            if foreign is not None:
                print(f"{name:<10} up    {server.endpoint_text}, served by {foreign}", file=out)
                continue
            stale = " (stale pid file)" if pid_from_file(server.pid_file) is not None else ""
            print(f"{name:<10} down{stale}", file=out)
            all_up = False
        elif server.ready():
            print(f"{name:<10} up    pid {pid:<8} {server.endpoint_text}", file=out)
        else:
            print(f"{name:<10} running (pid {pid}) but not answering on {server.endpoint_text}", file=out)
            all_up = False
    return all_up


def restart(name: str, settings: Settings) -> None:
    """Start ``name`` again on ``settings`` (after kill -9) and return once it answers; quiet."""
    up([name], settings, say=lambda _line: None)


USAGE = """\
usage: scripts/services up|down|status|env [redis|postgres|mariadb|cassandra|kafka|all ...]
       scripts/services ring up|down|status

  up      install when missing (Debian packages, cached downloads) and start; waits until each
          answers a real client request (default: all)
  down    stop the servers started from here (default: all)
  status  one line per server; exit 3 when one is down
  env     the `export RATCHET_...=...` lines of the endpoints in use
  ring    three Cassandra nodes on 127.0.0.1-3 (RF 3; the deep profile's ring, docs/faults.md);
          about 3.8 GiB and a few minutes to start; never part of `make services`

Knobs: RATCHET_SERVICES_DIR, RATCHET_DURABILITY (durable|fast), RATCHET_*_PORT (a private set),
RATCHET_CASSANDRA_VERSION, MAX_HEAP_SIZE / HEAP_NEWSIZE, RATCHET_KAFKA_VERSION, RATCHET_KAFKA_HEAP
(conformance/services/_settings.py).
"""


def main(argv: Sequence[str] | None = None) -> int:
    """``up|down|status|env [service ...]``, or ``probe [NAME ...]`` (the endpoints in the environment)."""
    args = list(sys.argv[1:] if argv is None else argv)
    command, names = (args[0], args[1:]) if args else ("", [])
    if command == "ring":  # its own launcher: three nodes of one Cassandra (conformance.crash._ring)
        from conformance.services._cassandra_ring import main as ring

        return ring(names)
    if command == "probe":
        failed = 0
        for name in names or SERVICE_NAMES:
            reason = probe(name)
            print(f"{name}: {'ok' if reason is None else reason}")
            failed += reason is not None
        return 1 if failed else 0
    try:
        settings = Settings.from_env()
    except ServiceControlError as exc:  # a knob with a value it cannot have: a usage error
        print(f"[services] ERROR: {exc}", file=sys.stderr)
        return 2
    try:
        if command == "up":
            up(names, settings)
        elif command in ("down", "stop"):
            down(names, settings)
        elif command == "status":
            return 0 if status(names, settings) else 3
        elif command == "env":
            print("\n".join(settings.env_lines()))
        elif command in ("-h", "--help", "help"):
            print(USAGE, end="")
        else:
            print(USAGE, end="", file=sys.stderr)
            return 2
    except ServiceControlError as exc:
        print(f"[services] ERROR: {exc}", file=sys.stderr)
        for line in log_tail(getattr(exc, "logs", ())):
            print(f"[services] {line}", file=sys.stderr)
        return 1
    return 0
