"""A committer wrong in one way, for ``conformance run --committer`` (docs/backend-authors.md)::

    conformance run --backend memory --suite commit --committer examples.broken_committers:ignores_quota

===============  =========  ==========================================================================
factory          rule       the bug
===============  =========  ==========================================================================
ignores_quota    C-PRE-08   drops the quota it is given: a sender over quota is reserved anyway
clamps_config    C-ERR-04   a retention or attempt count below 1 is raised to 1 instead of refused
===============  =========  ==========================================================================

Each factory is called as ``impls.commit.MessageCommitter`` is (store, outbox, membership, clock,
and the keywords). ``BROKEN_COMMITTERS`` maps each to the rule the harness must report.
"""

from __future__ import annotations

from typing import Any

from impls.commit import MessageCommitter


def ignores_quota(*args: Any, **kwargs: Any) -> MessageCommitter:
    """C-PRE-08: admission without the quota check."""
    kwargs.pop("quota", None)
    return MessageCommitter(*args, **kwargs)


def clamps_config(*args: Any, **kwargs: Any) -> MessageCommitter:
    """C-ERR-04: a configuration out of range is quietly made legal instead of refused."""
    for name in ("retention_ms", "max_attempts"):
        if name in kwargs:
            kwargs[name] = max(1, kwargs[name])
    return MessageCommitter(*args, **kwargs)


BROKEN_COMMITTERS = {"ignores_quota": "C-PRE-08", "clamps_config": "C-ERR-04"}
