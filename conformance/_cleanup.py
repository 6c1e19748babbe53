"""Namespaces of examples: dropped when an example passes, the failing one kept, the rest cleaned.

Theory of operation
-------------------
Isolation between examples is by namespace, never by flushing or truncating, so every example used
to leave its keys and rows behind (about 4,500 Redis keys, 19,000 SQL rows per engine and 4,000 CQL
rows per run). Backends that own namespaces offer an optional drop operation
(``impls.api.NamespaceOwner`` for stores and outboxes, ``impls.saga.NamespacedSagaBackend`` for saga
backends); a backend without one is left alone.

* An example that passes drops what it opened at the end of ``teardown``, before ``close``, on the
  objects it already has (``Namespaces.passed``).
* An example that fails keeps its namespaces: during shrinking many examples fail, and only the
  last one is the counterexample of the failure file. At the end of the suite (``settle``) the
  earlier failing ones are opened again, from the factory and arguments recorded by
  ``conformance._opened``, and dropped; the last one's namespaces are kept and listed in the report,
  so the state the violation left can be inspected on the server.
* ``conformance clean`` (``clean_backend``) removes whatever is left (a run killed with SIGKILL, the
  kept namespaces of old failures): it lists the namespaces present with the backend's own listing
  and drops the harness's, those older than a cut-off, so runs in progress keep theirs.

A drop that fails (an outage) is counted, never raised: leftovers are for ``conformance clean``, and
cleaning up must never turn into a verdict.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import attrs

from conformance._opened import Opened
from impls.api import NamespaceOwner

T = TypeVar("T")
Runner = Callable[[Awaitable[Any]], Any]

#: ``rtt`` + the creation time in seconds (6 base-36 digits) + 6 hex digits of the run + the pid and a
#: counter (``RunContext.new_namespace``); saga examples add a suffix per backend ("o", an owner).
_HARNESS_NAMESPACE = re.compile(r"rtt([0-9a-z]{6})[0-9a-f]{6}[0-9]{5}x[0-9]+")
#: What the harness made before namespaces carried their time: no age, dropped only when asked.
_LEGACY_NAMESPACE = re.compile(r"rt[0-9a-f]{10}[0-9]{5}x[0-9]+")
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def namespace_stamp(now: float | None = None) -> str:
    """``t`` and six base-36 digits of the time in seconds: what ``clean`` reads a namespace's age from."""
    seconds = int(time.time() if now is None else now)
    digits = ""
    for _ in range(6):
        seconds, digit = divmod(seconds, 36)
        digits = _DIGITS[digit] + digits
    return "t" + digits


def namespace_age_s(namespace: str, now: float | None = None, *, legacy: bool = False) -> float | None:
    """How old a harness namespace is (from its stamp); ``inf`` for a legacy one when ``legacy``;
    None for a name the harness did not make."""
    match = _HARNESS_NAMESPACE.match(namespace)
    if match is None:
        return float("inf") if legacy and _LEGACY_NAMESPACE.match(namespace) else None
    return (time.time() if now is None else now) - int(match.group(1), 36)


def offers_drop(value: object) -> bool:
    if isinstance(value, NamespaceOwner):
        return True
    # Imported here: the saga runtime package is not needed by the commit suites.
    from impls.saga import NamespacedSagaBackend

    return isinstance(value, NamespacedSagaBackend)


def drop(opened: Opened, run: Runner) -> bool:
    """Drop ``opened.value``'s namespace; False if it offers no drop or the drop failed."""
    if not offers_drop(opened.value):
        return False
    try:
        _settle(opened.value.drop_namespace(), run)
    except Exception:
        return False
    return True


def reopen_and_drop(opened: Opened, run: Runner) -> bool:
    """Open ``opened``'s namespace again with its factory and arguments, drop it, close it."""
    try:
        value = _settle(opened.factory(*opened.args, **opened.kwargs), run)
    except Exception:
        return False
    try:
        return drop(Opened(opened.factory, opened.args, value, opened.kwargs), run)
    finally:
        with contextlib.suppress(Exception):
            _settle(value.close(), run)


def _settle(result: Any, run: Runner) -> Any:
    return run(result) if inspect.isawaitable(result) else result


def namespace_of(opened: Opened) -> str | None:
    """The namespace an object was opened on: every factory takes it first."""
    return str(opened.args[0]) if opened.args else None


@attrs.define
class Namespaces:
    """What one (backend, suite) run did with its examples' namespaces."""

    dropped: int = 0
    failed_drops: int = 0
    #: The opened objects of each failing example, oldest first; the last is the counterexample.
    failing: list[list[Opened]] = attrs.field(factory=list)
    kept: tuple[str, ...] = ()

    def passed(self, opened: Sequence[Opened], run: Runner) -> None:
        for item in opened:
            if offers_drop(item.value):
                if drop(item, run):
                    self.dropped += 1
                else:
                    self.failed_drops += 1

    def failed(self, opened: Sequence[Opened]) -> None:
        if any(offers_drop(item.value) for item in opened):
            self.failing.append(list(opened))

    def settle(self, *, keep_last: bool) -> None:
        """At the end of a run: drop every failing example's namespaces but (``keep_last``) the last."""
        done = self.failing[:-1] if keep_last else self.failing
        kept = self.failing[-1] if keep_last and self.failing else []
        if done:
            loop = asyncio.new_event_loop()
            try:
                for example in done:
                    for item in example:
                        if offers_drop(item.value):
                            if reopen_and_drop(item, loop.run_until_complete):
                                self.dropped += 1
                            else:
                                self.failed_drops += 1
            finally:
                loop.close()
        self.failing = [kept] if kept else []
        self.kept = tuple(dict.fromkeys(ns for item in kept if (ns := namespace_of(item)) is not None))


@attrs.frozen
class CleanResult:
    backend: str
    found: int  # harness namespaces present
    dropped: tuple[str, ...]
    skipped_young: int  # younger than the cut-off: maybe a run in progress
    failed: tuple[str, ...]


def clean_backend(
    name: str,
    factories: Sequence[tuple[Callable[..., Any], Callable[[str], tuple[Any, ...]]]],
    older_than_s: float,
    *,
    legacy: bool = False,
) -> CleanResult:
    """Drop the harness namespaces older than ``older_than_s`` that ``factories`` can reach.

    Each factory comes with a function giving its arguments for a namespace. The first object
    opened (on a throwaway namespace) lists what is present; each old harness namespace is then
    opened with every factory and dropped."""
    loop = asyncio.new_event_loop()
    try:
        present: set[str] = set()
        for factory, arguments in factories:
            probe = _settle(factory(*arguments(f"rtclean{namespace_stamp()}")), loop.run_until_complete)
            try:
                if offers_drop(probe):
                    present.update(_settle(probe.namespaces(), loop.run_until_complete))
                    _settle(probe.drop_namespace(), loop.run_until_complete)  # opening may write
            finally:
                with contextlib.suppress(Exception):
                    _settle(probe.close(), loop.run_until_complete)
        ours = {ns: age for ns in present if (age := namespace_age_s(ns, legacy=legacy)) is not None}
        old = sorted(ns for ns, age in ours.items() if age >= older_than_s)
        dropped: list[str] = []
        failed: list[str] = []
        for namespace in old:
            ok = True
            for factory, arguments in factories:
                opened = Opened(factory, arguments(namespace), None)
                ok = reopen_and_drop(opened, loop.run_until_complete) and ok
            (dropped if ok else failed).append(namespace)
        return CleanResult(name, len(ours), tuple(dropped), len(ours) - len(old), tuple(failed))
    finally:
        loop.close()
