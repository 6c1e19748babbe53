"""The saga observer keeps a read-back only while nothing can have written its rows.

``conformance/saga/_ratchet.py`` (``RatchetRuntime._kept``) reuses a read-back while the role's
write generation (``conformance/saga/_timing.py``, ``TimedBackend``) has not moved. These tests
write the rows through every other door there is and check the next read-back shows the write:
the runtime's own backend, another backend object on the same namespace (another party), and a
server restart or reopen that no seam sees (``forget_reads``)."""

from __future__ import annotations

from pathlib import Path

from conformance._machine import SuiteStats
from conformance.saga import _world as w
from conformance.saga._ratchet import RatchetRuntime
from conformance.saga._timing import TimedBackend
from impls.saga import EffectRow, SagaBackend
from impls.sql._sqlite import open_sqlite_saga_backend
from model import saga as m

OWNER = w.OWNERS[0]


def _runtime(tmp_path: Path, namespace: str) -> RatchetRuntime:
    # One SQLite file per namespace: a second backend object opened on it sees the same rows.
    def factory(ns: str) -> SagaBackend:
        return open_sqlite_saga_backend(ns, str(tmp_path / f"{ns}.db"))

    return RatchetRuntime(factory, namespace, lambda _point: m.CommitFate.COMMITTED, SuiteStats())


def _write_effect(backend: SagaBackend, effect_id: str) -> None:
    tx = backend.begin()
    tx.append_effect(EffectRow(effect_id, f"command-{effect_id}"))
    tx.commit()


def test_a_read_back_is_kept_while_nothing_wrote(tmp_path: Path) -> None:
    runtime = _runtime(tmp_path, "kept")
    first = runtime.observe_participant(OWNER)
    assert runtime.observe_participant(OWNER) is first  # no unit ran: the same read-back
    assert runtime.observe() is runtime.observe()


def test_a_write_through_the_runtimes_backend_is_seen(tmp_path: Path) -> None:
    runtime = _runtime(tmp_path, "own")
    assert runtime.observe_participant(OWNER).effects == ()
    _write_effect(runtime.parts[OWNER].backend, "e1")
    assert runtime.observe_participant(OWNER).effects == ("e1",)


def test_a_write_by_another_backend_object_on_the_namespace_is_seen(tmp_path: Path) -> None:
    runtime = _runtime(tmp_path, "other")
    assert runtime.observe_participant(OWNER).effects == ()
    namespace = f"other{OWNER}"
    other = open_sqlite_saga_backend(namespace, str(tmp_path / f"{namespace}.db"))
    # Another party's seam on the same namespace moves the same generation.
    _write_effect(TimedBackend(other, SuiteStats(), namespace=namespace), "e2")
    assert runtime.observe_participant(OWNER).effects == ("e2",)


def test_a_write_no_seam_saw_is_seen_after_forget_reads(tmp_path: Path) -> None:
    """A server restart (``conformance/crash/_saga.py``'s ``server_crash``) changes rows without a
    call on any backend of this process; the harness forgets its read-backs there, and on reopen."""
    runtime = _runtime(tmp_path, "unseen")
    assert runtime.observe_participant(OWNER).effects == ()
    namespace = f"unseen{OWNER}"
    _write_effect(open_sqlite_saga_backend(namespace, str(tmp_path / f"{namespace}.db")), "e3")
    assert runtime.observe_participant(OWNER).effects == ()  # no seam saw it: kept, as designed
    runtime.forget_reads()
    assert runtime.observe_participant(OWNER).effects == ("e3",)
    _write_effect(open_sqlite_saga_backend(namespace, str(tmp_path / f"{namespace}.db")), "e4")
    runtime.reopen(OWNER)
    assert runtime.observe_participant(OWNER).effects == ("e3", "e4")
