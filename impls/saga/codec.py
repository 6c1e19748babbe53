"""Blob and text codecs shared by every saga backend: envelopes, step lists, artifacts.

Backends store an envelope as one blob column (the model's canonical encoding, so it is
self-delimiting and language-neutral) beside the indexed columns they query by. A blob or
text that does not decode is ``SagaBackendError(CORRUPT)``, never a crash.
"""

from __future__ import annotations

import functools

from model.saga import (
    DOCUMENT_FORMAT,
    Canon,
    CommandEnvelope,
    DecodeError,
    DefinitionArtifact,
    DefinitionKey,
    PayloadContract,
    Phase,
    ResultEnvelope,
    ResultKind,
    SagaPayload,
    StepDefinition,
    StepStatus,
    UncertainPolicy,
    decode,
    encode,
)

from ._backend import SagaBackendError, SagaBackendErrorKind

_COMMAND_TAG = "ratchet.saga.command/1"
_RESULT_TAG = "ratchet.saga.result/1"


class _Malformed(ValueError):
    """A decoded value of the wrong shape; explicit checks, not ``assert``, so ``python -O`` keeps them."""


def _corrupt(what: str) -> SagaBackendError:
    return SagaBackendError(SagaBackendErrorKind.CORRUPT, f"undecodable {what}")


def _payload_canon(payload: SagaPayload | None) -> Canon:
    if payload is None:
        return None
    return (payload.data, payload.contract.media_type, payload.contract.schema_id)


def command_to_blob(command: CommandEnvelope) -> bytes:
    key = command.definition
    return encode(
        (
            _COMMAND_TAG,
            command.command_id,
            command.effect_id,
            command.target_effect_id,
            command.saga_id,
            (key.tenant, key.workflow, key.version),
            command.definition_digest,
            command.step_index,
            command.step_name,
            command.owner,
            command.phase.value,
            command.attempt,
            _payload_canon(command.payload),
        )
    )


def command_from_blob(blob: bytes) -> CommandEnvelope:
    try:
        value = decode(blob)
        if not (isinstance(value, tuple) and value[0] == _COMMAND_TAG):
            raise _Malformed
        (_, cid, eid, target, sid, key, digest, index, name, owner, phase, attempt, payload) = value
        if not isinstance(key, tuple):
            raise _Malformed
        tenant, workflow, version = key
        decoded_payload = None
        if payload is not None:
            if not isinstance(payload, tuple):
                raise _Malformed
            data, media, schema = payload
            if not (isinstance(data, bytes) and isinstance(media, str)):
                raise _Malformed
            if not (schema is None or isinstance(schema, str)):
                raise _Malformed
            decoded_payload = SagaPayload(data, PayloadContract(media, schema))
        if not (isinstance(cid, str) and isinstance(eid, str) and isinstance(sid, str)):
            raise _Malformed
        if not (target is None or isinstance(target, str)):
            raise _Malformed
        if not (isinstance(tenant, str) and isinstance(workflow, str) and isinstance(version, int)):
            raise _Malformed
        if not (isinstance(digest, str) and isinstance(index, int) and isinstance(name, str)):
            raise _Malformed
        if not (isinstance(owner, str) and isinstance(phase, str) and isinstance(attempt, int)):
            raise _Malformed
        return CommandEnvelope(
            command_id=cid,
            effect_id=eid,
            target_effect_id=target,
            saga_id=sid,
            definition=DefinitionKey(tenant, workflow, version),
            definition_digest=digest,
            step_index=index,
            step_name=name,
            owner=owner,
            phase=Phase(phase),
            attempt=attempt,
            payload=decoded_payload,
        )
    except (DecodeError, ValueError, TypeError) as exc:
        raise _corrupt("command envelope") from exc


def result_to_blob(result: ResultEnvelope) -> bytes:
    return encode(
        (
            _RESULT_TAG,
            result.message_id,
            result.command_id,
            result.effect_id,
            result.saga_id,
            result.definition_digest,
            result.step_index,
            result.phase.value,
            result.owner,
            result.kind.value,
        )
    )


def result_from_blob(blob: bytes) -> ResultEnvelope:
    try:
        value = decode(blob)
        if not (isinstance(value, tuple) and value[0] == _RESULT_TAG):
            raise _Malformed
        (_, mid, cid, eid, sid, digest, index, phase, owner, kind) = value
        if not (isinstance(mid, str) and isinstance(cid, str) and isinstance(eid, str)):
            raise _Malformed
        if not (isinstance(sid, str) and isinstance(digest, str) and isinstance(index, int)):
            raise _Malformed
        if not (isinstance(phase, str) and isinstance(owner, str) and isinstance(kind, str)):
            raise _Malformed
        return ResultEnvelope(mid, cid, eid, sid, digest, index, Phase(phase), owner, ResultKind(kind))
    except (DecodeError, ValueError, TypeError) as exc:
        raise _corrupt("result envelope") from exc


def steps_to_text(steps: tuple[StepStatus, ...]) -> str:
    return ",".join(s.value for s in steps)


def steps_from_text(text: str) -> tuple[StepStatus, ...]:
    try:
        return tuple(StepStatus(part) for part in text.split(",")) if text else ()
    except ValueError as exc:
        raise _corrupt("step list") from exc


@functools.lru_cache(maxsize=256)
def artifact_from_document(document: bytes) -> DefinitionArtifact:
    """Rebuild the artifact from its canonical document (S-CAT-01): the document is the row.

    Every start and result reads its definition row; the document is immutable under its digest
    and the artifact frozen, so each distinct document is decoded once (a corrupt one, which
    raises, is never kept). A document under another format tag is one this codec cannot read,
    however its fields look: CORRUPT like any other malformed form (S-TX-03)."""
    try:
        value = decode(document)
        if not (isinstance(value, tuple) and len(value) == 6):
            raise _Malformed
        tag, tenant, workflow, version, contract, steps = value
        if tag != DOCUMENT_FORMAT:
            raise _Malformed
        if not (isinstance(contract, tuple) and len(contract) == 2):
            raise _Malformed
        media, schema = contract
        if not (isinstance(tenant, str) and isinstance(workflow, str) and isinstance(version, int)):
            raise _Malformed
        if not (isinstance(media, str) and (schema is None or isinstance(schema, str))):
            raise _Malformed
        if not isinstance(steps, tuple):
            raise _Malformed
        built: list[StepDefinition] = []
        for step in steps:
            if not (isinstance(step, tuple) and len(step) == 8):
                raise _Malformed
            name, owner, action, compensation, policy, timeout, attempts, budget = step
            if not (isinstance(name, str) and isinstance(owner, str) and isinstance(action, str)):
                raise _Malformed
            if not (compensation is None or isinstance(compensation, str)):
                raise _Malformed
            if not (isinstance(policy, str) and isinstance(timeout, int)):
                raise _Malformed
            if not (isinstance(attempts, int) and isinstance(budget, int)):
                raise _Malformed
            built.append(
                StepDefinition(
                    name, owner, action, compensation, UncertainPolicy(policy), timeout, attempts, budget
                )
            )
        return DefinitionArtifact(
            DefinitionKey(tenant, workflow, version), tuple(built), PayloadContract(media, schema)
        )
    except (DecodeError, ValueError, TypeError) as exc:
        raise _corrupt("definition document") from exc
