"""Typed responses of the host: frozen values built by named constructors from the JSON.

Field names follow nasaga's vocabulary; status texts are nasaga's own stable names
(``RUNNING``, ``COMPENSATED``, ``SUCCEEDED``, ``CANCEL_CONFIRMED``...). Envelopes stay the JSON
nasaga wrote (``Mapping``), verbatim, so a delivery hands back exactly what was read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

Json = Mapping[str, Any]


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _opt_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@attrs.frozen
class HostInfo:
    engine: str
    server_version: str
    crates: Mapping[str, str]
    pid: int

    @classmethod
    def from_json(cls, body: Json) -> HostInfo:
        return cls(str(body["engine"]), str(body["server_version"]), dict(body["crates"]), int(body["pid"]))


@attrs.frozen
class NamespaceInfo:
    namespace: str
    mode: str
    orchestrator_container: str
    participants: tuple[str, ...]
    catalog_generation: int

    @classmethod
    def from_json(cls, body: Json) -> NamespaceInfo:
        return cls(
            namespace=str(body["namespace"]),
            mode=str(body["mode"]),
            orchestrator_container=str(body["orchestrator"]["container"]),
            participants=tuple(sorted(body["participants"])),
            catalog_generation=int(body["catalog_generation"]),
        )


@attrs.frozen
class Instance:
    saga_id: str
    tenant: str
    workflow: str
    definition_version: int
    definition_digest: str
    status: str
    control_state: str
    direction: str
    current_step: str | None
    version: int
    control_version: int
    failure_code: str | None
    compensation_plan_version: str | None
    deadline_at_ms: int | None

    @classmethod
    def from_json(cls, row: Json) -> Instance:
        return cls(
            saga_id=str(row["saga_id"]),
            tenant=str(row["tenant"]),
            workflow=str(row["workflow"]),
            definition_version=int(row["definition_version"]),
            definition_digest=str(row["definition_digest"]),
            status=str(row["status"]),
            control_state=str(row["control_state"]),
            direction=str(row["direction"]),
            current_step=_opt_str(row.get("current_step")),
            version=int(row["version"]),
            control_version=int(row["control_version"]),
            failure_code=_opt_str(row.get("failure_code")),
            compensation_plan_version=_opt_str(row.get("compensation_plan_version")),
            deadline_at_ms=_opt_int(row.get("deadline_at_ms")),
        )


@attrs.frozen
class StartResult:
    outcome: str  # "started" | "already_exists"
    instance: Instance
    eligibility_calls: int

    @classmethod
    def from_json(cls, body: Json) -> StartResult:
        return cls(str(body["outcome"]), Instance.from_json(body["instance"]), int(body["eligibility_calls"]))


@attrs.frozen
class OutboxRow:
    """One ``outbox_event`` row: a command (orchestrator) or a result (participant)."""

    id: int
    event_id: str
    kind: str  # "command" | "result" | "other"
    dispatched: bool
    dead: bool
    attempts: int
    saga_id: str | None
    step: str | None
    phase: str | None
    attempt: int | None
    command_id: str | None
    effect_id: str | None
    status: str | None
    envelope: Json

    @classmethod
    def from_json(cls, row: Json) -> OutboxRow:
        keys = row["keys"]
        return cls(
            id=int(row["id"]),
            event_id=str(row["event_id"]),
            kind=str(row["kind"]),
            dispatched=bool(row["dispatched"]),
            dead=bool(row["dead"]),
            attempts=int(row["attempts"]),
            saga_id=_opt_str(keys.get("saga_id")),
            step=_opt_str(keys.get("step")),
            phase=_opt_str(keys.get("phase")),
            attempt=_opt_int(keys.get("attempt")),
            command_id=_opt_str(keys.get("command_id")),
            effect_id=_opt_str(keys.get("effect_id")),
            status=_opt_str(keys.get("status")),
            envelope=row["envelope"],
        )


@attrs.frozen
class CommandDelivery:
    """``ParticipantHandled``: executed / replayed (with a status), duplicate, suppressed,
    contract_violation; ``handler_calls`` counts step-handler invocations of this delivery."""

    handled: str
    status: str | None
    handler_calls: int

    @classmethod
    def from_json(cls, body: Json) -> CommandDelivery:
        return cls(str(body["handled"]), _opt_str(body.get("status")), int(body["handler_calls"]))


@attrs.frozen
class ResultDelivery:
    """``HandleOutcome``: applied (with the committed status) or duplicate."""

    outcome: str
    status: str | None
    eligibility_calls: int

    @classmethod
    def from_json(cls, body: Json) -> ResultDelivery:
        return cls(str(body["outcome"]), _opt_str(body.get("status")), int(body["eligibility_calls"]))


@attrs.frozen
class Timer:
    timer_id: str
    saga_id: str
    kind: str
    scope_kind: str
    scope_key: str
    due_at_ms: int
    state: str
    attempt: int
    expected_saga_version: int
    owner: str | None
    claimed_until_ms: int | None

    @classmethod
    def from_json(cls, row: Json) -> Timer:
        return cls(
            timer_id=str(row["timer_id"]),
            saga_id=str(row["saga_id"]),
            kind=str(row["kind"]),
            scope_kind=str(row["scope_kind"]),
            scope_key=str(row["scope_key"]),
            due_at_ms=int(row["due_at_ms"]),
            state=str(row["state"]),
            attempt=int(row["attempt"]),
            expected_saga_version=int(row["expected_saga_version"]),
            owner=_opt_str(row.get("owner")),
            claimed_until_ms=_opt_int(row.get("claimed_until_ms")),
        )


@attrs.frozen
class TimerClaim:
    """A claim the host holds: ``claim`` is its handle; ``token`` nasaga's fencing token text."""

    claim: str
    owner: str
    token: str
    timers: tuple[Timer, ...]

    @classmethod
    def from_json(cls, body: Json) -> TimerClaim:
        return cls(
            str(body["claim"]),
            str(body["owner"]),
            str(body["token"]),
            tuple(Timer.from_json(t) for t in body["timers"]),
        )


@attrs.frozen
class TimerFire:
    """``TimerOutcome``: applied (with status), skipped_paused, skipped_fencing_lost, skipped_stale."""

    outcome: str
    status: str | None

    @classmethod
    def from_json(cls, body: Json) -> TimerFire:
        return cls(str(body["outcome"]), _opt_str(body.get("status")))
