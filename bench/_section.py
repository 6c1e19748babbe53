"""A bench section: one side of the bench (commit, saga, transport), run on the backends chosen.

Every side has the same shape: for each chosen backend, is its server up (if not, the backend is
*unavailable* and skipped, never a crash); then its measurements, each ``guarded`` (a failure is an
error of that section and backend, and the bench goes on). A side returns a ``SectionOutcome``: its
figures under the names of ``BenchReport``'s fields, the servers it measured, what was unavailable
and what failed. ``_bench.run_bench`` runs every section of ``SECTIONS`` (``_bench``) whose suites
were chosen and merges their outcomes: a new side is one ``Section`` and its report fields.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from bench._options import BenchOptions

Progress = Callable[[str], None]


@attrs.frozen
class SectionOutcome:
    figures: Mapping[str, tuple[Any, ...]] = attrs.field(factory=dict)  # BenchReport field -> figures
    servers: Mapping[str, str] = attrs.field(factory=dict)  # backend -> server version
    unavailable: Mapping[str, str] = attrs.field(factory=dict)  # backend -> why
    errors: Mapping[str, str] = attrs.field(factory=dict)  # "measurement backend" -> what went wrong


@attrs.frozen
class Section:
    name: str
    #: Whether the chosen suites ask for this section.
    applies: Callable[[BenchOptions], bool]
    #: The section on the options' backends of its family (never raises for a backend or a figure).
    run: Callable[[BenchOptions, Progress], SectionOutcome]


def unavailable(service: str | None) -> str | None:
    """Why a backend needing ``service`` cannot be measured now, or None (one real request)."""
    if service is None:
        return None
    from conformance import services

    reason = services.probe(service)
    if reason is None:
        return None
    return f"{reason} (start it with: scripts/services up {service})"


def merge(outcomes: Sequence[SectionOutcome]) -> SectionOutcome:
    figures: dict[str, tuple[Any, ...]] = {}
    servers: dict[str, str] = {}
    missing: dict[str, str] = {}
    errors: dict[str, str] = {}
    for outcome in outcomes:
        for field, found in outcome.figures.items():
            figures[field] = figures.get(field, ()) + tuple(found)
        servers.update(outcome.servers)
        missing.update(outcome.unavailable)
        errors.update(outcome.errors)
    return SectionOutcome(figures, servers, missing, errors)
