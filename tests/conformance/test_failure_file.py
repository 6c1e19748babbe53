"""Failure files round-trip through JSON and refuse what they do not understand."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance import FailureFile
from conformance._machine import Step


def sample() -> FailureFile:
    return FailureFile(
        suite="commit",
        backend="memory",
        factories={"store": "impls.memory:open_store", "outbox": "impls.memory:open_outbox"},
        seed=42,
        profile="ci",
        faults="all",
        hypothesis_version="6.0.0",
        rule_id="C-POST-01",
        message="reserve returned other coordinates",
        context={"at": "step 2", "key": "t1/alice/m1"},
        program=(
            Step("send", {"key": "t1/alice/m1", "variant": "same"}),
            Step("concurrent", {"key": "t1/alice/m1", "workers": ["send", "resume"], "schedule": [1, 0]}),
        ),
        trace=("reserve(t1/alice/m1) -> ReserveCreated(seq 1/1 @T0+0)",),
        reproduce_blob="@reproduce_failure('6.0.0', b'AAA=')",
    )


def test_round_trip(tmp_path: Path) -> None:
    original = sample()
    path = original.write(tmp_path)
    assert path.name.startswith("memory-commit-C-POST-01-")
    assert FailureFile.read(path) == original


def test_the_program_renders_as_a_script() -> None:
    assert sample().render_program().splitlines()[1].strip() == (
        "2. concurrent(key='t1/alice/m1', workers=['send', 'resume'], schedule=[1, 0])"
    )


@pytest.mark.parametrize(
    "data",
    [{"format": "something-else/1"}, {"format": "ratchet-failure/1", "suite": "store"}],
)
def test_unknown_or_malformed_files_are_refused(data: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        FailureFile.from_json(data)
