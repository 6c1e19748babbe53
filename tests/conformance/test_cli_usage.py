"""Usage and environment problems: exit 2, one line on stderr, no traceback, before the run (issue 19, 5).

Also: ``--faults -x`` as ``--faults=-x``; replay refuses to import a module a failure file names
unless it is a registered backend or the user vouches for it (``--store`` / ``--trust``); a factory
that raises is the backend's error; failure-file names tell two ``--store``s apart.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import pytest

from conformance.cli import main

SHORT = [
    "--suite",
    "store",
    "--examples",
    "3",
    "--steps",
    "5",
    "--seed",
    "1",
    "--quiet",
    "--no-coverage-gate",
]


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("conformance: error: ")
    assert "Traceback" not in captured.out + captured.err
    return err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "--examples", "0"], "argument --examples: must be at least 1"),
        (["run", "--examples", "-1"], "argument --examples: must be at least 1"),
        (["run", "--examples", "many"], "expected a positive integer"),
        (["run", "--steps", "-1"], "argument --steps: must be at least 1"),
        (["run", "--steps", "0"], "argument --steps: must be at least 1"),
        (["run", "--profile", "fast"], "invalid choice: 'fast'"),
        (["run", "--bogus"], "unrecognized arguments: --bogus"),
        (
            ["run", "--backend", "memory", "--outbox", "impls.memory:open_outbox"],
            "--outbox applies to a custom backend",
        ),
        (["run", "--outbox", "impls.memory:open_outbox"], "--outbox applies to a custom backend"),
        (["run", "--backend", "memory", "--name", "mine"], "--name applies to a custom backend"),
        (["run", "--no-database", "--database", "db"], "--no-database and --database contradict"),
        (
            ["run", "--backend", "memory", "--store", "impls.memory:open_store"],
            "--backend and --store contradict",
        ),
        # --store is a MessageStore only; a saga backend has its own flag (and the reverse)
        (
            ["run", "--suite", "saga", "--store", "impls.saga.memory:open_memory_saga_backend"],
            "--store gives a MessageStore factory",
        ),
        (
            ["run", "--suite", "store,saga", "--store", "impls.memory:open_store"],
            "suite saga tests a SagaBackend: give its factory with --saga-backend",
        ),
        (
            ["run", "--suite", "store", "--saga-backend", "impls.saga.memory:open_memory_saga_backend"],
            "--saga-backend gives a SagaBackend factory",
        ),
        (["run", "--time-budget", "0"], "argument --time-budget"),
        (["run", "--time-budget", "soon"], "argument --time-budget"),
        (["replay"], "the following arguments are required: file"),
        (
            ["run", "--backend", "memory", "--control", "conformance.crash:redis_control"],
            "--control applies to a custom backend",
        ),
    ],
)
def test_a_bad_command_line_is_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as raised:
        code = main(argv)
        raise SystemExit(code)
    assert raised.value.code == 2
    assert message in _one_line_error(capsys)


@pytest.mark.parametrize("flag", ["--failures", "--database", "--report", "--junit"])
def test_an_output_under_a_file_is_refused_before_the_run(
    flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    target = blocker / ("out.json" if flag in ("--report", "--junit") else "dir")
    argv = ["run", *SHORT, "--failures", str(tmp_path / "f"), flag, str(target)]
    if flag != "--database":
        argv.append("--no-database")
    assert main(argv) == 2
    err = _one_line_error(capsys)
    assert flag in err and ("cannot write" in err or "is not a directory" in err)
    assert not (tmp_path / "f").exists() or not list((tmp_path / "f").iterdir())  # nothing ran


def test_a_report_path_that_is_a_directory_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", *SHORT, "--no-database", "--report", str(tmp_path)]) == 2
    assert "is a directory" in _one_line_error(capsys)


def _read_only_dir() -> Path | None:
    """A directory this process cannot create files in (root ignores permission bits: try /sys)."""
    for candidate in (Path("/sys"), Path("/proc")):
        try:
            with tempfile.NamedTemporaryFile(dir=candidate):
                pass
        except OSError:
            return candidate
    return None


def test_a_read_only_working_directory_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    where = _read_only_dir()
    if where is None:
        pytest.skip("no read-only directory on this machine")
    monkeypatch.chdir(where)
    assert main(["run", *SHORT]) == 2
    err = _one_line_error(capsys)
    assert "--failures .ratchet/failures: cannot write" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only (mode 555) directory")
def test_a_read_only_failures_directory_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    assert main(["run", *SHORT, "--no-database", "--failures", str(locked)]) == 2
    assert "cannot write" in _one_line_error(capsys)


@pytest.mark.parametrize("form", [["--faults", "-response-lost"], ["--faults=-response-lost"]])
def test_a_dropped_fault_may_follow_the_flag_as_a_separate_word(form: list[str], tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    argv = ["run", *SHORT, "--examples", "20", "--no-database", "--failures", str(tmp_path), *form]
    assert main([*argv, "--report", str(report)]) == 0
    (result,) = json.loads(report.read_text())["results"]
    assert "response-lost" not in result["faults_injected"]
    assert result["faults_injected"]  # the other kinds still ran


RAISING = """
async def make_store(namespace, membership):
    raise RuntimeError("cannot reach the fleet")

