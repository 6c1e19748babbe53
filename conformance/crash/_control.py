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
port is open). ``crash_cycle`` does both and times them. Optional: ``crash_profiles`` (the
profiles that may restart it) and ``before_crash()`` (block until the service can take the next
kill: the ring's control waits there until its last victim rejoined, ``_ring.RingNodeControl``).
``InFlightCrash`` runs a cycle on a thread, so the kill lands while a call of the machine's thread
is in flight.

Implementations: ``_project.ScriptedService`` (the services ``scripts/services`` starts) and
``_local.LocalRedis`` (a private redis-server the harness spawns itself: examples and tests).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Protocol, runtime_checkable

import attrs

# The process helpers and the error live with the launcher (conformance/services), the one home
# of starting, finding and killing the project's servers.
from conformance.services._process import ServiceControlError as ServiceControlError
from conformance.services._process import command_line as command_line
from conformance.services._process import descendants as descendants
from conformance.services._process import kill_tree as kill_tree
from conformance.services._process import pid_alive as pid_alive


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
