"""A loopback TCP proxy between a driver and its real server, with faults armed per request.

Theory of operation
-------------------
``FaultProxy`` listens on 127.0.0.1 (an ephemeral port) and forwards every connection it accepts
to the real server, byte for byte, on an event loop of its own in a daemon thread: the commit
stores run on a new asyncio loop per example and the saga backends are synchronous, and neither
may notice the proxy except through the faults.

Request boundaries come from taking turns, not from parsing: a client chunk that arrives while
its connection waits for no answer starts a request, and the server's next bytes are its answer
(``_protocols`` says whether such a request is the store's or the driver's housekeeping). That is
exact for drivers that wait for each answer before the next request (redis-py, psycopg, PyMySQL,
and the CQL stores, which await every statement).

The harness arms an action for the next payload requests, on any connection of this proxy, and
disarms it when the store call it was armed for has returned; what was hit is reported back, so
the program says exactly which call met which fault (``arm``/``disarm``):

* ``REPLY_LOST``: the request is forwarded; the first bytes of its answer are dropped and both
  sides of the connection are reset (RST). The server has done the work; the driver sees a reset.
  An answer that is a refusal (``_protocols.REFUSALS``: the server did none of the work) passes
  unchanged and the action stays armed for the next request: the fault means "done, answer lost".
* ``RESET_BEFORE``: both sides are reset before the request is forwarded; the server saw nothing.
* ``REQUEST_LOST``: the request is swallowed, never forwarded, and nothing answers it: the driver
  times out a request the server never ran (a message dropped on the way, as an overloaded
  coordinator drops one past its timeout). The connection lives on, so a multiplexing driver's
  next requests are served; without ``release_stalls`` it is reset after ``stall_s``.
* ``STALL``: the request is forwarded and its answer is held (swallowed) until the client gives up
  and closes, or ``stall_s`` passes and both sides are reset. With ``release_stalls`` (a driver that
  multiplexes requests on one connection and, past its own timeout, forgets the request but keeps
  the connection: cassandra-driver) the held answers are delivered once ``stall_s`` has passed
  instead, in order, and the connection lives on: a late answer the driver has given up on is
  dropped by the driver itself, and the requests it sent meanwhile get their answers late.

``partition(True)`` resets every live connection and every new one at once (a refused
connection, as the driver sees it) until ``partition(False)`` heals it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import enum
import itertools
import socket
import struct
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

import attrs

from conformance.wire._protocols import CLASSIFIERS, REFUSALS, UNARMED, Classifier, Refusal

T = TypeVar("T")


class WireAction(enum.Enum):
    REPLY_LOST = "reply-lost"
    RESET_BEFORE = "reset-before"
    STALL = "stall"
    REQUEST_LOST = "request-lost"


@attrs.frozen
class Hit:
    """One request a fault met: which action, what the request was, on which connection."""

    action: WireAction
    request: str
    connection: int

    def render(self) -> str:
        return f"{self.action.value} on {self.request} (connection {self.connection})"


@attrs.define
class _Armed:
    action: WireAction
    left: int  # payload requests still to hit
    match: str | None  # only requests with this label (e.g. "COMMIT"); None: any payload request
    skip: int = 0  # payload requests still to let through untouched before the first hit


class _Link:
    """One forwarded connection: the client's side, the server's side, and whose turn it is."""

    def __init__(self, number: int, client: asyncio.StreamWriter, server: asyncio.StreamWriter) -> None:
        self.number = number
        self.client = client
        self.server = server
        self.awaiting = False  # a request was forwarded and its answer has not begun
        self.notes: dict[str, str] = {}  # what the protocol's classifier remembers (prepared names)
        self.fate: WireAction | None = None  # what happens to the answer of the current request
        self.held: list[bytes] = []  # answers held by a stall that will be released
        self.closed = False

    def release(self) -> None:
        """End a stall by delivering what it held (``FaultProxy.release_stalls``)."""
        if self.closed or self.fate is not WireAction.STALL:
            return
        held, self.held = b"".join(self.held), []
        self.fate = None
        self.awaiting = False
        if held:
            self.client.write(held)

    def reset(self) -> None:
        if self.closed:
            return
        self.closed = True
        for writer in (self.client, self.server):
            _abort_with_rst(writer)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            for writer in (self.client, self.server):
                writer.close()


def _abort_with_rst(writer: asyncio.StreamWriter) -> None:
    """Close with SO_LINGER 0: the peer gets a reset, not an orderly end of stream."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):  # already gone: abort below is all that is left to do
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class FaultProxy:
    """One proxy per backend endpoint. ``start()`` returns the (host, port) to give the driver."""

    def __init__(
        self, service: str, upstream: tuple[str, int], *, stall_s: float = 2.0, release_stalls: bool = False
    ) -> None:
        self.service = service
        self.upstream = upstream
        self.stall_s = stall_s
        self.release_stalls = release_stalls
        self._classify: Classifier = CLASSIFIERS[service]
        self._refused: Refusal = REFUSALS[service]
        self._lock = threading.Lock()
        self._armed: _Armed | None = None
        self._hits: list[Hit] = []
        self._partitioned = False
        self._links: set[_Link] = set()
        self._numbers = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self.address: tuple[str, int] | None = None
        self.connections = 0  # accepted so far (figures, tests)
        #: Payload requests forwarded so far, by label (one per round trip: the bench's count).
        self.requests: collections.Counter[str] = collections.Counter()

    # --- lifetime ---------------------------------------------------------------------------

    def start(self) -> tuple[str, int]:
        if self.address is not None:
            return self.address
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name=f"ratchet-wire-{self.service}", daemon=True)
        thread.start()
        self._loop = loop
        self._server = self._call(asyncio.start_server(self._serve, "127.0.0.1", 0))
        host, port = self._server.sockets[0].getsockname()[:2]
        self.address = (str(host), int(port))
        return self.address

    def close(self) -> None:
        loop = self._loop
        if loop is None:
            return
        self._call(self._shutdown())
        loop.call_soon_threadsafe(loop.stop)
        self._loop = None
        self.address = None

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for link in list(self._links):
            link.reset()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        assert self._loop is not None, "the proxy is not running"
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=30)

    # --- control (from the harness's thread) --------------------------------------------------

    def arm(self, action: WireAction, requests: int = 1, match: str | None = None, skip: int = 0) -> None:
        """Apply ``action`` to the next ``requests`` payload requests (labelled ``match``, if given),
        after letting the first ``skip`` of them through untouched."""
        with self._lock:
            self._armed = _Armed(action, requests, match, skip)
            self._hits = []

    def disarm(self) -> tuple[Hit, ...]:
        """Stop; return what was hit since ``arm``."""
        with self._lock:
            hits, self._armed, self._hits = tuple(self._hits), None, []
        return hits

    def met(self) -> tuple[Hit, ...]:
        """What was hit since ``arm``, still armed (``disarm`` ends it)."""
        with self._lock:
            return tuple(self._hits)

    def partition(self, on: bool) -> None:
        """Reset every connection and refuse new ones (``True``), or heal (``False``)."""
        with self._lock:
            self._partitioned = on
        if on:
            self._call(self._reset_all())

    async def _reset_all(self) -> None:
        for link in list(self._links):
            link.reset()

    def _take(self, label: str, link: _Link) -> WireAction | None:
        with self._lock:
            armed = self._armed
            if armed is None or armed.left <= 0 or (armed.match is not None and armed.match != label):
                return None
            if armed.skip > 0:
                armed.skip -= 1
                return None
            armed.left -= 1
            self._hits.append(Hit(armed.action, label, link.number))
            return armed.action

    def _untake(self, link: _Link) -> None:
        with self._lock:
            armed = self._armed
            for index in range(len(self._hits) - 1, -1, -1):
                hit = self._hits[index]
                if hit.connection == link.number and hit.action is WireAction.REPLY_LOST:
                    del self._hits[index]
                    if armed is not None and armed.action is WireAction.REPLY_LOST:
                        armed.left += 1
                    break
        link.fate = None

    # --- forwarding (on the proxy's loop) -----------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        if self._partitioned:
            _abort_with_rst(writer)
            return
        try:
            server_reader, server_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            _abort_with_rst(writer)  # the real server is away: the driver sees what it would see
            return
        link = _Link(next(self._numbers), writer, server_writer)
        self._links.add(link)
        try:
            await asyncio.gather(
                self._requests(link, reader), self._answers(link, server_reader), return_exceptions=True
            )
        finally:
            self._links.discard(link)
            link.close()

    async def _requests(self, link: _Link, reader: asyncio.StreamReader) -> None:
        # Whatever ends this side (end of stream, or a reset when a killed client's socket closes
        # with unread data) ends the link: the server must see its client go, or a session idle
        # in its transaction outlives a killed client and holds its locks.
        try:
            await self._forward_requests(link, reader)
        finally:
            link.close()

    async def _forward_requests(self, link: _Link, reader: asyncio.StreamReader) -> None:
        while data := await reader.read(65536):
            if self._partitioned or link.closed:
                link.reset()
                return
            if not link.awaiting:
                label = self._classify(data, link.notes)
                action = None if label is None or label in UNARMED else self._take(label, link)
                if label is not None:
                    self.requests[label] += 1
                link.awaiting = True
                link.fate = action
                if action is WireAction.RESET_BEFORE:
                    link.reset()
                    return
                if action is WireAction.REQUEST_LOST:
                    # Nothing was forwarded, so no answer is awaited: the next chunk is a request.
                    link.awaiting, link.fate = False, None
                    if not self.release_stalls:
                        asyncio.get_running_loop().call_later(self.stall_s, link.reset)
                    continue
                if action is WireAction.STALL:
                    end = link.release if self.release_stalls else link.reset
                    asyncio.get_running_loop().call_later(self.stall_s, end)
            link.server.write(data)
            await link.server.drain()

    async def _answers(self, link: _Link, reader: asyncio.StreamReader) -> None:
        try:
            await self._forward_answers(link, reader)
        finally:
            link.close()

    async def _forward_answers(self, link: _Link, reader: asyncio.StreamReader) -> None:
        while data := await reader.read(65536):
            if link.closed:
                return
            if link.fate is WireAction.REPLY_LOST and not self._refused(data):
                link.reset()  # the server answered, so it did the work; the answer never arrives
                return
            if link.fate is WireAction.REPLY_LOST:
                self._untake(link)  # refused: no work to lose an answer of; the next request meets it
            if link.fate is WireAction.STALL:
                if self.release_stalls:
                    link.held.append(data)
                continue  # held until the client gives up or the stall ends (reset, or released)
            link.awaiting = False
            link.client.write(data)
            await link.client.drain()
