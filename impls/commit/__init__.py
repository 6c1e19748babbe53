"""The commit runtime: ``MessageCommitter`` over any ``MessageStore`` and ``Outbox``, and
``CommitRecovery`` that sweeps what no client came back for.

The committer's branches are ``model.commit.next_step``; its fault points are
``model.commit.FaultPoint`` (M-COMMIT-01..06, docs/faults.md), reached through an injected
``FaultHook`` that is ``no_faults`` in production.
"""

from impls.commit._committer import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_RETENTION_MS,
    FaultHook,
    MessageCommitter,
    no_faults,
)
from impls.commit._quota import Quota, SenderQuota
from impls.commit._recovery import CommitRecovery

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_RETENTION_MS",
    "CommitRecovery",
    "FaultHook",
    "MessageCommitter",
    "Quota",
    "SenderQuota",
    "no_faults",
]
