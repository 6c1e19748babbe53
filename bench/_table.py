"""The bench as text (the table ``conformance bench`` prints) and as JSON (``--json FILE``)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from bench._bench import COMMIT_SUITES, BenchReport
from bench._figures import Spread
from bench._redis_footprint import CONTRACT_COMMITTED_BYTES
from bench._saga_throughput import SAGA_SUITE
from bench._transport_bench import TRANSPORT_SUITE

JSON_FORMAT = "ratchet-bench/1"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> list[str]:
    """Columns padded to their widest cell; the ``right`` columns are right-aligned."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(cells)
        ).rstrip()

    return [line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def _pct(spread: Spread) -> str:
    return f"{100 * spread.median:.0f}"


def _maybe(spread: Spread | None, digits: int = 0) -> str:
    return "-" if spread is None else spread.show(digits)


def _percent(spread: Spread | None) -> str:
    return "-" if spread is None else spread.show() + "%"


def _verdicts(verdicts: Sequence[str]) -> str:
    return ", ".join(f"{v} x{n}" for v, n in Counter(verdicts).items())


def _commit_sections(report: BenchReport, sizes: str) -> list[str]:
    out: list[str] = []
    out += ["", f"1. Harness throughput: conformance suites, model check on ({sizes})"]
    if report.throughput:
        rows = [
            [
                t.backend,
                t.suite,
                t.steps_per_second.show(),
                _pct(t.backend_share),
                _pct(t.store_share),
                _pct(t.outbox_share),
                _pct(t.harness_share),
                f"{t.steps_per_run.median:.0f}",
                _verdicts(t.verdicts),
            ]
            for t in report.throughput
        ]
        out += table(
            [
                "backend",
                "suite",
                "steps/s",
                "backend%",
                "store%",
                "outbox%",
                "harness+model%",
                "steps/run",
                "runs",
            ],
            rows,
            right=(2, 3, 4, 5, 6, 7),
        )
        out.append("   backend% = time awaiting the real store and outbox (timing seam) / wall time")

    out += ["", "2. Commit cost per commit (MessageCommitter; RT = server round trips, '-' = no server)"]
    if report.costs:
        rows = [
            [
                c.backend,
                case.case,
                case.crash_point or "",
                _maybe(case.store_calls),
                _maybe(case.store_round_trips),
                _maybe(case.outbox_calls),
                _maybe(case.outbox_round_trips),
                " ".join(f"{name}:{n:g}" for name, n in case.store_calls_by_method.items()),
            ]
            for c in report.costs
            for case in c.cases
        ]
        out += table(
            [
                "backend",
                "case",
                "killed at",
                "store calls",
                "store RT",
                "outbox calls",
                "outbox RT",
                "store calls by method",
            ],
            rows,
            right=(3, 4, 5, 6),
        )

    out += ["", "3. Commits per second, sequential MessageCommitter.send on one connection, vs the raw floor"]
    if report.rates:
        rows = [
            [
                r.backend,
                r.commits_per_second.show(),
                f"{r.cpu_us_per_commit.median:.0f}",
                "-" if r.round_trips_per_commit is None else f"{r.round_trips_per_commit:g}",
                _maybe(r.floor_per_second),
                _percent(r.floor_ratio_percent),
                _maybe(r.read_only_floor_per_second),
                _percent(r.read_only_ratio_percent),
            ]
            for r in report.rates
        ]
        out += table(
            [
                "backend",
                "commits/s",
                "CPU us/commit",
                "RT/commit",
                "floor/s (same RT, writing)",
                "Ratchet/floor",
                "read-only floor/s",
                "Ratchet/read-only",
            ],
            rows,
            right=(1, 2, 3, 4, 5, 6, 7),
        )
        if any(r.floor_per_second is not None for r in report.rates):
            out.append(
                "   floor: a commit's round trips, each writing as a commit's do (the target's figure);"
            )
            out.append("   read-only: the same round trips writing nothing (no fsync, no commit log)")
    if report.floors:
        out += [
            "",
            "   raw floor probes (same run, one connection, the server's durability as it reported it):",
        ]
        rows = [
            [
                f.backend,
                f.server,
                f.durability,
                p.name,
                str(p.round_trips),
                "yes" if p.writes else "no",
                p.per_second.show(),
                f"{p.cpu_us_per_op.median:.0f}",
            ]
            for f in report.floors
            for p in f.probes
        ]
        out += [
            "   " + line
            for line in table(
                ["backend", "server", "durability", "probe", "RT/op", "writes", "ops/s", "CPU us/op"],
                rows,
                right=(4, 6, 7),
            )
        ]

    out += [
        "",
        "4. Redis commit-hash footprint "
        f"(100-byte body; contract: {CONTRACT_COMMITTED_BYTES} B committed, listpack)",
    ]
    if report.footprints:
        rows = []
        for f in report.footprints:
            n = f.name_lengths
            lengths = "/".join(
                str(n[k]) for k in ("namespace", "tenant", "sender", "conversation", "client_message_id")
            )
            versus = f"{100 * f.memory_usage / CONTRACT_COMMITTED_BYTES:.0f}%" if f.committed else ""
            rows.append([f.ids, lengths, f.stage, f.encoding, f"{f.memory_usage} B", str(f.fields), versus])
        out += table(
            [
                "ids",
                "ns/tenant/sender/conv/cmid chars",
                "stage",
                "encoding",
                "MEMORY USAGE",
                "fields",
                "vs contract",
            ],
            rows,
            right=(4, 5, 6),
        )
        out.append("   MEMORY USAGE includes the key name, which holds the namespace and the ids above")
    elif "redis" in report.options.backends:
        out.append("   (not measured: real Redis unavailable)")
    return out


def _saga_sections(report: BenchReport, sizes: str) -> list[str]:
    out = ["", f"5. Saga harness throughput: the saga suite, model check on ({sizes})"]
    if report.saga_throughput:
        rows = [
            [
                t.backend,
                t.steps_per_second.show(),
                f"{t.transactions_per_step.median:.1f}",
                _pct(t.backend_share),
                _pct(t.transaction_share),
                _pct(t.harness_share),
                f"{t.steps_per_run.median:.0f}",
                _verdicts(t.verdicts),
            ]
            for t in report.saga_throughput
        ]
        out += table(
            ["backend", "steps/s", "tx/step", "backend%", "in-tx%", "harness+model%", "steps/run", "runs"],
            rows,
            right=(1, 2, 3, 4, 5, 6),
        )
        out += [
            "   backend% = time inside the SagaBackend port (timing seam, opening included) / wall time;",
            "   in-tx% = time with a transaction open (port calls + the runtime's work in it) / wall time",
        ]

    out += [
        "",
        "6. Saga unit cost per unit (one transaction each; SQL = statements incl. BEGIN/COMMIT/ROLLBACK,"
        " '-' = no SQL)",
    ]
    if report.saga_costs:
        rows = [
            [
                c.backend,
                u.unit,
                u.side,
                u.outcome,
                _maybe(u.transactions),
                _maybe(u.port_calls),
                _maybe(u.statements),
                " ".join(f"{name}:{n:g}" for name, n in u.port_calls_by_method.items()),
            ]
            for c in report.saga_costs
            for u in c.units
        ]
        out += table(
            ["backend", "unit", "side", "outcome", "tx", "port calls", "SQL", "port calls by method"],
            rows,
            right=(4, 5, 6),
        )

    out += ["", "7. Saga units per second, sequential on one connection, vs the raw SQL floor"]
    if report.saga_rates:
        rows = [
            [
                r.backend,
                r.unit,
                r.units_per_second.show(),
                f"{r.cpu_us_per_unit.median:.0f}",
                "-" if r.statements_per_unit is None else f"{r.statements_per_unit:g}",
                _maybe(r.floor_per_second),
                _maybe(r.floor_ratio_percent) + ("%" if r.floor_ratio_percent is not None else ""),
            ]
            for r in report.saga_rates
        ]
        out += table(
            ["backend", "unit", "units/s", "CPU us/unit", "SQL/unit", "floor/s (same SQL)", "Ratchet/floor"],
            rows,
            right=(2, 3, 4, 5, 6),
        )
    if report.saga_floors:
        out += ["", "   raw SQL floor probes (same run, one connection, the backend's driver and BEGIN):"]
        rows = [
            [
                f.backend,
                f.server,
                p.name,
                str(p.statements),
                p.per_second.show(),
                f"{p.cpu_us_per_op.median:.0f}",
            ]
            for f in report.saga_floors
            for p in f.probes
        ]
        out += [
            "   " + line
            for line in table(
                ["backend", "server", "probe", "SQL/tx", "tx/s", "CPU us/tx"], rows, right=(3, 4, 5)
            )
        ]
    if report.saga_wire_costs:
        out += [
            "",
            "8. Saga units at the wire, same PostgreSQL, same run: round trips per unit counted by the"
            " fault proxy (every request, BEGIN/COMMIT included)",
        ]
        rows = [
            [
                c.backend,
                c.unit,
                _maybe(c.round_trips),
                "-" if c.units_per_second is None else c.units_per_second.show(),
                " ".join(f"{label}:{n:g}" for label, n in c.by_label.items()),
            ]
            for c in report.saga_wire_costs
        ]
        out += table(["backend", "unit", "round trips", "units/s", "by first word"], rows, right=(2, 3))
    out.append("   (no target is set for sagas: these figures are reported, not checked)")
    return out


def _transport_section(report: BenchReport) -> list[str]:
    out = ["", "8. Transports: messages/s through each connector beside the engine's floor, same run"]
    rows = [
        [
            r.backend,
            r.connector,
            r.messages_per_second.show(),
            r.floor,
            r.floor_per_second.show(),
            f"{r.ratio_percent.show(1, spread=False)}%",
        ]
        for r in report.transport_rates
    ]
    out += table(["backend", "connector", "msg/s", "floor", "floor/s", "share"], rows, right=(2, 4, 5))
    out.append("   (sequential, one connection; a message counts once committed and acknowledged)")
    out += [f"   {note}" for r in report.transport_rates for note in r.notes]
    return out


def render(report: BenchReport) -> str:
    o = report.options
    m = report.machine
    out: list[str] = []
    mode = "quick" if o.quick else "full"
    out.append(
        f"Ratchet bench ({mode}): {o.runs} runs per figure, median [min-max]; seed {o.seed}; "
        f"{report.elapsed_s:.0f}s"
    )
    out.append(f"machine: {m.cpus} CPUs ({m.cpu_model}), {m.memory_gib} GiB, Python {m.python}, {m.platform}")
    start, end = m.load_average
    out.append(
        f"load average (1 min): {start:.2f} at start, {end:.2f} at end (every process on the machine counts)"
    )
    if report.servers:
        out.append("servers: " + ", ".join(f"{b}: {v}" for b, v in report.servers.items()))
    sizes = f"{o.examples if o.examples is not None else 'ci-profile'} examples/run"
    if o.steps is not None:
        sizes += f", <= {o.steps} steps/example"

    if any(suite in COMMIT_SUITES for suite in o.suites):
        out += _commit_sections(report, sizes)
    if SAGA_SUITE in o.suites:
        out += _saga_sections(report, sizes)
    if TRANSPORT_SUITE in o.suites:
        out += _transport_section(report)

    if report.targets:
        out += ["", "Targets (on the median)"]
        out += table(
            ["", "target", "wanted", "measured"],
            [[t.verdict, t.name, t.wanted, t.measured] for t in report.targets],
        )
    else:
        out += ["", "Targets: none for the chosen suites"]
    if report.unavailable:
        out += ["", "Unavailable backends:"]
        out += [f"  {name}: {why}" for name, why in report.unavailable.items()]
    non_passing = report.non_passing_runs()
    if non_passing:
        out += ["", "Conformance runs that did not pass (their time includes shrinking):"]
        out += [f"  {line}" for line in non_passing]
    if report.errors:
        out += ["", "Sections that could not be measured:"]
        out += [f"  {where}: {what}" for where, what in report.errors.items()]
    return "\n".join(out)


def to_json(report: BenchReport) -> dict[str, Any]:
    body = attrs.asdict(report)
    return {"format": JSON_FORMAT, **body}


def write_json(report: BenchReport, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_json(report), indent=2) + "\n", encoding="utf-8")
