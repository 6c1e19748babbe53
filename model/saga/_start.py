"""Starting a saga: admission, idempotency, eligibility checkpoints and commit reporting.

The authorized start consults the host's eligibility check at numbered checkpoints:
``0`` before the definition snapshot is used, ``1..r`` at each of the ``r`` resumptions
of the create transaction, and ``r + 1`` just before COMMIT is handed to the database
(a start joined to the caller's transaction leaves that last gate to the outer
transaction). The first "no" rolls everything back (S-START-04).

Precedence of verdicts, so every backend reports the same one: checkpoint 0; unknown or
retired definition; payload admission; the resumption and pre-commit checkpoints; the
start receipt (``AlreadyExists``/``StartConflict``, in any lifecycle and for running and
finished instances alike); a new start's lifecycle (only ``active``); quota; COMMIT.

A new start writes instance, receipt, initial journal entry, quota unit, first command
and its timer in one transaction, or nothing at all (S-START-03).
"""

from __future__ import annotations

from typing import TypeAlias

import attrs

from ._canonical import digest_of
from ._catalog import admits_new_start
from ._errors import (
    DefinitionNotLoadable,
    DefinitionNotStartable,
    EligibilityRevoked,
    PayloadProblem,
    PayloadRejected,
    QuotaExhausted,
    StartConflict,
    UnknownDefinition,
)
from ._instance import begin
from ._keys import Lifecycle
from ._messages import saga_id_for
from ._store import OrchestratorStore, StartReceipt, stage_command
from ._transaction import OutcomeUnknown, RolledBack, settle
from ._values import (
    JSON_CONTRACT,
    CommitFate,
    DefinitionKey,
    PayloadContract,
    SagaPayload,
    is_json_document,
    is_json_media_type,
    name_validator,
)


@attrs.frozen
class StartSaga:
    """A start request: at most one of ``json_payload`` and ``raw_payload`` (S-START-10); neither is
    a start without first-step input."""

    definition: DefinitionKey
    business_key: str = attrs.field(validator=name_validator)
    json_payload: bytes | None = None
    raw_payload: SagaPayload | None = None


@attrs.frozen
class Eligibility:
    """The host's eligibility check as the model sees it.

    ``revoked_at``: the first checkpoint at which the check answers "no" (``None``: it
    always answers "yes", which is the unconstrained start, S-START-07).
    ``lapses_after_commit``: eligibility ends after COMMIT was sent; it must not change
    the reported outcome (S-START-05).
    """

    revoked_at: int | None = None
    lapses_after_commit: bool = False

    def holds_at(self, checkpoint: int) -> bool:
        return self.revoked_at is None or checkpoint < self.revoked_at


ALWAYS_ELIGIBLE = Eligibility()


@attrs.frozen
class StartAttempt:
    """One execution of a start by the runtime, with the faults the harness chose."""

    request: StartSaga
    now_ms: int
    resumptions: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    eligibility: Eligibility = ALWAYS_ELIGIBLE
    joined_outer: bool = False
    commit: CommitFate = CommitFate.COMMITTED


def checkpoints(attempt: StartAttempt) -> tuple[int, ...]:
    """The eligibility checkpoints the runtime itself passes (S-START-04, S-START-06).

    post: __return__[0] == 0
    post: len(__return__) == attempt.resumptions + (1 if attempt.joined_outer else 2)
    """
    last = attempt.resumptions + (0 if attempt.joined_outer else 1)
    return tuple(range(last + 1))


@attrs.frozen
class Started:
    saga_id: str
    start_digest: str
    first_command_id: str


@attrs.frozen
class AlreadyExists:
    """A replay of a committed start with the same digest (S-START-02)."""

    saga_id: str
    start_digest: str


StartOutcome: TypeAlias = (
    Started
    | AlreadyExists
    | StartConflict
    | RolledBack
    | OutcomeUnknown
    | EligibilityRevoked
    | QuotaExhausted
    | PayloadRejected
    | UnknownDefinition
    | DefinitionNotLoadable
    | DefinitionNotStartable
)


def _given(json_payload: bytes | None, raw_payload: SagaPayload | None) -> bytes | None:
    if json_payload is not None:
        return json_payload
    return None if raw_payload is None else raw_payload.data


