"""What a saga runtime's metrics must say: the stage set, the label policy, the reconciliation.

Theory of operation
-------------------
A runtime process keeps one source of process metrics (S-OBS-04): the stage histogram
``nasaga_stage_duration_seconds`` with exactly the five ``Stage`` s and the fixed bucket bounds
``STAGE_BUCKETS`` (S-OBS-01), and three counter families, transport (``direction``,
``verdict``), processing (``unit``, ``outcome``) and governance (``operation``, ``outcome``).
Durable facts (instances by status, attempts, timers, conflicts, quota) are not counted by the
process: they are read from the backend at scrape time (``store_facts``, S-OBS-06) and rendered
beside the process metrics. The structured snapshot and the text exposition are two renderings
of one set of buckets (S-OBS-05).

Every label value comes from a closed set declared here (``LABEL_VALUES``), so the series do not
grow with sagas, tenants or messages (S-OBS-07); identities, tenants, endpoints and bodies are
never labels (``FORBIDDEN_LABELS``, S-OBS-08).

Reconciliation: what one call of the runtime must add, given the state before it and its outcome,
is a pure function of the contract's own values (``unit_tally``, ``command_stages``,
``fire_lateness``). The harness sums them over a run and compares the sum with the exposition
(S-OBS-02, S-OBS-03, S-OBS-04). Durations other than timer lateness depend on a clock the caller
injects; only their counts are the contract's.
"""

from __future__ import annotations

import bisect
import enum
import functools
import re
from collections.abc import Iterable, Mapping
from typing import Union, get_args

import attrs

from ._audit import ControlState
from ._catalog import LifecycleOutcome, PublishOutcome
from ._errors import (
    EligibilityRevoked,
    InstanceNotReleasable,
    MessageRefused,
    NoSuchTimer,
    StaleFencingToken,
    UnknownSaga,
)
from ._instance import Cause
from ._keys import SagaStatus
from ._messages import CommandEnvelope
from ._orchestrator import FireOutcome, ResultOutcome
from ._participant import CommandOutcome, CommandProcessed, DeadLettered, DuplicateCommand, ParticipantState
from ._routes import RegisterOutcome, RenewOutcome
from ._start import StartOutcome
from ._store import InstanceReleased, OrchestratorStore
from ._timers import ClaimOutcome, TimerReleased, TimerRenewed, check_fence
from ._transaction import RolledBack
from ._values import DeliveryVerdict, Phase, ResultKind

#: Metric family names as a text-format parser reports them; a counter's sample adds ``_total``.
STAGE_METRIC = "nasaga_stage_duration_seconds"
TRANSPORT_METRIC = "nasaga_transport_messages"
PROCESSING_METRIC = "nasaga_processing"
GOVERNANCE_METRIC = "nasaga_governance"
#: The database facts' families (gauges; read from the backend at scrape time, S-OBS-06).
FACT_METRICS: Mapping[str, tuple[str, ...]] = {
    "nasaga_instances": ("status",),
    "nasaga_attempts": (),
    "nasaga_retry_attempts": (),
    "nasaga_unknown_results": (),
    "nasaga_conflicts": (),
    "nasaga_timers": ("state",),
    "nasaga_quota_used": (),
}


class Stage(enum.Enum):
    """The five fixed stages (S-OBS-01); the values are nasaga's own label values."""

    #: The participant's business handler: execute, compensate, or a resolve poll of the world.
    HANDLER = "participant_handler"
    #: The participant's local transaction (inbox, gate, fact, result outbox), every attempt.
    PARTICIPANT_TRANSACTION = "participant_transaction"
    #: The orchestrator's create transaction of a start, every attempt.
    START_TRANSACTION = "start_transaction"
    #: The orchestrator's transaction for a result or a timer fire, every attempt.
    TRANSITION_TRANSACTION = "transition_transaction"
    #: How late a timer fired: fire time minus due time, taken once the claim was re-verified.
    TIMER_LATENESS = "timer_lateness"


