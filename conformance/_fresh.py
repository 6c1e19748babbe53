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
from collections.abc import Callable
from typing import Any, TypeVar

import attrs

T = TypeVar("T")


def fresh(value: T) -> T:
    """An equal copy of ``value`` that shares no string, bytes or int object with it (CPython
    still shares the empty and one-character strings and the ints -5..256: it caches those)."""
    return _fresh(value)  # type: ignore[no-any-return]


Copier = Callable[[Any], Any]

#: The copier of each type met so far: the choice below is made once per type, not per value
#: (a suite copies every argument of every store call, hundreds of thousands of values a run).
_COPIERS: dict[type, Copier] = {}


def _fresh(value: Any) -> Any:
    kind = type(value)
    copier = _COPIERS.get(kind)
    if copier is None:
        copier = _COPIERS[kind] = _copier_for(kind)
    return copier(value)


def _same(value: Any) -> Any:
    return value


def _str(value: str) -> str:
    return value.encode("utf-8", "surrogatepass").decode("utf-8", "surrogatepass")


def _int(value: int) -> int:
    return int(str(value))


def _bytes(value: bytes) -> bytes:
    return bytes(bytearray(value))


def _tuple(value: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple([_fresh(item) for item in value])


def _list(value: list[Any]) -> list[Any]:
    return [_fresh(item) for item in value]


def _frozenset(value: frozenset[Any]) -> frozenset[Any]:
    return frozenset([_fresh(item) for item in value])


def _copier_for(kind: type) -> Copier:
    """How to copy a value of ``kind``: the first that applies of singleton (None, bool, enum
    member), str, int, bytes, tuple (a named tuple rebuilt as its type), list, frozenset, attrs
    class whose fields all go through ``__init__``; anything else is kept."""
    if kind is type(None) or issubclass(kind, bool | enum.Enum):
        return _same
    if issubclass(kind, str):
        return _str
    if issubclass(kind, int):
        return _int if kind is int else _same
    if issubclass(kind, bytes):
        return _bytes
    if issubclass(kind, tuple):
        if hasattr(kind, "_fields"):
            return lambda value: kind(*[_fresh(item) for item in value])
        return _tuple
    if issubclass(kind, list):
        return _list
    if issubclass(kind, frozenset):
        return _frozenset
    if attrs.has(kind):
        fields = attrs.fields(kind)
        if all(field.init for field in fields):
            names = tuple((field.alias, field.name) for field in fields)
            return lambda value: kind(**{alias: _fresh(getattr(value, name)) for alias, name in names})
    return _same
