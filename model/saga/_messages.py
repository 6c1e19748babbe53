"""Command and result envelopes and the identities they carry.

- ``saga_id`` names one instance and is derived from its start key (tenant, workflow,
  business key), so a replayed start lands on the same instance;
- ``effect_id`` names one business effect, ``(saga_id, step, phase)``, stable across all
  attempts (S-ID-01); participants deduplicate effects by it (S-PART-03);
- ``command_id`` names one delivery attempt, ``(effect_id, attempt)`` (S-ID-02);
- a result's ``message_id`` is derived from the command it answers, so every copy of the
  same answer shares one orchestrator inbox key (S-ORCH-03).

A resolve command polls the execute effect it is about: ``target_effect_id``.
"""

from __future__ import annotations

import attrs

from ._canonical import derive_id
from ._canonical import memoised_id as _ids
from ._values import DefinitionKey, Phase, ResultKind, SagaPayload


@_ids
def saga_id_for(tenant: str, workflow: str, business_key: str) -> str:
    return derive_id("saga", tenant, workflow, business_key)


@_ids
def effect_id_for(saga_id: str, step_index: int, phase: Phase) -> str:
    return derive_id("eff", saga_id, step_index, phase.value)


@_ids
def command_id_for(effect_id: str, attempt: int) -> str:
    return derive_id("cmd", effect_id, attempt)


@_ids
def result_message_id_for(command_id: str) -> str:
    return derive_id("res", command_id)


@attrs.frozen
class CommandEnvelope:
    """One attempt at one effect, as written to the command outbox.

    ``payload`` is present only on the first step's execute commands (S-START-12).
    """

    command_id: str
    effect_id: str
    target_effect_id: str | None
    saga_id: str
    definition: DefinitionKey
    definition_digest: str
    step_index: int
    step_name: str
    owner: str
    phase: Phase
    attempt: int
    payload: SagaPayload | None


@attrs.frozen
class ResultEnvelope:
    """A participant's answer to one command."""

    message_id: str
    command_id: str
    effect_id: str
    saga_id: str
    definition_digest: str
    step_index: int
    phase: Phase
    owner: str
    kind: ResultKind


def command_identity_holds(command: CommandEnvelope) -> bool:
    """True iff the command's identities are the ones derived from its facts (S-ID-01)."""
    effect = effect_id_for(command.saga_id, command.step_index, command.phase)
    target = (
        effect_id_for(command.saga_id, command.step_index, Phase.EXECUTE)
        if command.phase is Phase.RESOLVE
        else None
    )
    return (
        command.attempt >= 1
        and command.effect_id == effect
        and command.command_id == command_id_for(effect, command.attempt)
        and command.target_effect_id == target
    )


def answer(command: CommandEnvelope, kind: ResultKind) -> ResultEnvelope:
    """The result envelope a participant writes for ``command``."""
    return ResultEnvelope(
        message_id=result_message_id_for(command.command_id),
        command_id=command.command_id,
        effect_id=command.effect_id,
        saga_id=command.saga_id,
        definition_digest=command.definition_digest,
        step_index=command.step_index,
        phase=command.phase,
        owner=command.owner,
        kind=kind,
    )
