"""``SagaBackend`` in memory. A transaction works on a copy of the tables and COMMIT swaps it in,
so a rollback (or a transaction abandoned by a crash) leaves nothing behind. Namespaces share a
process-wide registry, so reopening a namespace sees its committed rows (``durable`` within
the process).
"""

from __future__ import annotations

import attrs

from impls.saga._backend import (
    CapabilityRow,
    CommandOutboxRow,
    DefinitionRow,
    EffectRow,
    GateRow,
    InstanceRow,
    JournalRow,
    LeaseRow,
    ReceiptRow,
    ResultOutboxRow,
    SagaCapabilities,
    TimerRow,
)
from model.saga import (
    AuditRecord,
    Control,
    DefinitionKey,
    DefinitionReference,
    Lifecycle,
    ReferenceKind,
    ResultKind,
)

CapKey = tuple[str, str, int, int, str, str]


@attrs.define
class Tables:
    definitions: dict[DefinitionKey, DefinitionRow] = attrs.field(factory=dict)
    registry_revision: int = 0
    references: set[DefinitionReference] = attrs.field(factory=set)
    capabilities: dict[CapKey, CapabilityRow] = attrs.field(factory=dict)
    receipts: dict[str, ReceiptRow] = attrs.field(factory=dict)
    instances: dict[str, InstanceRow] = attrs.field(factory=dict)
    quota: dict[str, int] = attrs.field(factory=dict)
    journal: dict[tuple[str, int], JournalRow] = attrs.field(factory=dict)
    result_inbox: set[str] = attrs.field(factory=set)
    commands: dict[str, CommandOutboxRow] = attrs.field(factory=dict)
    timers: dict[str, TimerRow] = attrs.field(factory=dict)
    last_token: int = 0
    command_inbox: set[str] = attrs.field(factory=set)
    gate: dict[str, GateRow] = attrs.field(factory=dict)
    effects: list[EffectRow] = attrs.field(factory=list)
    results: dict[str, ResultOutboxRow] = attrs.field(factory=dict)
    seq: int = 0
    controls: dict[str, Control] = attrs.field(factory=dict)
    audit: dict[tuple[str, str], AuditRecord] = attrs.field(factory=dict)
    audit_seq: int = 0

    def copy(self) -> Tables:
        return Tables(
            dict(self.definitions),
            self.registry_revision,
            set(self.references),
            dict(self.capabilities),
            dict(self.receipts),
            dict(self.instances),
            dict(self.quota),
            dict(self.journal),
            set(self.result_inbox),
            dict(self.commands),
            dict(self.timers),
            self.last_token,
            set(self.command_inbox),
            dict(self.gate),
            list(self.effects),
            dict(self.results),
            self.seq,
            dict(self.controls),
            dict(self.audit),
            self.audit_seq,
        )


