"""What a matrix run knows so far: the suites that finished, the one running, the ones to come.

The runner records here as it goes and builds its report from it. The signal watchdog
(``conformance._signals``) reads it from its own thread when a stuck step leaves no time to wait
for the runner, so even a forced stop writes the JSON and JUnit of what finished. A suite that was
running is reported ``interrupted`` (with a violation it had already found, if any) and the rest
``not-run``: the journal never invents a verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from conformance._machine import SuiteStats
from conformance._report import Report, SuiteResult, Verdict


@attrs.define
class Journal:
    pairs: tuple[tuple[str, str], ...]  # (backend, suite) in run order
    results: list[SuiteResult] = attrs.field(factory=list)
    #: Builds the running suite's ``interrupted`` result (and keeps its failure file); None between suites.
    running: Callable[[], SuiteResult] | None = None

    @classmethod
    def of(cls, pairs: Sequence[tuple[str, str]]) -> Journal:
        return cls(tuple(pairs))

    def finish(self, result: SuiteResult) -> None:
        self.running = None
        self.results.append(result)

    def report(self, interrupted_by: int | None = None) -> Report:
        """The report of what is known; with a signal, the running suite and the rest are included."""
        results = list(self.results)
        if interrupted_by is None:
            return Report(tuple(results))
        running = self.running
        if running is not None:
            results.append(running())
        for backend, suite in self.pairs[len(results) :]:
            results.append(SuiteResult(backend, suite, Verdict.NOT_RUN, SuiteStats(), 0.0, None))
        return Report(tuple(results), interrupted_by=interrupted_by)
