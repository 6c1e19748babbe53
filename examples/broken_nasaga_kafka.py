"""A planted bug behind nasaga's Kafka consumer, for the transport suite to catch (backend role
``planted_bug`` of ``nasaga-kafka``; tests/conformance/test_nasaga_kafka.py).

``skip_unit``: the host's handler answers "duplicate" without running the unit
(``hosts/nasaga/src/kafka.rs``), so nasaga acknowledges, and nafka commits the offset of, a record
whose unit never committed: S-KAFKA-02. nasaga's and nafka's code are untouched.

``trust_old_owner``: the second member that joins the group mid-unit (``kafka_join``, the
rebalance of ``conformance/transport/_nasaga_kafka_rebalance.py``) acknowledges, without running it,
a record of the partition it was handed whose unit the old owner still runs (the host's held
unit), as if that unit were done: the offset moves past a unit that has not committed
(S-KAFKA-02). nasaga's and nafka's code are untouched.
"""

from __future__ import annotations

#: factory -> the rule the suite must name
BROKEN_NASAGA_KAFKA = {"skip_unit": "S-KAFKA-02", "trust_old_owner": "S-KAFKA-02"}


def skip_unit() -> str:
    return "skip_unit"


def trust_old_owner() -> str:
    return "trust_old_owner"


def no_bug() -> str | None:
    """The honest handler (what a replay swaps in to show the bug was the planted one)."""
    return None
