"""Processes of the servers the launcher starts: alive or not, whose, and how they die.

Both sides use these: the launcher (``up`` finds its own instance by pid file and command-line
marker, ``down`` stops it) and the crash suite (``kill_tree`` is the power cut of ``server-crash``).
A pid counts as a server's only when it is alive (not a zombie) and its command line carries a
marker of that instance, so a stale pid file or a recycled pid is never touched.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


class ServiceControlError(Exception):
    """The server cannot be controlled (not found, not ours, did not come back): an environment error."""


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


def stat_fields(stat: str) -> list[str]:
    """The fields of a /proc/<pid>/stat line after ``comm``, from ``state`` on: "pid (comm) state
    ppid ...", where comm may hold spaces and parentheses, so split after the last ")"."""
    return stat[stat.rfind(")") + 2 :].split()


def cpu_seconds(pid: int) -> float | None:
    """The process's CPU time so far, its reaped children's included (utime, stime, cutime,
    cstime); None when /proc cannot say."""
    try:
        fields = stat_fields(Path(f"/proc/{pid}/stat").read_text())
        return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return None


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
        fields = stat_fields(stat)
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


def pid_from_file(path: Path) -> int | None:
    """The pid on the first line of ``path``, or None (no file, no digits)."""
    try:
        digits = "".join(ch for ch in path.read_text().split("\n", 1)[0] if ch.isdigit())
    except OSError:
        return None
    return int(digits) if digits else None


def pid_matches(pid: int | None, marker: str) -> bool:
    """``pid`` is alive and its command line carries ``marker``."""
    return pid is not None and pid_alive(pid) and marker in command_line(pid)


def wait_exit(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while pid_alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True


def stop_pid(name: str, pid: int, timeout_s: float, warn: Callable[[str], None]) -> None:
    """SIGTERM, and SIGKILL when it has not exited within ``timeout_s``."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    if not wait_exit(pid, timeout_s):
        warn(f"{name} (pid {pid}) did not stop within {timeout_s:.0f}s; killing it")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        if not wait_exit(pid, 10):
            raise ServiceControlError(f"{name} (pid {pid}) survived SIGKILL")


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def port_owner(port: int) -> str | None:
    """``name (pid N)`` of the process listening on ``port``, when ``ss`` can tell."""
    try:
        out = subprocess.run(
            ["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True, timeout=5, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r'users:\(\("([^"]*)",pid=(\d+)', out)
    return f"{found.group(1)} (pid {found.group(2)})" if found else None
