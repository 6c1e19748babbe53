"""What a chunk of client bytes is, per wire protocol: a payload request, or connection setup.

The proxy needs no parser. It takes turns: a client chunk that arrives while the connection waits
for no answer starts a *request*; what the server sends next is its *answer*. This module only
says whether such a request is one the store asked for (a command, a query, an execution) or the
driver's own housekeeping (a handshake, authentication, a heartbeat), by looking at the first
bytes, where every protocol puts a type:

=========  =============================================  ==========================================
service    payload request                                housekeeping (never armed)
=========  =============================================  ==========================================
redis      RESP array ``*N\\r\\n$L\\r\\nNAME``: the name     HELLO, AUTH, CLIENT, SELECT, READONLY
cassandra  frame opcode QUERY 0x07, EXECUTE 0x0A,          STARTUP, OPTIONS (heartbeat), REGISTER,
           BATCH 0x0D (v4 frame; v5 behind its            AUTH_RESPONSE, PREPARE
           6-byte segment header)
postgres   a typed message: ``Q`` simple query (its       the startup/SSL request (untyped, first on
           first word: BEGIN, COMMIT, ...), ``P``/``B``   the connection), ``p`` password
           extended query
mariadb    packet sequence 0: COM_QUERY 0x03 (its first   the handshake answer (sequence 1), a
           word), COM_PING 0x0E, others by number         client that speaks first (none does)
=========  =============================================  ==========================================

A label is short text for the trace (``EVALSHA``, ``COMMIT``, ``EXECUTE``); ``None`` means
housekeeping. A round trip that only prepares a statement (PostgreSQL's Parse then Sync, MySQL's
COM_STMT_PREPARE) is ``PREPARE``, one of ``UNARMED``: counted as a round trip, never met by a
fault, since the statement runs in a later one. A request split over several chunks is classified
by its first one.

An answer is read for one thing only: whether the server *refused* the request instead of doing
its work (``REFUSALS``): a PostgreSQL ``ErrorResponse`` or a COMMIT answered ``ROLLBACK`` (a
serialization failure found at COMMIT under ``SERIALIZABLE``), a MariaDB ERR packet, a Redis error
or aborted ``EXEC``, a CQL ERROR frame. A reply-lost fault drops only an answer of work done.
"""

from __future__ import annotations

from collections.abc import Callable

#: (first chunk of a request, the connection's own notes) -> label or None. ``notes`` starts empty
#: for each connection; a classifier may remember what it learns there (PostgreSQL's prepared
#: statement names: psycopg prepares a statement it runs often, COMMIT included, and then sends
#: only a Bind naming it).
Classifier = Callable[[bytes, dict[str, str]], str | None]

_REDIS_SETUP = frozenset({"HELLO", "AUTH", "CLIENT", "SELECT", "READONLY"})


def redis_request(chunk: bytes, _notes: dict[str, str]) -> str | None:
    if not chunk.startswith(b"*"):
        return "INLINE"
    parts = chunk.split(b"\r\n", 3)
    if len(parts) < 3:
        return "RESP"
    name = parts[2].decode("ascii", "replace").upper()
    return None if name in _REDIS_SETUP else name


_CQL_PAYLOAD = {0x07: "QUERY", 0x0A: "EXECUTE", 0x0D: "BATCH"}


def cql_request(chunk: bytes, _notes: dict[str, str]) -> str | None:
    for offset in (0, 6):  # a v4 frame, or a v5 frame behind its uncompressed segment header
        if len(chunk) >= offset + 9 and chunk[offset] in (0x03, 0x04, 0x05):
            opcode = chunk[offset + 4]
            if opcode in _CQL_PAYLOAD:
                return _CQL_PAYLOAD[opcode]
            if opcode in (0x01, 0x05, 0x09, 0x0B, 0x0F):
                return None
    return "FRAME"


def _first_word(text: bytes) -> str:
    words = text.lstrip().split(None, 1)
    return words[0].decode("ascii", "replace").upper().rstrip(";\x00") if words else ""


