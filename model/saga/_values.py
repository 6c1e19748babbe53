"""Small shared values of the saga contract: names, keys, payloads, phases and verdicts."""

from __future__ import annotations

import enum
import json
from typing import Any

import attrs


def _is_name(text: str) -> bool:
    # Names travel in keys, topics and digests: printable, bounded, no surrogates.
    return 0 < len(text) <= 200 and text.isprintable() and not any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def name_validator(_instance: object, attribute: attrs.Attribute[Any], value: str) -> None:
    """attrs validator for contract names (tenant, workflow, owner, step, ...)."""
    if not isinstance(value, str) or not _is_name(value):
        raise ValueError(f"{attribute.name} must be a printable name of 1..200 chars: {value!r}")


class CommitFate(enum.Enum):
    """What became of one local transaction's COMMIT (S-TX-01).

    The harness injects the fault, so it knows whether an unacknowledged COMMIT applied;
    the *reported* outcome for both ``UNKNOWN_*`` fates is the same "outcome unknown".
    """

    COMMITTED = "committed"
    ROLLED_BACK = "rolled_back"
    UNKNOWN_APPLIED = "unknown_applied"
    UNKNOWN_NOT_APPLIED = "unknown_not_applied"

    @property
    def applied(self) -> bool:
        return self in (CommitFate.COMMITTED, CommitFate.UNKNOWN_APPLIED)

    @property
    def commit_sent(self) -> bool:
        return self is not CommitFate.ROLLED_BACK


class DeliveryVerdict(enum.Enum):
    """What a consumer does with the delivered message (S-DLV-01..04)."""

    ACK = "ack"
    REDELIVER = "redeliver"
    DEAD_LETTER = "dead_letter"


class Phase(enum.Enum):
    """The kind of business effect a command asks for."""

    EXECUTE = "execute"
    COMPENSATE = "compensate"
    RESOLVE = "resolve"


class ResultKind(enum.Enum):
    """The closed set of answers a participant reports for one effect."""

    SUCCEEDED = "succeeded"
    REJECTED = "rejected"
    UNKNOWN = "unknown"


class UncertainPolicy(enum.Enum):
    """What a step does with an external effect it cannot confirm (S-STEP-03)."""

    RESOLVE = "resolve"
    MANUAL_INTERVENTION = "manual_intervention"


class Transport(enum.Enum):
    HTTP = "http"
    GRPC = "grpc"
    KAFKA = "kafka"
    REDIS_STREAMS = "redis_streams"


@attrs.frozen
class DefinitionKey:
    """(tenant, workflow, definition version): one immutable definition (S-CAT-01)."""

    tenant: str = attrs.field(validator=name_validator)
    workflow: str = attrs.field(validator=name_validator)
    version: int = attrs.field(validator=attrs.validators.ge(1))


JSON_MEDIA_TYPE = "application/json"


def is_json_media_type(media_type: str) -> bool:
    """``application/json`` or a structured ``+json`` suffix type."""
    base = media_type.split(";", 1)[0].strip().lower()
    return base == JSON_MEDIA_TYPE or (base.startswith("application/") and base.endswith("+json"))


def is_json_document(data: bytes) -> bool:
    """Strict JSON in UTF-8: no NaN/Infinity, nothing trailing (S-START-11)."""

    def _refuse(constant: str) -> object:
        raise ValueError(constant)

    try:
        json.loads(data.decode("utf-8"), parse_constant=_refuse)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    return True


@attrs.frozen
class PayloadContract:
    """Media type and optional schema id a step's input is declared with (S-START-11)."""

    media_type: str = attrs.field(validator=name_validator)
    schema_id: str | None = attrs.field(default=None, validator=attrs.validators.optional(name_validator))


#: The contract of the legacy JSON entry point: JSON without a schema id.
JSON_CONTRACT = PayloadContract(JSON_MEDIA_TYPE, None)


@attrs.frozen
class SagaPayload:
    """Raw first-step input: bytes exactly as the caller sent them plus their contract."""

    data: bytes
    contract: PayloadContract
