"""The broker killed and restarted under nasaga's Kafka consumer, while a unit runs (machine and
theory of operation: ``_nasaga_kafka.py``).

The fault (``broker-restart``): only where the suite controls the broker — the target's
``broker_control`` (``conformance.crash:kafka_control``, the launcher's pid file and ports, so a
server of another checkout is never touched) — and only in profile ``deep``: a restart costs the
broker's whole start-up (seconds to tens of seconds on a shared machine), which ``make test``'s
``ci`` run does not pay; ``tests/conformance/test_nasaga_kafka_restart.py`` runs it once on a
private broker of its own. Once per run: a saga is published with its first attempt held in the
host's handler (``kafka.rs``), the broker is killed -9 and started again on its data directory,
then the unit is released. What was committed and every acknowledged dead letter must still be
there (S-KAFKA-01: a committed offset never moves backward; S-KAFKA-03: the dead letters are the
planted records, checked at the settle's end); the consumer, which nafka and librdkafka reconnect
on their own, must finish the held record — committed once (S-PART-03), its offset committed
after it (S-KAFKA-02), sampled all the while.
"""

from __future__ import annotations

import time
from typing import Any

import confluent_kafka as ck

from conformance._violations import HarnessEnvironmentError, Violation
from conformance.services import ServiceControlError
from conformance.transport import _faults as f
from conformance.transport._nasaga_kafka_backoff import BackoffRebalance
from conformance.transport._nasaga_kafka_rebalance import HELD_WAIT_S
from conformance.transport._nasaga_kafka_world import GROUP, KEYS, PARTITIONS
from impls.transport import DeadLetterReader, KafkaAdmin, TransportError
from impls.transport._kafka_records import client_config

MAX_BROKER_RESTARTS = 1  # per run
RESTART_PROFILES = ("deep",)
LEADERS_WAIT_S = 60.0  # the restarted broker leads its partitions again within this


class BrokerRestart(BackoffRebalance):
    """``_restart_broker``: the walk's broker restart, where the target lets the suite restart."""

    bootstrap: str
    producer: ck.Producer

    def _restart_applies(self) -> str | None:
        """Why the broker is not restarted in this run, or None."""
        target: Any = self.context.target
        if getattr(target, "broker_control", None) is None:
            return "the broker is not the suite's to restart (no broker_control role)"
        if self.context.profile not in RESTART_PROFILES:
            profiles = "/".join(RESTART_PROFILES)
            return f"a broker restart runs in profile {profiles} only (it costs the broker's start-up)"
        return None

    def _restart_broker(self) -> None:
        restarts = int(self.context.stats.details.get("kafka:broker_restarts", "0"))
        if (
            self._restart_applies() is not None
            or restarts >= MAX_BROKER_RESTARTS
            or not self.context.faults.allows(f.BROKER_RESTART.name)
        ):
            return
        free = [k for k in range(len(KEYS)) if k not in self.keys_started]
        if not free:
            return
        self.context.stats.details["kafka:broker_restarts"] = str(restarts + 1)
        key = free[-1]
        saga = self._saga_of(key)
        self._start(key)
        self._publish(hold=frozenset({saga}), before_settle=lambda: self._bounce(saga))
        self.context.reach("offsets-survived-broker-restart")

    def _bounce(self, saga: str) -> None:
        """The held unit running: the broker killed -9, started again; offsets and dead letters
        compared with what they were; the unit released."""
        self._await_journal(
            lambda: any(e["kind"] == "held" and e["saga"] == saga for e in self.journal), HELD_WAIT_S
        )
        try:
            before = self.admin.committed(GROUP, self.topics.commands, PARTITIONS)
            letters = self._dead_letters()
        except TransportError as exc:
            raise HarnessEnvironmentError(f"the broker did not answer: {exc}") from exc
        self.context.inject(f.BROKER_RESTART.name)
        target: Any = self.context.target
        try:
            service = target.broker_control()
            service.kill()
            service.restart()
        except ServiceControlError as exc:
            raise HarnessEnvironmentError(f"the broker could not be restarted: {exc}") from exc
        self.note(f"broker restarted: committed before {before}")
        # The harness's own clients start again on the restarted broker.
        self.dead.close()
        self.producer.flush(5)
        self.admin = KafkaAdmin(self.bootstrap)
        self.dead = DeadLetterReader(self.bootstrap, self.topics)
        self.producer = ck.Producer(client_config(self.bootstrap, acks="all", **{"linger.ms": 0}))
        after = self._committed_once_led()
        back = {
            p: (before.get(p, 0), after.get(p, 0))
            for p in range(PARTITIONS)
            if after.get(p, 0) < before.get(p, 0)
        }
        if back:
            raise Violation(
                "S-KAFKA-01",
                "a committed offset moved backward over a broker restart",
                {"partitions": repr(back)},
            )
        kept = self._dead_letters()
        if set(letters) - set(kept):
            raise Violation(
                "S-KAFKA-03",
                "an acknowledged dead letter was lost over a broker restart",
                {"lost": repr(sorted(set(letters) - set(kept)))},
            )
        self.runtime.host.call("kafka_release", namespace=self.runtime.ns)

    def _committed_once_led(self) -> dict[int, int]:
        """The group's committed offsets once the restarted broker leads its partitions again: it
        answers its probe before its controller re-elected every leader (``NOT_LEADER_FOR_PARTITION``
        for seconds on a loaded machine), which is no outage yet."""
        deadline = time.monotonic() + LEADERS_WAIT_S
        while True:
            try:
                after = self.admin.committed(GROUP, self.topics.commands, PARTITIONS)
                self.admin.high_watermarks(self.topics.commands, PARTITIONS)
                self.admin.high_watermarks(self.topics.dead_letters, 1)
                return after
            except TransportError as exc:
                if time.monotonic() > deadline:
                    raise HarnessEnvironmentError(f"the restarted broker did not answer: {exc}") from exc
                time.sleep(0.5)
