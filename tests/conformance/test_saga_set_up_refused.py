"""The saga machine's catalog set-up on a database that refuses it (conformance/saga/_starts.py).

Found beside another run on one PostgreSQL: the set-up's publication of the upload definition was
refused on every attempt the runtime made, the model went back (S-TX-01), and the example ran on
without the definition; its quiescence failed with a KeyError that no replay reproduced, so the run
ended ERROR with Hypothesis's FlakyFailure. The set-up is the harness's, so it asks again.
"""

from __future__ import annotations

import sys

import pytest

from conformance._machine import RunContext
from conformance._suites import BackendUnderTest, suite_named
from conformance._violations import HarnessEnvironmentError
from conformance.saga import _base as base
from conformance.saga import _world as w
from impls.saga import SagaBackendError, SagaBackendErrorKind
from impls.saga._unit import MAX_ATTEMPTS
from impls.saga.memory._backend import MemorySagaBackend, MemoryTransaction
from model import saga as m

#: The set-up's third unit (the upload publication) is its COMMIT number 2.
REFUSED_FROM = 2
_refused = [MAX_ATTEMPTS]


class _Refused(MemoryTransaction):
    def __init__(self, backend: RefusedAtSetUp) -> None:
        super().__init__(backend)
        self._counted = backend

    def commit(self) -> None:
        number = self._counted.commits
        self._counted.commits += 1
        if number >= REFUSED_FROM and _refused[0]:
            _refused[0] -= 1
            self.rollback()
            raise SagaBackendError(SagaBackendErrorKind.ROLLED_BACK, "could not serialize access")
        super().commit()


class RefusedAtSetUp(MemorySagaBackend):
    """The orchestrator's database refuses every attempt of the set-up's upload publication."""

    def __init__(self, namespace: str) -> None:
        super().__init__(namespace)
        self.commits = 0

    def begin(self) -> MemoryTransaction:
        return _Refused(self)


def refused_at_set_up(namespace: str) -> MemorySagaBackend:
    return RefusedAtSetUp(namespace)


def _context() -> tuple[RunContext, type]:
    suite = suite_named("saga")
    here = "tests.conformance.test_saga_set_up_refused"
    backend = BackendUnderTest("refused", "saga", {"backend": f"{here}:refused_at_set_up"}, None)
    context = RunContext("saga", "refused", suite.make_target(backend))
    return context, context.machine_class(suite.machine())


def test_a_set_up_the_database_refused_on_every_attempt_is_asked_again() -> None:
    _refused[0] = MAX_ATTEMPTS
    context, machine_class = _context()
    machine = machine_class()
    assert _refused == [0]  # the runtime's every attempt of one call was refused
    upload = machine.model.catalog.entries.get(w.UPLOAD_KEY)
    assert upload is not None and upload.lifecycle is m.Lifecycle.CANDIDATE
    assert machine.refusals == 1
    assert machine.model.catalog.entries[w.KEY].lifecycle is m.Lifecycle.ACTIVE
    machine.first_start(key=1)
    machine.teardown()
    assert context.last_failure is None


def test_a_set_up_the_database_never_accepts_is_an_environment_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "ASK_AGAIN_PAUSE_S", 0.0)  # the tries, not their pauses
    _refused[0] = 10**6
    _, machine_class = _context()
    try:
        with pytest.raises(HarnessEnvironmentError, match="refused the catalog's set-up"):
            machine_class()
    finally:
        _refused[0] = 0


@pytest.mark.parametrize("refused_from", [0, 1])
def test_a_first_unit_the_database_refused_keeps_the_models_configuration(
    refused_from: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model goes back to its state before the refused unit (S-TX-01), not to a blank store:
    beside another run on one PostgreSQL the set-up's first publication was refused on every
    attempt, the model came back without its quota limit and trusted producers, and at quiescence
    it expected ``Started`` for the start beyond the quota that the runtime refused (S-START-13:
    ``QuotaExhausted(tenant='acme', limit=3)``, reported as S-START-01, no replay reproduced it)."""
    monkeypatch.setattr(sys.modules[__name__], "REFUSED_FROM", refused_from)
    _refused[0] = MAX_ATTEMPTS
    context, machine_class = _context()
    machine = machine_class()
    assert _refused == [0] and machine.refusals == 1
    assert machine.model.quota_limit == w.QUOTA_LIMIT
    assert machine.model.trusted_producers == frozenset(w.OWNERS)
    machine.first_start(key=1)
    machine.teardown()  # quiescence: every key started, then the one beyond the quota
    assert context.last_failure is None
    assert "start:QuotaExhausted" in context.example_reached
