"""Leaf vocabulary of the saga model: enums and keys every layer above names.

They import nothing of the model but ``_values``, so ``_errors`` (and any other module) can name
them without an import circle.
"""

from __future__ import annotations

import enum

import attrs

from ._values import DefinitionKey, name_validator


class Lifecycle(enum.Enum):
    CANDIDATE = "candidate"
    ACTIVE = "active"
    DEPRECATED = "deprecated"
    RETIRED = "retired"


class LifecycleAction(enum.Enum):
    ACTIVATE = "activate"
    DEPRECATE = "deprecate"
    RETIRE = "retire"


class ReferenceKind(enum.Enum):
    """Facts that keep a definition from retiring (S-CAT-07)."""

    INSTANCE = "instance"
    MIGRATION = "migration"
    AUDIT = "audit"
    OUTBOX = "outbox"
    CAPABILITY_LEASE = "capability_lease"


@attrs.frozen
class DefinitionReference:
    kind: ReferenceKind
    key: DefinitionKey
    ref_id: str


class SagaStatus(enum.Enum):
    RUNNING = "running"
    RESOLVING = "resolving"
    COMPENSATING = "compensating"
    COMPLETED = "completed"
    COMPENSATED = "compensated"
    AWAITING_MANUAL_INTERVENTION = "awaiting_manual_intervention"
    #: Closed by an operator after manual intervention (S-MGT-08); no business outcome is claimed.
    MANUALLY_CLOSED = "manually_closed"


class TransportViolation(enum.Enum):
    HTTP_ORIGIN_NOT_BARE = "http_origin_not_bare"
    HTTP_BASE_PATH_NOT_CANONICAL = "http_base_path_not_canonical"
    GRPC_ORIGIN_NOT_BARE_HTTPS = "grpc_origin_not_bare_https"
    KAFKA_TOPIC_INVALID = "kafka_topic_invalid"
    REDIS_STREAM_KEY_INVALID = "redis_stream_key_invalid"
    PATH_ON_NON_HTTP = "path_on_non_http"
    CREDENTIALS_DIGEST_INVALID = "credentials_digest_invalid"


@attrs.frozen
class CapabilityKey:
    """The capability row a generation is allocated under (S-ROUTE-02)."""

    definition: DefinitionKey
    step_index: int
    owner: str = attrs.field(validator=name_validator)
    replica: str = attrs.field(validator=name_validator)
