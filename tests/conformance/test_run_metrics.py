"""``conformance run --metrics FILE``: the run as OpenMetrics, and p50/p99 per method in the summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from conformance._latency import LATENCY_BOUNDS, CallLatencies
from conformance.cli import main


def test_quantiles_interpolate_inside_a_bucket_as_promql_does() -> None:
    latency = CallLatencies()
    for _ in range(99):
        latency.observe("begin", 2e-6)  # the (1 us, 2.5 us] bucket
    latency.observe("begin", 3.0)  # (2.5 s, 5 s]
    assert latency.count("begin") == 100
    assert 1e-6 < latency.quantile("begin", 0.5) <= 2.5e-6
    assert latency.quantile("begin", 0.99) <= 2.5e-6 < latency.quantile("begin", 1.0) <= 5.0
    latency.observe("slow", 60.0)
    assert latency.quantile("slow", 0.5) == LATENCY_BOUNDS[-1]  # beyond the last bound
    assert latency.quantile("absent", 0.5) == 0.0


def test_run_writes_openmetrics_and_prints_latency(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "run.om"
    argv = ["run", "--backend", "memory", "--suite", "saga", "--examples", "4", "--seed", "3", "--quiet"]
    argv += ["--no-database", "--no-coverage-gate", "--failures", str(tmp_path), "--metrics", str(out_file)]
    argv += ["--report", str(tmp_path / "report.json")]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "backend latency p50/p99" in printed
    latency = printed.split("backend latency p50/p99", 1)[1].splitlines()
    assert len(latency) > 1 and all(len(line) <= 100 for line in latency)
    text = out_file.read_text(encoding="utf-8")
    assert text.endswith("# EOF\n")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert {"ratchet_run_steps", "ratchet_run_examples", "ratchet_run_faults"} <= set(families)
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))["results"][0]
    (steps,) = families["ratchet_run_steps"].samples
    assert steps.labels == {"backend": "memory", "suite": "saga"} and steps.value == report["steps"]
    faults = {s.labels["kind"]: s.value for s in families["ratchet_run_faults"].samples}
    assert faults == report["faults_injected"]
    calls = families["ratchet_backend_call_seconds"]
    assert calls.type == "histogram"
    methods = {s.labels["method"] for s in calls.samples}
    assert {"begin", "commit", "rollback"} <= methods
    counts = {s.labels["method"]: s.value for s in calls.samples if s.name.endswith("_count")}
    infinite = {s.labels["method"]: s.value for s in calls.samples if s.labels.get("le") == "+Inf"}
    assert counts == infinite and counts["begin"] > 0
