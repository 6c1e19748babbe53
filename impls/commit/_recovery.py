"""CommitRecovery: the sweeper that finishes commits whose client never came back (C-POST-02).

It owns no commit logic: it asks the committer to ``recover_due``, which scans the store's recovery
candidates and runs the same ``resume`` a retrying client would (C-POST-09). Recovery never reads
current membership or a payload; everything it needs is in the stored intent (C-PRE-02).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from impls.api import Clock
from impls.commit._committer import MessageCommitter
from model.commit import MAX_SCAN_ITEMS, CommitError

_log = logging.getLogger(__name__)


class CommitRecovery:
    """Sweeps intents older than ``min_age_ms`` in batches of ``batch``.

    ``min_age_ms`` leaves in-flight commits to their own committer for a while; ``max_batches`` bounds
    one sweep even against a store that never removes its candidates (C-POST-05 says it must).
    """

    def __init__(
        self,
        committer: MessageCommitter,
        clock: Clock,
        *,
        min_age_ms: int = 60_000,
        batch: int = 100,
        max_batches: int = 1_000,
    ) -> None:
        if min_age_ms < 0 or not 1 <= batch <= MAX_SCAN_ITEMS or max_batches < 1:
            raise ValueError(f"min_age_ms must be >= 0, batch 1..{MAX_SCAN_ITEMS}, max_batches >= 1")
        self._committer = committer
        self._clock = clock
        self._min_age_ms = min_age_ms
        self._batch = batch
        self._max_batches = max_batches

    async def run_once(self) -> int:
        """One sweep: batch after batch until one comes back short. Returns the keys committed.

        Committed keys leave the candidate set, so a full batch of them means there may be more; a
        key that could not finish makes the batch short and waits for the next sweep.
        """
        older_than = self._clock.now_ms() - self._min_age_ms
        total = 0
        for _ in range(self._max_batches):
            recovered = await self._committer.recover_due(older_than, self._batch)
            total += recovered
            if recovered < self._batch:
                break
        return total

    async def run_forever(self, stop: asyncio.Event, interval_s: float = 5.0) -> None:
        """Sweep every ``interval_s`` until ``stop`` is set; a failed sweep is retried next time."""
        while not stop.is_set():
            try:
                recovered = await self.run_once()
            except CommitError as error:
                _log.warning("recovery sweep failed: %s", error)
            else:
                if recovered:
                    _log.info("recovery committed %d messages", recovered)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval_s)
