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

A drop that fails (an outage) is counted, never raised: leftovers are for ``conformance clean``.
Every backend call here is under the watchdog (``conformance._outage``): a passing example's, so a
server frozen at its end ends the run as an outage; ``settle``'s, whose first late call ends the drops.
A drop that *reports success* is a promise, though (issue 19 item 7: flat growth, ``conformance
clean``), and is judged (C-POST-12 for stores and outboxes, S-TX-04 for saga backends): after the
drops of a passing example, each dropped object's namespace is opened again with its factory and
arguments and read back (``CleanupJudge.leftovers``: nothing of the example may remain), and on
every passing example until one listing reached its verdict, and every ``LISTING_EVERY``-th
after that, the listing is judged too: it
names the example's namespace while that holds data, names nothing that is not a string, and no
longer names it once dropped. Those examples drop through the reopened object rather than their
own (the path ``settle`` and ``conformance clean`` take; a Redis client that wrote nothing SCANs
the prefix), then through their own. An error out of a drop or a read-back that is the port's own
(``CleanupJudge.environment``: ``MessageStoreError``, ``SagaBackendError``) is an outage, no
verdict; any other exception out of a store's drop breaks the port's "errors leave as
``MessageStoreError``" (``CleanupJudge.foreign_error_rule``: C-ERR-01). Nothing here draws from
Hypothesis: the choice sequences of a run are those it had without the check.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import inspect
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

import attrs

from conformance._opened import Opened
from conformance._outage import BackendLost, bounded
from conformance._violations import Violation
from impls.api import NamespaceOwner

T = TypeVar("T")
Runner = Callable[[Awaitable[Any]], Any]

#: ``rtt`` + the creation time in seconds (6 base-36 digits) + 6 hex digits of the run + the pid and a
#: counter (``RunContext.new_namespace``); saga examples add a suffix per backend ("o", an owner).
_HARNESS_NAMESPACE = re.compile(r"rtt([0-9a-z]{6})[0-9a-f]{6}[0-9]{5}x[0-9]+")
#: What the harness made before namespaces carried their time: no age, dropped only when asked.
_LEGACY_NAMESPACE = re.compile(r"rt[0-9a-f]{10}[0-9]{5}x[0-9]+")
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


class _Dropped(enum.Enum):
    DROPPED = "every drop reported success"


_DROPPED = _Dropped.DROPPED

#: The listing is judged on the first passing example and every this many after it: on Redis it is
#: a SCAN of the whole keyspace, too dear for every example (C-POST-12, S-TX-04).
LISTING_EVERY = 8


