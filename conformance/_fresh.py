"""Values handed to a backend as new objects, equal to the harness's but never the same object.

The suites build their values from small pools of literals, and CPython shares literals, small
ints and interned strings: a backend that compares with ``is`` where the contract means equality
(``conversation is not stored``, ``accepted_at is not older_than``) would see the very objects it
stored and pass. A real caller's values come off a wire, decoded afresh each time; ``fresh``
gives the backend that: a deep copy of attrs values, tuples, lists, frozensets, strings, bytes and
ints, rebuilt through their constructors (so an attrs validator still runs). Enum members, None
and booleans are singletons by design and stay themselves. Mutation testing found this blind spot
(docs/sensitivity.md).
"""

from __future__ import annotations

import enum
from typing import Any, TypeVar

import attrs

T = TypeVar("T")


def fresh(value: T) -> T:
    """An equal copy of ``value`` that shares no string, bytes or int object with it (CPython
    still shares the empty and one-character strings and the ints -5..256: it caches those)."""
    return _fresh(value)  # type: ignore[no-any-return]


def _fresh(value: Any) -> Any:
    if value is None or isinstance(value, bool | enum.Enum):
        return value
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "surrogatepass")
    if isinstance(value, int):
        return int(str(value)) if type(value) is int else value
    if isinstance(value, bytes):
        return bytes(bytearray(value))
    if isinstance(value, tuple):
        items = [_fresh(item) for item in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, list):
        return [_fresh(item) for item in value]
    if isinstance(value, frozenset):
        return frozenset(_fresh(item) for item in value)
    if attrs.has(type(value)):
        fields = attrs.fields(type(value))
        if all(field.init for field in fields):
            return type(value)(**{field.alias: _fresh(getattr(value, field.name)) for field in fields})
    return value
