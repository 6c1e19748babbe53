"""A committer wrong in one way, for ``conformance run --committer`` (docs/backend-authors.md)::

    conformance run --backend memory --suite commit --committer examples.broken_committers:ignores_quota

===============  =========  ==========================================================================
factory          rule       the bug
===============  =========  ==========================================================================
ignores_quota    C-PRE-08   drops the quota it is given: a sender over quota is reserved anyway
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


BROKEN_COMMITTERS = {"ignores_quota": "C-PRE-08"}
