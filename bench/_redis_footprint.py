"""Redis footprint: what one commit hash costs on a real Redis server.

The commit contract says the compact committed hash of a message with a 100-byte body
takes 552 B (down from 2,640 B) and stays ``listpack``; the bench's target is <= 256 B. This
measures ``OBJECT ENCODING`` and ``MEMORY USAGE`` (``RedisMessageStore.commit_hash_footprint``)
of a committed hash and of pending ones: a committer is killed at M-COMMIT-02 (RESERVED) and at
M-COMMIT-03 (RECORDED) to leave them behind, and a third commit runs to the end.

``MEMORY USAGE`` counts the key name, which carries the namespace and the commit key's ids, so
each row says the lengths it was measured with, for the short ids and for UUID ids.
"""

from __future__ import annotations

import contextlib

import attrs

from bench._workload import (
    BODY_BYTES,
    SHORT_IDS,
    UUID_IDS,
    Ids,
    Killed,
    kill_at,
    membership,
    new_namespace,
    opened,
    request,
)
from conformance.backends import COMMIT_BACKENDS
from impls.api import SystemClock
from impls.commit import MessageCommitter
from model.commit import CommitKey, FaultPoint

CONTRACT_COMMITTED_BYTES = 552
TARGET_COMMITTED_BYTES = 256
TARGET_ENCODING = "listpack"


@attrs.frozen
class Footprint:
    ids: str  # "short" or "uuid"
    stage: str  # RESERVED, RECORDED, COMMITTED
    body_bytes: int
    encoding: str
    memory_usage: int  # bytes, key name included
    fields: int
    name_lengths: dict[str, int]  # characters of namespace, tenant, sender, conversation, cmid

    @property
    def committed(self) -> bool:
        return self.stage == "COMMITTED"


async def measure_footprint(id_sets: tuple[Ids, ...] = (SHORT_IDS, UUID_IDS)) -> tuple[Footprint, ...]:
    """On the real Redis server (``RATCHET_REDIS_URL``); raises if it cannot be reached."""
    from impls.redis import RedisMessageStore

    found: list[Footprint] = []
    clock = SystemClock()
    for ids in id_sets:
        namespace = new_namespace()
        directory = membership(ids)
        async with opened(COMMIT_BACKENDS["redis"], namespace, directory) as (store, outbox):
            assert isinstance(store, RedisMessageStore)
            left: list[tuple[str, CommitKey]] = []
            for n, (stage, point) in enumerate(
                (
                    ("RESERVED", FaultPoint.M_COMMIT_02),
                    ("RECORDED", FaultPoint.M_COMMIT_03),
                    ("COMMITTED", None),
                ),
                start=1,
            ):
                sent = request(ids, n)
                committer = MessageCommitter(store, outbox, directory, clock, fault_hook=kill_at(point))
                with contextlib.suppress(Killed):
                    await committer.send(sent)
                left.append((stage, sent.commit_key))
            for stage, key in left:
                footprint = await store.commit_hash_footprint(key)
                if footprint is None:
                    raise RuntimeError(f"no commit hash for the {stage} commit")
                found.append(
                    Footprint(
                        ids=ids.label,
                        stage=stage,
                        body_bytes=BODY_BYTES,
                        encoding=footprint.encoding,
                        memory_usage=footprint.memory_usage,
                        fields=footprint.fields,
                        name_lengths=ids.lengths(namespace),
                    )
                )
    return tuple(found)


def meets_target(footprint: Footprint) -> bool:
    return footprint.encoding == TARGET_ENCODING and footprint.memory_usage <= TARGET_COMMITTED_BYTES