#: Upper bounds in seconds; the last bucket (``+Inf``) takes everything beyond (nasaga's bounds).
STAGE_BUCKETS: tuple[float, ...] = (
    0.001,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)


def bucket_of(seconds: float) -> int:
    """The (non-cumulative) bucket an observation falls in: the first bound ``>=`` it (``le``)."""
    return bisect.bisect_left(STAGE_BUCKETS, seconds)


# -- units and their outcome labels ---------------------------------------------------------


class Unit(enum.Enum):
    """What the processing counter counts: one call of a runtime unit, by its outcome."""

    START = "start"
    RESULT = "result"
    COMMAND = "command"
    TIMER_CLAIM = "timer_claim"
    TIMER_FIRE = "timer_fire"
    TIMER_RENEW = "timer_renew"
    TIMER_RELEASE = "timer_release"


class Operation(enum.Enum):
    """What the governance counter counts: one catalog or management action, by its outcome."""

    PUBLISH = "publish"
    LIFECYCLE = "lifecycle"
    ROUTE_REGISTER = "route_register"
    ROUTE_RENEW = "route_renew"
    RELEASE = "release"


@functools.cache
def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def outcome_label(outcome: object) -> str:
    """An outcome as a label value: its type in snake case; a gate-absorbed attempt is its own."""
    if isinstance(outcome, CommandProcessed) and outcome.absorbed:
        return "absorbed_by_gate"
    return _snake(type(outcome).__name__)


def _labels(*unions: object) -> frozenset[str]:
    names = {_snake(t.__name__) for u in unions for t in get_args(u)}
    return frozenset(names | {"rolled_back", "outcome_unknown"})


_TIMER_WRITE = Union[TimerRenewed, TimerReleased, NoSuchTimer, StaleFencingToken]  # noqa: UP007 - get_args
_RELEASE = Union[InstanceReleased, UnknownSaga, InstanceNotReleasable]  # noqa: UP007 - get_args

#: The closed outcome label set of each unit and operation (S-OBS-07).
UNIT_OUTCOMES: Mapping[Unit, frozenset[str]] = {
    Unit.START: _labels(StartOutcome),
    Unit.RESULT: _labels(ResultOutcome),
    Unit.COMMAND: _labels(CommandOutcome) | {"absorbed_by_gate"},
    Unit.TIMER_CLAIM: _labels(ClaimOutcome),
    Unit.TIMER_FIRE: _labels(FireOutcome),
    Unit.TIMER_RENEW: _labels(_TIMER_WRITE),
    Unit.TIMER_RELEASE: _labels(_TIMER_WRITE),
}
OPERATION_OUTCOMES: Mapping[Operation, frozenset[str]] = {
    Operation.PUBLISH: _labels(PublishOutcome),
    Operation.LIFECYCLE: _labels(LifecycleOutcome),
    Operation.ROUTE_REGISTER: _labels(RegisterOutcome),
    Operation.ROUTE_RENEW: _labels(RenewOutcome),
    Operation.RELEASE: _labels(_RELEASE),
}

# -- the label policy ----------------------------------------------------------------------------

#: Label names of each process metric; ``le`` is the histogram's own (S-OBS-07).
METRIC_LABELS: Mapping[str, tuple[str, ...]] = {
    STAGE_METRIC: ("stage",),
    TRANSPORT_METRIC: ("direction", "verdict"),
    PROCESSING_METRIC: ("unit", "outcome"),
    GOVERNANCE_METRIC: ("operation", "outcome"),
    **FACT_METRICS,
}

#: Every value a label may take: closed sets that no saga, tenant or message can extend.
LABEL_VALUES: Mapping[str, frozenset[str]] = {
    "stage": frozenset(s.value for s in Stage),
    "le": frozenset([*(repr(b) for b in STAGE_BUCKETS), "+Inf"]),
    "direction": frozenset({"command", "result"}),
    "verdict": frozenset(v.value for v in DeliveryVerdict),
    "unit": frozenset(u.value for u in Unit),
    "operation": frozenset(o.value for o in Operation),
    "outcome": frozenset().union(*UNIT_OUTCOMES.values(), *OPERATION_OUTCOMES.values()),
    "status": frozenset(s.value for s in SagaStatus),
    "state": frozenset({"scheduled", "leased"}),
}

