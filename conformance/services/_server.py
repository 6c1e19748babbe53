"""A server the launcher manages: what each one says about itself, and what they share.

Each kind is a subclass in a module of its own (``_redis``, ``_postgres``, ``_mariadb``,
``_cassandra``, ``_kafka``); ``_launcher`` drives them.
"""

from __future__ import annotations

import abc
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar, TextIO

from conformance.services._probe import probe
from conformance.services._process import (
    ServiceControlError,
    pid_from_file,
    pid_matches,
    port_open,
    port_owner,
    stop_pid,
)
from conformance.services._settings import Settings

Say = Callable[[str], None]


def say_to(stream: TextIO) -> Say:
    return lambda line: print(f"[services] {line}", file=stream, flush=True)


class ServerFailed(ServiceControlError):
    """A server did not start or come up; ``logs`` are the files that tell why."""

    def __init__(self, name: str, message: str, logs: Sequence[Path] = ()) -> None:
        super().__init__(f"{name}: {message}")
        self.logs = tuple(logs)


def log_tail(paths: Sequence[Path], lines: int = 30) -> list[str]:
    shown: list[str] = []
    for path in paths:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        if text.strip():
            shown.append(f"---- last lines of {path} ----")
            shown += [line[:400] for line in text.splitlines()[-lines:]]
            shown.append(f"---- end of {path} ----")
    return shown


class Server(abc.ABC):
    """One kind of server the launcher manages, on the ports and directory of ``settings``."""

    name: ClassVar[str]
    ready_timeout_s: ClassVar[float]
    stop_timeout_s: ClassVar[float] = 30.0
    jvm: ClassVar[bool] = False  # boots slowly: launched first, waited for last

    def __init__(self, settings: Settings, say: Say) -> None:
        self.settings = settings
        self.say = say

    @property
    def dir(self) -> Path:
        return self.settings.root / self.name

    @property
    def port(self) -> int:
        return self.settings.main_port(self.name)

    @property
    def endpoint_text(self) -> str:
        return f"127.0.0.1:{self.port}"

    @abc.abstractmethod
    def packages(self) -> list[str]:
        """Debian packages it needs (installed when missing)."""

    @property
    @abc.abstractmethod
    def pid_file(self) -> Path: ...

    @abc.abstractmethod
    def marker(self) -> str:
        """What our instance's command line carries (a recycled pid never does)."""

    @abc.abstractmethod
    def logs(self) -> list[Path]: ...

    @abc.abstractmethod
    def start(self) -> None:
        """Launch the server (return before it answers; ``wait`` waits)."""

    def stop(self, pid: int) -> None:
        stop_pid(self.name, pid, self.stop_timeout_s, self.say)
        self.pid_file.unlink(missing_ok=True)

    def ready(self) -> bool:
        return probe(self.name, timeout=5.0, endpoint=self.settings.endpoint(self.name)) is None

    # --- shared ----------------------------------------------------------------------------------

    def fail(self, message: str) -> ServerFailed:
        return ServerFailed(self.name, message, self.logs())

    def live_pid(self) -> int | None:
        pid = pid_from_file(self.pid_file)
        return pid if pid_matches(pid, self.marker()) else None

    def foreign(self) -> str | None:
        """Who serves our endpoint when it answers but is not our instance."""
        if not (port_open(self.port) and self.ready()):
            return None
        return f"{port_owner(self.port) or 'another process'} (not managed from {self.settings.root})"

    def record_durability(self) -> None:
        (self.dir / "durability").write_text(self.settings.durability + "\n")

    def check_durability(self) -> None:
        try:
            running = (self.dir / "durability").read_text().strip()
        except OSError:
            running = "fast"
        if running != self.settings.durability:
            self.say(
                f"WARNING: {self.name} runs {running}, not {self.settings.durability} (RATCHET_DURABILITY); "
                f"restart it to change: scripts/services down {self.name} && scripts/services up {self.name}"
            )

    def run_logged(self, argv: Sequence[str], log: Path, what: str, timeout_s: float = 600) -> None:
        """Run a set-up command to completion, its output in ``log``; a failure shows that log."""
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("w") as out:
            try:
                done = subprocess.run(
                    list(argv),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    timeout=timeout_s,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise ServerFailed(self.name, f"{what} failed: {exc}", [log]) from None
        if done.returncode != 0:
            raise ServerFailed(self.name, f"{what} failed (exit {done.returncode})", [log])

    def spawn(self, argv: Sequence[str], log: Path, *, append: bool = True) -> subprocess.Popen[bytes]:
        """Start a long-running server process in a session of its own, output to ``log``."""
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab" if append else "wb") as out:
            return subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
