"""One atomic unit of work: begin, body, COMMIT under the harness's fate, and the report.

The body returns ``Keep(outcome)`` to commit its writes or ``Discard(outcome)`` for a refusal
that wrote nothing. The COMMIT is where the contract's fates live (S-TX-01, S-TX-02): a
failure before COMMIT is a definite ``RolledBack``; once COMMIT was sent, only the committed
outcome or ``OutcomeUnknown`` may be reported, never a made-up rollback.

``FateHook`` is the seam the harness uses to decide a named unit's COMMIT (a no-op in
production, like the commit side's fault points): ``ROLLED_BACK`` fails just before COMMIT,
``UNKNOWN_APPLIED``/``UNKNOWN_NOT_APPLIED`` commit or roll back and then lose the answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Generic, TypeVar

import attrs

from model.saga import CommitFate, OutcomeUnknown, RolledBack

from ._backend import SagaBackend, SagaBackendError, SagaBackendErrorKind, SagaTransaction

O = TypeVar("O")  # noqa: E741 - "outcome"

#: Decides the fate of the named unit's COMMIT; production passes none.
FateHook = Callable[[str], CommitFate]


def always_commit(_unit: str) -> CommitFate:
    return CommitFate.COMMITTED


@attrs.frozen
class Keep(Generic[O]):
    """The body's writes stand: the unit sends COMMIT and reports ``outcome`` under its fate."""

    outcome: O


@attrs.frozen
class Discard(Generic[O]):
    """A refusal that wrote nothing: the unit rolls back and reports ``outcome`` as it is."""

    outcome: O


class Conflict(Exception):
    """A guarded write lost a race the body's reads did not foresee: roll back, redeliver."""


#: How many times a unit runs when the database itself rolls it back (a serialization failure,
#: a deadlock, a lock timeout). A rollback the harness injects through the fate is never retried.
MAX_ATTEMPTS = 3


#: How many times a read runs when the database refuses it. A read applies nothing, so it may run
#: more often than a unit: a wide read (every table of a namespace) beside other sessions' writes
#: met three refusals in a row on PostgreSQL (SSI picks read-only transactions as victims too).
READ_ATTEMPTS = 10
#: The pause before a read's second attempt, doubling before each next one (about 1 s in all over
#: ``READ_ATTEMPTS``): two runs side by side on one PostgreSQL refused a read ten times in a row
#: when it ran again at once (the other session's unit was still the pivot of the conflict).
READ_BACKOFF_S = 0.002


class _DatabaseRolledBack(Exception):
    """The database refused this attempt with a definite rollback: the unit may run again."""


def run_unit(
    backend: SagaBackend,
    unit: str,
    body: Callable[[SagaTransaction], Keep[O] | Discard[O]],
    fates: FateHook = always_commit,
    timed: Callable[[], AbstractContextManager[None]] = nullcontext,
) -> O | RolledBack | OutcomeUnknown:
    """Run ``body`` as one transaction, again (bounded) when the database rolled it back.

    A retry is safe because nothing of a rolled-back attempt is durable and the body reads
    everything it decides on inside its own transaction (S-TX-01). ``timed`` is opened around
    each attempt, so a stage histogram sees failed and retried attempts too (S-OBS-02).
    """
    decided: dict[str, CommitFate] = {}

    def fate(name: str) -> CommitFate:
        # The unit's COMMIT has one fate: an attempt the database refused never reached it, so
        # the attempt run again meets the same one (decided on the first that gets there).
        if name not in decided:
            decided[name] = fates(name)
        return decided[name]

    for _ in range(MAX_ATTEMPTS):
        try:
            with timed():
                return _attempt(backend, unit, body, fate)
        except _DatabaseRolledBack:
            continue
    return RolledBack()


def _attempt(
    backend: SagaBackend,
    unit: str,
    body: Callable[[SagaTransaction], Keep[O] | Discard[O]],
    fates: FateHook,
) -> O | RolledBack | OutcomeUnknown:
    try:
        tx = backend.begin()
    except SagaBackendError:
        return RolledBack()
    try:
        decided = body(tx)
    except SagaBackendError as exc:
        tx.rollback()
        if exc.kind is SagaBackendErrorKind.ROLLED_BACK:
            raise _DatabaseRolledBack from exc
        return RolledBack()
    except Conflict:
        tx.rollback()
        return RolledBack()
    except BaseException:
        tx.rollback()
        raise
    if isinstance(decided, Discard):
        tx.rollback()
        return decided.outcome
    fate = fates(unit)
    if fate is CommitFate.ROLLED_BACK:
        tx.rollback()
        return RolledBack()
    if fate is CommitFate.UNKNOWN_NOT_APPLIED:
        tx.rollback()
        return OutcomeUnknown()
    try:
        tx.commit()
    except SagaBackendError as exc:
        tx.rollback()
        if exc.kind is SagaBackendErrorKind.OUTCOME_UNKNOWN:
            return OutcomeUnknown()
        if exc.kind is SagaBackendErrorKind.ROLLED_BACK:
            raise _DatabaseRolledBack from exc
        return RolledBack()
    if fate is CommitFate.UNKNOWN_APPLIED:
        return OutcomeUnknown()
    return decided.outcome


def read_only(backend: SagaBackend, body: Callable[[SagaTransaction], O]) -> O:
    """A read transaction, run again (bounded, ``READ_ATTEMPTS``) when the database refused it with
    a definite rollback: a read applies nothing, so running it again is always safe (S-TX-01;
    PostgreSQL's SSI may pick a read of another session's rows as its victim). Any other failure,
    and the last refusal, raises ``SagaBackendError`` (queries have no fate to report). A refused
    BEGIN is a refusal too: nothing had started. The attempts back off (``READ_BACKOFF_S``,
    doubling), so a contended read waits for the writer it conflicts with to finish."""
    attempt = 1
    while True:
        try:
            tx = backend.begin()
            try:
                return body(tx)
            finally:
                tx.rollback()
        except SagaBackendError as exc:
            if exc.kind is not SagaBackendErrorKind.ROLLED_BACK or attempt >= READ_ATTEMPTS:
                raise
        time.sleep(READ_BACKOFF_S * 2 ** (attempt - 1))
        attempt += 1
