"""What the saga benchmarks run: the harness's world (``conformance.saga._world``: one two-step
definition, participants ``p0`` and ``p1``), an orchestrator and a participant over a backend of a
named kind, new start requests and the commands those starts dispatch.

A command is made by the model (``model.saga._instance.begin``, the function the runtime's start
uses), so a participant can be fed commands without an orchestrator in the measured loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from conformance.saga import _world as w
from impls.saga import Orchestrator, Participant, SagaBackend
from model.saga import (
    ChangeLifecycle,
    CommandEnvelope,
    LifecycleAction,
    LifecycleChanged,
    Published,
    SagaPayload,
    StartSaga,
    admit_payload,
    saga_id_for,
    start_digest_for,
)
from model.saga._instance import begin

PARTICIPANT = w.OWNERS[0]  # owns step 0: the step every start dispatches
PAYLOAD = w.PAYLOADS[0]  # b'{"qty":1}', the definition's declared JSON input


def business_key(n: int) -> str:
    return f"b{n}"


def start_request(n: int) -> StartSaga:
    return StartSaga(w.KEY, business_key(n), json_payload=PAYLOAD)


def _payload() -> SagaPayload:
    payload = admit_payload(PAYLOAD, None, w.ARTIFACT.first_input)
    if not isinstance(payload, SagaPayload):
        raise RuntimeError(f"the bench payload is refused: {payload!r}")
    return payload


def command_for(n: int) -> CommandEnvelope:
    """The command a start of ``business_key(n)`` dispatches: step 0, execute, attempt 1."""
    key, payload = business_key(n), _payload()
    saga_id = saga_id_for(w.KEY.tenant, w.KEY.workflow, key)
    start_digest = start_digest_for(w.KEY, w.DIGEST, key, payload)
    return begin(saga_id, w.ARTIFACT, w.DIGEST, start_digest, key, payload)[2]


def ready_orchestrator(backend: SagaBackend) -> Orchestrator:
    """An orchestrator whose catalog holds the world's definition, active (two transactions)."""
    orchestrator = Orchestrator(backend, frozenset(w.OWNERS))
    published = orchestrator.publish_definition(w.ARTIFACT, w.DIGEST)
    if not isinstance(published, Published):
        raise RuntimeError(f"publishing the bench definition: {published!r}")
    changed = orchestrator.change_lifecycle(ChangeLifecycle(w.KEY, LifecycleAction.ACTIVATE), 0)
    if not isinstance(changed, LifecycleChanged):
        raise RuntimeError(f"activating the bench definition: {changed!r}")
    return orchestrator


def participant(backend: SagaBackend) -> Participant:
    return Participant(backend, w.participant_config(PARTICIPANT))


@contextmanager
def opened(
    factory: Callable[[str], SagaBackend], namespace: str
) -> Iterator[tuple[SagaBackend, SagaBackend]]:
    """An orchestrator database and a participant database (two namespaces), closed afterwards."""
    orchestrator = factory(f"{namespace}o")
    try:
        part = factory(f"{namespace}{PARTICIPANT}")
        try:
            yield orchestrator, part
        finally:
            part.close()
    finally:
        orchestrator.close()
