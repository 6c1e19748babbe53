"""The two error boundaries of the contract, as closed sets of kinds.

The model *returns* these as outcome values; implementations *raise* them. One type serves both,
so the harness compares a model outcome and a backend outcome by ``kind`` directly.
Whose fault it was is part of the kind: caller errors, conflicts, evidence gaps, backend trouble.
"""

from __future__ import annotations

import enum

import attrs

from model.commit._values import CommitKey


def _describe(kind: str, detail: str, key: CommitKey | None) -> str:
    where = f" [{key.tenant}/{key.sender}/{key.client_message_id}]" if key else ""
    return f"{kind}{where}: {detail}" if detail else f"{kind}{where}"


class StoreErrorKind(enum.Enum):
    """Every way a ``MessageStore`` call may fail (C-ERR-01)."""

    INVALID_ARGUMENT = "invalid-argument"  # caller sent a malformed value; nothing changed
    IDENTITY_CONFLICT = "identity-conflict"  # same key, different canonical request (C-PRE-03)
    INTENT_MISMATCH = "intent-mismatch"  # the intent is not the one reserved under its key
    NOT_FOUND = "not-found"  # no commit under that key
    MISSING_EVIDENCE = "missing-evidence"  # transition needs record/publication evidence
    PUBLICATION_MISMATCH = "publication-mismatch"  # a different publication is already durable
    NOT_A_MEMBER = "not-a-member"  # history actor fails conversation authorization
    UNAVAILABLE = "unavailable"  # backend unreachable or failed; the call may or may not apply
    OUTCOME_UNKNOWN = "outcome-unknown"  # a conditional write timed out; re-read to settle
    CORRUPT = "corrupt"  # stored data cannot be decoded

    @property
    def is_uncertain(self) -> bool:
        """Whether a write that failed this way may still have applied (re-read to settle)."""
        return self in (StoreErrorKind.UNAVAILABLE, StoreErrorKind.OUTCOME_UNKNOWN)


@attrs.define(frozen=True, auto_exc=True)
class MessageStoreError(Exception):
    """The only error that crosses the store boundary (C-ERR-01).

    ``detail`` is ours to write: never a backend's exception text, key, table or script.
    """

    kind: StoreErrorKind
    detail: str = ""
    key: CommitKey | None = None

    def __str__(self) -> str:
        return _describe(self.kind.value, self.detail, self.key)


class CommitErrorKind(enum.Enum):
    """Every way ``MessageCommitter`` may fail (C-ERR-02)."""

    INVALID_CLIENT_MESSAGE_ID = "invalid-client-message-id"  # C-PRE-01
    INVALID_REQUEST = "invalid-request"  # content, mentions or ids out of contract
    NOT_A_MEMBER = "not-a-member"  # sender admission refused
    QUOTA_EXCEEDED = "quota-exceeded"
    CONFLICT = "conflict"  # same (tenant, sender, cmid), different request (C-PRE-03)
    NOT_FOUND = "not-found"  # resume of a key that was never reserved
    RECOVERABLE = "recoverable"  # continue later with the same key; never a fake ACK (C-ERR-03)
    UNAVAILABLE = "unavailable"  # readiness: a production dependency did not answer


@attrs.define(frozen=True, auto_exc=True)
class CommitError(Exception):
    """The only error that crosses the commit boundary (C-ERR-02)."""

    kind: CommitErrorKind
    detail: str = ""
    key: CommitKey | None = None

    @classmethod
    def recoverable(cls, key: CommitKey, detail: str = "") -> CommitError:
        return cls(CommitErrorKind.RECOVERABLE, detail, key)

    def __str__(self) -> str:
        return _describe(self.kind.value, self.detail, self.key)
