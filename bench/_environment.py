"""The machine a bench ran on: CPUs, memory, Python and library versions (servers come from _floor)."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from pathlib import Path

import attrs


@attrs.frozen
class Machine:
    cpus: int
    cpu_model: str
    memory_gib: float
    python: str
    platform: str
    libraries: dict[str, str]  # distribution -> version
    load_average: tuple[float, float]  # 1-minute load average when the bench started and ended


def _proc_field(path: str, field: str) -> str | None:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() == field:
            return value.strip()
    return None


def _memory_gib() -> float:
    total = _proc_field("/proc/meminfo", "MemTotal")  # "24576000 kB"
    if total is None or not total.split()[0].isdigit():
        return 0.0
    return round(int(total.split()[0]) / (1024 * 1024), 1)


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def load_average() -> float:
    """The 1-minute load average: how busy the CPUs were with other processes too."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return -1.0


def machine(load_at_start: float) -> Machine:
    return Machine(
        cpus=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 0,
        cpu_model=_proc_field("/proc/cpuinfo", "model name") or platform.processor() or "unknown",
        memory_gib=_memory_gib(),
        python=sys.version.split()[0],
        platform=platform.platform(),
        libraries={
            name: _version(name)
            for name in (
                "hypothesis",
                "attrs",
                "redis",
                "fakeredis",
                "lupa",
                "cassandra-driver",
                "psycopg",
                "PyMySQL",
            )
        },
        load_average=(load_at_start, load_average()),
    )
