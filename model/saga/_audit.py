"""Management vocabulary: permissions, the operator's context, control state, audit records.

The seed puts management actions in the runtime (「管理动作」) and the business start/get/query/
audit and management operations in its orchestrator protocol; the tenant of a business call is
the authorization *target*, never the identity: actor, owner and permissions come from the host's
authentication context (「业务 API 的 tenant 是授权目标而不是身份来源;actor、owner 与权限必须由宿主
的认证上下文生成」). These are the values; ``_management`` has the transitions.
"""

from __future__ import annotations

import enum

import attrs

from ._keys import SagaStatus
from ._values import _is_name


class Permission(enum.Enum):
    """One permission per action and per read, never one admin flag (S-MGT-01)."""

    PAUSE = "saga.pause"
    RESUME = "saga.resume"
    RETRY_COMPENSATION = "saga.retry_compensation"
    RETRY_RESOLUTION = "saga.retry_resolution"
    MANUAL_CLOSE = "saga.manual_close"
    READ_AUDIT = "saga.audit.read"
    LIST_INSTANCES = "saga.instance.list"


class ManagementAction(enum.Enum):
    PAUSE = "pause"
    RESUME = "resume"
    RETRY_COMPENSATION = "retry_compensation"
    RETRY_RESOLUTION = "retry_resolution"
    MANUAL_CLOSE = "manual_close"


#: The permission each action needs (S-MGT-01).
REQUIRED_PERMISSION: dict[ManagementAction, Permission] = {
    ManagementAction.PAUSE: Permission.PAUSE,
    ManagementAction.RESUME: Permission.RESUME,
    ManagementAction.RETRY_COMPENSATION: Permission.RETRY_COMPENSATION,
    ManagementAction.RETRY_RESOLUTION: Permission.RETRY_RESOLUTION,
    ManagementAction.MANUAL_CLOSE: Permission.MANUAL_CLOSE,
}

ALL_PERMISSIONS: frozenset[Permission] = frozenset(Permission)

#: The control actions: they flip the control state and touch no status (S-MGT-05).
CONTROL_ACTIONS: frozenset[ManagementAction] = frozenset({ManagementAction.PAUSE, ManagementAction.RESUME})


class OperationScope(enum.Enum):
    """Where an operation id is bound (S-MGT-03; the seed names no scope, N-17, N-22)."""

    #: One ledger per saga: an id bound to one action conflicts with every other action.
    SAGA = "saga"
    #: One ledger per saga and family: control actions (pause, resume) apart from the recovery
    #: actions (retries, close); an id bound in one family is unbound in the other.
    FAMILY = "family"


def same_ledger(scope: OperationScope, recorded: ManagementAction, action: ManagementAction) -> bool:
    """Whether an operation recorded for ``recorded`` binds ``action``'s id (S-MGT-03)."""
    return scope is OperationScope.SAGA or (recorded in CONTROL_ACTIONS) == (action in CONTROL_ACTIONS)


@attrs.frozen
class ManagementContext:
    """The authenticated operator: a stable principal id, a human reason, frozen permissions.

    Not validated on construction: an invalid one is a request the model refuses (S-MGT-01).
    """

    actor: str
    reason: str
    permissions: frozenset[Permission] = ALL_PERMISSIONS


def context_valid(context: ManagementContext) -> bool:
    """A principal name, and a printable non-empty reason of at most 500 characters (S-MGT-01).

    post: not __return__ or len(context.reason) > 0
    """
    reason = context.reason
    return _is_name(context.actor) and 0 < len(reason) <= 500 and reason.isprintable()


class ControlState(enum.Enum):
    """Pause is a control flag beside the status, with its own revision (S-MGT-05)."""

    ACTIVE = "active"
    PAUSED = "paused"


@attrs.frozen
class Control:
    state: ControlState = ControlState.ACTIVE
    #: Bumped by every pause and resume; starts at 1 with the instance.
    revision: int = attrs.field(default=1, validator=attrs.validators.ge(1))


ACTIVE_CONTROL = Control()


@attrs.frozen
class Expectation:
    """The revisions the operator saw; ``None`` sides are not compared (S-MGT-04)."""

    revision: int | None = None
    control_revision: int | None = None

    def holds(self, revision: int, control_revision: int) -> bool:
        return (self.revision is None or self.revision == revision) and (
            self.control_revision is None or self.control_revision == control_revision
        )


NO_EXPECTATION = Expectation()


@attrs.frozen
class AuditRecord:
    """One committed management action, written in the action's own transaction (S-MGT-09)."""

    seq: int
    saga_id: str
    tenant: str
    operation_id: str
    action: ManagementAction
    actor: str
    reason: str
    before: tuple[SagaStatus, ControlState]
    after: tuple[SagaStatus, ControlState]
    #: The command the action dispatched (retries), if any.
    dispatched: str | None
