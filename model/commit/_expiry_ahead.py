"""What a store without the atomic step may write ahead of its commit row (C-POST-06, C-POST-11):
the history expiry ahead of OUTBOXED -> COMMITTED, the history entry ahead of RESERVED -> RECORDED."""

from __future__ import annotations

from model.commit._store import StoreState, _append_history, _register_expiry
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


def record_history_ahead(state: StoreState, intent: CommitIntent) -> StoreState:
    """C-POST-11, C-POST-06: ``state`` with the history entry of a RESERVED ``intent`` written ahead of
    its RESERVED -> RECORDED step (unchanged for any other stage or intent).

    A store without the atomic step records across two tables too (the history entry, the commit
    row) and writes the entry first, so that no RECORDED commit lacks it. The entry is fixed at
    reserve: the intent is frozen then, and ``put_record`` may write nothing but ``intent.record``
    (the seed: "put_record 只能写 CommitIntent.record"; it "可安全重试并收敛为同一值"). So a
    ``put_record`` that fails between the two writes leaves the commit RESERVED with the very entry
    its retry, or recovery (C-POST-02), will record: a legal outcome of the failed call beside
    "nothing applied". The entry is readable as a RECORDED one is (C-POST-11: until its expiry).

    post: __return__.commits == state.commits
    """
    entry = state.commits.get(intent.key)
    if entry is None or entry.stage is not CommitStage.RESERVED or entry.intent != intent:
        return state
    return _append_history(state, intent)
