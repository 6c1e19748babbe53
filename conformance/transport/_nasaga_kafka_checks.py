"""The checks of the transport suite on nasaga's Kafka connector: a settle's samples and its end
(machine and theory of operation: ``_nasaga_kafka.py``)."""

from __future__ import annotations

import time
from typing import Any

import attrs

from conformance._violations import HarnessEnvironmentError, Violation
from conformance.saga._nasaga import NasagaRuntime
from conformance.saga._port import model_participant
from conformance.transport._base import SagaSideRules
from conformance.transport._nasaga_kafka_world import (
    EXHAUSTED,
    GROUP,
    OWNER,
    PARTITION_OF,
    PARTITIONS,
    PLANTED,
    SETTLE_S,
)
from impls.transport import DeadLetterReader, KafkaAdmin, KafkaTopics, TransportError
from model import saga as m

Plan = tuple[str, int]  # (decision, transient failures first)


def _unordered(facts: Any) -> tuple[list[str], list[str]]:
    return sorted(facts.effects), sorted(repr(r) for r in facts.results)


@attrs.frozen
class Sent:
    partition: int
    offset: int
    saga: str
    kind: str  # command | copy | poison | forged
    payload: bytes


class KafkaChecks(SagaSideRules):
    """What a settle samples and holds against the model; the machine owns the world."""

    runtime: NasagaRuntime
    admin: KafkaAdmin
    dead: DeadLetterReader
    topics: KafkaTopics
    part: m.ParticipantState
    sent: dict[tuple[int, int], Sent]
    journal: list[dict[str, Any]]
    done_copies: set[tuple[int, int]]
    killed: list[tuple[int, int]]

    def _drain_journal(self) -> None:
        reply = self.runtime.host.call("kafka_journal", namespace=self.runtime.ns)
        for entry in reply["entries"]:
            self.journal.append({**entry, "epoch": self.runtime.crash.kills})

    # -- settling and checks -----------------------------------------------------------------

    def _sample(self) -> bool:
        """One look at the broker, then at the outcomes; ``True`` once every record is done."""
        committed = self.admin.committed(GROUP, self.topics.commands, PARTITIONS)
        high = self.admin.high_watermarks(self.topics.commands, PARTITIONS)
        self._drain_journal()
        letters = self._dead_letters()
        rows = self.runtime.host.effects(self.runtime.ns, OWNER)
        committed_sagas = {str(r["saga_id"]) for r in rows}
        absorbed = {
            (e["partition"], e["offset"]) for e in self.journal if e["kind"] == "delivered" and e["ok"]
        }
        for p in range(PARTITIONS):
            for o in range(committed.get(p, 0)):
                sent = self.sent.get((p, o))
                if sent is None:
                    raise Violation("S-KAFKA-01", "a record the harness never produced", {"at": repr((p, o))})
                if sent.kind == "command" and sent.saga not in committed_sagas:
                    raise Violation(
                        "S-KAFKA-02",
                        "the offset was committed past a command whose unit never committed",
                        {"partition": p, "offset": o, "committed": committed[p]},
                    )
                if sent.kind == "copy" and (p, o) not in absorbed:
                    raise Violation(
                        "S-KAFKA-02",
                        "the offset was committed past a copy nasaga never absorbed",
                        {"partition": p, "offset": o, "committed": committed[p]},
                    )
                if (sent.kind in PLANTED or sent.kind == "exhausted") and (p, o) not in letters:
                    raise Violation(
                        "S-KAFKA-03",
                        "the offset moved past a record whose dead letter the broker does not hold",
                        {"partition": p, "offset": o, "committed": committed[p]},
                    )
        return all(committed.get(p, 0) == high[p] for p in range(PARTITIONS))

    def _dead_letters(self) -> dict[tuple[int, int], str]:
        high = self.admin.high_watermarks(self.topics.dead_letters, 1)[0]
        out = {}
        for record in self.dead.read(high):
            h = record.headers
            if h.get("X-Nasa-DLT-Origin-Topic", b"").decode() != self.topics.commands:
                raise Violation("S-KAFKA-03", "a dead letter names another source topic", {})
            at = (int(h["X-Nasa-DLT-Origin-Partition"]), int(h["X-Nasa-DLT-Origin-Offset"]))
            out[at] = h.get("X-Nasa-DLT-Reason", b"").decode()
        return out

    def _settle(self, batch: dict[str, Plan]) -> None:
        deadline = time.monotonic() + SETTLE_S
        try:
            while not self._sample():
                if time.monotonic() > deadline:
                    raise Violation(
                        "S-KAFKA-04", "records stayed without an outcome with nothing failing", {}
                    )
                time.sleep(0.05)
        except TransportError as exc:
            raise HarnessEnvironmentError(f"the broker did not answer: {exc}") from exc
        self._end_checks(batch)

    def _end_checks(self, batch: dict[str, Plan]) -> None:
        letters = self._dead_letters()
        planted = {at: s.kind for at, s in self.sent.items() if s.kind in PLANTED or s.kind == "exhausted"}
        if set(letters) != set(planted):
            raise Violation(
                "S-KAFKA-03",
                "the dead letters differ from the planted records",
                {"expected": repr(sorted(planted)), "actual": repr(sorted(letters))},
            )
        for at, how in planted.items():
            reason = letters[at]
            self.note(f"dead letter {at}: {how} -> {reason!r}")
            if (EXHAUSTED if how == "exhausted" else PLANTED[how][1]) not in reason:
                raise Violation(
                    "S-KAFKA-03", "a dead letter carries another reason", {"how": how, "reason": reason}
                )
            self.context.reach(f"dead-letter:{how}")
        copies = [at for at, s in self.sent.items() if s.kind == "copy" and at not in self.done_copies]
        for at in copies:
            self.done_copies.add(at)
            self.context.reach("duplicate-record-absorbed")
        facts = self.runtime.observe_participant(OWNER)
        if len(set(facts.effects)) != len(facts.effects):
            raise Violation("S-PART-03", "an effect took effect twice", {"effects": list(facts.effects)})
        model = self.runtime.project(model_participant(self.part))
        # The two partitions are consumed side by side, so units of different sagas commit in
        # either order (the healthy partition first, when the other backs off): compared as sets.
        if _unordered(facts) != _unordered(model):
            raise Violation(
                "S-PART-01",
                "business facts or result outbox differ from the model",
                {"expected": repr(model)[:1500], "actual": repr(facts)[:1500]},
            )
        self._backoff_check(batch)

    def _backoff_check(self, batch: dict[str, Plan]) -> None:
        """In a batch where a saga failed, each saga of the other partition that did not fail was
        done before the failing one finally was: its partition backed off alone (S-KAFKA-04).
        A record killed at ``kafka_committed`` was redelivered to the fresh host and absorbed."""
        epoch = self.runtime.crash.kills
        done: dict[str, int] = {}  # saga -> when its record was done: committed, or dead-lettered
        for e in self.journal:
            if e["epoch"] == epoch and e["kind"] == "delivered" and (e["ok"] or e["error"] == "dead_letter"):
                done.setdefault(str(e["saga"]), int(e["at_ms"]))
        for at in self.killed:
            if any(
                e["epoch"] == epoch
                and e["kind"] == "delivered"
                and e["ok"]
                and (e["partition"], e["offset"]) == at
                for e in self.journal
            ):
                self.context.reach("redelivery-after-kill-absorbed")
        self.killed = []
        failed = [s for s, (_, n) in batch.items() if n]
        if failed:
            self.context.reach("failed-record-redelivered")
        for slow in failed:
            others = [s for s, (_, n) in batch.items() if not n and PARTITION_OF[s] != PARTITION_OF[slow]]
            if not others:
                continue
            late = [s for s in others if done.get(s, 1 << 62) > done.get(slow, 0)]
            self.note(f"back-off: {slow} done at {done.get(slow)} ms, others {[done.get(s) for s in others]}")
            if late:
                raise Violation(
                    "S-KAFKA-04",
                    "a healthy partition waited for another partition's back-off",
                    {"slow": slow, "late": repr(late)},
                )
            self.context.reach("healthy-partition-moved-during-backoff")
