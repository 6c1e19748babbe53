"""Consumer groups on a delivery stream: read, claim, settle, dead-letter, trim (S-STREAM-01..08)."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from model.saga import (
    ENTRY_TRANSITIONS,
    Acknowledged,
    Backlog,
    ClaimIdle,
    DeadLetterRecorded,
    Delivered,
    DeliveryStream,
    DeliveryVerdict,
    LeftPending,
    NoSuchGroup,
    NotPending,
    ReadGroup,
    SettleEntry,
    Trim,
    Trimmed,
    TrimRefused,
    append,
    backlog,
    claim_idle,
    create_group,
    entry_state,
    read_group,
    settle_entry,
    trim,
    trim_frontier,
)


def stream_of(n: int, groups: tuple[str, ...] = ("g",)) -> DeliveryStream:
    stream = DeliveryStream()
    for group in groups:
        stream = create_group(stream, group)
    for i in range(n):
        stream, _ = append(stream, f"m{i + 1}")
    return stream


def read(stream: DeliveryStream, consumer: str, count: int, now: int = 0, group: str = "g") -> DeliveryStream:
    stream, outcome = read_group(stream, ReadGroup(group, consumer, count, now))
    assert isinstance(outcome, Delivered)
    return stream


def test_s_stream_01_reads_deliver_in_order_after_the_last_delivered_id() -> None:
    stream = stream_of(3)
    stream, first = read_group(stream, ReadGroup("g", "c1", 2, 10))
    assert isinstance(first, Delivered)
    assert [(d.entry_id, d.message_id, d.deliveries) for d in first.deliveries] == [
        (1, "m1", 1),
        (2, "m2", 1),
    ]
    group = stream.groups["g"]
    assert group.last_delivered == 2
    assert {k: (p.consumer, p.delivered_ms, p.deliveries) for k, p in group.pending.items()} == {
        1: ("c1", 10, 1),
        2: ("c1", 10, 1),
    }
    stream, second = read_group(stream, ReadGroup("g", "c2", 5, 11))
    assert isinstance(second, Delivered) and [d.entry_id for d in second.deliveries] == [3]
    _, empty = read_group(stream, ReadGroup("g", "c2", 5, 12))
    assert empty == Delivered(())
    assert read_group(stream, ReadGroup("nope", "c1", 1, 0))[1] == NoSuchGroup("nope")


def test_s_stream_02_a_dead_consumer_or_a_redeliver_verdict_leaves_the_entry_pending() -> None:
    stream = read(stream_of(1), "c1", 1)
    kept, outcome = settle_entry(stream, SettleEntry("g", 1, DeliveryVerdict.REDELIVER))
    assert outcome == LeftPending(1) and kept is stream
    # a consumer that dies simply never settles: the entry is still there for a claim
    assert entry_state(stream, "g", 1) == "pending"
    assert backlog(stream, "g") == Backlog(0, 1)


def test_s_stream_03_claims_take_only_idle_entries_and_count_deliveries() -> None:
    stream = read(stream_of(2), "c1", 1, now=0)
    stream = read(stream, "c1", 1, now=50)
    busy, outcome = claim_idle(stream, ClaimIdle("g", "c2", 100, 60))
    assert outcome == Delivered(()) and busy == stream  # c1 is still working on both
    stream, outcome = claim_idle(stream, ClaimIdle("g", "c2", 100, 120))
    assert isinstance(outcome, Delivered) and [(d.entry_id, d.deliveries) for d in outcome.deliveries] == [
        (1, 2)
    ]
    held = stream.groups["g"].pending
    assert (held[1].consumer, held[1].delivered_ms, held[1].deliveries) == ("c2", 120, 2)
    assert held[2].consumer == "c1"
    assert held[1].idle_ms(130) == 10


def test_s_stream_03_an_entry_trimmed_while_pending_is_dropped_not_delivered() -> None:
    stream = read(stream_of(1), "c1", 1)
    stream = DeliveryStream((), stream.last_id, stream.groups)  # removed behind the frontier's back
    stream, outcome = claim_idle(stream, ClaimIdle("g", "c2", 0, 10))
    assert outcome == Delivered(()) and not stream.groups["g"].pending


def test_s_stream_04_only_an_ack_verdict_acknowledges_and_only_in_its_group() -> None:
    stream = read(read(stream_of(1, ("g", "audit")), "c1", 1), "a1", 1, group="audit")
    acked, outcome = settle_entry(stream, SettleEntry("g", 1, DeliveryVerdict.ACK))
    assert outcome == Acknowledged(1)
    assert entry_state(acked, "g", 1) == "acknowledged"
    assert entry_state(acked, "audit", 1) == "pending"
    again, second = settle_entry(acked, SettleEntry("g", 1, DeliveryVerdict.ACK))
    assert second == NotPending(1) and again is acked


def test_s_stream_06_dead_letter_and_acknowledgement_are_one_step_and_happen_once() -> None:
    stream = read(stream_of(1), "c1", 1)
    stream, outcome = settle_entry(stream, SettleEntry("g", 1, DeliveryVerdict.DEAD_LETTER, "bad_signature"))
    assert isinstance(outcome, DeadLetterRecorded)
    assert outcome.letter.message_id == "m1" and outcome.letter.reason == "bad_signature"
    assert not stream.groups["g"].pending
    assert entry_state(stream, "g", 1) == "dead_lettered"
    stream, again = settle_entry(stream, SettleEntry("g", 1, DeliveryVerdict.DEAD_LETTER, "bad_signature"))
    assert again == NotPending(1) and len(stream.dead_letters) == 1


def test_s_stream_07_the_frontier_is_the_minimum_over_groups() -> None:
    stream = stream_of(5, ("fast", "slow"))
    assert trim_frontier(stream) == 1
    stream = read(stream, "c", 5, group="fast")
    for entry_id in (1, 2, 4, 5):
        stream, _ = settle_entry(stream, SettleEntry("fast", entry_id, DeliveryVerdict.ACK))
    stream = read(stream, "s", 2, group="slow")
    stream, _ = settle_entry(stream, SettleEntry("slow", 1, DeliveryVerdict.ACK))
    assert trim_frontier(stream) == 2  # slow still holds 2 pending; fast still holds 3
    refused, outcome = trim(stream, Trim(3))
    assert outcome == TrimRefused(3, 2) and refused is stream
    stream, outcome = trim(stream, Trim(2))
    assert outcome == Trimmed((1,))
    assert [e.entry_id for e in stream.entries] == [2, 3, 4, 5]
    stream, appended = append(stream, "m6")
    assert appended == 6  # ids are never reused
    assert trim_frontier(DeliveryStream()) == 1


def test_s_stream_08_backlog_counts_undelivered_and_pending() -> None:
    stream = read(stream_of(4), "c1", 3)
    stream, _ = settle_entry(stream, SettleEntry("g", 2, DeliveryVerdict.ACK))
    assert backlog(stream, "g") == Backlog(1, 2)
    assert backlog(stream, "g").total == 3
    assert backlog(stream, "x") == NoSuchGroup("x")


GROUPS = ("g1", "g2")


class StreamMachine(RuleBasedStateMachine):
    """Random reads, claims, settles and trims: the frontier never passes a needed entry, every
    move follows ``ENTRY_TRANSITIONS``, and dead letters are never doubled (S-STREAM-01..08)."""

    def __init__(self) -> None:
        super().__init__()
        self.stream = stream_of(0, GROUPS)
        self.now = 0
        self.before: dict[tuple[str, int], str] = {}

    def _remember(self) -> None:
        for group in GROUPS:
            for entry_id in range(1, self.stream.last_id + 1):
                state = entry_state(self.stream, group, entry_id)
                previous = self.before.get((group, entry_id), "undelivered")
                assert state == previous or state in ENTRY_TRANSITIONS[previous], (previous, state)
                self.before[(group, entry_id)] = state

    @rule()
    def append(self) -> None:
        self.stream, _ = append(self.stream, f"m{self.stream.last_id + 1}")
        self._remember()

    @rule(group=st.sampled_from(GROUPS), consumer=st.sampled_from(["c1", "c2"]), count=st.integers(1, 3))
    def read(self, group: str, consumer: str, count: int) -> None:
        self.stream, _ = read_group(self.stream, ReadGroup(group, consumer, count, self.now))
        self._remember()

    @rule(
        group=st.sampled_from(GROUPS), consumer=st.sampled_from(["c1", "c2"]), idle=st.sampled_from([0, 50])
    )
    def claim(self, group: str, consumer: str, idle: int) -> None:
        self.stream, _ = claim_idle(self.stream, ClaimIdle(group, consumer, idle, self.now))
        self._remember()

    @rule(
        group=st.sampled_from(GROUPS), index=st.integers(0, 9), verdict=st.sampled_from(list(DeliveryVerdict))
    )
    def settle(self, group: str, index: int, verdict: DeliveryVerdict) -> None:
        pending = sorted(self.stream.groups[group].pending)
        if pending:
            self.stream, _ = settle_entry(
                self.stream, SettleEntry(group, pending[index % len(pending)], verdict)
            )
        self._remember()

    @rule(ahead=st.integers(0, 2))
    def trim(self, ahead: int) -> None:
        frontier = trim_frontier(self.stream)
        self.stream, outcome = trim(self.stream, Trim(frontier + ahead))
        assert isinstance(outcome, Trimmed) == (ahead == 0)

    @rule(ms=st.integers(1, 60))
    def tick(self, ms: int) -> None:
        self.now += ms

    @invariant()
    def needed_entries_are_kept(self) -> None:
        present = {e.entry_id for e in self.stream.entries}
        for group in self.stream.groups.values():
            needed = set(group.pending) | set(range(group.last_delivered + 1, self.stream.last_id + 1))
            assert needed <= present

    @invariant()
    def dead_letters_are_unique_and_acknowledged(self) -> None:
        keys = [(d.group, d.entry_id) for d in self.stream.dead_letters]
        assert len(keys) == len(set(keys))
        for group, entry_id in keys:
            assert entry_id not in self.stream.groups[group].pending


TestStreamMachine = StreamMachine.TestCase
TestStreamMachine.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)


def test_s_stream_07_random_trims_never_pass_a_needed_entry() -> None:
    """The state machine above, as one named test for the traceability table."""
    TestStreamMachine().runTest()