def admit_payload(
    json_payload: bytes | None, raw_payload: SagaPayload | None, declared: PayloadContract
) -> SagaPayload | PayloadRejected | None:
    """Normalize the first-step input without touching its bytes (S-START-10, S-START-11).

    Neither form given is a start without first-step input (``None``): the seed makes the two
    forms mutually exclusive (两者互斥) and requires neither; a present input must match the
    first step's declared contract.

    post: _ is None or isinstance(_, PayloadRejected) or _.contract == declared
    post: _ is None or isinstance(_, PayloadRejected) or _.data is _given(json_payload, raw_payload)
    post: (_ is None) == (json_payload is None and raw_payload is None)
    """
    if json_payload is not None and raw_payload is not None:
        return PayloadRejected(PayloadProblem.BOTH_GIVEN)
    if json_payload is not None:
        payload = SagaPayload(json_payload, JSON_CONTRACT)
    elif raw_payload is not None:
        payload = raw_payload
    else:
        return None
    if is_json_media_type(payload.contract.media_type):
        if not is_json_document(payload.data):
            return PayloadRejected(PayloadProblem.INVALID_JSON)
    elif payload.contract.schema_id is None:
        return PayloadRejected(PayloadProblem.SCHEMA_REQUIRED)
    if payload.contract != declared:
        return PayloadRejected(PayloadProblem.CONTRACT_MISMATCH)
    return payload


def start_digest_for(
    key: DefinitionKey, definition_digest: str, business_key: str, payload: SagaPayload | None
) -> str:
    """The domain digest of a start: definition, business key and raw payload (S-START-09).

    No input is encoded as absent (no media type), which no present payload can equal (S-START-10).
    """
    given: tuple[str | bytes | None, ...] = (
        (None, None, None)
        if payload is None
        else (payload.contract.media_type, payload.contract.schema_id, payload.data)
    )
    head = ("ratchet.saga.start/1", key.tenant, key.workflow, key.version, definition_digest, business_key)
    return digest_of((*head, *given))


def start_saga(store: OrchestratorStore, attempt: StartAttempt) -> tuple[OrchestratorStore, StartOutcome]:
    """Admit, replay or refuse a start (S-START-01..13, S-CAT-05, S-CAT-08, S-TX-01).

    Every outcome other than ``Started`` and an applied ``OutcomeUnknown`` returns
    ``store`` unchanged: a refused or rolled-back admission leaves no instance, receipt,
    journal entry, quota unit, command or timer.
    """
    request = attempt.request
    key = request.definition
    gates = checkpoints(attempt)
    if not attempt.eligibility.holds_at(gates[0]):
        return store, EligibilityRevoked(gates[0])
    entry = store.catalog.entries.get(key)
    if entry is None:
        return store, UnknownDefinition(key)
    if entry.lifecycle is Lifecycle.RETIRED:
        return store, DefinitionNotLoadable(key, entry.lifecycle)
    if entry.lifecycle is Lifecycle.CANDIDATE:
        # Not in the loaded snapshot (S-CAT-08): refused where the snapshot is used, before the create
        # transaction and its eligibility checkpoints (seed: 在使用 definition 快照前 ... 复验;
        # docs/nasaga-findings.md N-14).
        return store, DefinitionNotStartable(key, entry.lifecycle)
    artifact = entry.artifact
    payload = admit_payload(request.json_payload, request.raw_payload, artifact.first_input)
    if isinstance(payload, PayloadRejected):
        return store, payload
    for gate in gates[1:]:
        if not attempt.eligibility.holds_at(gate):
            return store, EligibilityRevoked(gate)
    digest = start_digest_for(key, entry.digest, request.business_key, payload)
    saga_id = saga_id_for(key.tenant, key.workflow, request.business_key)
    receipt = store.receipts.get(saga_id)
    if receipt is not None:
        if receipt.start_digest == digest:
            return store, AlreadyExists(saga_id, digest)
        return store, StartConflict(saga_id, receipt.start_digest, digest)
    if not admits_new_start(entry.lifecycle):
        return store, DefinitionNotStartable(key, entry.lifecycle)
    used = store.quota_used.get(key.tenant, 0)
    if store.quota_limit is not None and used >= store.quota_limit:
        return store, QuotaExhausted(key.tenant, store.quota_limit)
    instance, journal_entry, command = begin(
        saga_id, artifact, entry.digest, digest, request.business_key, payload
    )
    written = attrs.evolve(
        store,
        instances={**store.instances, saga_id: instance},
        receipts={**store.receipts, saga_id: StartReceipt(saga_id, key, digest)},
        journal=(*store.journal, journal_entry),
        quota_used={**store.quota_used, key.tenant: used + 1},
    )
    written = stage_command(written, command, attempt.now_ms + artifact.steps[0].timeout_ms)
    # Eligibility lapsing after COMMIT was sent changes nothing below (S-START-05).
    return settle(store, written, attempt.commit, Started(saga_id, digest, command.command_id))
