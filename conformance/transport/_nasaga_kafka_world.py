"""What the transport suite on nasaga's Kafka connector shares: names, partitions, planted records,
what it cannot be put through (machine: ``_nasaga_kafka.py``; target: ``_nasaga_kafka_target.py``)."""

from __future__ import annotations

from conformance.saga import _world as w
from conformance.transport import _faults as f
from model import saga as m

GROUP, OWNER, STEP = "work", "p0", "reserve"
PARTITIONS = 2
#: The world's business keys; a saga's command goes to partition ``index % 2`` (the harness names
#: the partition, so a batch can put a failing saga beside a healthy one on purpose).
#: Keys beyond the world's, so every part of the walk has its own: one per partition for the
#: rebalance (``_nasaga_kafka_rebalance.py``), one for the broker restart (``_nasaga_kafka_restart.py``).
EXTRA_KEYS = ("r1", "r2", "r3", "r4")
KEYS = (*w.BUSINESS_KEYS, *w.UPLOAD_KEYS, *EXTRA_KEYS)
PARTITION_OF = {
    m.saga_id_for(w.KEY.tenant, w.KEY.workflow, key): index % PARTITIONS for index, key in enumerate(KEYS)
}
BACKOFF_MS = 400  # nafka's consume_retry_backoff_ms: the pause of a partition after a failure
#: The back-off of an example that may walk a back-off across a rebalance: it must outlast c2's
#: join (c1 revoked up to 0.6 s after the join began, seen); at 400 ms the revoke came, in most
#: tries, just as the back-off ended (``_nasaga_kafka_backoff.py``). Only there: every back-off
#: of the example costs it.
LONG_BACKOFF_MS = 1000
#: The members' heartbeat interval: under librdkafka's classic protocol a member hears of a
#: rebalance in a heartbeat's answer; at 1000 ms c1's revoke came up to a second after c2's join
#: began, past a back-off (``_nasaga_kafka_backoff.py``).
HEARTBEAT_MS = 100
SETTLE_S = 30.0  # every record has its outcome within this once nothing more fails
EVENT_HEADER = "X-Nasa-Event"  # nafka's routing header; nasaga's command event type is its value
COMMAND_EVENT = b"saga.command"
#: how -> (fault kind, nasaga's dead-letter reason as nafka's DLT header carries it)
PLANTED = {
    # nafka's own reason (its decoder's text: "payload codec 失败: JSON 解码失败 ...")
    "poison": (f.POISON, "payload codec"),
    "forged": (f.FORGED_ENVELOPE, "saga_command_identity_invalid"),
}
DECISIONS = {"succeed": m.Decision.SUCCEED, "reject": m.Decision.REJECT}
#: nasaga's ``CommandDeliveryPolicy.max_retries`` on the consumer: its ``retry_attempt`` counts the
#: ordinary failures from 1 and a failure past ``max_retries`` is dead-lettered, so the model's
#: ``transient_failure_budget`` (dead-lettered at the budget-th failure) is one more.
MAX_RETRIES = 2
FAILURE_BUDGET = MAX_RETRIES + 1
EXHAUSTED = "saga_command_retry_exhausted"  # nasaga's reason for a spent budget
#: Fault kinds of the suite nasaga's Kafka connector cannot be put through, and why.
NASAGA_KAFKA_LACKS = {
    f.KEY_ROTATED.name: "nasaga's Kafka records carry no signature: the topic's owner is the producer",
    f.UNSIGNED_ENVELOPE.name: "nasaga's Kafka records carry no signature: the topic's owner is the producer",
    f.OLD_KEY_ENVELOPE.name: "nasaga's Kafka records carry no signature: the topic's owner is the producer",
}
