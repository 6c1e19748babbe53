"""``impls.api.SagaInspector`` for each shipped saga backend, and which one a backend gets.

The SQL backends' inspector is ``impls/sql/_inspect.py``. The memory backend's rows are the
runtime's own values in a dict per table (``impls.saga.memory._backend.Tables``): their raw form
is a row value's attributes, and ``write_raw`` replaces them with whatever it is given. Nothing
there is decoded (``decodes`` is False), so the saga suite only compares its stored form with the
model (S-TX-03). Both live outside the packages the saga and sql mutation samples draw from
(impls/saga, impls/sql's listed modules), so adding them moves neither sample.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from impls.api import SAGA_ROW_KINDS, SagaInspector
from impls.saga.memory import MemorySagaBackend
from impls.sql._inspect import SqlSagaInspector
from impls.sql._saga import SqlSagaBackend
from model.saga import DefinitionKey

#: Row kind -> the attribute of ``Tables`` holding it (a dict: key -> row value).
MEMORY_TABLES: Mapping[str, str] = {
    "definition": "definitions",
    "capability": "capabilities",
    "receipt": "receipts",
    "instance": "instances",
    "journal": "journal",
    "command": "commands",
    "timer": "timers",
    "gate": "gate",
    "result": "results",
    "control": "controls",
    "audit": "audit",
}
assert tuple(MEMORY_TABLES) == SAGA_ROW_KINDS


def _key(key: object) -> tuple[object, ...]:
    if isinstance(key, tuple):
        return key
    if isinstance(key, DefinitionKey):
        return (key.tenant, key.workflow, key.version)
    return (key,)


class MemorySagaInspector:
    """``SagaInspector`` over one ``MemorySagaBackend``'s committed tables."""

    decodes = False

    def __init__(self, backend: MemorySagaBackend) -> None:
        self._backend = backend

    def _table(self, kind: str) -> dict[Any, Any]:
        table: dict[Any, Any] = getattr(self._backend.tables, MEMORY_TABLES[kind])
        return table

    def read_raw(self, kind: str) -> list[tuple[tuple[object, ...], dict[str, object]]]:
        return [
            (_key(key), {a.name: getattr(row, a.name) for a in attrs.fields(type(row))})
            for key, row in sorted(self._table(kind).items(), key=lambda item: repr(_key(item[0])))
        ]

    def write_raw(self, kind: str, key: tuple[object, ...], fields: Mapping[str, object]) -> None:
        table = self._table(kind)
        stored = next(k for k in table if _key(k) == key)
        # attrs.evolve runs no validator on a field it is not given, and object.__setattr__ none
        # at all: the row holds what it was given, however malformed.
        row = attrs.evolve(table[stored])
        for name, value in fields.items():
            object.__setattr__(row, name, value)
        table[stored] = row


def saga_inspector(backend: object) -> SagaInspector | None:
    """The inspector of a shipped saga backend (a subclass's too), or None for any other."""
    if isinstance(backend, MemorySagaBackend):
        return MemorySagaInspector(backend)
    if isinstance(backend, SqlSagaBackend):
        return SqlSagaInspector(backend)
    return None