def make_saga_backend(namespace):
    raise RuntimeError("no saga today")
"""


@pytest.mark.parametrize(
    ("factory", "suite", "role", "flag"),
    [("make_store", "store", "store", "--store"), ("make_saga_backend", "saga", "backend", "--saga-backend")],
)
def test_a_factory_that_raises_is_the_backends_error(
    factory: str,
    suite: str,
    role: str,
    flag: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "raising_factories.py").write_text(RAISING)
    monkeypatch.syspath_prepend(str(tmp_path))
    argv = ["run", flag, f"raising_factories:{factory}", "--suite", suite, "--examples", "5", "--quiet"]
    assert main([*argv, "--no-database", "--failures", str(tmp_path / "f")]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    why = "cannot reach the fleet" if suite == "store" else "no saga today"
    named = f"backend custom: the {role} factory raising_factories:{factory}"
    assert err == f"conformance: error: {named} raised RuntimeError: {why}"
    assert "the harness failed" not in captured.out and "Traceback" not in captured.out


# --- replay --------------------------------------------------------------------------------------


def _failure_file(tmp_path: Path, **changes: object) -> Path:
    data: dict[str, object] = {
        "format": "ratchet-failure/1",
        "suite": "store",
        "backend": "memory",
        "factories": {"store": "impls.memory:open_store", "outbox": "impls.memory:open_outbox"},
        "rule_id": "C-POST-02",
        "message": "hand-written",
        "program": [{"rule": "first_reserve", "args": {"key": "t1/alice/m1"}}],
    }
    data.update(changes)
    path = tmp_path / "failure.json"
    path.write_text(json.dumps(data))
    return path


def test_a_hand_written_file_of_a_registered_backend_replays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", str(_failure_file(tmp_path))]) == 0
    assert "did not reproduce" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"program": []}, "the program is empty"),
        ({"program": [{"rule": "first_reserve", "args": {"key": "zz/nobody"}}]}, "step 1, first_reserve"),
        ({"program": [{"rule": "first_reserve", "args": {"key": 5}}]}, "is not a step this harness can run"),
        ({"program": [{"rule": "first_reserve", "args": {"slot": 1}}]}, "missing a required argument"),
        (
            {"program": [{"rule": "first_reserve", "args": {"key": "t1/alice/m1", "x": 1}}]},
            "unexpected keyword",
        ),
        (
            {"suite": "commit", "program": [{"rule": "put_record", "args": {"key": "t1/alice/m1"}}]},
            "rules this",
        ),
        ({"suite": "no-such-suite"}, "unknown suite 'no-such-suite'"),
        ({"program": "reserve"}, "malformed failure file"),
    ],
)
def test_an_unusable_failure_file_is_a_usage_error(
    changes: dict[str, object], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", str(_failure_file(tmp_path, **changes))]) == 2
    assert message in _one_line_error(capsys)


def test_replay_does_not_import_a_module_the_file_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _failure_file(tmp_path, factories={"store": "this:s", "outbox": "impls.memory:open_outbox"})
    had_this = "this" in sys.modules
    assert main(["replay", str(path)]) == 2
    err = _one_line_error(capsys)
    assert "store=this:s" in err and "--trust this" in err
    assert ("this" in sys.modules) == had_this  # never imported: the Zen of Python stays unprinted


def test_replay_refuses_a_registered_name_with_foreign_factories(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _failure_file(tmp_path, factories={"store": "os:system", "outbox": "impls.memory:open_outbox"})
    assert main(["replay", str(path)]) == 2
    assert "store=os:system" in _one_line_error(capsys)


def test_replay_imports_what_the_user_vouches_for(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    factories = {
        "store": "examples.broken_stores:loses_recovery_candidate",
        "outbox": "impls.memory:open_outbox",
    }
    program = [
        {"rule": "first_reserve", "args": {"key": "t1/alice/m1"}},
        {"rule": "advance_commit", "args": {"key": "t1/alice/m1", "path": "atomic", "publication": "p1"}},
    ]
    path = _failure_file(tmp_path, backend="custom", factories=factories, program=program)
    assert main(["replay", str(path)]) == 2
    capsys.readouterr()
    assert main(["replay", str(path), "--trust", "examples.broken_stores"]) == 1
    assert main(["replay", str(path), "--trust", "examples.broken_stores:loses_recovery_candidate"]) == 1
    assert main(["replay", str(path), "--store", "impls.memory:open_store"]) == 0


# --- failure-file names --------------------------------------------------------------------------


def test_two_custom_stores_failing_alike_keep_separate_failure_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "two_stores.py").write_text(
        "from examples.broken_stores import loses_recovery_candidate\n"
        "first = second = loses_recovery_candidate\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    failures = tmp_path / "failures"
    # Profile mutation: no shrinking (the files' names are the point here, not their programs).
    for name in ("first", "second"):
        argv = [
            "run",
            "--store",
            f"two_stores:{name}",
            "--suite",
            "store",
            "--profile",
            "mutation",
            "--seed",
            "2",
        ]
        assert main([*argv, "--quiet", "--no-database", "--failures", str(failures)]) == 1
    names = sorted(p.name for p in failures.iterdir())
    assert len(names) == 2, names
    assert names[0].startswith("custom-store-C-POST-02-two_stores.first-")
    assert names[1].startswith("custom-store-C-POST-02-two_stores.second-")
    assert "--trust two_stores" in capsys.readouterr().out  # the replay command printed works as is


def test_control_fills_the_control_role_of_a_custom_backend_only() -> None:
    """``--control``: the ``server-crash`` seam for a custom backend (the three-node ring's
    ``conformance.crash._ring:ring_control``); a named backend keeps the registry's own."""
    from conformance._selection import with_control_flag
    from conformance._suites import FAMILIES, load_suites, suite_named

    load_suites()
    suite = suite_named("durability")
    named = FAMILIES["commit"].backends()["memory"]
    custom = FAMILIES["commit"].custom_backend("ring", "conformance.crash._ring:open_ring_store")
    pairs = with_control_flag([(named, suite), (custom, suite)], "conformance.crash._ring:ring_control")
    assert pairs[0][0] == named
    assert pairs[1][0].factories["control"] == "conformance.crash._ring:ring_control"
    assert pairs[1][0].factories["store"] == "conformance.crash._ring:open_ring_store"
