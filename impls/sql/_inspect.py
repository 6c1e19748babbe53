"""The SQL saga backends' ``impls.api.SagaInspector``: one row kind's table, read and written raw.

A row's raw form is its table's columns as the driver returns them: the primary key (without the
``ns`` column of shared tables) as the key, every other column by name. ``write_raw`` is one
``UPDATE`` of those columns in a transaction of the backend's own, so a value of any type the
column takes (NULL, text that does not parse) lands as a torn page or a bad restore would leave
it, and the backend's next read must refuse it (S-TX-03). It lives beside, not in, the modules
the sql mutation sample draws from, so adding it leaves that sample where it was.
"""

from __future__ import annotations

from collections.abc import Mapping

from impls.api import SAGA_ROW_KINDS

from ._saga import SCHEMA, SqlSagaBackend

#: Row kind -> its table in ``SCHEMA``.
TABLES: Mapping[str, str] = {
    "definition": "definitions",
    "capability": "capabilities",
    "receipt": "receipts",
    "instance": "instances",
    "journal": "journal",
    "command": "command_outbox",
    "timer": "timers",
    "gate": "gate",
    "result": "result_outbox",
    "control": "controls",
    "audit": "audit",
}
assert tuple(TABLES) == SAGA_ROW_KINDS


class SqlSagaInspector:
    """``SagaInspector`` over one ``SqlSagaBackend`` (SQLite, PostgreSQL, MariaDB)."""

    decodes = True

    def __init__(self, backend: SqlSagaBackend) -> None:
        self._backend = backend

    @staticmethod
    def _layout(kind: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
        table = TABLES[kind]
        columns, key = SCHEMA[table]
        return table, key, tuple(name for name, _ in columns if name not in key)

    def read_raw(self, kind: str) -> list[tuple[tuple[object, ...], dict[str, object]]]:
        table, key, fields = self._layout(kind)
        tx = self._backend.begin()
        try:
            rows = tx._all(
                f"SELECT {', '.join((*key, *fields))} FROM {tx._t(table)}{tx._where_ns} "
                f"ORDER BY {', '.join(key)}",
                tx._ns,
            )
        finally:
            tx.rollback()
        width = len(key)
        return [(tuple(row[:width]), dict(zip(fields, row[width:], strict=True))) for row in rows]

    def write_raw(self, kind: str, key: tuple[object, ...], fields: Mapping[str, object]) -> None:
        table, key_columns, known = self._layout(kind)
        unknown = sorted(set(fields) - set(known))
        if unknown:
            raise ValueError(f"{kind} rows have no columns {unknown}")
        names = tuple(fields)
        tx = self._backend.begin()
        try:
            # No row-count check: MariaDB counts a row written with the values it held as 0.
            tx._exec(
                f"UPDATE {tx._t(table)} SET {', '.join(f'{name} = ?' for name in names)} "
                f"WHERE {' AND '.join(f'{name} = ?' for name in key_columns)}{tx._and_ns}",
                (*(fields[name] for name in names), *key, *tx._ns),
            )
        except BaseException:
            tx.rollback()
            raise
        tx.commit()
