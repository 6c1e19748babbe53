"""The one door a driver exception passes through on its way out of the CQL backend (C-ERR-01).

Every call into cassandra-driver is wrapped so that whatever it raises is turned into a
``MessageStoreError`` here, and only here. The detail text is ours and neutral: no table name, no
CQL, no server message (the original goes to the ``impls.cql`` debug log instead).

Which kind, and why:

* a lightweight transaction (``Operation.CONDITIONAL_WRITE``) whose coordinator timed out in the
  Paxos round (``WriteTimeout``/``WriteFailure`` with write type CAS, the protocol-v5
  ``CAS_WRITE_UNKNOWN`` error) or whose reply the driver gave up waiting for
  (``OperationTimedOut``) may or may not have applied: OUTCOME_UNKNOWN, settled by a SERIAL read;
* every other failure (no host, unavailable replicas, read/write timeouts of plain statements,
  refused or invalid requests, a broken connection) is backend trouble: UNAVAILABLE.
"""

from __future__ import annotations

import enum
import logging

from cassandra import (
    OperationTimedOut,
    WriteFailure,
    WriteTimeout,
    WriteType,
)
from cassandra.protocol import ErrorMessage

from model.commit import CommitKey, MessageStoreError, StoreErrorKind

_log = logging.getLogger("impls.cql")

# Protocol v5 reports an LWT whose Paxos round lost contact half-way with its own error code
# (CAS_WRITE_UNKNOWN); cassandra-driver 3.x has no class for it and hands over the raw message.
CAS_WRITE_UNKNOWN_CODE = 0x1700


class Operation(enum.Enum):
    """What the failed call was; decides whether a timeout leaves the outcome unknown."""

    READ = "read"
    WRITE = "write"  # a plain (unconditional, idempotent) write
    CONDITIONAL_WRITE = "conditional-write"  # a lightweight transaction
    SETUP = "setup"  # connect, schema, prepare


_UNKNOWN = "the conditional write timed out; its outcome is unknown"


def is_unknown_outcome(exc: BaseException, operation: Operation) -> bool:
    """Whether ``exc`` says a lightweight transaction may or may not have applied."""
    if operation is not Operation.CONDITIONAL_WRITE:
        return False
    if isinstance(exc, WriteTimeout | WriteFailure):
        return bool(getattr(exc, "write_type", None) == WriteType.CAS)
    if isinstance(exc, OperationTimedOut):
        return True
    return isinstance(exc, ErrorMessage) and bool(getattr(exc, "code", None) == CAS_WRITE_UNKNOWN_CODE)


def translate(exc: BaseException, operation: Operation, key: CommitKey | None = None) -> MessageStoreError:
    """C-ERR-01: the ``MessageStoreError`` that stands for ``exc``; never the driver's type or text."""
    if isinstance(exc, MessageStoreError):
        return exc
    _log.debug("cassandra %s failed", operation.value, exc_info=exc)
    if is_unknown_outcome(exc, operation):
        return MessageStoreError(StoreErrorKind.OUTCOME_UNKNOWN, _UNKNOWN, key)
    if isinstance(exc, WriteTimeout | WriteFailure):
        # A plain write that timed out may still land: UNAVAILABLE is an uncertain kind.
        return MessageStoreError(StoreErrorKind.UNAVAILABLE, "the database did not confirm a write", key)
    if isinstance(exc, OperationTimedOut):
        return MessageStoreError(StoreErrorKind.UNAVAILABLE, "the database did not answer in time", key)
    if operation is Operation.SETUP:
        return MessageStoreError(StoreErrorKind.UNAVAILABLE, "the database could not be set up", key)
    return MessageStoreError(StoreErrorKind.UNAVAILABLE, "the database is unavailable", key)
