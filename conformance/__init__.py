"""Ratchet's conformance harness: stateful, fault-injecting checks of commit (and saga) backends.

Public API (usable without pytest; docs/backend-authors.md)::

    from conformance import run_conformance
    report = run_conformance("mypkg.store:make_store", suites=("store", "commit"), profile="ci")
    report = run_conformance("mypkg.saga:make_saga_backend", suites=("saga",))  # a saga backend
    assert report.ok, report.details()

Layout: ``_machine`` (the base state machine, step recording), ``_scheduler`` (deterministic
interleaving), ``_faults`` (fault kinds and points), ``_runner`` / ``_report`` / ``_failures`` /
``_replay`` (runs, verdicts, failure files), ``commit/`` (the commit-family suites), ``cli`` and
``pytest_plugin`` / ``testing`` (thin shells). Names are loaded on first use, so importing this
package (as pytest does for the plug-in) costs nothing and cannot fail on a driver.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conformance._failures import FailureFile
    from conformance._faults import ALL_FAULTS, FaultFilter, FaultKind
    from conformance._replay import ReplayResult, replay
    from conformance._report import Report, SuiteResult, Verdict
    from conformance._runner import RunOptions, run_conformance, run_matrix, run_suite
    from conformance._scheduler import Scheduler
    from conformance._violations import HarnessEnvironmentError, Violation

_EXPORTS = {
    "ALL_FAULTS": "conformance._faults",
    "FailureFile": "conformance._failures",
    "FaultFilter": "conformance._faults",
    "FaultKind": "conformance._faults",
    "HarnessEnvironmentError": "conformance._violations",
    "ReplayResult": "conformance._replay",
    "Report": "conformance._report",
    "RunOptions": "conformance._runner",
    "Scheduler": "conformance._scheduler",
    "SuiteResult": "conformance._report",
    "Verdict": "conformance._report",
    "Violation": "conformance._violations",
    "replay": "conformance._replay",
    "run_conformance": "conformance._runner",
    "run_matrix": "conformance._runner",
    "run_suite": "conformance._runner",
}

__all__ = [
    "ALL_FAULTS",
    "FailureFile",
    "FaultFilter",
    "FaultKind",
    "HarnessEnvironmentError",
    "ReplayResult",
    "Report",
    "RunOptions",
    "Scheduler",
    "SuiteResult",
    "Verdict",
    "Violation",
    "replay",
    "run_conformance",
    "run_matrix",
    "run_suite",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'conformance' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
