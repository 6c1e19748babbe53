"""``--stop-when-covered`` (``RunOptions.stop_when_covered``, for scripts/reach.py): a run that stops
once every demanded target is reached ran the same examples as the whole run up to there, so each
target's first-reaching example, and so its verdict, is the whole run's (docs/ci-gate.md, "A gate
that does not hang on the seed")."""

from __future__ import annotations

import attrs

from conformance._runner import RunOptions, run_suite
from conformance._suites import FAMILIES, load_suites


def test_a_run_stopped_when_covered_reached_each_target_in_the_same_example() -> None:
    suite = load_suites()["commit"]
    backend = FAMILIES["commit"].backends()["memory"]
    whole = RunOptions(examples=40, seed=777, database_dir=None, failure_dir=None)
    full = run_suite(suite, backend, whole)
    stopped = run_suite(suite, backend, attrs.evolve(whole, stop_when_covered=True))
    assert full.verdict.value == stopped.verdict.value == "pass", (full.error, stopped.error)
    assert stopped.stopped_covered and not full.stopped_covered
    assert stopped.stats.examples < full.stats.examples
    assert stopped.demanded == full.demanded
    first = {t: full.stats.first_reached[t] for t in full.demanded}
    assert {t: stopped.stats.first_reached[t] for t in stopped.demanded} == first
    assert max(first.values()) == stopped.stats.examples  # it stopped right after the last first hit
