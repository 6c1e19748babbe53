"""Backlog and safe trimming of a stream over all its consumer groups (S-STREAM-07, S-STREAM-08).

The frontier is computed from what the server says about every group: ``XINFO GROUPS`` gives
each group's last-delivered id and pending count, ``XPENDING`` (summary form) its smallest
pending id. A group needs its first pending entry, or else everything after its last-delivered
id; the frontier is the smallest of those, and ``XTRIM MINID`` (exact, never ``~``) removes only
what lies below it. A stream no group reads keeps everything: a group created later reads from
the start.

Computing and trimming are two calls, and that is safe because a frontier only moves forward
while groups exist (acknowledgements and reads only move theirs up): a frontier read a moment ago
is at most too cautious. Creating a group at an id behind the frontier is the one move that could
make it stale; this module's consumers create their groups before anything is published.
"""

from __future__ import annotations

from typing import Any

import attrs
import redis

from ._streams import StreamNames, TransportError

StreamId = tuple[int, int]


def parse_id(text: bytes | str) -> StreamId:
    raw = text.decode() if isinstance(text, bytes) else text
    ms, _, seq = raw.partition("-")
    return int(ms), int(seq or 0)


def format_id(value: StreamId) -> str:
    return f"{value[0]}-{value[1]}"


def after(value: StreamId) -> StreamId:
    return value[0], value[1] + 1


@attrs.frozen
class GroupBacklog:
    group: str
    undelivered: int
    pending: int

    @property
    def total(self) -> int:
        return self.undelivered + self.pending


@attrs.define
class StreamAdmin:
    client: redis.Redis
    names: StreamNames

    def frontier(self) -> StreamId | None:
        """The smallest id some group still needs; ``None`` when no group reads the stream."""
        needs: list[StreamId] = []
        try:
            for info in self.client.xinfo_groups(self.names.stream):
                name = info["name"]
                if int(info["pending"]) > 0:
                    summary = self.client.xpending(self.names.stream, name)
                    needs.append(parse_id(summary["min"]))
                else:
                    needs.append(after(parse_id(info["last-delivered-id"])))
        except redis.ResponseError as exc:
            if "no such key" in str(exc).lower():
                return None
            raise TransportError(f"XINFO/XPENDING failed: {exc}") from exc
        except redis.RedisError as exc:
            raise TransportError(f"XINFO/XPENDING failed: {exc}") from exc
        return min(needs, default=None)

    def safe_trim(self) -> int:
        """``XTRIM MINID`` at the frontier; how many entries went."""
        frontier = self.frontier()
        if frontier is None:
            return 0
        return self.trim_to(frontier)

    def trim_to(self, min_id: StreamId) -> int:
        try:
            return int(self.client.xtrim(self.names.stream, minid=format_id(min_id), approximate=False))
        except redis.RedisError as exc:
            raise TransportError(f"XTRIM failed: {exc}") from exc

    def backlog(self) -> list[GroupBacklog]:
        """Per group: entries after its last-delivered id plus its pending entries."""
        out = []
        try:
            for info in self.client.xinfo_groups(self.names.stream):
                last = format_id(parse_id(info["last-delivered-id"]))
                lag = info.get("lag")
                if lag is None:  # unknown after deletions: count what lies after the group
                    rest: Any = self.client.xrange(self.names.stream, min=f"({last}", max="+")
                    lag = len(rest)
                name = info["name"]
                out.append(
                    GroupBacklog(
                        name.decode() if isinstance(name, bytes) else name, int(lag), int(info["pending"])
                    )
                )
        except redis.RedisError as exc:
            raise TransportError(f"XINFO GROUPS failed: {exc}") from exc
        return out
