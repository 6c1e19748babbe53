"""The oracle's eyes: every store call is applied to the model in lock step and compared.

Theory of operation
-------------------
``StoreOracle`` holds the model's ``StoreState`` for one example. ``ObservedStore`` is a
``MessageStore`` that wraps the real one; each call (made by a rule directly, or by a committer the
harness runs) goes: gate (the scheduler's turn) -> armed fault -> model -> real store -> compare.

* Calls are applied one at a time (the scheduler runs one worker between gates), so the model sees
  exactly the order the backend saw.
* An armed fault kind acts through its own hooks (``conformance._faults.CallHooks``), called at
  fixed places of every call: ``before`` (``failed-before`` raises there: the model is not applied,
  the real store is not called, the caller gets UNAVAILABLE), ``after_backend`` (the wire kinds
  disarm the backend's fault proxy there, before anything is read back) and ``after``
  (``response-lost`` raises there: the model and the real store were both applied and compared,
  then the caller gets UNAVAILABLE instead of the answer). The oracle knows no kind by name.
* A real *uncertain* error the harness did not inject (UNAVAILABLE, OUTCOME_UNKNOWN) is settled at
  once by reading the key back: the durable state must be the model's state before the call or
  after it; anything else is a partial write. One exception, written in the contract (C-POST-06):
  a store *without* the atomic capability does ``mark_published_and_committed`` as
  ``mark_outbox_published`` then ``mark_committed``, and when the second step fails it must leave
  OUTBOXED with the publication. So for such a store the state after the first step alone is
  legal too, and the model adopts it; on an atomic store it is a partial write (C-POST-05).
* A refused write (the model expected an error and got it) is read back too: nothing may change.
* Every argument reaches the real store as a fresh copy (``conformance._fresh``): equal to the
  model's, never the same object, as values decoded off a wire are.
* A divergence raises ``HaltExample``, a ``BaseException`` carrying the ``Violation``: a committer
  turns any ``Exception`` from its store into ``CommitError``, and must not swallow our verdict.

After each step the machine calls ``observe`` on the keys the step touched: the backend's view of
each key must equal the model's, and its rank must not have gone down (C-POST-08).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

from conformance._faults import CallSite, FaultKind
from conformance._fresh import fresh
from conformance._machine import RunContext
from conformance._outage import bounded
from conformance._violations import HarnessEnvironmentError, Violation
from conformance.commit._expiry_ahead import AHEAD_OPS, settle_ahead
from conformance.commit._judge import (
    combined_step_rule,
    exercised,
    rank_of,
    refusal_rule,
    show,
    uncertain_rule,
    verdict,
)
from conformance.commit._leaks import leaked, vocabulary
from conformance.commit._settle import never_settled, records_failures, retry_uncertain, uncertain
from conformance.commit._vocabulary import key_name
from impls.api import InMemoryMembership, MessageStore
from model.commit import (
    ABSENT_RANK,
    AuthenticatedSend,
    CommitIntent,
    CommitKey,
    CommitStage,
    CommittedMessage,
    ConversationId,
    FrozenDeliveryInput,
    HistoryPage,
    HistoryQuery,
    LoadedCommit,
    LoadedCommitted,
    LoadedInFlight,
    MessageCoordinates,
    MessageStoreError,
    OutboxPublication,
    ReserveCandidate,
    ReserveCommitted,
    ReserveInFlight,
    ReserveResult,
    StoreCapabilities,
    StoreErrorKind,
    StoreState,
    TimestampMillis,
    is_valid_client_message_id,
)
from model.commit import (
    history_page as model_history_page,
)
from model.commit import (
    load_commit as model_load_commit,
)
from model.commit import (
    load_commit_for_request as model_load_commit_for_request,
)
from model.commit import (
    mark_committed as model_mark_committed,
)
from model.commit import (
    mark_outbox_published as model_mark_outbox_published,
)
from model.commit import (
    mark_published_and_committed as model_mark_published_and_committed,
)
from model.commit import (
    put_record as model_put_record,
)
from model.commit import (
    reserve as model_reserve,
)
from model.commit import (
    scan_recoverable_commits as model_scan,
)

T = TypeVar("T")
Gate = Callable[[], Awaitable[None]]

_SETTLE_ATTEMPTS = 5
_WIRE_SETTLE_ATTEMPTS = 12  # about 12 s of backoff in all


class HaltExample(BaseException):
    """Carries a ``Violation`` out through code that converts every ``Exception`` (a committer)."""

    def __init__(self, violation: Violation) -> None:
        super().__init__(violation.rule_id)
        self.violation = violation


class StoreOracle:
    """The model state of one example, and the checks that compare the backend with it."""

    def __init__(
        self,
        context: RunContext,
        real: MessageStore,
        membership: InMemoryMembership,
        namespace: str,
        note: Callable[[str], None],
        wire: object | None = None,
    ) -> None:
        self.context = context
        self.real = real
        self.membership = membership
        self.namespace = namespace
        self.note = note
        self.wire = wire  # the backend's fault proxy (conformance.wire), None without a network
        self.capabilities: StoreCapabilities = real.capabilities
        self.forbidden = vocabulary(real)  # C-ERR-01: text no error detail may carry (_leaks.py)
        self.state = StoreState()
        self.armed: FaultKind | None = None  # a fault for the next store calls, whoever makes them
        self.armed_calls = 0  # how many calls it still hits (an outage spans several)
        self.armed_requests, self.armed_skip = 1, 0  # requests a wire fault meets; ones it lets through
        self.violation: Violation | None = None
        self.disturbances = 0  # faults injected plus uncertain outcomes seen: excuses RECOVERABLE
        self.failed_calls: list[StoreErrorKind] = []  # each store/outbox error a caller was given
        self.conversation_of: dict[CommitKey, ConversationId] = {}
        self.first_coordinates: dict[CommitKey, MessageCoordinates] = {}
        self.real_rank: dict[CommitKey, int] = {}
        self.touched: set[CommitKey] = set()
        self.last_op: dict[CommitKey, str] = {}
        self.intents: dict[CommitKey, CommitIntent] = {}  # the intent each key was reserved with
        # Set while the harness itself has the backend down (a server it killed is restarting):
        # a read-back awaits it instead of taking the outage for the backend's fault.
        self.outage: Callable[[], Awaitable[None]] | None = None
        # Set at quiescence (faults disarmed, readiness answered): a read must settle (_settle).
        self.quiescent = False

    # --- verdicts -------------------------------------------------------------------------

    def fail(self, rule_id: str, message: str, **context: Any) -> HaltExample:
        """Record the first violation of the example and return the signal that carries it."""
        if self.violation is None:
            rendered = {k: v if isinstance(v, str | int | None) else show(v) for k, v in context.items()}
            self.violation = Violation(rule_id, message, rendered)
        return HaltExample(self.violation)

    # --- the lock step ----------------------------------------------------------------------

    def arm(self, fault: FaultKind | None, calls: int = 1, requests: int = 1, skip: int = 0) -> None:
        self.armed = fault
        self.armed_calls = calls if fault is not None else 0
        self.armed_requests, self.armed_skip = requests, skip

    def take_fault(self, label: str, key: CommitKey | None, write: bool) -> tuple[FaultKind, CallSite] | None:
        """The armed fault for this call, with the call as its hooks see it (``taken`` has run)."""
        fault = self.armed
        if fault is None:
            return None
        self.armed_calls -= 1
        requests, skip = self.armed_requests, self.armed_skip
        if self.armed_calls <= 0:
            self.arm(None)
        self.disturbances += 1
        site = CallSite(
            label,
            self.note,
            self.context.inject,
            lambda detail: MessageStoreError(StoreErrorKind.UNAVAILABLE, detail, key),
            write=write,
            wire=self.wire,
            requests=requests,
            skip=skip,
        )
        fault.hooks.taken(fault, site)
        return fault, site

    async def call_backend(
        self,
        op: str,
        key: CommitKey | None,
        call: Callable[[], Awaitable[T]],
        taken: tuple[FaultKind, CallSite] | None,
    ) -> T | MessageStoreError:
        """``call_real`` between the fault's ``before`` and ``after_backend`` hooks."""
        if taken is None:
            return await self.call_real(op, key, call)
        fault, site = taken
        fault.hooks.before(fault, site)
        try:
            return await self.call_real(op, key, call)
        finally:
            fault.hooks.after_backend(fault, site)

    async def call_real(
        self, op: str, key: CommitKey | None, call: Callable[[], Awaitable[T]]
    ) -> T | MessageStoreError:
        stats = self.context.stats
        start = time.perf_counter()
        try:
            return await bounded(f"the backend call {op}", call(), self.context)
        except MessageStoreError as error:
            term = leaked(error, self.namespace, self.forbidden)
            if term is not None:
                what = "a backend key name" if term == self.namespace else f"backend text {term!r}"
                message = f"{op} leaked {what} in its error: {str(error)[:120]!r}"
                raise self.fail("C-ERR-01", message, op=op) from None
            self.context.reach("error-detail-scanned")
            return error
        except Exception as error:
            raise self.fail(
                "C-ERR-01",
                f"{op} raised {type(error).__name__}, not MessageStoreError",
                op=op,
                key=key_name(key) if key else None,
                error=repr(error)[:300],
            ) from None
        finally:
            elapsed = time.perf_counter() - start
            stats.backend_seconds += elapsed
            stats.latency.observe(op, elapsed)

    @property
    def atomic(self) -> bool:
        return self.capabilities.atomic_publish_and_commit

    @records_failures
    async def write(
        self,
        gate: Gate | None,
        op: str,
        key: CommitKey,
        conversation: ConversationId,
        model: Callable[[StoreState], tuple[StoreState, Any]],
        real: Callable[[], Awaitable[T]],
        first_step: Callable[[StoreState], tuple[StoreState, Any]] | None = None,
    ) -> T:
        """One write in lock step. ``first_step`` is the model of the part that may stand alone when
        the call ends uncertainly (the default two-step path's ``mark_outbox_published``)."""
        if gate is not None:
            await gate()
        name = key_name(key)
        taken = self.take_fault(f"{op}({name})", key, write=True)
        before = self.state
        after, expected = model(before)
        actual = await self.call_backend(op, key, real, taken)
        self.note(f"{op}({name}) -> {show(actual)}   [model: {show(expected)}]")
        if isinstance(actual, MessageStoreError) and actual.kind.is_uncertain:
            self.disturbances += 1
            partial = None
            if first_step is not None:
                partial, partial_outcome = first_step(before)
                if isinstance(partial_outcome, MessageStoreError) or partial == before:
                    partial = None  # the first step alone would not have written: nothing new to accept
            await self.settle(op, key, conversation, before, after, partial)
        else:
            self.judge(op, key, expected, actual)
            self.advance(after, key, op)
            if isinstance(expected, MessageStoreError):
                await self.check_unchanged(op, key, conversation, expected.kind)
        if taken is not None:
            taken[0].hooks.after(*taken)
        if isinstance(actual, MessageStoreError):
            raise actual
        return actual

    @records_failures
    async def read(
        self,
        gate: Gate | None,
        op: str,
        key: CommitKey | None,
        model: Callable[[StoreState], Any],
        real: Callable[[], Awaitable[T]],
    ) -> T:
        if gate is not None:
            await gate()
        label = f"{op}({key_name(key)})" if key is not None else op
        taken = self.take_fault(label, key, write=False)
        expected = model(self.state)
        actual = await self.call_backend(op, key, real, taken)
        if self.quiescent and uncertain(actual):  # C-PRE-06: at quiescence a read must settle
            attempts = _SETTLE_ATTEMPTS if self.wire is None else _WIRE_SETTLE_ATTEMPTS
            retry = lambda: self.call_real(op, key, real)  # noqa: E731
            actual = await retry_uncertain(retry, actual, attempts, self.wire is not None, self.outage)
            if isinstance(actual, MessageStoreError) and uncertain(actual):
                raise self.fail("C-PRE-06", never_settled(op, actual, attempts), op=op)
        self.note(f"{label} -> {show(actual)}   [model: {show(expected)}]")
        if isinstance(actual, MessageStoreError) and actual.kind.is_uncertain:
            self.disturbances += 1
        else:
            self.judge(op, key, expected, actual)
        if taken is not None:
            taken[0].hooks.after(*taken)
        if isinstance(actual, MessageStoreError):
            raise actual
        return actual

    def judge(self, op: str, key: CommitKey | None, expected: object, actual: object) -> None:
        found = verdict(op, expected, actual, self.atomic)
        if found is not None:
            rule_id, message = found
            where = f" for {key_name(key)}" if key is not None else ""
            raise self.fail(
                rule_id, message.replace(op, f"{op}{where}", 1), op=op, expected=expected, actual=actual
            )
        self.context.reach("rule:C-ERR-01")
        for rule_id in exercised(op, expected, self.atomic):
            self.context.reach(f"rule:{rule_id}")

    def advance(self, after: StoreState, key: CommitKey, op: str) -> None:
        """Adopt the model's next state; note what it reached for the coverage gate."""
        self.state = after
        entry = after.commits.get(key)
        if entry is None:
            return
        self.conversation_of[key] = entry.conversation
        self.first_coordinates.setdefault(key, entry.coordinates)
        if entry.intent is not None:
            self.intents.setdefault(key, entry.intent)
        self.touched.add(key)
        self.last_op[key] = op
        self.context.reach(f"stage:{entry.stage.name}")

    # --- reading the backend back --------------------------------------------------------------

    async def read_back(
        self, op: str, key: CommitKey | None, call: Callable[[], Awaitable[T]]
    ) -> T | MessageStoreError:
        """``call`` on the real backend, retrying uncertain failures; no gate, no injected faults."""
        # Behind a fault proxy a reset connection may leave the driver reconnecting for a while
        # (cassandra-driver marks its only host down after one reset): wait for it, bounded.
        attempts = _SETTLE_ATTEMPTS if self.wire is None else _WIRE_SETTLE_ATTEMPTS
        first = await self.call_real(op, key, call)
        again = partial(self.call_real, op, key, call)
        result = await retry_uncertain(again, first, attempts, self.wire is not None, self.outage)
        if isinstance(result, MessageStoreError) and uncertain(result):
            raise HarnessEnvironmentError(f"the backend stayed unavailable reading back ({op}): {result}")
        return result

    async def load_real(
        self, key: CommitKey, conversation: ConversationId
    ) -> LoadedCommit | MessageStoreError | None:
        """The backend's view of ``key`` (``read_back``). A definite error must be the model's own (a
        key held by another conversation); the model's value then stands for it in comparisons."""
        result = await self.read_back("load_commit", key, lambda: self.real.load_commit(key, conversation))
        if isinstance(result, MessageStoreError):
            expected = model_load_commit(self.state, key, conversation)
            self.judge("load_commit", key, expected, result)
            return expected
        return result

    async def settle(
        self,
        op: str,
        key: CommitKey,
        conversation: ConversationId,
        before: StoreState,
        after: StoreState,
        partial: StoreState | None = None,
    ) -> None:
        """An uncertain outcome: the durable state must be the model's before or after, nothing else;
        or ``partial``, the first step alone of a non-atomic ``mark_published_and_committed`` (C-POST-06)."""
        conversation = self._conversation(key, conversation, before, after)
        real = await self.load_real(key, conversation)
        if real == model_load_commit(after, key, conversation):
            self.note(f"  settled: {op} applied")
            self.advance(after, key, op)
        elif real == model_load_commit(before, key, conversation):
            self.note(f"  settled: {op} did not apply")
        elif partial is not None and real == model_load_commit(partial, key, conversation):
            self.note(f"  settled: only the first step of {op} applied; OUTBOXED is recoverable (C-POST-06)")
            self.advance(partial, key, "mark_outbox_published")
            self.context.reach("settled-outboxed")
            self.context.reach("rule:C-POST-06")
        else:
            legal = "nor after the first step " if partial is not None else ""
            raise self.fail(
                uncertain_rule(op, self.atomic),
                f"{op} for {key_name(key)} failed uncertainly and left {show(real)}: neither the state "
                f"before ({show(model_load_commit(before, key, conversation))}) {legal}nor after "
                f"({show(model_load_commit(after, key, conversation))})",
                op=op,
            )
        if not self.atomic and op in AHEAD_OPS:  # left OUTBOXED or RESERVED: was anything written ahead?
            await settle_ahead(self, op, key)
        self.context.reach("settled-uncertain")

    async def check_unchanged(
        self, op: str, key: CommitKey, conversation: ConversationId, kind: StoreErrorKind
    ) -> None:
        """C-POST-05, C-ERR-04: a refused write leaves nothing behind."""
        if not is_valid_client_message_id(key.client_message_id):
            return  # such a key cannot be read back either
        conversation = self.conversation_of.get(key, conversation)
        real = await self.load_real(key, conversation)
        expected = model_load_commit(self.state, key, conversation)
        if real != expected:
            raise self.fail(
                refusal_rule(op, kind, self.atomic),
                f"{op} for {key_name(key)} was refused ({kind.value}) but left a partial write: "
                f"{show(real)} instead of {show(expected)}",
                op=op,
                expected=expected,
                actual=real,
            )

    async def observe(self, key: CommitKey) -> None:
        """After a step: the backend's view equals the model's, and never moved backwards."""
        conversation = self.conversation_of.get(key)
        if conversation is None:
            return
        real = await self.load_real(key, conversation)
        expected = model_load_commit(self.state, key, conversation)
        rank = rank_of(real)
        previous = self.real_rank.get(key, ABSENT_RANK)
        if rank < previous:
            raise self.fail(
                "C-POST-08",
                f"{key_name(key)} went backwards: rank {previous} -> {rank} ({show(real)})",
                expected=expected,
                actual=real,
            )
        self.real_rank[key] = rank
        if real != expected:
            found = verdict("load_commit", expected, real)
            rule_id = found[0] if found else "C-POST-03"
            if (
                rule_id in ("C-PRE-09", "C-POST-03")
                and self.last_op.get(key) == "mark_published_and_committed"
            ):
                rule_id = combined_step_rule(self.atomic)
            raise self.fail(
                rule_id,
                f"after {self.last_op.get(key, 'a step')}, {key_name(key)} reads back as {show(real)}; "
                f"the model holds {show(expected)}",
                expected=expected,
                actual=real,
            )

    def _conversation(
        self, key: CommitKey, hint: ConversationId, before: StoreState, after: StoreState
    ) -> ConversationId:
        for state in (before, after):
            entry = state.commits.get(key)
            if entry is not None:
                return entry.conversation
        return hint

    # --- acknowledgements -----------------------------------------------------------------------

    def check_ack(self, key: CommitKey, ack: CommittedMessage, how: str) -> None:
        """C-POST-10, C-ERR-03, C-POST-01: an ACK only for a COMMITTED key, equal to the model's."""
        entry = self.state.commits.get(key)
        if entry is None or entry.publication is None or entry.stage is not CommitStage.COMMITTED:
            stage = "absent" if entry is None else entry.stage.name
            raise self.fail(
                "C-POST-10", f"{how} for {key_name(key)} returned an ACK while the key is {stage}", actual=ack
            )
        expected = entry.committed_message(key)
        if ack != expected:
            rule_id = "C-POST-01" if ack.coordinates != expected.coordinates else "C-POST-10"
            raise self.fail(
                rule_id,
                f"{how} for {key_name(key)} acknowledged {show(ack)}; the store holds {show(expected)}",
                expected=expected,
                actual=ack,
            )
        first = self.first_coordinates.get(key)
        if first is not None and ack.coordinates != first:
            raise self.fail(
                "C-POST-01", f"{key_name(key)} was acknowledged with new coordinates {show(ack.coordinates)}"
            )
        self.context.reach("rule:C-POST-10")


