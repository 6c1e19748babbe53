"""A saga rig over every saga backend: ``saga_backend`` names it, ``rig`` drives the runtime.

``SAGA_BACKEND_PARAMS`` is read from the registry (``conformance.backends.SAGA_BACKENDS``): a backend
added there is tested here; one on a real server is skipped locally / failed in CI when it is down.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import attrs
import pytest

from conformance.backends import SAGA_BACKENDS, load_object
from impls.saga import FateHook, Orchestrator, Participant, SagaBackend, always_commit
from model.saga import (
    JSON_CONTRACT,
    ChangeLifecycle,
    CommandEnvelope,
    CommandOutcome,
    Decision,
    DefinitionArtifact,
    DefinitionKey,
    LifecycleAction,
    LifecycleChanged,
    ParticipantConfig,
    Published,
    ResultEnvelope,
    ResultOutcome,
    Started,
    StartSaga,
    StepBinding,
    StepDefinition,
    UncertainPolicy,
    definition_digest,
)
from tests._backends import backend_params

# Ratchet's runtime over each saga backend (runtimes under test, the "built" group, have tests of their own).
SAGA_BACKEND_PARAMS = backend_params("saga", "embedded", "real")

ORCHESTRATOR = "orchestrator"
KEY = DefinitionKey("acme", "order", 1)
#: reserve (resolve when uncertain) -> hold -> charge (manual intervention when uncertain).
STEPS = (
    StepDefinition("reserve", "p0", "reserve", "unreserve", UncertainPolicy.RESOLVE, 100, 2, 2),
    StepDefinition("hold", "p1", "hold", "unhold", UncertainPolicy.RESOLVE, 100, 2, 2),
    StepDefinition("charge", "p2", "charge", "refund", UncertainPolicy.MANUAL_INTERVENTION, 100, 2, 1),
)
ARTIFACT = DefinitionArtifact(KEY, STEPS)
DIGEST = definition_digest(ARTIFACT)
OWNERS = tuple(s.owner for s in STEPS)

#: Which answer a participant's fake service gives to a command.
Decide = Callable[[CommandEnvelope], Decision]


def succeed(_command: CommandEnvelope) -> Decision:
    return Decision.SUCCEED


@pytest.fixture(params=SAGA_BACKEND_PARAMS)
def saga_backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def open_backend(saga_backend: str) -> Iterator[Callable[[str], SagaBackend]]:
    """Opens backends of the parametrized kind on fresh namespaces; closes them afterwards."""
    factory = load_object(SAGA_BACKENDS[saga_backend].factory)
    assert callable(factory)
    run = uuid.uuid4().hex[:12]
    opened: list[SagaBackend] = []

    def open_(role: str) -> SagaBackend:
        backend = factory(f"rt{run}{role}")
        assert isinstance(backend, SagaBackend)
        opened.append(backend)
        return backend

    yield open_
    for backend in opened:
        backend.close()


@attrs.define
class Rig:
    """An orchestrator and one participant per step owner; the wire is the test's own lists."""

    orch: Orchestrator
    parts: dict[str, Participant]
    now: int = 0
    delivered: list[CommandEnvelope] = attrs.field(factory=list)

    def start(self, business_key: str = "k1", payload: bytes = b'{"qty":1}') -> Started:
        started = self.orch.start_saga(StartSaga(KEY, business_key, json_payload=payload), self.now)
        assert isinstance(started, Started), started
        return started

    def command(self, decide: Decide = succeed) -> tuple[CommandEnvelope, CommandOutcome]:
        """Relay the oldest unpublished command and deliver it once."""
        command = self.orch.pending_commands()[0]
        self.orch.mark_command_published(command.command_id)
        self.delivered.append(command)
        return command, self.parts[command.owner].handle_command(command, ORCHESTRATOR, decide(command))

    def result(self, owner: str) -> tuple[ResultEnvelope, ResultOutcome]:
        """Relay the owner's oldest unpublished result and deliver it once."""
        envelope = self.parts[owner].pending_results()[0]
        self.parts[owner].mark_result_published(envelope.message_id)
        return envelope, self.orch.handle_result(envelope, owner, self.now)

    def drive(self, decide: Decide = succeed, rounds: int = 20) -> None:
        """Deliver every command and result until nothing is pending."""
        for _ in range(rounds):
            if not self.orch.pending_commands():
                return
            command, _ = self.command(decide)
            while self.parts[command.owner].pending_results():
                self.result(command.owner)
        raise AssertionError("the saga did not settle")


def make_rig(open_backend: Callable[[str], SagaBackend], fates: FateHook = always_commit) -> Rig:
    orch = Orchestrator(open_backend("o"), frozenset(OWNERS), fates=fates)
    assert isinstance(orch.publish_definition(ARTIFACT, DIGEST), Published)
    activated = orch.change_lifecycle(ChangeLifecycle(KEY, LifecycleAction.ACTIVATE), 0)
    assert isinstance(activated, LifecycleChanged)
    parts = {}
    for index, owner in enumerate(OWNERS):
        binding = StepBinding(KEY, DIGEST, index, JSON_CONTRACT if index == 0 else None)
        config = ParticipantConfig(owner, frozenset({ORCHESTRATOR}), frozenset({binding}), 2)
        parts[owner] = Participant(open_backend(owner), config)
    return Rig(orch, parts)


@pytest.fixture
def rig(open_backend: Callable[[str], SagaBackend]) -> Rig:
    return make_rig(open_backend)
