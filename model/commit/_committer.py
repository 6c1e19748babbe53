"""The committer's branches as pure functions, and its named fault points.

A committer never decides from memory what to do next: it loads (or reserves) and follows
``next_step`` from the durable stage (C-POST-09). The only fact it may hold that is not yet in the
store is the outbox publication it was just acknowledged (``publication_in_hand``).
"""

from __future__ import annotations

import enum

import attrs

from model.commit._values import (
    CommitStage,
    LoadedCommit,
    LoadedCommitted,
    OutboxPublication,
)


class CommitStep(enum.Enum):
    RESERVE = "reserve"
    PUT_RECORD = "put_record"
    PUBLISH_OUTBOX = "publish_outbox"
    MARK_PUBLISHED_AND_COMMITTED = "mark_published_and_committed"
    MARK_OUTBOX_PUBLISHED = "mark_outbox_published"
    MARK_COMMITTED = "mark_committed"
    REPLAY_ACK = "replay_ack"


@attrs.frozen
class StoreCapabilities:
    """What a store declares it can do; the committer picks its path from this alone."""

    atomic_publish_and_commit: bool


class FaultPoint(enum.Enum):
    """Every boundary between durable steps where a committer can die (docs/faults.md)."""

    M_COMMIT_01 = "M-COMMIT-01"  # request validated and frozen; nothing durable yet
    M_COMMIT_02 = "M-COMMIT-02"  # reserve durable; record not written
    M_COMMIT_03 = "M-COMMIT-03"  # record durable; nothing published
    M_COMMIT_04 = "M-COMMIT-04"  # outbox durably acked; the store does not know the publication
    M_COMMIT_05 = "M-COMMIT-05"  # OUTBOXED durable (two-step path only); not committed
    M_COMMIT_06 = "M-COMMIT-06"  # COMMITTED durable; the ACK has not reached the client

    @property
    def rule_id(self) -> str:
        return self.value


# C-POST-06, C-POST-07, C-POST-09: the step that follows a durable stage. With the atomic capability, a
# Recorded commit and a publication in hand go to Committed in one store call.
def next_step(
    loaded: LoadedCommit | None,
    capabilities: StoreCapabilities,
    publication_in_hand: OutboxPublication | None,
) -> CommitStep:
    """C-POST-06, C-POST-07, C-POST-09.

    post: capabilities.atomic_publish_and_commit or __return__ != CommitStep.MARK_PUBLISHED_AND_COMMITTED
    post: not capabilities.atomic_publish_and_commit or __return__ != CommitStep.MARK_OUTBOX_PUBLISHED
    """
    if loaded is None:
        return CommitStep.RESERVE
    if isinstance(loaded, LoadedCommitted):
        return CommitStep.REPLAY_ACK
    stage = loaded.stage
    if stage is CommitStage.RESERVED:
        return CommitStep.PUT_RECORD
    if stage is CommitStage.OUTBOXED:
        return CommitStep.MARK_COMMITTED
    if publication_in_hand is None:
        return CommitStep.PUBLISH_OUTBOX
    if capabilities.atomic_publish_and_commit:
        return CommitStep.MARK_PUBLISHED_AND_COMMITTED
    return CommitStep.MARK_OUTBOX_PUBLISHED


# The fault point a committer passes just before taking each step (C-POST-07 names M-COMMIT-04).
FAULT_POINT_BEFORE: dict[CommitStep, FaultPoint] = {
    CommitStep.RESERVE: FaultPoint.M_COMMIT_01,
    CommitStep.PUT_RECORD: FaultPoint.M_COMMIT_02,
    CommitStep.PUBLISH_OUTBOX: FaultPoint.M_COMMIT_03,
    CommitStep.MARK_PUBLISHED_AND_COMMITTED: FaultPoint.M_COMMIT_04,
    CommitStep.MARK_OUTBOX_PUBLISHED: FaultPoint.M_COMMIT_04,
    CommitStep.MARK_COMMITTED: FaultPoint.M_COMMIT_05,
}
# M-COMMIT-06 follows the step that produced the CommittedMessage, before it is returned.
FAULT_POINT_AFTER_COMMIT = FaultPoint.M_COMMIT_06


def fault_points_for(capabilities: StoreCapabilities) -> tuple[FaultPoint, ...]:
    """The fault points a fresh commit passes on a store with these capabilities.

    post: FaultPoint.M_COMMIT_04 in __return__
    """
    if capabilities.atomic_publish_and_commit:
        return (
            FaultPoint.M_COMMIT_01,
            FaultPoint.M_COMMIT_02,
            FaultPoint.M_COMMIT_03,
            FaultPoint.M_COMMIT_04,
            FaultPoint.M_COMMIT_06,
        )
    return tuple(FaultPoint)
