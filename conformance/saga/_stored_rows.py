"""Stored saga rows through the backend's inspector port (``impls.api.SagaInspector``, S-TX-03).

An end-of-run audit at quiescence, on Ratchet's runtime over a backend that offers the port (every
shipped one: ``impls.saga_inspect.saga_inspector``); it draws nothing from Hypothesis, so every
example's choice sequence stays as it was. For each role's backend:

1. the stored form is compared with the model where reads could lie consistently: each instance
   row's status and revision, and the journal's keys (a backend that stored something else and
   decoded it back consistently would pass every read-back of ``after_step``);
2. on a backend that decodes its rows (``decodes``), one stored row of each kind found (at the
   start of quiescence or, for a kind not stored then, at its end) is made
   malformed in each of the ways ``MALFORMED`` lists (text an enum column cannot hold, NULL where
   a number or a blob must be, and a definition's document or an envelope canonically encoded but
   of the wrong shape: each of its fields given another type, or a document's format tag a foreign
   one, re-encoded with model.saga's encoder, ``Reencoded``), and every read of that kind
   (``READS``) must refuse it with ``SagaBackendError(CORRUPT)``: a foreign exception, another
   error kind or a value (the row decoded into something, skipped or defaulted) is S-TX-03. A
   transient refusal is asked again;
3. the row's stored form is written back and every read must answer again; ``after_step`` then
   compares the whole world with the model once more.

Coverage targets ``stored-form-compared`` (any inspector) and ``corrupt-row-refused`` (a decoding
one) are required where the port is offered (``conformance/saga/suites.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, ClassVar, Protocol, TypeVar

import attrs

from conformance._machine import RunContext
from conformance._violations import HarnessEnvironmentError, Violation
from conformance.saga._base import ASK_AGAIN_TRIES, TRANSIENT, asking_again, show
from conformance.saga._ratchet import RatchetRuntime
from impls.api import SagaInspector
from impls.saga import SagaBackend, SagaBackendError, SagaBackendErrorKind, codec
from impls.saga_inspect import saga_inspector
from model import saga as m


class AuditedMachine(Protocol):
    """What the audit uses of ``conformance.saga._machine.SagaMachine`` (which calls it)."""

    raw_runtime: object
    model: m.OrchestratorStore
    context: ClassVar[RunContext]

    def note(self, line: str) -> None: ...

    def after_step(self) -> None: ...


Key = tuple[object, ...]
Read = Callable[[Any, Key], object]


def _another_type(value: m.Canon) -> m.Canon:
    """A canonical value of another type that a careless decoder would still take: a tuple becomes
    a text of as many characters (it unpacks into as many parts), a text its length, an integer
    its decimal text, anything else the integer 0."""
    if isinstance(value, tuple):
        return "x" * len(value)
    if isinstance(value, str):
        return len(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return 0


@attrs.frozen
class Reencoded:
    """A form computed from the stored value: the stored canonical tuple (model.saga's encoding)
    decoded, its field ``index`` given ``foreign`` (``None``: another type, ``_another_type``) and
    encoded again. Canonical bytes of the wrong shape: only the decoder's own checks refuse them."""

    index: int
    foreign: str | None = None

    def __call__(self, stored: object) -> bytes:
        fields = m.decode(bytes(stored)) if isinstance(stored, bytes | bytearray | memoryview) else None
        if not (isinstance(fields, tuple) and self.index < len(fields)):
            raise Violation("S-TX-03", "a stored document is not a canonical tuple", {"stored": show(stored)})
        value = _another_type(fields[self.index]) if self.foreign is None else self.foreign
        return m.encode((*fields[: self.index], value, *fields[self.index + 1 :]))


@attrs.frozen
class EachField:
    """Stands for one ``Reencoded`` form per field of the stored canonical tuple, each field given
    another type in turn (the tuple's length is the stored value's, so no layout is written here)."""


def _forms(form: Mapping[str, object], original: Mapping[str, object]) -> list[Mapping[str, object]]:
    """``form`` itself, or one form per field where it holds ``EachField`` (at most one name)."""
    for name, value in form.items():
        if isinstance(value, EachField):
            stored = original.get(name)
            fields = m.decode(bytes(stored)) if isinstance(stored, bytes | bytearray | memoryview) else None
            if not isinstance(fields, tuple):
                raise Violation("S-TX-03", "a stored blob is not a canonical tuple", {"stored": show(stored)})
            return [{**form, name: Reencoded(index)} for index in range(len(fields))]
    return [form]


#: Per row kind, the malformed forms planted one at a time: each a set of fields and the values
#: they get (a ``Reencoded`` value is computed from the stored one). Text no enum of the contract
#: holds raises ValueError in a decoder; NULL where an integer or blob column must hold one,
#: TypeError; a blob of the wrong shape or a document under a format tag the runtime does not
#: read, a value that would decode into something: a backend and the runtime's codec must turn
#: each into CORRUPT.
MALFORMED: Mapping[str, tuple[Mapping[str, object], ...]] = {
    "definition": (
        {"lifecycle": "garbage"},
        {"document": None},
        {"document": Reencoded(0, foreign=f"{m.DOCUMENT_FORMAT}.foreign")},
        {"document": EachField()},
    ),
    "capability": ({"transport": "garbage"}, {"generation": None}),
    "receipt": ({"version": None},),
    "instance": ({"status": "garbage"}, {"revision": None}),
    "journal": ({"phase": "garbage"}, {"step_index": None}),
    "command": ({"envelope": b"\xff\xfe garbage"}, {"envelope": EachField()}, {"version": None}),
    "timer": ({"due_ms": None},),
    "gate": ({"phase": "garbage"}, {"kind": "garbage"}),
    "result": ({"envelope": b"\xff\xfe garbage"}, {"envelope": None}, {"envelope": EachField()}),
    "control": ({"state": "garbage"}, {"revision": None}),
    "audit": ({"action": "garbage"}, {"seq": None}),
}

#: Per row kind, every read of ``impls.saga.SagaTransaction`` that decodes such a row, by name. A
#: definition's document is opaque to the backend (S-CAT-01: the document is the row) and decoded
#: by the runtime's codec, so its reads are the backend's read and that decoding together.
READS: Mapping[str, Mapping[str, Read]] = {
    "definition": {
        "list_definitions": lambda tx, key: [
            codec.artifact_from_document(row.document) for row in tx.list_definitions()
        ],
        "load_definition": lambda tx, key: _artifact(
            tx.load_definition(m.DefinitionKey(str(key[0]), str(key[1]), int(str(key[2]))))
        ),
    },
    "capability": {"list_capabilities": lambda tx, key: tx.list_capabilities()},
    "receipt": {"load_receipt": lambda tx, key: tx.load_receipt(key[0])},
    "instance": {
        "load_instance": lambda tx, key: tx.load_instance(key[0]),
        "list_instances": lambda tx, key: tx.list_instances(),
    },
    "journal": {
        "journal(saga_id)": lambda tx, key: tx.journal(key[0]),
        "journal()": lambda tx, key: tx.journal(),
    },
    "command": {
        "load_command": lambda tx, key: tx.load_command(key[0]),
        "list_commands": lambda tx, key: tx.list_commands(),
    },
    "timer": {
        "load_timer": lambda tx, key: tx.load_timer(key[0]),
        "list_timers": lambda tx, key: tx.list_timers(),
    },
    "gate": {"load_gate": lambda tx, key: tx.load_gate(key[0])},
    "result": {"list_results": lambda tx, key: tx.list_results()},
    "control": {"load_control": lambda tx, key: tx.load_control(key[0])},
    "audit": {
        "load_audit": lambda tx, key: tx.load_audit(key[0], key[1]),
        "list_audit": lambda tx, key: tx.list_audit(key[0]),
    },
}


def _artifact(row: object) -> object:
    """A loaded definition row as the runtime reads it (``impls.saga._writes.entry_of``)."""
    document = getattr(row, "document", None)
    return row if document is None else codec.artifact_from_document(document)


_CORRUPT = "SagaBackendError(corrupt)"


def inspected(runtime: object) -> list[tuple[str, SagaBackend, SagaInspector]]:
    """Each role's real backend with its inspector, on Ratchet's runtime (none on another)."""
    if not isinstance(runtime, RatchetRuntime):
        return []
    found = [(role, backend, saga_inspector(backend)) for role, backend in runtime.raw_backends().items()]
    return [(role, backend, inspector) for role, backend, inspector in found if inspector is not None]


def _read(backend: SagaBackend, read: Read, key: Key, refusals: bool) -> object:
    """One read in a transaction of its own: its value, or ``_CORRUPT``; a transient refusal is
    asked again, pausing as the harness's own writes do (``asking_again``), any other failure is
    returned as it was raised. ``refusals``: other sessions write the backend's database, so a
    read it refused (or could not reach) on every attempt answered nothing, neither the row's
    refusal nor a value (S-TX-01): an environment error. Elsewhere that answer is the finding."""
    outcome: SagaBackendError | None = None
    for _ in asking_again():
        try:
            tx = backend.begin()
        except SagaBackendError as exc:
            outcome = exc
            continue
        try:
            return read(tx, key)
        except SagaBackendError as exc:
            if exc.kind is SagaBackendErrorKind.CORRUPT:
                return _CORRUPT
            outcome = exc
        except Exception as exc:  # a foreign exception is the finding, not the harness's error
            return exc
        finally:
            # The read's own answer stands; a broken connection reconnects on the next begin.
            with contextlib.suppress(SagaBackendError):
                tx.rollback()
    if refusals and outcome is not None and outcome.kind in TRANSIENT:
        raise HarnessEnvironmentError(
            f"the database refused the stored-row audit's read on every one of {ASK_AGAIN_TRIES} "
            f"attempts ({outcome!r}): no verdict"
        ) from outcome
    return outcome


T = TypeVar("T")


def _asked_again(call: Callable[[], T]) -> T:
    """An inspector call (the harness's own read or write of raw rows), asked again after a
    transient refusal, pausing between attempts (``asking_again``): a server under SERIALIZABLE
    refuses the inspector's transaction beside another writer (a planted second connection, or
    another run on the same shared tables). Four attempts in a row with no pause were all refused
    in 8 of 28 runs of two postgres/saga runs side by side, and the example ended as "the harness
    failed", which no replay reproduced (Hypothesis's ``FlakyFailure``). Refused on every attempt,
    the audit cannot be carried out: an environment error, never a verdict on the backend."""
    refused: SagaBackendError | None = None
    for _ in asking_again():
        try:
            return call()
        except SagaBackendError as exc:
            if exc.kind is SagaBackendErrorKind.CORRUPT:
                raise
            refused = exc
    raise HarnessEnvironmentError(
        f"the database refused the stored-row audit's own {_call_name(call)} on every one of "
        f"{ASK_AGAIN_TRIES} attempts ({refused!r}): no verdict"
    ) from refused


def _call_name(call: Callable[..., object]) -> str:
    inner = call.func if isinstance(call, partial) else call
    return getattr(inner, "__name__", "call")


def audit_stored_rows(machine: AuditedMachine, planted: set[tuple[str, str]]) -> None:
    """S-TX-03 over every role's backend (module docstring); nothing is drawn. Called at the start
    of quiescence, while timers and unpublished commands are still stored, and at its end, after
    the operator's actions wrote audit rows: ``planted`` (role, kind) is what the earlier call
    already planted in this example, which the later one leaves alone."""
    found = inspected(machine.raw_runtime)
    if not found:
        return
    # The world first, as the model holds it: a divergence the last step left (a row written by a
    # second connection after its unit) is that rule's, not muddled by the rows the audit writes.
    machine.after_step()
    for role, backend, inspector in found:
        _compare_stored_form(machine, role, inspector)
        if inspector.decodes:
            for kind, forms in MALFORMED.items():
                rows = [] if (role, kind) in planted else _asked_again(partial(inspector.read_raw, kind))
                if rows:
                    _plant(machine, (role, backend, inspector), kind, forms, rows[0])
                    planted.add((role, kind))
    # The inspector wrote behind the timed seam, so the observer's kept read-backs cannot tell:
    # the check of the restored world reads the rows afresh (RatchetRuntime._kept).
    if isinstance(machine.raw_runtime, RatchetRuntime):
        machine.raw_runtime.forget_reads()
    machine.after_step()


def _compare_stored_form(machine: AuditedMachine, role: str, inspector: SagaInspector) -> None:
    if role != "orchestrator":
        return
    stored = {key[0]: fields for key, fields in _asked_again(partial(inspector.read_raw, "instance"))}
    expected = {
        saga_id: (instance.status.value, instance.revision)
        for saga_id, instance in machine.model.instances.items()
    }
    actual = {
        saga_id: (getattr(fields.get("status"), "value", fields.get("status")), fields.get("revision"))
        for saga_id, fields in stored.items()
    }
    if actual != expected:
        raise Violation(
            "S-TX-03",
            "the stored instance rows (status, revision) differ from the model",
            {"expected": show(expected), "actual": show(actual)},
        )
    journal = sorted(key[:2] for key, _ in _asked_again(partial(inspector.read_raw, "journal")))
    if journal != sorted((e.saga_id, e.revision) for e in machine.model.journal):
        raise Violation(
            "S-TX-03",
            "the stored journal's keys differ from the model's transitions",
            {
                "expected": show(sorted((e.saga_id, e.revision) for e in machine.model.journal)),
                "actual": show(journal),
            },
        )
    machine.context.reach("stored-form-compared")


def _plant(
    machine: AuditedMachine,
    audited: tuple[str, SagaBackend, SagaInspector],
    kind: str,
    forms: tuple[Mapping[str, object], ...],
    row: tuple[Key, dict[str, object]],
) -> None:
    role, backend, inspector = audited
    refusals = isinstance(machine.raw_runtime, RatchetRuntime) and machine.raw_runtime.refusals
    key, original = row
    for form in [each for given in forms for each in _forms(given, original)]:
        missing = sorted(set(form) - set(original))
        if missing:
            raise Violation(
                "S-TX-03", f"the inspector's {kind} rows have no fields {missing}", {"role": role}
            )
        written = {
            name: value(original[name]) if isinstance(value, Reencoded) else value
            for name, value in form.items()
        }
        _asked_again(partial(inspector.write_raw, kind, key, written))
        machine.note(f"stored rows: {role}'s {kind} row {key!r} written as {form!r}")
        for name, read in READS[kind].items():
            answer = _read(backend, read, key, refusals)
            if answer == _CORRUPT:
                continue
            # Written back first: the world stays the model's for the report.
            _asked_again(partial(inspector.write_raw, kind, key, original))
            raise Violation(
                "S-TX-03",
                f"{name} of a malformed {kind} row answered {_described(answer)}, not {_CORRUPT}",
                {"role": role, "key": show(key), "form": show(form), "answer": show(answer)},
            )
        _asked_again(partial(inspector.write_raw, kind, key, original))
        for name, read in READS[kind].items():
            answer = _read(backend, read, key, refusals)
            if answer == _CORRUPT or isinstance(answer, Exception):
                raise Violation(
                    "S-TX-03",
                    f"{name} of a {kind} row written back as it was stored answered {_described(answer)}",
                    {"role": role, "key": show(key), "answer": show(answer)},
                )
    machine.context.reach("corrupt-row-refused")


def _described(answer: object) -> str:
    if isinstance(answer, SagaBackendError):
        return f"SagaBackendError({answer.kind.value})"
    if isinstance(answer, Exception):
        return f"a foreign exception {type(answer).__name__}"
    if answer == _CORRUPT:
        return _CORRUPT
    return f"a value ({show(answer)[:120]})"
