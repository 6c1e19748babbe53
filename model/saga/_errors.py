"""Typed rejections: every refused request, and whose fault it was.

A rejection is a value returned beside the *unchanged* state; the model never raises for a
contract outcome. The three bases say who must act:

- ``CallerError``: the request is malformed or illegal in the current state (fix the call);
- ``PeerRefusal``: a message or registration failed authentication/authorization before
  anything was claimed (the sender is not who or what it claims);
- ``HostRefusal``: the host's admission policy (eligibility, quota) said no.
"""

from __future__ import annotations

import enum
from typing import ClassVar

import attrs

from ._keys import (
    CapabilityKey,
    DefinitionReference,
    Lifecycle,
    LifecycleAction,
    SagaStatus,
    TransportViolation,
)
from ._values import DefinitionKey, DeliveryVerdict


class Fault(enum.Enum):
    CALLER = "caller"
    PEER = "peer"
    HOST = "host"


@attrs.frozen
class Rejection:
    """Base of every rejection; the state returned with it equals the state passed in."""

    fault: ClassVar[Fault]


@attrs.frozen
class CallerError(Rejection):
    fault: ClassVar[Fault] = Fault.CALLER


@attrs.frozen
class PeerRefusal(Rejection):
    fault: ClassVar[Fault] = Fault.PEER


@attrs.frozen
class HostRefusal(Rejection):
    fault: ClassVar[Fault] = Fault.HOST


class RefusalReason(enum.Enum):
    """Why a message was refused before any inbox claim (S-ORCH-01, S-PART-05)."""

    IDENTITY_MISMATCH = "identity_mismatch"
    DIGEST_MISMATCH = "digest_mismatch"
    OWNER_MISMATCH = "owner_mismatch"
    UNTRUSTED_PRODUCER = "untrusted_producer"
    PAYLOAD_CONTRACT_MISMATCH = "payload_contract_mismatch"


class PayloadProblem(enum.Enum):
    """Why a start payload was refused (S-START-10, S-START-11)."""

    BOTH_GIVEN = "both_given"
    INVALID_JSON = "invalid_json"
    SCHEMA_REQUIRED = "schema_required"
    CONTRACT_MISMATCH = "contract_mismatch"


# -- catalog ---------------------------------------------------------------------------


@attrs.frozen
class InvalidDefinition(CallerError):
    key: DefinitionKey
    problems: tuple[str, ...]


@attrs.frozen
class DigestMismatch(CallerError):
    key: DefinitionKey
    claimed: str
    computed: str


@attrs.frozen
class DefinitionConflict(CallerError):
    key: DefinitionKey
    existing_digest: str
    offered_digest: str


@attrs.frozen
class UnknownDefinition(CallerError):
    key: DefinitionKey


@attrs.frozen
class IllegalLifecycleTransition(CallerError):
    key: DefinitionKey
    current: Lifecycle
    action: LifecycleAction


@attrs.frozen
class RetirementBlocked(CallerError):
    key: DefinitionKey
    references: frozenset[DefinitionReference]


@attrs.frozen
class ActivationBlocked(CallerError):
    key: DefinitionKey
    invalid_routes: tuple[CapabilityKey, ...]


@attrs.frozen
class DefinitionNotLoadable(CallerError):
    """Candidate and retired definitions are not loaded for instances (S-CAT-08)."""

    key: DefinitionKey
    lifecycle: Lifecycle


@attrs.frozen
class DefinitionNotStartable(CallerError):
    """Only an active definition admits new starts (S-CAT-05)."""

    key: DefinitionKey
    lifecycle: Lifecycle


@attrs.frozen
class UnknownReference(CallerError):
    reference: DefinitionReference


# -- start / instances -----------------------------------------------------------------


@attrs.frozen
class StartConflict(CallerError):
    saga_id: str
    existing_digest: str
    offered_digest: str


@attrs.frozen
class PayloadRejected(CallerError):
    problem: PayloadProblem


@attrs.frozen
class UnknownSaga(CallerError):
    saga_id: str