#: The messages of a round trip that only prepares a statement: Parse (and a Describe of it), then
#: Sync. psycopg sends one when a statement reaches its prepare threshold (5 runs on a connection),
#: COMMIT included, and runs the statement in the next round trip (a Bind naming it).
_PG_PREPARE_ONLY = frozenset({"P", "D", "S"})

#: The label of such a round trip. It is the driver's (the statement runs in the next one) and its
#: answer, a ParseComplete, says no work was done: the proxy counts it as a round trip and never
#: spends a fault on it (``UNARMED``).
PREPARE = "PREPARE"
UNARMED = frozenset({PREPARE})


def postgres_request(chunk: bytes, notes: dict[str, str]) -> str | None:
    if not chunk or chunk[0] == 0:
        return None  # the startup message (or SSLRequest) carries no type byte: its length leads
    messages = _pg_messages(chunk)
    label = None
    for kind, body in messages:
        if kind == "p":
            return None  # a password message
        if kind == "Q":
            label = label or _first_word(body) or "Q"
        elif kind == "P":  # Parse: statement name, query text
            name, _, rest = body.partition(b"\x00")
            word = _first_word(rest.partition(b"\x00")[0]) or "P"
            if name:
                notes[name.decode("ascii", "replace")] = word
            label = label or word
        elif kind == "B":  # Bind: portal name, statement name
            _portal, _, rest = body.partition(b"\x00")
            statement = rest.partition(b"\x00")[0].decode("ascii", "replace")
            label = label or notes.get(statement, "B")
    kinds = {kind for kind, _ in messages}
    if "P" in kinds and kinds <= _PG_PREPARE_ONLY and messages[-1][0] == "S":
        # Only prepared (its name is noted above), not run: a reply-lost COMMIT spent here would
        # reset the connection before the COMMIT itself ever ran.
        return PREPARE
    return label or chr(chunk[0])


def _pg_messages(chunk: bytes) -> list[tuple[str, bytes]]:
    """The whole typed messages at the start of ``chunk`` (type, body); a cut-off one is dropped."""
    messages = []
    offset = 0
    while offset + 5 <= len(chunk):
        length = int.from_bytes(chunk[offset + 1 : offset + 5], "big")
        if length < 4:
            break
        messages.append((chr(chunk[offset]), chunk[offset + 5 : offset + 1 + length]))
        offset += 1 + length
    return messages


_MYSQL_COMMANDS = {0x03: "QUERY", 0x0E: "PING", 0x01: "QUIT", 0x16: PREPARE, 0x17: "EXECUTE"}


def mysql_request(chunk: bytes, _notes: dict[str, str]) -> str | None:
    if len(chunk) < 5 or chunk[3] != 0:
        return None  # the handshake answer has sequence 1
    command = chunk[4]
    if command == 0x03:
        return _first_word(chunk[5:]) or "QUERY"
    if command == 0x01:
        return None  # COM_QUIT: the driver closing; nothing to lose
    return _MYSQL_COMMANDS.get(command, f"COM_{command:#04x}")


#: (first chunk of an answer) -> whether the server refused the request (did none of its work).
Refusal = Callable[[bytes], bool]


def redis_refused(chunk: bytes) -> bool:
    return chunk.startswith((b"-", b"*-1\r\n"))  # an error, or EXEC aborted by a WATCH


def cql_refused(chunk: bytes) -> bool:
    return any(
        len(chunk) >= offset + 9 and chunk[offset] & 0x7F in (0x03, 0x04, 0x05) and chunk[offset + 4] == 0x00
        for offset in (0, 6)
    )


def postgres_refused(chunk: bytes) -> bool:
    for kind, body in _pg_messages(chunk):
        if kind == "E" or (kind == "C" and body.startswith(b"ROLLBACK")):
            return True
    return False


def mysql_refused(chunk: bytes) -> bool:
    return len(chunk) >= 5 and chunk[4] == 0xFF


REFUSALS: dict[str, Refusal] = {
    "redis": redis_refused,
    "cassandra": cql_refused,
    "postgres": postgres_refused,
    "mariadb": mysql_refused,
}


CLASSIFIERS: dict[str, Classifier] = {
    "redis": redis_request,
    "cassandra": cql_request,
    "postgres": postgres_request,
    "mariadb": mysql_request,
}
