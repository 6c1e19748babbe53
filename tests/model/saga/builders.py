"""Builders and strategies for saga-model tests: small definitions, stores, a tiny driver."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import attrs
from hypothesis import strategies as st

from model.saga import (
    JSON_CONTRACT,
    ChangeLifecycle,
    ClaimTimer,
    CommandDelivery,
    CommandEnvelope,
    CommandProcessed,
    CommitFate,
    Decision,
    DefinitionArtifact,
    DefinitionKey,
    FireTimer,
    LifecycleAction,
    LifecycleChanged,
    OrchestratorStore,
    ParticipantConfig,
    ParticipantState,
    PayloadContract,
    PublishDefinition,
    Published,
    ResultDelivery,
    StartAttempt,
    Started,
    StartOutcome,
    StartSaga,
    StepBinding,
    StepDefinition,
    TimerClaimed,
    UncertainPolicy,
    change_lifecycle,
    claim_timer,
    definition_digest,
    due_timers,
    fire_timer,
    handle_command,
    handle_result,
    mark_command_published,
    pending_commands,
    publish_definition,
    start_saga,
)

ORCHESTRATOR = "orchestrator"
OWNERS = ("svc-a", "svc-b", "svc-c")
TENANT = "t1"


def step(
    name: str,
    owner: str,
    *,
    compensation: str | None = "undo",
    policy: UncertainPolicy = UncertainPolicy.RESOLVE,
    timeout_ms: int = 1_000,
    max_attempts: int = 2,
    resolve_budget: int = 2,
) -> StepDefinition:
    return StepDefinition(
        name, owner, f"do-{name}", compensation, policy, timeout_ms, max_attempts, resolve_budget
    )


def artifact(
    steps: Iterable[StepDefinition],
    *,
    workflow: str = "checkout",
    version: int = 1,
    tenant: str = TENANT,
    first_input: PayloadContract = JSON_CONTRACT,
) -> DefinitionArtifact:
    return DefinitionArtifact(DefinitionKey(tenant, workflow, version), tuple(steps), first_input)


def three_steps(
    workflow: str = "checkout", version: int = 1, policy: UncertainPolicy = UncertainPolicy.RESOLVE
) -> DefinitionArtifact:
    """reserve (svc-a) -> charge (svc-b) -> ship (svc-c, non-compensable pivot)."""
    return artifact(
        [
            step("reserve", "svc-a", policy=policy),
            step("charge", "svc-b", policy=policy),
            step("ship", "svc-c", compensation=None, policy=policy),
        ],
        workflow=workflow,
        version=version,
    )


def store_with(
    *artifacts: DefinitionArtifact,
    activate: bool = True,
    quota_limit: int | None = None,
    trusted: Iterable[str] = OWNERS,
) -> OrchestratorStore:
    store = OrchestratorStore(quota_limit=quota_limit, trusted_producers=frozenset(trusted))
    for art in artifacts:
        store, published = publish_definition(store, PublishDefinition(art, definition_digest(art)))
        assert isinstance(published, Published), published
        if activate:
            store, changed = change_lifecycle(store, ChangeLifecycle(art.key, LifecycleAction.ACTIVATE), 0)
            assert isinstance(changed, LifecycleChanged), changed
    return store


def participants(
    store: OrchestratorStore, budget: int = 3, owners: Iterable[str] = OWNERS
) -> dict[str, ParticipantState]:
    """One participant per owner, bound to every step it owns in the catalog."""
    result: dict[str, ParticipantState] = {}
    for owner in owners:
        bindings = frozenset(
            StepBinding(entry.key, entry.digest, index, entry.artifact.first_input if index == 0 else None)
            for entry in store.catalog.entries.values()
            for index, s in enumerate(entry.artifact.steps)
            if s.owner == owner
        )
        config = ParticipantConfig(owner, frozenset({ORCHESTRATOR}), bindings, budget)
        result[owner] = ParticipantState(config)
    return result


def start(
    store: OrchestratorStore,
    key: DefinitionKey,
    business_key: str = "order-1",
    payload: bytes = b'{"sku": 1}',
    **attempt: object,
) -> tuple[OrchestratorStore, StartOutcome]:
    request = StartSaga(key, business_key, json_payload=payload)
    fields = {"now_ms": 0, **attempt}
    return start_saga(store, StartAttempt(request, **fields))  # type: ignore[arg-type]


def started(
    store: OrchestratorStore, key: DefinitionKey, business_key: str = "order-1"
) -> tuple[OrchestratorStore, str]:
    store, outcome = start(store, key, business_key)
    assert isinstance(outcome, Started), outcome
    return store, outcome.saga_id


Decide = Callable[[CommandEnvelope], Decision]


def always(decision: Decision) -> Decide:
    return lambda _command: decision


@attrs.define
class Driver:
    """Runs the happy transport: publish, deliver, answer, fire due timers.

    Mutable on purpose: it is a test harness around the pure model, not a model value.
    """

    store: OrchestratorStore
    parts: dict[str, ParticipantState]
    now_ms: int = 0

    def deliver_pending(self, decide: Decide) -> int:
        delivered = 0
        for command in pending_commands(self.store):
            self.store, _ = mark_command_published(self.store, command.command_id)
            self.deliver(command, decide(command))
            delivered += 1
        return delivered

    def deliver(
        self, command: CommandEnvelope, decision: Decision, commit: CommitFate = CommitFate.COMMITTED
    ) -> object:
        part = self.parts[command.owner]
        part, outcome = handle_command(part, CommandDelivery(command, ORCHESTRATOR, decision, commit))
        self.parts[command.owner] = part
        if isinstance(outcome, CommandProcessed):
            self.store, _ = handle_result(
                self.store, ResultDelivery(outcome.result, command.owner, self.now_ms)
            )
        return outcome

    def fire_due(self) -> int:
        fired = 0
        for timer in due_timers(self.store.timers, self.now_ms):
            self.store, claim = claim_timer(
                self.store, ClaimTimer(timer.timer_id, "worker", self.now_ms, 500)
            )
            assert isinstance(claim, TimerClaimed), claim
            self.store, _ = fire_timer(self.store, FireTimer(timer.timer_id, claim.token, self.now_ms))
            fired += 1
        return fired

    def run(self, decide: Decide, rounds: int = 50) -> None:
        """Deliver until quiet, advancing the clock past timers when nothing moves."""
        for _ in range(rounds):
            if self.deliver_pending(decide):
                continue
            if not self.store.timers.timers:
                return
            self.now_ms = max(t.due_ms for t in self.store.timers.timers.values())
            self.fire_due()


def effects_of(parts: Mapping[str, ParticipantState]) -> list[str]:
    return [e for p in parts.values() for e in p.effects]


commit_fates = st.sampled_from(list(CommitFate))
decisions = st.sampled_from(list(Decision))
policies = st.sampled_from(list(UncertainPolicy))


@st.composite
def artifacts(draw: st.DrawFn, workflow: str = "wf", version: int = 1) -> DefinitionArtifact:
    """Valid definitions of 1..3 steps with mixed owners, policies and budgets."""
    count = draw(st.integers(1, 3))
    steps = [
        step(
            f"s{i}",
            draw(st.sampled_from(OWNERS)),
            compensation=None if (i == count - 1 and draw(st.booleans())) else "undo",
            policy=draw(policies),
            timeout_ms=draw(st.sampled_from([100, 1_000])),
            max_attempts=draw(st.integers(1, 3)),
            resolve_budget=draw(st.integers(1, 3)),
        )
        for i in range(count)
    ]
    return artifact(steps, workflow=workflow, version=version)
