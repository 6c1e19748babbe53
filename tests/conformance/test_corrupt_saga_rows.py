"""The saga suite's stored-row audit (S-TX-03) catches the backends of examples/corrupt_saga_rows.py
(a malformed row read as absent, a decoder's own exception leaking), names the rule, shrinks the
program and the failure file replays; on the shipped SQLite backend it does not reproduce. The
inspectors themselves round-trip a row's raw form."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from conformance import FailureFile, Report, replay, run_matrix
from conformance._suites import BackendUnderTest, suite_named
from conformance.saga import _world as w
from conformance.saga._stored_rows import MALFORMED, READS, Reencoded, _forms
from examples.corrupt_saga_rows import CORRUPT_SAGA_ROWS
from impls.api import SAGA_ROW_KINDS, SagaInspector
from impls.saga import DefinitionRow, SagaBackend, SagaBackendError, SagaBackendErrorKind, codec
from impls.saga.memory import open_memory_saga_backend
from impls.saga_inspect import saga_inspector
from impls.sql import open_sqlite_saga_backend
from model.saga import DefinitionKey, Lifecycle, canonical_document, decode, definition_digest
from tests._planted import caught_and_replayed, planted_options

# The fixed suite seed: the audit runs in every example's quiescence, so the first example fails.
SEED = 20_261_130

RunBroken = Callable[[str], Report]


@pytest.fixture(scope="module")
def run_broken(tmp_path_factory: pytest.TempPathFactory) -> RunBroken:
    reports: dict[str, Report] = {}

    def run(factory: str) -> Report:
        if factory not in reports:
            backend = BackendUnderTest(
                factory, "saga", {"backend": f"examples.corrupt_saga_rows:{factory}"}, None
            )
            options = planted_options(SEED, tmp_path_factory.mktemp(factory))
            reports[factory] = run_matrix([(backend, suite_named("saga"))], options)
        return reports[factory]

    return run


@pytest.mark.parametrize(("factory", "rule_id"), sorted(CORRUPT_SAGA_ROWS.items()))
def test_a_backend_answering_garbage_for_a_corrupt_row_is_caught_and_replays(
    factory: str, rule_id: str, run_broken: RunBroken
) -> None:
    report = run_broken(factory)
    saved = caught_and_replayed(report, rule_id)
    assert 1 <= len(saved.program) <= 12, report.details()
    assert saved.factories == {"backend": f"examples.corrupt_saga_rows:{factory}"}


def test_the_shipped_sqlite_backend_does_not_reproduce(run_broken: RunBroken) -> None:
    failure = run_broken("timer_read_as_absent").results[0].failure
    assert failure is not None and failure.failure_file is not None
    result = replay(
        FailureFile.read(failure.failure_file), overrides={"backend": "impls.sql:open_sqlite_saga_backend"}
    )
    assert not result.reproduced, result.describe()


def _definition(inspector: SagaInspector) -> tuple[tuple[object, ...], dict[str, object]]:
    (row,) = inspector.read_raw("definition")
    return row


def _published(backend: SagaBackend) -> None:
    tx = backend.begin()
    assert tx.insert_definition(DefinitionRow(DefinitionKey("t", "w", 1), "d", b"{}", Lifecycle.ACTIVE))
    tx.commit()


def test_the_sqlite_inspector_plants_a_malformed_row_and_restores_it() -> None:
    backend = open_sqlite_saga_backend("inspect")
    inspector = saga_inspector(backend)
    assert isinstance(inspector, SagaInspector) and inspector.decodes
    assert all(inspector.read_raw(kind) == [] for kind in SAGA_ROW_KINDS)
    _published(backend)
    key, fields = _definition(inspector)
    assert key == ("t", "w", 1) and fields["lifecycle"] == "active" and fields["digest"] == "d"
    inspector.write_raw("definition", key, {"lifecycle": "garbage"})
    tx = backend.begin()
    with pytest.raises(SagaBackendError) as refused:
        tx.list_definitions()
    tx.rollback()
    assert refused.value.kind is SagaBackendErrorKind.CORRUPT
    inspector.write_raw("definition", key, fields)
    tx = backend.begin()
    assert tx.load_definition(DefinitionKey("t", "w", 1)) is not None
    tx.rollback()
    backend.close()


def test_the_memory_inspector_reads_and_writes_values_it_never_decodes() -> None:
    backend = open_memory_saga_backend("inspect-memory")
    inspector = saga_inspector(backend)
    assert isinstance(inspector, SagaInspector) and not inspector.decodes
    _published(backend)
    key, fields = _definition(inspector)
    assert key == ("t", "w", 1) and fields["lifecycle"] is Lifecycle.ACTIVE
    inspector.write_raw("definition", key, {"lifecycle": Lifecycle.DEPRECATED})
    assert _definition(inspector)[1]["lifecycle"] is Lifecycle.DEPRECATED
    backend.close()


def test_no_inspector_for_a_backend_it_does_not_know() -> None:
    assert saga_inspector(object()) is None


def test_each_reencoded_document_is_canonical_and_read_as_corrupt() -> None:
    """The audit's definition documents of the wrong shape: each still decodes as a canonical tuple
    (only the runtime codec's own checks can refuse it), differs from the stored one in the one
    field it names, and both definition reads refuse it on SQLite, which stores documents opaque."""
    stored = canonical_document(w.ARTIFACT)
    backend = open_sqlite_saga_backend("reencoded")
    inspector = saga_inspector(backend)
    assert inspector is not None
    tx = backend.begin()
    assert tx.insert_definition(
        DefinitionRow(w.ARTIFACT.key, definition_digest(w.ARTIFACT), stored, Lifecycle.ACTIVE)
    )
    tx.commit()
    key, fields = _definition(inspector)
    forms = [
        each["document"]
        for given in MALFORMED["definition"]
        for each in _forms(given, fields)
        if isinstance(each.get("document"), Reencoded)
    ]
    assert len(forms) == 7  # a foreign tag, then each of the L6 document's fields another type
    for form in forms:
        assert isinstance(form, Reencoded)
        written = form(fields["document"])
        before, after = decode(stored), decode(written)
        assert isinstance(before, tuple) and isinstance(after, tuple) and len(after) == len(before)
        assert [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b] == [form.index]
        inspector.write_raw("definition", key, {"document": written})
        for read in READS["definition"].values():
            tx = backend.begin()
            with pytest.raises(SagaBackendError) as refused:
                read(tx, key)
            tx.rollback()
            assert refused.value.kind is SagaBackendErrorKind.CORRUPT, form
    inspector.write_raw("definition", key, fields)
    tx = backend.begin()
    assert [codec.artifact_from_document(r.document) for r in tx.list_definitions()] == [w.ARTIFACT]
    tx.rollback()
    backend.close()
