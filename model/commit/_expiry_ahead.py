"""The history expiry registered ahead of a two-step commit (C-POST-06, C-POST-05)."""

from __future__ import annotations

from model.commit._store import StoreState, _register_expiry
from model.commit._values import CommitIntent, CommitStage


def register_expiry_ahead(state: StoreState, intent: CommitIntent) -> StoreState:
    """C-POST-06, C-POST-05: ``state`` with the history expiry of an OUTBOXED ``intent`` registered
    ahead of its OUTBOXED -> COMMITTED step (unchanged for any other stage or intent).

    A store without the atomic step commits across two tables with no atomicity between them (the
    seed: "Scylla 当前采用该默认两步条件写，不宣称单次 LWT 或跨表原子提交"), and C-POST-05 wants the
    due expiry (``accepted_at_ms + retention_ms``) registered whenever the commit succeeds, also
    across a crash between the two writes. So such a store registers the expiry first, and a
    ``mark_committed`` that fails between the two leaves the commit OUTBOXED with the very expiry
    its resume will register anyway: a legal outcome of the failed call beside "nothing applied".

    post: __return__.commits == state.commits
    """
    entry = state.commits.get(intent.key)
    if entry is None or entry.stage is not CommitStage.OUTBOXED or entry.intent != intent:
        return state
    return _register_expiry(state, intent)
