"""What a connector hands a delivery to: Ratchet's saga runtime, one side each.

A connector authenticates an envelope, names its principal and calls a ``DeliveryHandler``;
the handler decodes the body (a body that does not decode is ``PoisonMessage``: it can never
succeed, so it is dead-lettered rather than redelivered) and runs the runtime's transaction.
What comes back is a model outcome whose ``verdict`` the connector maps to its
acknowledgement (S-DLV-01..04, S-STREAM-04, S-GRPC-01). ``ready`` reaches the engine: a
round-trip to the handler's database, so a listener is not reported ready over a dead store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import attrs

from impls.saga import Orchestrator, Participant, SagaBackend, SagaBackendError
from impls.saga.codec import command_from_blob, result_from_blob
from model.saga import CommandEnvelope, CommandOutcome, Decision, ResultEnvelope, ResultOutcome


class PoisonMessage(Exception):
    """The body is not an envelope of this side: no redelivery can make it succeed."""


class DeliveryHandler(Protocol):
    def handle(self, body: bytes, principal: str) -> CommandOutcome | ResultOutcome:
        """Run the unit for one authenticated envelope; raises ``PoisonMessage``."""
        ...

    def message_id(self, body: bytes) -> str:
        """The envelope's dedupe id (command id or result message id); raises ``PoisonMessage``."""
        ...

    def ready(self) -> bool: ...


#: The participant's business code: what to do with one command.
BusinessCode = Callable[[CommandEnvelope], Decision]


def _decode_command(body: bytes) -> CommandEnvelope:
    try:
        return command_from_blob(body)
    except SagaBackendError as exc:
        raise PoisonMessage(str(exc)) from exc


@attrs.define
class ParticipantHandler:
    """Commands to ``Participant.handle_command`` (S-PART-01..06) with the principal as producer."""

    participant: Participant
    business: BusinessCode

    def handle(self, body: bytes, principal: str) -> CommandOutcome:
        command = _decode_command(body)
        return self.participant.handle_command(command, principal, self.business(command))

    def message_id(self, body: bytes) -> str:
        return _decode_command(body).command_id

    def ready(self) -> bool:
        return _backend_ready(self.participant.backend)


@attrs.define
class OrchestratorHandler:
    """Results to ``Orchestrator.handle_result`` (S-ORCH-01..04) with the principal as producer."""

    orchestrator: Orchestrator
    clock: Callable[[], int]  # now in ms; the harness passes its own

    def handle(self, body: bytes, principal: str) -> ResultOutcome:
        return self.orchestrator.handle_result(self._decode(body), principal, self.clock())

    def message_id(self, body: bytes) -> str:
        return self._decode(body).message_id

    def ready(self) -> bool:
        return _backend_ready(self.orchestrator.backend)

    @staticmethod
    def _decode(body: bytes) -> ResultEnvelope:
        try:
            return result_from_blob(body)
        except SagaBackendError as exc:
            raise PoisonMessage(str(exc)) from exc


def _backend_ready(backend: SagaBackend) -> bool:
    try:
        backend.readiness()
    except SagaBackendError:
        return False
    return True
