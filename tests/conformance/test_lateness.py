"""The timer-lateness comparison (conformance/saga/_lateness.py, S-OBS-03): the fires the database
refused may be in the histogram or not, and nothing else may."""

from __future__ import annotations

import pytest

from conformance._violations import Violation
from conformance.saga._lateness import LABELS, SUM, check_lateness, expected_samples
from conformance.saga._port import sample_key


def exposed(*fires: float) -> dict[str, float]:
    """What a runtime that observed exactly ``fires`` exposes."""
    return {**expected_samples(fires), sample_key(SUM, LABELS): sum(fires)}


def test_the_sure_fires_must_be_exactly_the_histogram() -> None:
    check_lateness([0.5, 3.0], [], exposed(0.5, 3.0))
    with pytest.raises(Violation, match="S-OBS-03"):
        check_lateness([0.5, 3.0], [], exposed(0.5))
    with pytest.raises(Violation, match="sum"):
        check_lateness([0.5], [], {**exposed(0.5), sample_key(SUM, LABELS): 0.25})


def test_a_refused_fire_may_be_observed_or_not() -> None:
    check_lateness([0.5], [3.0], exposed(0.5))
    check_lateness([0.5], [3.0], exposed(0.5, 3.0))
    check_lateness([0.5], [3.0, 0.0], exposed(0.5, 0.0))


def test_nothing_but_a_refused_fire_may_be_added_and_no_sure_one_missed() -> None:
    with pytest.raises(Violation, match="S-OBS-03"):
        check_lateness([0.5], [3.0], exposed(0.5, 3.0, 3.0))  # observed twice
    with pytest.raises(Violation, match="S-OBS-03"):
        check_lateness([0.5], [3.0], exposed(0.5, 20.0))  # a lateness no fire had
    with pytest.raises(Violation, match="S-OBS-03"):
        check_lateness([0.5], [3.0], exposed(3.0))  # the sure fire is missing