class MemoryTransaction:
    """Reads and writes a private copy; ``commit`` publishes it to the backend."""

    def __init__(self, backend: MemorySagaBackend) -> None:
        self._backend = backend
        self.t = backend.tables.copy()
        self._open = True

    def commit(self) -> None:
        if self._open:
            self._backend.tables = self.t
            self._open = False

    def rollback(self) -> None:
        self._open = False

    def _next_seq(self) -> int:
        self.t.seq += 1
        return self.t.seq

    # catalog
    def load_definition(self, key: DefinitionKey, *, lock: bool = False) -> DefinitionRow | None:
        return self.t.definitions.get(key)

    def insert_definition(self, row: DefinitionRow) -> bool:
        if row.key in self.t.definitions:
            return False
        self.t.definitions[row.key] = row
        return True

    def update_lifecycle(self, key: DefinitionKey, expected: Lifecycle, lifecycle: Lifecycle) -> bool:
        row = self.t.definitions.get(key)
        if row is None or row.lifecycle is not expected:
            return False
        self.t.definitions[key] = attrs.evolve(row, lifecycle=lifecycle)
        return True

    def list_definitions(self) -> tuple[DefinitionRow, ...]:
        return tuple(
            sorted(self.t.definitions.values(), key=lambda r: (r.key.tenant, r.key.workflow, r.key.version))
        )

    def registry_revision(self) -> int:
        return self.t.registry_revision

    def bump_registry_revision(self) -> int:
        self.t.registry_revision += 1
        return self.t.registry_revision

    def definition_references(self, key: DefinitionKey, now_ms: int) -> frozenset[DefinitionReference]:
        found = {r for r in self.t.references if r.key == key}
        found |= {
            DefinitionReference(ReferenceKind.INSTANCE, key, row.saga_id)
            for row in self.t.instances.values()
            if row.definition == key
        }
        found |= {
            DefinitionReference(ReferenceKind.OUTBOX, key, row.command_id)
            for row in self.t.commands.values()
            if row.definition == key
        }
        found |= {
            DefinitionReference(ReferenceKind.CAPABILITY_LEASE, key, f"{c.owner}/{c.replica}/{c.step_index}")
            for c in self.t.capabilities.values()
            if DefinitionKey(c.tenant, c.workflow, c.version) == key and now_ms < c.lease_expires_ms
        }
        return frozenset(found)

    def insert_reference(self, reference: DefinitionReference) -> bool:
        if reference in self.t.references:
            return False
        self.t.references.add(reference)
        return True

    def delete_reference(self, reference: DefinitionReference) -> bool:
        if reference not in self.t.references:
            return False
        self.t.references.discard(reference)
        return True

    # capabilities
    def load_capability(
        self,
        tenant: str,
        workflow: str,
        version: int,
        step_index: int,
        owner: str,
        replica: str,
        *,
        lock: bool = False,
    ) -> CapabilityRow | None:
        return self.t.capabilities.get((tenant, workflow, version, step_index, owner, replica))

    def upsert_capability(self, row: CapabilityRow) -> None:
        key = (row.tenant, row.workflow, row.version, row.step_index, row.owner, row.replica)
        self.t.capabilities[key] = row

    def list_capabilities(self) -> tuple[CapabilityRow, ...]:
        return tuple(self.t.capabilities[k] for k in sorted(self.t.capabilities))

    # instances
    def load_receipt(self, saga_id: str) -> ReceiptRow | None:
        return self.t.receipts.get(saga_id)

    def insert_receipt(self, row: ReceiptRow) -> bool:
        if row.saga_id in self.t.receipts:
            return False
        self.t.receipts[row.saga_id] = row
        return True

    def load_instance(self, saga_id: str, *, lock: bool = False) -> InstanceRow | None:
        return self.t.instances.get(saga_id)

    def insert_instance(self, row: InstanceRow) -> bool:
        if row.saga_id in self.t.instances:
            return False
        self.t.instances[row.saga_id] = row
        return True

    def update_instance(self, row: InstanceRow, expected_revision: int) -> bool:
        current = self.t.instances.get(row.saga_id)
        if current is None or current.revision != expected_revision:
            return False
        self.t.instances[row.saga_id] = row
        return True

    def delete_instance(self, saga_id: str) -> bool:
        return self.t.instances.pop(saga_id, None) is not None

    def list_instances(self) -> tuple[InstanceRow, ...]:
        return tuple(self.t.instances[k] for k in sorted(self.t.instances))

    def quota_used(self, tenant: str) -> int:
        return self.t.quota.get(tenant, 0)

    def add_quota(self, tenant: str, amount: int) -> int:
        self.t.quota[tenant] = self.t.quota.get(tenant, 0) + amount
        return self.t.quota[tenant]

    def append_journal(self, row: JournalRow) -> bool:
        key = (row.saga_id, row.revision)
        if key in self.t.journal:
            return False
        self.t.journal[key] = row
        return True

    def journal(self, saga_id: str | None = None) -> tuple[JournalRow, ...]:
        return tuple(self.t.journal[k] for k in sorted(self.t.journal) if saga_id is None or k[0] == saga_id)

    # result inbox
    def claim_result(self, message_id: str) -> bool:
        if message_id in self.t.result_inbox:
            return False
        self.t.result_inbox.add(message_id)
        return True

    def result_claimed(self, message_id: str) -> bool:
        return message_id in self.t.result_inbox

    # command outbox
    def append_command(self, row: CommandOutboxRow) -> bool:
        if row.command_id in self.t.commands:
            return False
        self.t.commands[row.command_id] = attrs.evolve(row, seq=self._next_seq())
        return True

    def load_command(self, command_id: str) -> CommandOutboxRow | None:
        return self.t.commands.get(command_id)

    def mark_command_published(self, command_id: str) -> bool:
        row = self.t.commands.get(command_id)
        if row is None or row.published:
            return False
        self.t.commands[command_id] = attrs.evolve(row, published=True)
        return True

    def delete_commands(self, saga_id: str) -> int:
        gone = [k for k, row in self.t.commands.items() if row.saga_id == saga_id]
        for command_id in gone:
            del self.t.commands[command_id]
        return len(gone)

    def list_commands(self, *, unpublished_only: bool = False) -> tuple[CommandOutboxRow, ...]:
        rows = sorted(self.t.commands.values(), key=lambda r: r.seq)
        return tuple(r for r in rows if not (unpublished_only and r.published))

    # timers
    def insert_timer(self, row: TimerRow) -> bool:
        if row.timer_id in self.t.timers:
            return False
        self.t.timers[row.timer_id] = row
        return True

    def load_timer(self, timer_id: str, *, lock: bool = False) -> TimerRow | None:
        return self.t.timers.get(timer_id)

    def list_timers(self) -> tuple[TimerRow, ...]:
        return tuple(sorted(self.t.timers.values(), key=lambda r: (r.due_ms, r.timer_id)))

    def allocate_fencing_token(self) -> int:
        self.t.last_token += 1
        return self.t.last_token

    def _holds(self, timer_id: str, token: int | None) -> TimerRow | None:
        row = self.t.timers.get(timer_id)
        if row is None:
            return None
        current = None if row.lease is None else row.lease.token
        return row if current == token else None

    def lease_timer(self, timer_id: str, expected_token: int | None, lease: LeaseRow) -> bool:
        row = self._holds(timer_id, expected_token)
        if row is None:
            return False
        self.t.timers[timer_id] = attrs.evolve(row, lease=lease)
        return True

    def _authority(self, timer_id: str, token: int, now_ms: int) -> TimerRow | None:
        """The timer if ``token`` holds an unexpired lease on it (S-TIMER-01, S-TIMER-04)."""
        row = self._holds(timer_id, token)
        if row is None or row.lease is None or row.lease.expires_ms <= now_ms:
            return None
        return row

    def renew_timer(self, timer_id: str, token: int, now_ms: int, expires_ms: int) -> bool:
        row = self._authority(timer_id, token, now_ms)
        if row is None or row.lease is None:
            return False
        self.t.timers[timer_id] = attrs.evolve(row, lease=attrs.evolve(row.lease, expires_ms=expires_ms))
        return True

    def release_timer(self, timer_id: str, token: int, now_ms: int) -> bool:
        row = self._authority(timer_id, token, now_ms)
        if row is None or row.lease is None:
            return False
        self.t.timers[timer_id] = attrs.evolve(row, lease=None)
        return True

    def complete_timer(self, timer_id: str, token: int, now_ms: int) -> bool:
        row = self._authority(timer_id, token, now_ms)
        if row is None:
            return False
        del self.t.timers[timer_id]
        return True

    def delete_timer(self, timer_id: str) -> bool:
        return self.t.timers.pop(timer_id, None) is not None

    # management (S-MGT-05, S-MGT-09)
    def load_control(self, saga_id: str, *, lock: bool = False) -> Control | None:
        return self.t.controls.get(saga_id)

    def save_control(self, saga_id: str, control: Control, expected_revision: int) -> bool:
        current = self.t.controls.get(saga_id)
        if (1 if current is None else current.revision) != expected_revision:
            return False
        self.t.controls[saga_id] = control
        return True

    def next_audit_seq(self) -> int:
        self.t.audit_seq += 1
        return self.t.audit_seq

    def append_audit(self, record: AuditRecord) -> bool:
        key = (record.saga_id, record.operation_id)
        if key in self.t.audit:
            return False
        self.t.audit[key] = record
        return True

    def load_audit(self, saga_id: str, operation_id: str) -> AuditRecord | None:
        return self.t.audit.get((saga_id, operation_id))

    def list_audit(self, saga_id: str | None = None) -> tuple[AuditRecord, ...]:
        chosen = (r for r in self.t.audit.values() if saga_id is None or r.saga_id == saga_id)
        return tuple(sorted(chosen, key=lambda r: r.seq))

    # participant
    def claim_command(self, command_id: str) -> bool:
        if command_id in self.t.command_inbox:
            return False
        self.t.command_inbox.add(command_id)
        return True

    def command_claimed(self, command_id: str) -> bool:
        return command_id in self.t.command_inbox

    def load_gate(self, effect_id: str, *, lock: bool = False) -> GateRow | None:
        return self.t.gate.get(effect_id)

    def insert_gate(self, row: GateRow) -> bool:
        if row.effect_id in self.t.gate:
            return False
        self.t.gate[row.effect_id] = row
        return True

    def update_gate(self, row: GateRow, expected_kind: ResultKind) -> bool:
        current = self.t.gate.get(row.effect_id)
        if current is None or current.kind is not expected_kind:
            return False
        self.t.gate[row.effect_id] = row
        return True

    def append_effect(self, row: EffectRow) -> None:
        self.t.effects.append(attrs.evolve(row, seq=self._next_seq()))

    def list_effects(self) -> tuple[EffectRow, ...]:
        return tuple(self.t.effects)

    def append_result(self, row: ResultOutboxRow) -> bool:
        if row.message_id in self.t.results:
            return False
        self.t.results[row.message_id] = attrs.evolve(row, seq=self._next_seq())
        return True

    def mark_result_published(self, message_id: str) -> bool:
        row = self.t.results.get(message_id)
        if row is None or row.published:
            return False
        self.t.results[message_id] = attrs.evolve(row, published=True)
        return True

    def list_results(self, *, unpublished_only: bool = False) -> tuple[ResultOutboxRow, ...]:
        rows = sorted(self.t.results.values(), key=lambda r: r.seq)
        return tuple(r for r in rows if not (unpublished_only and r.published))


_REGISTRY: dict[str, Tables] = {}


class MemorySagaBackend:
    """One namespace's tables; a transaction at a time (the runtime never nests)."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.tables = _REGISTRY.setdefault(namespace, Tables())

    @property
    def tables(self) -> Tables:
        return _REGISTRY[self.namespace]

    @tables.setter
    def tables(self, value: Tables) -> None:
        _REGISTRY[self.namespace] = value

    @property
    def capabilities(self) -> SagaCapabilities:
        return SagaCapabilities(fenced_timers=True, row_locks=False, durable=False)

    def begin(self) -> MemoryTransaction:
        return MemoryTransaction(self)

    def readiness(self) -> None:
        return None

    def drop_namespace(self) -> None:
        """``impls.saga.NamespacedSagaBackend``: the registry entry is the namespace."""
        _REGISTRY[self.namespace] = Tables()

    def namespaces(self) -> list[str]:
        return sorted(_REGISTRY)

    def close(self) -> None:
        _REGISTRY.pop(self.namespace, None)


def open_memory_saga_backend(namespace: str) -> MemorySagaBackend:
    return MemorySagaBackend(namespace)
