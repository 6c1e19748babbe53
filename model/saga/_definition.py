"""Saga definitions: the ordered step seal, its canonical document and SHA-256 digest."""

from __future__ import annotations

import attrs

from ._canonical import Canon, encode, sha256_hex
from ._values import (
    JSON_CONTRACT,
    DefinitionKey,
    PayloadContract,
    UncertainPolicy,
    name_validator,
)

#: Version tag of the canonical document layout; part of every digest.
DOCUMENT_FORMAT = "ratchet.saga.definition/1"


@attrs.frozen
class StepDefinition:
    """One step: who does it, how it is undone, and what happens when it is uncertain.

    ``compensation`` is ``None`` for a non-compensable step, legal only as the last step
    (S-DEF-01). ``max_attempts`` is the per-effect budget of transient re-dispatches after
    timeouts; ``resolve_budget`` bounds the resolve polls of an uncertain effect (S-STEP-05).
    """

    name: str = attrs.field(validator=name_validator)
    owner: str = attrs.field(validator=name_validator)
    action: str = attrs.field(validator=name_validator)
    compensation: str | None = attrs.field(validator=attrs.validators.optional(name_validator))
    uncertain_policy: UncertainPolicy
    timeout_ms: int
    max_attempts: int
    resolve_budget: int


@attrs.frozen
class DefinitionArtifact:
    """The complete, ordered definition seal a workflow owner publishes (S-CAT-01)."""

    key: DefinitionKey
    steps: tuple[StepDefinition, ...]
    first_input: PayloadContract = JSON_CONTRACT


def _step_canon(step: StepDefinition) -> Canon:
    return (
        step.name,
        step.owner,
        step.action,
        step.compensation,
        step.uncertain_policy.value,
        step.timeout_ms,
        step.max_attempts,
        step.resolve_budget,
    )


def canonical_document(artifact: DefinitionArtifact) -> bytes:
    """The canonical document of a definition (S-CAT-01).

    ``L6:`` of format tag, tenant, workflow, version, first-input contract
    ``(media_type, schema_id)`` and the ordered step tuples
    ``(name, owner, action, compensation, policy, timeout_ms, max_attempts, resolve_budget)``,
    encoded with ``model.saga._canonical.encode``.
    """
    key = artifact.key
    return encode(
        (
            DOCUMENT_FORMAT,
            key.tenant,
            key.workflow,
            key.version,
            (artifact.first_input.media_type, artifact.first_input.schema_id),
            tuple(_step_canon(s) for s in artifact.steps),
        )
    )


def definition_digest(artifact: DefinitionArtifact) -> str:
    """SHA-256 (lower-case hex) of the canonical document (S-CAT-01)."""
    return sha256_hex(canonical_document(artifact))


def definition_problems(artifact: DefinitionArtifact) -> tuple[str, ...]:
    """Why ``artifact`` cannot be published; empty when it can (S-DEF-01).

    post: (len(artifact.steps) > 0) or len(__return__) > 0
    """
    problems: list[str] = []
    steps = artifact.steps
    if not steps:
        problems.append("a definition needs at least one step")
    names = [s.name for s in steps]
    if len(set(names)) != len(names):
        problems.append("step names must be unique")
    for index, step in enumerate(steps):
        where = f"step {index} ({step.name})"
        if step.timeout_ms <= 0:
            problems.append(f"{where}: timeout_ms must be positive")
        if step.max_attempts < 1:
            problems.append(f"{where}: max_attempts must be at least 1")
        if step.resolve_budget < 0:
            problems.append(f"{where}: resolve_budget must not be negative")
        if step.uncertain_policy is UncertainPolicy.RESOLVE and step.resolve_budget < 1:
            problems.append(f"{where}: a resolve policy needs resolve_budget >= 1")
        # A non-compensable step that is followed by another step could not be undone
        # when that later step fails, so "Compensated" would be a lie.
        if step.compensation is None and index != len(steps) - 1:
            problems.append(f"{where}: only the last step may be non-compensable")
    return tuple(problems)
