"""What the planted-bug tests share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conformance import RunOptions

#: Seconds Hypothesis may shrink a planted bug's failure (``RunOptions.shrink_budget_s``); the
#: runner's replay pass then makes the program 1-minimal. Unbounded, Hypothesis replays for up to
#: five minutes, each replay a whole example on a real engine.
PLANTED_SHRINK_S = 20.0


def planted_options(seed: int, failures: Path, **more: Any) -> RunOptions:
    """The ci profile at ``seed``, failure files in ``failures``, no example database, shrinking
    bounded by ``PLANTED_SHRINK_S``; ``more`` overrides the rest (examples, steps...)."""
    return RunOptions(
        profile="ci",
        seed=seed,
        failure_dir=failures,
        database_dir=None,
        shrink_budget_s=PLANTED_SHRINK_S,
        **more,
    )