#: Never a label: identities, tenants, datasource endpoints, message bodies (S-OBS-08).
FORBIDDEN_LABELS = frozenset(
    {
        "saga_id",
        "saga",
        "tenant",
        "business_key",
        "message_id",
        "command_id",
        "effect_id",
        "timer_id",
        "datasource",
        "endpoint",
        "dsn",
        "url",
        "host",
        "namespace",
        "body",
        "payload",
        "message",
    }
)


@attrs.frozen
class Series:
    """One exposed sample: the metric family it belongs to, its sample name and its labels."""

    family: str
    name: str
    labels: Mapping[str, str]


#: The fixed quantiles a lifecycle summary may expose (nasaga's p50/p95/p99).
SUMMARY_QUANTILES = frozenset({"0.5", "0.95", "0.99"})


def label_violations(
    series: Iterable[Series],
    identities: frozenset[str] = frozenset(),
    closed: Mapping[str, frozenset[str]] | None = None,
) -> tuple[tuple[str, str], ...]:
    """``(rule, problem)`` for every sample breaking the label policy (S-OBS-07, S-OBS-08).

    ``identities`` are values a label must never carry whatever its name (saga ids, tenants,
    business keys, message ids, namespaces): a renamed identity label is still an identity.
    ``closed`` adds label sets closed by something other than the code, such as the catalog's
    definitions (a workflow name and version grow with published definitions, never with sagas,
    tenants or messages); a value outside them is still unbounded (S-OBS-07).
    """
    sets = {**LABEL_VALUES, **(closed or {})}
    problems: list[tuple[str, str]] = []
    for s in series:
        for name, value in s.labels.items():
            if name in FORBIDDEN_LABELS or value in identities:
                problems.append(("S-OBS-08", f"{s.name}{{{name}={value!r}}}: an identity as a label"))
            elif name not in sets or value not in sets[name]:
                problems.append(("S-OBS-07", f"{s.name}{{{name}={value!r}}}: not in a closed label set"))
        allowed = METRIC_LABELS.get(s.family)
        if allowed is not None and set(s.labels) - {"le"} != set(allowed):
            problems.append(("S-OBS-07", f"{s.name}: labels {sorted(s.labels)}, declared {list(allowed)}"))
    return tuple(problems)


# -- reconciliation -------------------------------------------------------------------------


@attrs.frozen
class Tally:
    """What one call adds: stage observations (count) and counter increments, by labels."""

    stages: tuple[Stage, ...] = ()
    counters: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()


def unit_tally(unit: Unit | Operation, outcome: object) -> Tally:
    """The counters one call of ``unit`` with ``outcome`` adds, and its orchestrator stages.

    Every attempt that reached its transaction is observed, failed and refused ones included
    (S-OBS-02): a start unless checkpoint 0 refused it before the transaction; every result and
    every fire. Participant stages depend on the state before (``command_stages``).
    """
    label = outcome_label(outcome)
    if isinstance(unit, Operation):
        return Tally(counters=((GOVERNANCE_METRIC, (("operation", unit.value), ("outcome", label))),))
    counters: list[tuple[str, tuple[tuple[str, str], ...]]] = [
        (PROCESSING_METRIC, (("unit", unit.value), ("outcome", label)))
    ]
    stages: tuple[Stage, ...] = ()
    if unit in (Unit.RESULT, Unit.COMMAND):
        verdict: DeliveryVerdict = getattr(outcome, "verdict", DeliveryVerdict.REDELIVER)
        direction = "command" if unit is Unit.COMMAND else "result"
        counters.append((TRANSPORT_METRIC, (("direction", direction), ("verdict", verdict.value))))
    if unit is Unit.START and not (isinstance(outcome, EligibilityRevoked) and outcome.checkpoint == 0):
        stages = (Stage.START_TRANSACTION,)
    elif unit in (Unit.RESULT, Unit.TIMER_FIRE):
        stages = (Stage.TRANSITION_TRANSACTION,)
    return Tally(stages, tuple(counters))


