"""The transport suite catches every planted connector bug (examples/broken_transports.py), names the
rule it broke, shrinks the program to a few steps, and the failure file replays to the same
violation, from Python and through ``conformance replay``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from conformance import FailureFile, Report, Verdict, replay, run_matrix
from conformance._suites import BackendUnderTest, suite_named
from examples.broken_transports import BROKEN_TRANSPORTS
from tests._planted import planted_options

ROOT = Path(__file__).resolve().parents[2]
STREAMS = "impls.transport:open_fakeredis_client"
# Fixed seeds whose search and shrink are short (any seed finds each bug within the ci profile).
SEEDS = {
    "AckBeforeCommit": 2,
    "TrimPastPending": 2,
    "DeadLetterWithoutAck": 2,
    "AckWithoutDeadLetter": 3,
    "UnauthenticatedHandler": 3,
}

RunBroken = Callable[[str], Report]


@pytest.fixture(scope="module")
def run_broken(tmp_path_factory: pytest.TempPathFactory) -> RunBroken:
    reports: dict[str, Report] = {}

    def run(factory: str) -> Report:
        if factory not in reports:
            role, _ = BROKEN_TRANSPORTS[factory]
            roles = {"streams": STREAMS, role: f"examples.broken_transports:{factory}"}
            backend = BackendUnderTest(factory, "transport", roles)
            failures = tmp_path_factory.mktemp(factory)
            options = planted_options(SEEDS[factory], failures)
            reports[factory] = run_matrix([(backend, suite_named("transport"))], options)
        return reports[factory]

    return run


@pytest.mark.parametrize("factory", sorted(BROKEN_TRANSPORTS))
def test_planted_connector_bug_is_caught_and_replays(factory: str, run_broken: RunBroken) -> None:
    role, rule_id = BROKEN_TRANSPORTS[factory]
    report = run_broken(factory)
    (result,) = report.results
    assert result.verdict is Verdict.VIOLATION, report.details()
    assert result.failure is not None
    assert result.failure.rule_id == rule_id, report.details()
    assert 1 <= len(result.failure.program) <= 8, report.details()
    path = result.failure.failure_file
    assert path is not None and path.exists()
    saved = FailureFile.read(path)
    assert (saved.suite, saved.rule_id) == ("transport", rule_id)
    assert saved.factories[role] == f"examples.broken_transports:{factory}"
    replayed = replay(saved)
    assert replayed.reproduced and replayed.same_rule, replayed.describe()
    print(f"{factory}: {rule_id} in {result.elapsed_s:.1f}s, {len(saved.program)} steps")


def test_the_real_connector_does_not_reproduce(run_broken: RunBroken) -> None:
    """The same program on the real consumer passes: the bug was the connector's."""
    failure = run_broken("AckBeforeCommit").results[0].failure
    assert failure is not None and failure.failure_file is not None
    result = replay(
        FailureFile.read(failure.failure_file), overrides={"consumer": "impls.transport:StreamConsumer"}
    )
    assert not result.reproduced, result.describe()


def test_conformance_replay_reproduces_from_the_command_line(run_broken: RunBroken) -> None:
    failure = run_broken("TrimPastPending").results[0].failure
    assert failure is not None and failure.failure_file is not None
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GRPC_VERBOSITY": "NONE"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "conformance.cli",
            "replay",
            "--trust",
            "examples.broken_transports",
            str(failure.failure_file),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "reproduced S-STREAM-07" in done.stdout
