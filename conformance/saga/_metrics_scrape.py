"""A runtime's metrics exposition read back: prometheus-client's text parser, bucket bounds in one
spelling, creation stamps left out (the S-OBS-* checks in ``_metrics_checks`` compare the result)."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from types import MappingProxyType

import attrs
from prometheus_client.parser import text_string_to_metric_families

from conformance.saga._port import sample_key
from model import saga as m


@attrs.frozen
class Scrape:
    samples: Mapping[str, float]
    series: tuple[m.Series, ...]
    families: tuple[str, ...]


def _without_created(text: str) -> str:
    # Creation stamps are wall-clock times, compared with nothing; not parsing them is a third
    # less work at every quiescence.
    def name(line: str) -> str:
        parts = line.split(" ", 3)
        return parts[2] if line.startswith("#") and len(parts) > 2 else parts[0].split("{")[0]

    return "\n".join(line for line in text.splitlines() if not name(line).endswith("_created")) + "\n"


def canonical_bound(le: str) -> str:
    """A bucket bound in one spelling (``1``, ``1.0`` and ``1e0`` are the same bound): Python's
    ``repr`` of the float, as ``LE`` spells the fixed bounds; unparsable text stays as it is."""
    try:
        bound = float(le)
    except ValueError:
        return le
    return "+Inf" if bound == math.inf else repr(bound)


# Memoised: a quiescence parses the same exposition for the metric checks and again for the facts
# (check_metrics, check_facts), and parsing is a tenth of a memory/saga run's time. Safe: the
# result is a function of the text alone, and read-only (the samples a MappingProxyType).
@functools.lru_cache(maxsize=8)
def parse(text: str) -> Scrape:
    """The text exposition through prometheus-client's parser; ``_created`` stamps left out."""
    samples: dict[str, float] = {}
    series: list[m.Series] = []
    families: list[str] = []
    for family in text_string_to_metric_families(_without_created(text)):
        if family.name.endswith("_created"):
            continue
        families.append(family.name)
        for s in family.samples:
            if s.name.endswith("_created"):
                continue
            labels = dict(s.labels)
            if "le" in labels:
                labels["le"] = canonical_bound(labels["le"])
            series.append(m.Series(family.name, s.name, labels))
            samples[sample_key(s.name, labels)] = s.value
    return Scrape(MappingProxyType(samples), tuple(series), tuple(families))
