"""The fate of one local transaction, and how it is reported (S-TX-01, S-TX-02).

Every write of the contract (a start, an orchestrator transition, a participant step)
is one local transaction. Its writes land together or not at all. A transaction that
failed before COMMIT was sent is a definite ``RolledBack``: nothing changed and the
input is redelivered. Once COMMIT was sent, the answer is the committed outcome or
``OutcomeUnknown``, never a made-up rollback; an unknown outcome is never downgraded
to a plain retry (the redelivery is decided by the inbox/gate, which know the truth).

A stored row that does not decode (S-TX-03, a decided reading: no seed sentence names it) is
refused as corrupt by the read that met it, never read as a value decoded or defaulted in its
place; the unit that made the read writes nothing and ends rolled back (S-TX-01).
"""

from __future__ import annotations

from typing import ClassVar, TypeVar

import attrs

from ._values import CommitFate, DeliveryVerdict


@attrs.frozen
class RolledBack:
    """Failed before COMMIT was sent: nothing changed; redeliver."""

    verdict: ClassVar[DeliveryVerdict] = DeliveryVerdict.REDELIVER


@attrs.frozen
class OutcomeUnknown:
    """COMMIT was sent, no answer came back; do not acknowledge, do not relabel."""

    verdict: ClassVar[DeliveryVerdict] = DeliveryVerdict.REDELIVER


#: The kinds of row a saga backend stores for the runtime, each refused when it does not decode
#: (S-TX-03).
STORED_ROW_KINDS = (
    "definition", "capability", "receipt", "instance", "journal", "command", "timer", "gate",
    "result", "control", "audit",
)  # fmt: skip


@attrs.frozen
class StoredRowCorrupt:
    """A read met a stored row of ``kind`` that does not decode (S-TX-03)."""

    kind: str
    verdict: ClassVar[DeliveryVerdict] = DeliveryVerdict.REDELIVER


S = TypeVar("S")
O = TypeVar("O")  # noqa: E741 - reads as "outcome" beside S for "state"


def settle(before: S, after: S, fate: CommitFate, committed: O) -> tuple[S, O | RolledBack | OutcomeUnknown]:
    """Apply a transaction's ``fate`` to its all-or-nothing writes (S-TX-01, S-TX-02).

    pre: not isinstance(committed, (RolledBack, OutcomeUnknown))
    post: __return__[0] is (after if fate.applied else before)
    post: not (fate.commit_sent and isinstance(__return__[1], RolledBack))
    post: (__return__[1] is committed) == (fate is CommitFate.COMMITTED)
    """
    if fate is CommitFate.COMMITTED:
        return after, committed
    if fate is CommitFate.ROLLED_BACK:
        return before, RolledBack()
    return (after if fate.applied else before), OutcomeUnknown()


def refuse_corrupt(before: S, kind: str) -> tuple[S, StoredRowCorrupt]:
    """A read of a stored ``kind`` row that does not decode (S-TX-03): the read is refused as
    corrupt, never answered with a value decoded or defaulted in the row's place, and the unit
    that made it writes nothing (S-TX-01: it ends rolled back).

    pre: kind in STORED_ROW_KINDS
    post: __return__[0] is before
    post: __return__[1].kind == kind
    """
    return before, StoredRowCorrupt(kind)
