"""Hypothesis settings profiles for conformance runs: ``ci`` (a CI gate), ``deep`` (a soak) and
``mutation`` (the fast verdict ``make mutation`` asks of each mutant).

The profiles are registered with Hypothesis as ``ratchet-ci`` and ``ratchet-deep`` (Hypothesis
itself loads a profile named ``ci`` when CI is set, so ours are prefixed) and looked up by name;
nothing here changes the global default profile.

``ci`` is sized so that ``make conformance`` (two suites on memory and fakeredis) finishes in about
a minute and a Cassandra run in a few minutes, while still reaching every fault kind and point.

``mutation`` (docs/sensitivity.md) runs each mutant of a backend package against the suites: fewer
and shorter programs, no shrinking and no minimizing pass (a mutant needs a verdict, not a minimal
program), and the run stops at the first suite that did not pass (``Profile.fail_fast``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import attrs
from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import (
    DirectoryBasedExampleDatabase,
    ExampleDatabase,
    MultiplexedDatabase,
    ReadOnlyDatabase,
)


@attrs.frozen
class Profile:
    name: str
    max_examples: int  # per (backend, suite)
    stateful_step_count: int  # steps per example, at most
    description: str
    #: Shrink a failure (Hypothesis's shrink phase, then the runner's 1-minimal pass).
    shrink: bool = True
    #: Stop the run at the first suite that did not pass; the rest are reported not-run.
    fail_fast: bool = False


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile("ci", 200, 40, "a CI gate: every fault reached, about a minute on embedded backends"),
        Profile("deep", 2000, 100, "a soak: many more and longer programs; minutes to hours"),
        Profile(
            "mutation",
            60,
            30,
            "one mutant's verdict: short programs, no shrinking, stop at the first failed suite",
            shrink=False,
            fail_fast=True,
        ),
    )
}

# No explain phase: it re-runs the minimal example many times to annotate it, and our programs
# already name the rule that broke.
_PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink)
_NO_SHRINK = tuple(p for p in _PHASES if p is not Phase.shrink)

for _profile in PROFILES.values():
    settings.register_profile(
        f"ratchet-{_profile.name}",
        max_examples=_profile.max_examples,
        stateful_step_count=_profile.stateful_step_count,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
        print_blob=True,
        phases=_PHASES if _profile.shrink else _NO_SHRINK,
        database=None,
    )


def hypothesis_settings(
    profile: str,
    *,
    examples: int | None = None,
    steps: int | None = None,
    database_dir: Path | None,
    read_also: Sequence[Path] = (),
) -> settings:
    """The settings for one suite run. ``database_dir`` None runs without an example database;
    ``read_also``: databases only read (a worker's shard writes ``database_dir`` alone)."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; known: {', '.join(PROFILES)}")
    base = settings.get_profile(f"ratchet-{profile}")
    database: ExampleDatabase | None = None
    if database_dir is not None:
        database = DirectoryBasedExampleDatabase(str(database_dir))
        if read_also:
            others = (ReadOnlyDatabase(DirectoryBasedExampleDatabase(str(p))) for p in read_also)
            database = MultiplexedDatabase(database, *others)
    return settings(
        base,
        max_examples=examples if examples is not None else base.max_examples,
        stateful_step_count=steps if steps is not None else base.stateful_step_count,
        database=database,
    )
