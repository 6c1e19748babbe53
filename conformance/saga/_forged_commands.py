"""Forged and unauthorized commands sent to participants (S-PART-05).

``forge_result`` (``_deliveries.py``) also forges a pending command the way it forges a result (its
``how``: ``owner``, ``digest``, ``producer``; an argument or rule of its own would shift the
fixed-seed run's draws away from rare targets). The twin is delivered changed in one way — from a
producer the participant does not trust (``producer``), to the participant it is not addressed to
(``owner``), with another definition digest (``digest``) — and the participant must refuse it before
its inbox claim: the model says ``MessageRefused`` with the reason, the runtime's answer is compared
with it, and the rows read back after the step (inbox, gate, outbox) must show nothing of it. The
genuine command stays on the wire. ``identity`` (the attempt changed, the command id kept) and
``payload`` (the first-step payload taken away) are written but not drawn yet. Each drawn forgery
is a coverage target ``forged-command:<how>``; the field forgeries need a runtime that sends the
envelope as the harness changed it (``RuntimeCapabilities.forged_command_fields``).
"""

from __future__ import annotations

import attrs

from conformance._machine import step
from conformance.saga import _world as w
from conformance.saga._base import SagaMachineBase
from conformance.saga._faults import FORGED
from model import saga as m

FORGERIES, FIELD_FORGERIES = w.FORGERIES, w.FIELD_FORGERIES


def forged(command: m.CommandEnvelope, how: str) -> m.CommandEnvelope | None:
    """``command`` changed as ``how`` says; None when it cannot be (no payload to take away)."""
    if how == "digest":
        return attrs.evolve(command, definition_digest="0" * 64)
    if how == "identity":
        return attrs.evolve(command, attempt=command.attempt + 1)
    if how == "payload":
        return attrs.evolve(command, payload=None) if command.payload is not None else None
    return command


class ForgedCommandRules(SagaMachineBase):
    def forge_command(self, command: m.CommandEnvelope, how: str) -> None:
        """S-PART-05: a forged or unauthorized twin of ``command`` is refused before the inbox claim."""
        if how == "none" or not self._allows(FORGED):
            return
        if how in FIELD_FORGERIES and not self.caps.forged_command_fields:
            how = "producer"
        if how == "owner" and not self.caps.misaddressed_commands:
            how = "producer"  # (N-05: such a runtime is judged on it through a route-binding host)
        changed = forged(command, how)
        if changed is None:
            return
        owner, producer = command.owner, w.ORCHESTRATOR
        if how == "owner":
            owner = w.OWNERS[1 - w.OWNERS.index(command.owner)]
        elif how == "producer":
            producer = "mallory"
        self.context.inject(FORGED.name)
        delivery = m.CommandDelivery(changed, producer, m.Decision.SUCCEED, m.CommitFate.COMMITTED)
        self.model_parts[owner], expected = m.handle_command(self.model_parts[owner], delivery)
        actual = self.runtime.handle_command(owner, changed, producer, m.Decision.SUCCEED)
        self.expect("S-PART-05", expected, actual)
        if isinstance(expected, m.MessageRefused):
            self.context.reach(f"forged-command:{how}")

    @step
    def forge_walk(self) -> None:
        """Once per example, from the opening (``SagaMachine.opening``): a twin of the first saga's
        first command forged each way ``forge_result`` draws (for another owner, with another
        digest, from another producer), each refused before the inbox claim (S-PART-05). Drawn,
        each was reached in 1 of 105 examples of a ci run on PostgreSQL (docs/ci-gate.md)."""
        pending = self.runtime.pending_commands()
        if pending:
            for how in w.DRAWN_FORGERIES:
                self.forge_command(pending[0], how)