class CleanupJudge(Protocol):
    """What a suite's machine tells ``Namespaces.passed`` to judge a drop by (C-POST-12, S-TX-04)."""

    #: The rule a drop that reports success but leaves data, or a wrong listing, breaks.
    cleanup_rule: str
    #: The rule an exception of a foreign type out of a drop breaks (None: not judged).
    foreign_error_rule: str | None
    #: The port's own error types: a drop or read-back failing with one is an outage, no verdict.
    environment: tuple[type[BaseException], ...]

    def leftovers(self, reopened: object) -> str | None:
        """What an object opened again on a dropped namespace still reads (None: nothing)."""

    #: Whether a listing after the drop may still name the namespace (False: judged, it may not).
    lists_dropped: bool
    #: Whether a listing may be empty while the namespace holds data (storage of the object's own).
    may_list_nothing: bool

    def reached(self, target: str) -> None:
        """Note a coverage target (``namespace-read-back``, ``namespace-listing-judged``)."""

    def holds_data(self, live: object) -> bool:
        """The example's namespace holds data (so a listing that names any namespace names it);
        ``live`` is the example's own object, before its drop."""


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
    #: Passing examples judged (C-POST-12, S-TX-04), and those of them whose listing was judged.
    passes: int = 0
    listings_checked: int = 0
    #: Listings that reached their verdict (the live namespace listed, then not once dropped).
    listings_judged: int = 0
    #: The opened objects of each failing example, oldest first; the last is the counterexample.
    failing: list[list[Opened]] = attrs.field(factory=list)
    kept: tuple[str, ...] = ()

    def passed(
        self, opened: Sequence[Opened], run: Runner, judge: CleanupJudge | None = None
    ) -> Violation | None:
        """Drop a passing example's namespaces; with ``judge``, read them back (see the module)."""
        owners = [item for item in opened if offers_drop(item.value)]
        if judge is None or not owners:
            self._drop_own(owners, run, None)
            return None
        self.passes += 1
        # Until one listing reached its verdict, every passing example tries: on Redis about half
        # the tries end early (nothing stored, a drop that failed), and with 8-example strides
        # redis/store missed the verdict with a predicted 8.0e-3 per random-seed run.
        listed = not self.listings_judged or (self.passes - 1) % LISTING_EVERY == 0
        try:
            if listed:
                self.listings_checked += 1
                return self._listed_drop(owners, run, judge)
            left = self._drop_own(owners, run, judge)
            if left is not _DROPPED:
                return left
            return self._read_back(owners, run, judge)
        except judge.environment:
            return None  # an outage in the read-back: no verdict (the drops were counted)

    def _drop_own(
        self, owners: Sequence[Opened], run: Runner, judge: CleanupJudge | None
    ) -> Violation | _Dropped | None:
        """Each owner's own drop: a foreign exception's violation; None when a drop failed (an
        outage, or a fault the program left armed in the seam: no verdict, so what it left is
        not judged either); ``_DROPPED`` when every drop reported success."""
        every = True
        for item in owners:
            try:
                _settle(item.value.drop_namespace(), run)
            except Exception as error:
                self.failed_drops += 1
                every = False
                foreign = judge is not None and judge.foreign_error_rule is not None
                if foreign and judge is not None and not isinstance(error, judge.environment):
                    return _foreign(judge, item, error)
            else:
                self.dropped += 1
        return _DROPPED if every else None

    def _read_back(self, owners: Sequence[Opened], run: Runner, judge: CleanupJudge) -> Violation | None:
        """Each owner's namespace opened again with its factory: it must read as empty."""
        for item in owners:
            found = _reopened(item, run, judge.leftovers)
            if found is not None:
                return Violation(
                    judge.cleanup_rule,
                    "the drop reported success, but the namespace still holds data when opened again",
                    {"namespace": namespace_of(item), "object": _type_name(item.value), "left": found},
                )
        judge.reached("namespace-read-back")
        return None

    def _listed_drop(self, owners: Sequence[Opened], run: Runner, judge: CleanupJudge) -> Violation | None:
        """The listing names the live namespace; the drop through a reopened object (``clean``'s path)
        leaves nothing; the example's own objects drop too; the listing no longer names it."""
        first = owners[0]
        namespace = namespace_of(first)
        if judge.holds_data(first.value):
            listed = _listing(first, run, judge)
            wrong = _wrong_listing(listed, namespace, live=True, may_list_nothing=judge.may_list_nothing)
            if wrong is not None:
                return Violation(
                    judge.cleanup_rule, wrong, {"namespace": namespace, "object": _type_name(first.value)}
                )
        for item in owners:
            try:
                value = _settle(item.factory(*item.args, **item.kwargs), run)
            except judge.environment:
                continue
            # Closed only after the read-back: closing the memory saga backend forgets its namespace.
            try:
                try:
                    _settle(value.drop_namespace(), run)
                except Exception as error:
                    self.failed_drops += 1
                    if judge.foreign_error_rule is not None and not isinstance(error, judge.environment):
                        return _foreign(judge, item, error)
                    continue
                found = _reopened(item, run, judge.leftovers)
            finally:
                with contextlib.suppress(Exception):
                    _settle(value.close(), run)
            if found is not None:
                return Violation(
                    judge.cleanup_rule,
                    "a drop through the namespace opened again reported success, but it still holds data",
                    {"namespace": namespace_of(item), "object": _type_name(item.value), "left": found},
                )
        left = self._drop_own(owners, run, judge)
        if left is not _DROPPED:
            return left  # a foreign exception's violation, or a failed drop: nothing more judged
        if judge.lists_dropped:
            return None
        wrong = _wrong_listing(_listing(first, run, judge), namespace, live=False)
        if wrong is not None:
            return Violation(
                judge.cleanup_rule, wrong, {"namespace": namespace, "object": _type_name(first.value)}
            )
        judge.reached("namespace-read-back")
        judge.reached("namespace-listing-judged")
        self.listings_judged += 1
        return None

    def failed(self, opened: Sequence[Opened]) -> None:
        if any(offers_drop(item.value) for item in opened):
            self.failing.append(list(opened))

    def settle(self, *, keep_last: bool) -> None:
        """At the end of a run: drop every failing example's namespaces but (``keep_last``) the last."""
        done = self.failing[:-1] if keep_last else self.failing
        kept = self.failing[-1] if keep_last and self.failing else []
        if done:
            loop = asyncio.new_event_loop()

            def run(coro: Awaitable[T]) -> T:
                return loop.run_until_complete(bounded("a failing example's namespace drop", coro))

            owners = [item for example in done for item in example if offers_drop(item.value)]
            try:
                for index, item in enumerate(owners):
                    try:
                        dropped = reopen_and_drop(item, run)
                    except BackendLost:  # the server stopped answering: the rest is `conformance clean`'s
                        self.failed_drops += len(owners) - index
                        break
                    if dropped:
                        self.dropped += 1
                    else:
                        self.failed_drops += 1
            finally:
                loop.close()
        self.failing = [kept] if kept else []
        self.kept = tuple(dict.fromkeys(ns for item in kept if (ns := namespace_of(item)) is not None))