class ObservedStore:
    """A ``MessageStore`` seen through the oracle; one per worker (each has its own gate).

    ``for_committer``: the store a ``MessageCommitter`` uses, which must follow its store's path
    (C-POST-06, C-POST-07); the store machine calls every method directly on every store.
    """

    def __init__(
        self,
        oracle: StoreOracle,
        gate: Gate | None = None,
        *,
        for_committer: bool = False,
        real: MessageStore | None = None,
    ) -> None:
        self._oracle = oracle
        self._real = real if real is not None else oracle.real  # another client of the same namespace
        self._gate = gate
        self._for_committer = for_committer
        self.first_seen: dict[CommitKey, str] = {}  # the stage each key was first read at (coverage)

    def _seen(self, key: CommitKey, result: object) -> None:
        if isinstance(result, ReserveInFlight | LoadedInFlight):
            self.first_seen.setdefault(key, result.stage.name)
        elif isinstance(result, ReserveCommitted | LoadedCommitted):
            self.first_seen.setdefault(key, CommitStage.COMMITTED.name)

    @property
    def capabilities(self) -> StoreCapabilities:
        return self._oracle.capabilities

    async def reserve(
        self, request: AuthenticatedSend, delivery: FrozenDeliveryInput, candidate: ReserveCandidate
    ) -> ReserveResult:
        result: ReserveResult = await self._oracle.write(
            self._gate,
            "reserve",
            request.commit_key,
            request.conversation,
            lambda s: model_reserve(s, request, delivery, candidate),
            lambda: self._real.reserve(*fresh((request, delivery, candidate))),
        )
        self._seen(request.commit_key, result)
        return result

    async def put_record(self, intent: CommitIntent) -> None:
        await self._oracle.write(
            self._gate,
            "put_record",
            intent.key,
            intent.conversation,
            lambda s: model_put_record(s, intent),
            lambda: self._real.put_record(fresh(intent)),
        )

    async def mark_outbox_published(self, intent: CommitIntent, publication: OutboxPublication) -> None:
        if not self.capabilities.atomic_publish_and_commit:
            self._oracle.context.reach("rule:C-POST-06")
        await self._oracle.write(
            self._gate,
            "mark_outbox_published",
            intent.key,
            intent.conversation,
            lambda s: model_mark_outbox_published(s, intent, publication),
            lambda: self._real.mark_outbox_published(*fresh((intent, publication))),
        )

    async def mark_published_and_committed(
        self, intent: CommitIntent, publication: OutboxPublication
    ) -> CommittedMessage:
        atomic = self.capabilities.atomic_publish_and_commit
        if not atomic and self._for_committer:
            raise self._oracle.fail(
                "C-POST-06",
                f"the committer used the atomic step for {key_name(intent.key)} on a store that does not "
                "declare it; the default path is mark_outbox_published, then mark_committed",
            )
        if atomic:
            self._oracle.context.reach("rule:C-POST-07")
        return await self._oracle.write(
            self._gate,
            "mark_published_and_committed",
            intent.key,
            intent.conversation,
            lambda s: model_mark_published_and_committed(s, intent, publication),
            lambda: self._real.mark_published_and_committed(*fresh((intent, publication))),
            # C-POST-06: the default path may stop after its first step, leaving OUTBOXED
            None if atomic else (lambda s: model_mark_outbox_published(s, intent, publication)),
        )

    async def mark_committed(self, intent: CommitIntent) -> CommittedMessage:
        return await self._oracle.write(
            self._gate,
            "mark_committed",
            intent.key,
            intent.conversation,
            lambda s: model_mark_committed(s, intent),
            lambda: self._real.mark_committed(fresh(intent)),
        )

    async def load_commit(self, key: CommitKey, conversation_id: ConversationId) -> LoadedCommit | None:
        result: LoadedCommit | None = await self._oracle.read(
            self._gate,
            "load_commit",
            key,
            lambda s: model_load_commit(s, key, conversation_id),
            lambda: self._real.load_commit(*fresh((key, conversation_id))),
        )
        self._seen(key, result)
        return result

    async def load_commit_for_request(self, request: AuthenticatedSend) -> LoadedCommit | None:
        result: LoadedCommit | None = await self._oracle.read(
            self._gate,
            "load_commit_for_request",
            request.commit_key,
            lambda s: model_load_commit_for_request(s, request),
            lambda: self._real.load_commit_for_request(fresh(request)),
        )
        self._seen(request.commit_key, result)
        return result

    async def scan_recoverable_commits(
        self, older_than: TimestampMillis, max_items: int
    ) -> list[CommitIntent]:
        return await self._oracle.read(
            self._gate,
            "scan_recoverable_commits",
            None,
            lambda s: model_scan(s, older_than, max_items),
            lambda: self._real.scan_recoverable_commits(*fresh((older_than, max_items))),
        )

    async def history_page(self, query: HistoryQuery) -> HistoryPage:
        members = self._oracle.membership.snapshot(query.tenant, query.conversation)
        return await self._oracle.read(
            self._gate,
            "history_page",
            None,
            lambda s: model_history_page(s, query, members),
            lambda: self._real.history_page(fresh(query)),
        )

    async def readiness(self) -> None:
        if self._gate is not None:
            await self._gate()
        result = await self._oracle.call_real("readiness", None, self._real.readiness)
        if isinstance(result, MessageStoreError):
            raise result

    async def close(self) -> None:
        """The harness owns the real store's lifetime; a committer never closes it."""
