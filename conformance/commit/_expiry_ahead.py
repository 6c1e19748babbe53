"""An uncertain ``mark_committed`` on a store without the atomic step: was the expiry registered ahead?

Such a store commits across two tables (the commit row, the history entry) with nothing atomic
between them, and registers the history expiry *before* OUTBOXED -> COMMITTED so that a commit
never lacks it (C-POST-05; ``model.commit.register_expiry_ahead`` cites the seed). A call that fails
between the two writes leaves the commit OUTBOXED, which the settling read-back of the commit row
accepts as "did not apply", while the history entry already carries its expiry. Nothing read a
commit row can tell the two apart; left unsettled, the model keeps the entry readable forever and
the first history read past the expiry (at quiescence, a day on) reports a C-POST-11 divergence
that depends on where the lost request fell: the flaky cql/store C-POST-11 of session 11.

So after such an outcome the oracle reads the entry's conversation once at the due expiry, through
the real store with nothing armed, and adopts whichever legal state it shows: the expiry registered
ahead, or not at all. Any other page is a partial write (C-POST-05). An expiry registered at the
wrong value is then judged by the quiescence reads at each registered expiry's edges.

``put_record`` is the same across the same two tables: the history entry first, then RESERVED ->
RECORDED (``model.commit.record_history_ahead``). A random reach seed (cql/store 185589973: a
reply lost on the entry's write) left the commit RESERVED, which the read-back took for "did not
apply", and history already showing the entry; so after an uncertain ``put_record`` the oracle
reads the conversation once and adopts the entry written ahead, or nothing (``settle_ahead``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from conformance._machine import RunContext
from conformance.commit._judge import show, uncertain_rule
from conformance.commit._vocabulary import key_name
from impls.api import InMemoryMembership, MessageStore
from model.commit import (
    CommitKey,
    HistoryDirection,
    HistoryQuery,
    MessageStoreError,
    StoreState,
    record_history_ahead,
    register_expiry_ahead,
)
from model.commit import history_page as model_history_page

T = TypeVar("T")


class StoreOracle(Protocol):
    """What of ``conformance.commit._oracle.StoreOracle`` this uses (that module imports this one)."""

    state: StoreState
    real: MessageStore
    membership: InMemoryMembership
    context: RunContext
    note: Callable[[str], None]

    @property
    def atomic(self) -> bool: ...

    def fail(self, rule_id: str, message: str, **context: Any) -> BaseException: ...

    async def read_back(
        self, op: str, key: CommitKey | None, call: Callable[[], Awaitable[T]]
    ) -> T | MessageStoreError: ...


#: The calls whose uncertain failure may leave the expiry registered ahead (non-atomic stores).
EXPIRY_OPS = frozenset({"mark_committed", "mark_published_and_committed"})
#: ... and those that may leave a write ahead at all: the history entry ahead of RECORDED too.
AHEAD_OPS = EXPIRY_OPS | {"put_record"}


async def settle_ahead(oracle: StoreOracle, op: str, key: CommitKey) -> None:
    """C-POST-06, C-POST-05, C-POST-11: after ``settle`` left ``key`` OUTBOXED (or RESERVED, for a
    ``put_record``), adopt an expiry registered ahead (or a history entry written ahead)."""
    entry = oracle.state.commits.get(key)
    if entry is None or entry.intent is None:
        return
    if op in EXPIRY_OPS:
        ahead = register_expiry_ahead(oracle.state, entry.intent)
        what, target, rule = "registered the expiry", "settled-expiry-ahead", "C-POST-06"
    else:
        ahead = record_history_ahead(oracle.state, entry.intent)
        what, target, rule = "wrote the history entry", "settled-history-ahead", "C-POST-11"
    if ahead == oracle.state:
        return  # another stage (applied, or refused earlier): nothing could have been written ahead
    ref = (key.tenant, entry.conversation)
    # At the due expiry for an expiry ahead; for an entry ahead, at its acceptance (none expires it)
    expiry = ahead.history[ref][entry.coordinates.conversation_seq].expires_at_ms
    as_of = expiry if expiry is not None else entry.coordinates.accepted_at_ms
    members = oracle.membership.snapshot(*ref)
    if not members:
        # No reader can ask; the quiescence reads skip a conversation without members as well.
        oracle.note(f"  history of {key_name(key)} not probed: the conversation has no members")
        return
    query = HistoryQuery(
        tenant=key.tenant,
        conversation=entry.conversation,
        actor=min(members),
        direction=HistoryDirection.AFTER,
        anchor=None,
        limit=100,
        max_bytes=1 << 20,
        as_of_ms=as_of,
    )
    real = await oracle.read_back("history_page", None, lambda: oracle.real.history_page(query))
    if real == model_history_page(ahead, query, members):
        oracle.note(f"  settled: {op} {what} of {key_name(key)} ahead ({rule})")
        oracle.state = ahead
        oracle.context.reach(target)
    elif real != model_history_page(oracle.state, query, members):
        raise oracle.fail(
            uncertain_rule(op, oracle.atomic),
            f"{op} for {key_name(key)} failed uncertainly and left its conversation's history as "
            f"{show(real)}: neither as if it {what} ahead "
            f"({show(model_history_page(ahead, query, members))}) nor without it "
            f"({show(model_history_page(oracle.state, query, members))})",
            op=op,
        )