def _reopened(item: Opened, run: Runner, leftovers: Callable[[object], str | None]) -> str | None:
    """What ``item``'s namespace, opened again with its factory and arguments, still reads."""
    value = _settle(item.factory(*item.args, **item.kwargs), run)
    try:
        return leftovers(value)
    finally:
        with contextlib.suppress(Exception):
            _settle(value.close(), run)


def _listing(item: Opened, run: Runner, judge: CleanupJudge) -> object:
    """``item``'s listing; an exception of a foreign type is what it lists (a wrong listing)."""
    try:
        return _settle(item.value.namespaces(), run)
    except judge.environment:
        raise
    except Exception as error:
        return error


def _wrong_listing(
    names: object, namespace: str | None, *, live: bool, may_list_nothing: bool = False
) -> str | None:
    """What is wrong with a listing (None: nothing): a name that is no string, the live namespace
    missing (``may_list_nothing``: a backend whose storage is its own may list nothing at all),
    or (``live`` False) the dropped one still named."""
    if isinstance(names, Exception):
        return f"the namespace listing raised {type(names).__name__}"
    listed = list(names) if isinstance(names, (list, tuple)) else None
    if listed is None or any(not isinstance(name, str) for name in listed):
        return f"the namespace listing is not a list of names: {names!r:.200}"
    if live and (listed or not may_list_nothing) and namespace not in listed:
        return f"the namespace listing omits the example's namespace, which holds data ({len(listed)} listed)"
    if not live and namespace in listed:
        return "the namespace listing still names the example's namespace after its drop reported success"
    return None


def _foreign(judge: CleanupJudge, item: Opened, error: Exception) -> Violation:
    rule = judge.foreign_error_rule or judge.cleanup_rule
    return Violation(
        rule,
        f"drop_namespace raised {type(error).__name__}, not the port's error",
        {"namespace": namespace_of(item), "object": _type_name(item.value), "at": "drop_namespace"},
    )


def _type_name(value: object) -> str:
    return f"{type(value).__module__}.{type(value).__qualname__}"


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
