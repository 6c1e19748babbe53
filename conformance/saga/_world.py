"""The saga world a machine plays in: definitions, two participants, a wire, a clock, routes.

``KEY`` is the order saga every example runs (JSON first input). ``UPLOAD_KEY`` (another tenant)
declares a non-JSON first input with a schema; it is published as a candidate and activated by
rules, so starts meet a candidate, then admit raw payloads (S-CAT-05, S-START-11). ``SPARE_KEY``
is walked to retirement with a route on it (S-CAT-07, S-CAT-09, S-CAT-10). ``CONFLICT`` and
``INVALID`` are publications the catalog must refuse (S-CAT-03, S-DEF-01).

``Wire`` is the at-least-once transport: envelopes stay on it until a delivery earns an ACK
and the ACK arrives; any envelope can be picked (reordering), delivered again (duplicates,
redelivery after a lost ACK) or forged (wrong owner, digest or producer).
"""

from __future__ import annotations

import attrs

from model.saga import (
    JSON_CONTRACT,
    CapabilityDescriptor,
    CapabilityKey,
    CommandEnvelope,
    DefinitionArtifact,
    DefinitionKey,
    ParticipantConfig,
    PayloadContract,
    ResultEnvelope,
    StepBinding,
    StepDefinition,
    Transport,
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
#: Starts admitted per tenant: the order saga's three business keys fill it exactly, so the
#: fourth key is the start beyond the quota (S-START-13).
QUOTA_LIMIT = 3
OVER_QUOTA_KEY = "k4"
PAYLOADS = (b'{"qty":1}', b'{"qty":2}', b"not json")
LEASE_MS = 50
WORKERS = ("w1", "w2")

UPLOAD_CONTRACT = PayloadContract("application/octet-stream", "upload.v1")
UPLOAD_KEY = DefinitionKey("beta", "upload", 1)
UPLOAD = DefinitionArtifact(
    UPLOAD_KEY,
    (StepDefinition("store", "p0", "store", None, UncertainPolicy.RESOLVE, 100, 2, 2),),
    UPLOAD_CONTRACT,
)
UPLOAD_DIGEST = definition_digest(UPLOAD)
UPLOAD_KEYS = ("u1", "u2")
RAW_BYTES = b"\x00\xffraw upload\n"
SPARE_KEY = DefinitionKey("gamma", "spare", 1)
SPARE = DefinitionArtifact(
    SPARE_KEY, (StepDefinition("note", "p1", "note", None, UncertainPolicy.MANUAL_INTERVENTION, 100, 1, 1),)
)
SPARE_DIGEST = definition_digest(SPARE)
#: The order definition with another timeout: same key, another digest (S-CAT-03).
CONFLICT = DefinitionArtifact(KEY, (STEPS[0], attrs.evolve(STEPS[1], timeout_ms=200)))
#: Each breaks one clause of S-DEF-01.
INVALID = (
    DefinitionArtifact(DefinitionKey("acme", "empty", 1), ()),
    DefinitionArtifact(DefinitionKey("acme", "twice", 1), (STEPS[0], attrs.evolve(STEPS[1], name="reserve"))),
    DefinitionArtifact(
        DefinitionKey("acme", "early", 1), (attrs.evolve(STEPS[0], compensation=None), STEPS[1])
    ),
    DefinitionArtifact(DefinitionKey("acme", "instant", 1), (attrs.evolve(STEPS[0], timeout_ms=0),)),
    DefinitionArtifact(DefinitionKey("acme", "hopeless", 1), (attrs.evolve(STEPS[0], max_attempts=0),)),
)
DEFINITIONS = {"order": (KEY, ARTIFACT), "upload": (UPLOAD_KEY, UPLOAD), "spare": (SPARE_KEY, SPARE)}

ROUTE_LEASE_MS = 200
REPLICAS = ("r1", "r2")
CREDENTIALS = "ab" * 32
#: (transport, address, base path, credentials digest): valid ones first, then one broken
#: clause each of S-ROUTE-05..08 and S-ROUTE-01's credentials digest.
DESCRIPTOR_SHAPES: tuple[tuple[Transport, str, str | None, str], ...] = (
    (Transport.HTTP, "https://a.example", "/saga", CREDENTIALS),
    (Transport.HTTP, "http://b.example:8080", "/", CREDENTIALS),
    (Transport.GRPC, "https://g.example", None, CREDENTIALS),
    (Transport.KAFKA, "saga.commands", None, CREDENTIALS),
    (Transport.KAFKA, "saga.other", None, CREDENTIALS),
    (Transport.REDIS_STREAMS, "saga:{p}", None, CREDENTIALS),
    (Transport.HTTP, "https://a.example/x", "/saga", CREDENTIALS),
    (Transport.HTTP, "https://a.example", "/saga/", CREDENTIALS),
    (Transport.GRPC, "http://g.example", None, CREDENTIALS),
    (Transport.KAFKA, "..", None, CREDENTIALS),
    (Transport.KAFKA, "saga.commands", "/saga", CREDENTIALS),
    (Transport.HTTP, "https://a.example", "/saga", "not-a-digest"),
)
VALID_SHAPES = 6


def descriptor(key: CapabilityKey, shape: int) -> CapabilityDescriptor:
    transport, address, base_path, credentials = DESCRIPTOR_SHAPES[shape % len(DESCRIPTOR_SHAPES)]
    return CapabilityDescriptor(key, transport, address, base_path, credentials)


#: A transient-failure budget no example exhausts: for a runtime whose participant never
#: dead-letters (``RuntimeCapabilities.dead_letters``).
NO_DEAD_LETTERS = 1_000_000


def participant_config(owner: str, transient_failure_budget: int = 2) -> ParticipantConfig:
    index = OWNERS.index(owner)
    bindings = {StepBinding(KEY, DIGEST, index, JSON_CONTRACT if index == 0 else None)}
    if owner == UPLOAD.steps[0].owner:
        bindings.add(StepBinding(UPLOAD_KEY, UPLOAD_DIGEST, 0, UPLOAD_CONTRACT))
    return ParticipantConfig(
        owner,
        frozenset({ORCHESTRATOR}),
        frozenset(bindings),
        transient_failure_budget=transient_failure_budget,
    )


@attrs.define
class Wire:
    commands: list[CommandEnvelope] = attrs.field(factory=list)
    results: list[tuple[str, ResultEnvelope]] = attrs.field(factory=list)  # (producer, envelope)


#: How ``forge_command`` changes a genuine command (S-PART-05); the field forgeries need a runtime
#: that sends the envelope as changed (``RuntimeCapabilities.forged_command_fields``).
FORGERIES = ("producer", "owner", "digest", "identity", "payload")
FIELD_FORGERIES = frozenset({"digest", "identity", "payload"})
DRAWN_FORGERIES = ("owner", "digest", "producer")  # forge_result's ``how``
