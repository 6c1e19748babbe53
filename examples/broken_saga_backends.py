"""Deliberately broken ``SagaBackend``s, each wrong in exactly one way the saga contract forbids.

They subclass the in-memory saga backend (``impls.saga.memory``) and change one or two methods
of its transaction, so every other answer is correct and the only thing the harness can find
is the planted bug. Each factory is a ``SagaBackendFactory`` (``(namespace) -> SagaBackend``)::

    conformance run --saga-backend examples.broken_saga_backends:gate_keyed_on_command_id --suite saga

==========================  ===========  =========================================================
factory                     rule broken  the bug
==========================  ===========  =========================================================
gate_keyed_on_command_id    S-PART-03    the participant gate's unique key is the command id, so
                                         a new attempt of the same effect runs it again
timer_ignores_fencing       S-TIMER-02   renew, release and complete act on whatever lease the
                                         timer holds, whatever token the caller brings
outbox_outside_transaction  S-ORCH-02    the command outbox row is written in its own implicit
                                         transaction and survives the unit's rollback
receipt_keyed_by_tenant     S-START-03   a start receipt reads back naming the tenant as its saga
                                         (a key column decoded from the wrong place); replays,
                                         judged by the digest alone, still answer right
release_answers_unapplied   S-CAT-11     deleting an instance row answers "nothing deleted", so
                                         every release of a finished saga rolls back
==========================  ===========  =========================================================

``BROKEN_SAGA_BACKENDS`` maps each factory name to the rule ID the harness must report.
"""

from __future__ import annotations

import attrs

from impls.saga import CommandOutboxRow, GateRow, ReceiptRow
from impls.saga.memory._backend import MemorySagaBackend, MemoryTransaction


class GateKeyedOnCommandId(MemoryTransaction):
    """S-PART-03: the gate row is stored under ``command_id``; a lookup by ``effect_id`` then only
    ever misses, and the unique key no longer stops a second attempt of the same effect."""

    def load_gate(self, effect_id: str, *, lock: bool = False) -> GateRow | None:
        return self.t.gate.get(effect_id)  # a table keyed by command ids: an effect id never matches

    def insert_gate(self, row: GateRow) -> bool:
        if row.command_id in self.t.gate:
            return False
        self.t.gate[row.command_id] = row
        return True


class TimerIgnoresFencing(MemoryTransaction):
    """S-TIMER-02: the fenced writes use the timer's current token instead of the caller's."""

    def _current(self, timer_id: str, token: int) -> int:
        row = self.t.timers.get(timer_id)
        return token if row is None or row.lease is None else row.lease.token

    def renew_timer(self, timer_id: str, token: int, now_ms: int, expires_ms: int) -> bool:
        return super().renew_timer(timer_id, self._current(timer_id, token), now_ms, expires_ms)

    def release_timer(self, timer_id: str, token: int, now_ms: int) -> bool:
        return super().release_timer(timer_id, self._current(timer_id, token), now_ms)

    def complete_timer(self, timer_id: str, token: int, now_ms: int) -> bool:
        return super().complete_timer(timer_id, self._current(timer_id, token), now_ms)


class OutboxOutsideTransaction(MemoryTransaction):
    """S-ORCH-02: the outbox row is also written straight to the committed tables (autocommit),
    so a unit that rolls back or whose COMMIT is lost unapplied leaves its command behind."""

    def append_command(self, row: CommandOutboxRow) -> bool:
        if not super().append_command(row):
            return False
        self._backend.tables.commands[row.command_id] = self.t.commands[row.command_id]
        self._backend.tables.seq = max(self._backend.tables.seq, self.t.seq)
        return True


class ReceiptKeyedByTenant(MemoryTransaction):
    """S-START-03: the receipt is found by its saga id but reads back naming the tenant."""

    def load_receipt(self, saga_id: str) -> ReceiptRow | None:
        row = super().load_receipt(saga_id)
        return None if row is None else attrs.evolve(row, saga_id=row.definition.tenant)


class ReleaseAnswersUnapplied(MemoryTransaction):
    """S-CAT-11: the instance row is deleted, and the delete answers that it was not."""

    def delete_instance(self, saga_id: str) -> bool:
        super().delete_instance(saga_id)
        return False


class _BrokenBackend(MemorySagaBackend):
    transaction: type[MemoryTransaction] = MemoryTransaction

    def begin(self) -> MemoryTransaction:
        return self.transaction(self)


def _backend(namespace: str, transaction: type[MemoryTransaction]) -> MemorySagaBackend:
    backend = _BrokenBackend(namespace)
    backend.transaction = transaction
    return backend


def gate_keyed_on_command_id(namespace: str) -> MemorySagaBackend:
    return _backend(namespace, GateKeyedOnCommandId)


def timer_ignores_fencing(namespace: str) -> MemorySagaBackend:
    return _backend(namespace, TimerIgnoresFencing)


def outbox_outside_transaction(namespace: str) -> MemorySagaBackend:
    return _backend(namespace, OutboxOutsideTransaction)


def receipt_keyed_by_tenant(namespace: str) -> MemorySagaBackend:
    return _backend(namespace, ReceiptKeyedByTenant)


def release_answers_unapplied(namespace: str) -> MemorySagaBackend:
    return _backend(namespace, ReleaseAnswersUnapplied)


BROKEN_SAGA_BACKENDS: dict[str, str] = {
    "gate_keyed_on_command_id": "S-PART-03",
    "timer_ignores_fencing": "S-TIMER-02",
    "outbox_outside_transaction": "S-ORCH-02",
    "receipt_keyed_by_tenant": "S-START-03",
    "release_answers_unapplied": "S-CAT-11",
}
