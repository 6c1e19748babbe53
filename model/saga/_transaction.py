"""The fate of one local transaction, and how it is reported (S-TX-01, S-TX-02).

Every write of the contract (a start, an orchestrator transition, a participant step)
is one local transaction. Its writes land together or not at all. A transaction that
failed before COMMIT was sent is a definite ``RolledBack``: nothing changed and the
input is redelivered. Once COMMIT was sent, the answer is the committed outcome or
``OutcomeUnknown``, never a made-up rollback; an unknown outcome is never downgraded
to a plain retry (the redelivery is decided by the inbox/gate, which know the truth).
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