def command_stages(
    before: ParticipantState, command: CommandEnvelope, outcome: CommandOutcome
) -> tuple[Stage, ...]:
    """The stages one delivery of ``command`` observes, from the participant's state before it.

    A refused command never opens the transaction; any other delivery is one participant
    transaction (S-OBS-02). The handler runs inside it unless the inbox or the gate answers: a
    duplicate claim (a dead letter's copy too: it is claimed in the inbox), an attempt at a
    decided effect, a resolve of a decided or never-run effect (S-PART-02, S-PART-03, S-PART-06).
    A delivery that spends the budget runs one more participant transaction, the one recording
    its dead letter (S-PART-04), answered ``RolledBack`` when the database refused to record it.
    """
    if isinstance(outcome, MessageRefused):
        return ()
    if command.command_id in before.inbox or command.command_id in before.dead_letters:
        return (Stage.PARTICIPANT_TRANSACTION,)
    if isinstance(outcome, DuplicateCommand):
        return (Stage.PARTICIPANT_TRANSACTION,)
    if command.phase is Phase.RESOLVE:
        record = before.gate.get(command.target_effect_id or "")
        runs = record is not None and record.kind is ResultKind.UNKNOWN
    else:
        runs = command.effect_id not in before.gate
    stages = (Stage.PARTICIPANT_TRANSACTION, Stage.HANDLER) if runs else (Stage.PARTICIPANT_TRANSACTION,)
    spent = before.delivery_failures.get(command.command_id, 0) + 1 >= before.config.transient_failure_budget
    lettered = isinstance(outcome, DeadLettered) or (isinstance(outcome, RolledBack) and spent)
    return (*stages, Stage.PARTICIPANT_TRANSACTION) if lettered else stages


def fire_lateness(before: OrchestratorStore, timer_id: str, token: int, now_ms: int) -> float | None:
    """Seconds a fire was late, or None when the fence refused it (S-OBS-03).

    Lateness is taken after the claim is re-verified: a stale or unknown token observes nothing.
    """
    timer = check_fence(before.timers, timer_id, token, now_ms)
    if isinstance(timer, NoSuchTimer | StaleFencingToken):
        return None
    control = before.controls.get(timer.saga_id)
    if control is not None and control.state is ControlState.PAUSED:
        return None  # deferred, not fired (S-MGT-05)
    return max(0, now_ms - timer.due_ms) / 1000


# -- database facts -------------------------------------------------------------------------


@attrs.frozen
class StoreFacts:
    """The orchestrator's committed facts, read from its backend at scrape time (S-OBS-06).

    ``conflicts`` are transitions caused by a rejection (a participant's business fact excluded
    the step); ``attempts`` every dispatched command, ``retries`` those past the first attempt.
    """

    instances: Mapping[SagaStatus, int]
    attempts: int
    retries: int
    unknown_results: int
    conflicts: int
    timers_scheduled: int
    timers_leased: int
    quota_used: int


def store_facts(state: OrchestratorStore) -> StoreFacts:
    """The model's side of the facts a runtime reads through its backend port."""
    commands = [e.command for e in state.outbox.values()]
    statuses = [i.status for i in state.instances.values()]
    leased = sum(1 for t in state.timers.timers.values() if t.lease is not None)
    return StoreFacts(
        instances={s: statuses.count(s) for s in SagaStatus},
        attempts=len(commands),
        retries=sum(1 for c in commands if c.attempt > 1),
        unknown_results=sum(1 for e in state.journal if e.cause is Cause.UNKNOWN),
        conflicts=sum(1 for e in state.journal if e.cause is Cause.REJECTED),
        timers_scheduled=len(state.timers.timers) - leased,
        timers_leased=leased,
        quota_used=sum(state.quota_used.values()),
    )