@attrs.frozen
class UnknownCommand(CallerError):
    command_id: str


@attrs.frozen
class InstanceNotReleasable(CallerError):
    saga_id: str
    status: SagaStatus
    pending_commands: int


@attrs.frozen
class IllegalTransition(CallerError):
    """An event the instance cannot take in its current state; nothing changes."""

    saga_id: str
    status: SagaStatus
    event: str


@attrs.frozen
class EligibilityRevoked(HostRefusal):
    """The host's eligibility check said no at ``checkpoint`` (S-START-04)."""

    checkpoint: int


@attrs.frozen
class QuotaExhausted(HostRefusal):
    tenant: str
    limit: int


# -- messages --------------------------------------------------------------------------


@attrs.frozen
class MessageRefused(PeerRefusal):
    """Refused before the inbox claim: the dedupe key stays free (S-ORCH-01)."""

    verdict: ClassVar[DeliveryVerdict] = DeliveryVerdict.DEAD_LETTER

    message_id: str
    reason: RefusalReason


# -- timers ----------------------------------------------------------------------------


@attrs.frozen
class NoSuchTimer(CallerError):
    timer_id: str


@attrs.frozen
class TimerNotDue(CallerError):
    timer_id: str
    due_ms: int


@attrs.frozen
class TimerLeased(CallerError):
    timer_id: str
    lease_expires_ms: int


@attrs.frozen
class StaleFencingToken(CallerError):
    """A fenced timer operation by a worker that lost authority: its token is not the current
    lease's, or that lease expired (S-TIMER-02, S-TIMER-04; ``current`` is then its own token)."""

    timer_id: str
    presented: int
    current: int | None


# -- capability routes -----------------------------------------------------------------


@attrs.frozen
class RouteInvalid(CallerError):
    violation: TransportViolation


@attrs.frozen
class UnknownStep(CallerError):
    key: DefinitionKey
    step_index: int


@attrs.frozen
class CapabilityRefused(PeerRefusal):
    """The registering principal is not the step's owner (S-ROUTE-01)."""

    key: CapabilityKey
    reason: RefusalReason


@attrs.frozen
class UnknownCapability(CallerError):
    key: CapabilityKey


@attrs.frozen
class StaleGeneration(CallerError):
    key: CapabilityKey
    presented: int
    current: int


@attrs.frozen
class LeaseExpired(CallerError):
    key: CapabilityKey
    expired_at_ms: int


# -- management (S-MGT-*) ----------------------------------------------------------------


class ManagementProblem(enum.Enum):
    """Why a management action's precondition does not hold (S-MGT-05..08)."""

    NOT_ACTIVE = "not_active"  # pause, retries and close need an active (unpaused) instance
    NOT_PAUSED = "not_paused"  # resume needs a paused one
    NOT_IN_MANUAL_INTERVENTION = "not_in_manual_intervention"
    NO_UNCONFIRMED_COMPENSATION = "no_unconfirmed_compensation"
    NO_UNRESOLVED_EFFECT = "no_unresolved_effect"
    DEFINITION_NOT_LOADABLE = "definition_not_loadable"


@attrs.frozen
class ManagementContextInvalid(CallerError):
    """The actor is not a stable principal name or the reason is empty or not printable (S-MGT-01)."""

    actor: str


@attrs.frozen
class PermissionDenied(PeerRefusal):
    """The authenticated principal lacks the action's own permission (S-MGT-01)."""

    permission: str


@attrs.frozen
class ManagedSagaNotFound(CallerError):
    """No such saga for the authorized tenant: absent and foreign look the same (S-MGT-02)."""

    tenant: str
    saga_id: str


@attrs.frozen
class OperationConflict(CallerError):
    """The operation id is already bound to another action or saga (S-MGT-03)."""

    operation_id: str


@attrs.frozen
class StaleSnapshot(CallerError):
    """An expected state or control revision is not the instance's (S-MGT-04)."""

    saga_id: str
    revision: int
    control_revision: int


@attrs.frozen
class ManagementPrecondition(CallerError):
    saga_id: str
    problem: ManagementProblem
