"""A partitioned log with committed offsets: frontier, back-off, dead letters, rebalance (S-KAFKA-01..05)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from model.saga import (
    BackingOff,
    DeliveryVerdict,
    NotOwner,
    OffsetCommitted,
    OffsetRefused,
    PartitionedLog,
    RecordDelivered,
    assign_partition,
    commit_offset,
    deliver_record,
    offset_frontier,
    partition_lag,
    produce_record,
    settle_record,
)


def log_with(records: int, partitions: int = 2, owner: str = "c1") -> PartitionedLog:
    log = PartitionedLog.of(partitions)
    for partition in range(partitions):
        for i in range(records):
            log, _ = produce_record(log, partition, f"m{partition}-{i}")
        log = assign_partition(log, partition, owner)
    return log


def test_s_kafka_01_offsets_follow_produce_order_and_commits_never_go_back() -> None:
    log = PartitionedLog.of(1)
    offsets = []
    for i in range(3):
        log, offset = produce_record(log, 0, f"m{i}")
        offsets.append(offset)
    assert offsets == [0, 1, 2]
    log = assign_partition(log, 0, "c1")
    log, first = deliver_record(log, 0, "c1", 0)
    assert first == RecordDelivered(0, 0, "m0")
    log, _ = settle_record(log, 0, 0, DeliveryVerdict.ACK)
    log, moved = commit_offset(log, 0, 1)
    assert moved == OffsetCommitted(0, 1)
    after, back = commit_offset(log, 0, 0)
    assert isinstance(back, OffsetRefused) and after is log


def test_s_kafka_02_the_committed_offset_never_passes_a_record_without_an_outcome() -> None:
    log = log_with(3, partitions=1)
    for _ in range(3):
        log, _ = deliver_record(log, 0, "c1", 0)
    log, _ = settle_record(log, 0, 1, DeliveryVerdict.ACK)  # offset 0 still has no outcome
    assert offset_frontier(log.partitions[0]) == 0
    same, refused = commit_offset(log, 0, 2)
    assert isinstance(refused, OffsetRefused) and refused.frontier == 0 and same is log
    log, _ = settle_record(log, 0, 0, DeliveryVerdict.ACK)
    assert offset_frontier(log.partitions[0]) == 2
    log, ok = commit_offset(log, 0, 2)
    assert ok == OffsetCommitted(0, 2) and partition_lag(log, 0) == 1


@given(
    st.lists(
        st.sampled_from([DeliveryVerdict.ACK, DeliveryVerdict.DEAD_LETTER, DeliveryVerdict.REDELIVER]),
        max_size=8,
    )
)
def test_s_kafka_02_frontier_is_the_first_offset_without_an_outcome(verdicts: list[DeliveryVerdict]) -> None:
    log = log_with(len(verdicts), partitions=1)
    for offset, verdict in enumerate(verdicts):
        log, _ = settle_record(log, 0, offset, verdict)
    frontier = offset_frontier(log.partitions[0])
    first_open = next((o for o, v in enumerate(verdicts) if v is DeliveryVerdict.REDELIVER), len(verdicts))
    assert frontier == first_open
    _, past = commit_offset(log, 0, frontier + 1)
    assert isinstance(past, OffsetRefused)


def test_s_kafka_03_a_dead_letter_is_done_only_once_recorded_and_recorded_once() -> None:
    log = log_with(1, partitions=1)
    log, _ = deliver_record(log, 0, "c1", 0)
    assert offset_frontier(log.partitions[0]) == 0  # produced to the dead letters, not acknowledged
    log, _ = settle_record(log, 0, 0, DeliveryVerdict.DEAD_LETTER, reason="poison")
    log, _ = settle_record(log, 0, 0, DeliveryVerdict.DEAD_LETTER, reason="poison")
    assert list(log.dead_letters) == [(0, 0)]
    assert offset_frontier(log.partitions[0]) == 1


def test_s_kafka_04_a_transient_failure_backs_off_its_partition_only() -> None:
    log = log_with(2)
    log, got = deliver_record(log, 0, "c1", 0)
    assert isinstance(got, RecordDelivered)
    log, _ = settle_record(log, 0, 0, DeliveryVerdict.REDELIVER, now_ms=0, backoff_ms=1000)
    _, waiting = deliver_record(log, 0, "c1", 500)
    assert waiting == BackingOff(0, 1000)
    _, healthy = deliver_record(log, 1, "c1", 500)
    assert healthy == RecordDelivered(1, 0, "m1-0")
    _, again = deliver_record(log, 0, "c1", 1000)
    assert again == RecordDelivered(0, 0, "m0-0")  # redelivered from the failed record


def test_s_kafka_05_a_new_owner_resumes_at_the_committed_offset() -> None:
    log = log_with(3, partitions=1)
    for offset in range(2):
        log, _ = deliver_record(log, 0, "c1", 0)
        log, _ = settle_record(log, 0, offset, DeliveryVerdict.ACK)
    log, _ = commit_offset(log, 0, 1)  # offset 1 done, not committed
    log = assign_partition(log, 0, "c2")
    _, old = deliver_record(log, 0, "c1", 0)
    assert old == NotOwner(0, "c1")
    _, first = deliver_record(log, 0, "c2", 0)
    assert first == RecordDelivered(0, 1, "m0-1")  # done but uncommitted: read again
