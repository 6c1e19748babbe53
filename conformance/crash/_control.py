"""The service-control seam: what the harness needs to kill a backend's server and bring it back.

Theory of operation
-------------------
The ``server-crash`` fault kills the real server process with SIGKILL (no shutdown hook runs: what
was not on disk is gone) and starts it again on the same data directory. The harness cannot do that
to a server it does not control, so a backend *declares* a ``ServiceControl`` (the factory role
``control``: a ``module:function`` returning one). A backend without it simply does not get the
fault; the coverage gate then says "server-crash: not applicable".

A control knows which process serves the backend (``pid``), where its data lives (``data_dir``),
how to kill it (``kill``: the process and its children, returning once they are gone) and how to
start it again (``restart``: returning once it answers a real client query, not merely once the
port is open). ``crash_cycle`` does both and times them. ``InFlightCrash`` runs a cycle on a
thread, so the kill lands while a call of the machine's thread is in flight.

Implementations: ``_project.ScriptedService`` (the services ``scripts/services`` starts) and
``_local.LocalRedis`` (a private redis-server the harness spawns itself: examples and tests).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path
from typing import Protocol, runtime_checkable

import attrs


class ServiceControlError(Exception):
    """The server cannot be controlled (not found, not ours, did not come back): an environment error."""


@runtime_checkable
class ServiceControl(Protocol):
    @property
    def name(self) -> str:
        """The service and where it is, for messages: ``redis at 127.0.0.1:16379``."""
        ...

    @property
    def data_dir(self) -> Path: ...

    def pid(self) -> int:
        """The live server's pid; ``ServiceControlError`` when none of ours is running."""
        ...

    def kill(self) -> None:
        """SIGKILL the server and its children; return once every one of them is gone."""
        ...

    def restart(self) -> None:
        """Start the server again on ``data_dir`` with the same configuration; return once it
        answers a real client query. ``ServiceControlError`` when it does not come back."""
        ...

    def durability(self) -> str:
        """What the running configuration promises, as the server reports it (for messages)."""
        ...


@attrs.frozen
class CrashCycle:
    """One kill -9 and restart, timed."""

    service: str
    pid: int
    kill_s: float  # SIGKILL until the process was gone
    restart_s: float  # gone until the server answered a real query

    @property
    def total_s(self) -> float:
        return self.kill_s + self.restart_s

    def describe(self) -> str:
        return (
            f"{self.service}: pid {self.pid} killed in {self.kill_s:.2f}s, "
            f"answering again after {self.restart_s:.2f}s"
        )


def crash_cycle(control: ServiceControl) -> CrashCycle:
    """Kill the server and start it again on the same data directory; raises ``ServiceControlError``."""
    pid = control.pid()
    started = time.perf_counter()
    control.kill()
    killed = time.perf_counter()
    control.restart()
    return CrashCycle(control.name, pid, killed - started, time.perf_counter() - killed)


class InFlightCrash:
    """A crash cycle on a thread, ``delay_s`` after ``start``: it lands while a call is in flight.

    ``wait`` blocks until the server answers again and re-raises what the cycle raised; the
    machine's readers await ``until_back`` instead of failing while the server is down.
    """

    def __init__(self, control: ServiceControl, delay_s: float) -> None:
        self._control = control
        self._delay_s = delay_s
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ratchet-server-crash", daemon=True)
        self.cycle: CrashCycle | None = None
        self.error: BaseException | None = None

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            time.sleep(self._delay_s)
            self.cycle = crash_cycle(self._control)
        except BaseException as error:  # reported by wait(), on the machine's thread
            self.error = error
        finally:
            self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    async def until_back(self) -> None:
        """Await the restart without blocking the event loop (the call in flight keeps running)."""
        import asyncio

        while not self._done.is_set():
            await asyncio.sleep(0.02)

    def wait(self, timeout_s: float) -> CrashCycle:
        if not self._done.wait(timeout_s):
            raise ServiceControlError(f"{self._control.name} did not come back within {timeout_s:.0f}s")
        if self.error is not None:
            if isinstance(self.error, ServiceControlError):
                raise self.error
            raise ServiceControlError(f"the crash cycle of {self._control.name} failed: {self.error!r}")
        assert self.cycle is not None
        return self.cycle


# --- processes -----------------------------------------------------------------------------------


def pid_alive(pid: int) -> bool:
    """Alive and not a zombie (a killed daemon's zombie lingers until its reaper runs)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith("State:"):
            return "Z" not in line.split(":", 1)[1].split()[0]
    return True


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (PostgreSQL's backends, for instance)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses; split after the last ")".
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: list[int] = []
    frontier = [pid]
    while frontier:
        for child in children.get(frontier.pop(), ()):
            found.append(child)
            frontier.append(child)
    return found


def kill_tree(pid: int, timeout_s: float = 20.0) -> None:
    """SIGKILL ``pid`` and everything below it at once (a power cut, not a shutdown)."""
    victims = [pid, *descendants(pid)]
    for victim in victims:
        with contextlib.suppress(ProcessLookupError):
            os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    while any(pid_alive(v) for v in victims):
        if time.monotonic() > deadline:
            raise ServiceControlError(f"pid {pid} survived SIGKILL for {timeout_s:.0f}s")
        time.sleep(0.01)
