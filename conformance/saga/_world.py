"""The saga world a machine plays in: one definition, two participants, a wire, a clock.

``Wire`` is the at-least-once transport: envelopes stay on it until a delivery earns an ACK
and the ACK arrives; any envelope can be picked (reordering), delivered again (duplicates,
redelivery after a lost ACK) or forged (wrong owner, digest or producer).
"""

from __future__ import annotations

import attrs

from model.saga import (
    JSON_CONTRACT,
    CommandEnvelope,
    DefinitionArtifact,
    DefinitionKey,
    ParticipantConfig,
    ResultEnvelope,
    StepBinding,
    StepDefinition,
    UncertainPolicy,
    definition_digest,
)

ORCHESTRATOR = "orchestrator"
OWNERS = ("p0", "p1")
KEY = DefinitionKey("acme", "order", 1)
STEPS = (
    StepDefinition("reserve", "p0", "reserve", "unreserve", UncertainPolicy.RESOLVE, 100, 2, 2),
    StepDefinition("charge", "p1", "charge", "refund", UncertainPolicy.MANUAL_INTERVENTION, 100, 2, 1),
)
ARTIFACT = DefinitionArtifact(KEY, STEPS)
DIGEST = definition_digest(ARTIFACT)
BUSINESS_KEYS = ("k1", "k2", "k3")
PAYLOADS = (b'{"qty":1}', b'{"qty":2}', b"not json")
LEASE_MS = 50
WORKERS = ("w1", "w2")


def participant_config(owner: str) -> ParticipantConfig:
    index = OWNERS.index(owner)
    binding = StepBinding(KEY, DIGEST, index, JSON_CONTRACT if index == 0 else None)
    return ParticipantConfig(
        owner, frozenset({ORCHESTRATOR}), frozenset({binding}), transient_failure_budget=2
    )


@attrs.define
class Wire:
    commands: list[CommandEnvelope] = attrs.field(factory=list)
    results: list[tuple[str, ResultEnvelope]] = attrs.field(factory=list)  # (producer, envelope)
