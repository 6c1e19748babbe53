"""A planted bug behind nasaga's Kafka consumer, for the transport suite to catch (backend role
``planted_bug`` of ``nasaga-kafka``; tests/conformance/test_nasaga_kafka.py).

``skip_unit``: the host's handler answers "duplicate" without running the unit
(``hosts/nasaga/src/kafka.rs``), so nasaga acknowledges, and nafka commits the offset of, a record
whose unit never committed: S-KAFKA-02. nasaga's and nafka's code are untouched.
"""

from __future__ import annotations

#: factory -> the rule the suite must name
BROKEN_NASAGA_KAFKA = {"skip_unit": "S-KAFKA-02"}


def skip_unit() -> str:
    return "skip_unit"


def no_bug() -> str | None:
    """The honest handler (what a replay swaps in to show the bug was the planted one)."""
    return None
