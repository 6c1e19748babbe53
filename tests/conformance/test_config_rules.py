"""The commit suite holds a committer's configuration (conformance/commit/_config_rules.py).

A committer factory that quietly makes an out-of-range configuration legal is caught at the first
quiescence (C-ERR-04), its failure file replays, and the shipped committer does not reproduce it.
"""

from __future__ import annotations

from pathlib import Path

from conformance import FailureFile, replay, run_conformance
from examples.broken_committers import BROKEN_COMMITTERS


def test_a_committer_clamping_its_configuration_is_caught_and_replays(tmp_path: Path) -> None:
    report = run_conformance(
        "impls.memory:open_store",
        backend="memory",
        suites=("commit",),
        seed=3,
        examples=5,
        steps=4,
        committer_factory="examples.broken_committers:clamps_config",
        failure_dir=str(tmp_path),
        database_dir=None,
    )
    (result,) = report.results
    assert result.failure is not None and result.failure.rule_id == BROKEN_COMMITTERS["clamps_config"]
    assert "accepted retention_ms=0" in result.failure.message
    assert result.failure.failure_file is not None
    saved = FailureFile.read(result.failure.failure_file)
    replayed = replay(saved)
    assert replayed.reproduced and replayed.same_rule, replayed.describe()
    shipped = replay(saved, overrides={"committer": "impls.commit:MessageCommitter"})
    assert not shipped.reproduced, shipped.describe()
