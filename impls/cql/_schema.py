"""Keyspace, tables and every statement the CQL backend runs. Nothing outside impls/cql knows them.

Tables (all shared by every namespace; ``ns`` is part of every partition key, so examples are
isolated without TRUNCATE):

``ledger`` — PRIMARY KEY ((ns, tenant), sender, cmid)
    One partition per tenant holds the tenant's sequence rows *and* its commit rows, so that
    reserve is one conditional batch: advance the tenant message counter, advance the
    conversation counter and ``INSERT ... IF NOT EXISTS`` the commit row, all in one Paxos round.
    Sequence rows use a sender no valid user id can spell (``#message``, ``#conversation``) and
    only fill ``next_seq`` (the last number allocated); commit rows never fill it.
``history`` — PRIMARY KEY ((ns, tenant, conversation), conversation_seq)
    One row per recorded message; ``expires_at_ms`` stays null until commit registers it.
``recovery`` — PRIMARY KEY ((ns), accepted_at_ms, tenant, sender, cmid)
    Recovery hints, in exactly the order ``scan_recoverable_commits`` returns them. A hint is only
    advice: the commit row decides whether it is still recoverable.
``outbox`` — PRIMARY KEY ((ns), tenant, sender, cmid)
    One publication per commit key; ``entry_id`` is a timeuuid made by the first publisher.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping

# A keyspace name goes into DDL text; only plain identifiers may (the server enforces its length).
KEYSPACE_NAME = re.compile(r"[A-Za-z0-9_]+")
_REPLICATION_WORD = re.compile(r"[A-Za-z0-9_.]+")

MESSAGE_SEQUENCE = ("#message", "")  # (sender, cmid) of the tenant's message counter row
CONVERSATION_SEQUENCE = "#conversation"  # sender of a conversation counter row; cmid = conversation

#: C-ERR-01: the tables, columns and statement text of this store; no error detail may carry any of it.
INTERNAL_TEXT = frozenset(
    {
        "ledger",
        "next_seq",
        "reserve_token",
        "expires_at_ms",
        "pub_entry",
        "ns text",
        "IF NOT EXISTS",
        "[applied]",
        "INSERT INTO",
        "SELECT ",
        "UPDATE ",
        "DELETE FROM",
        "cassandra.",
        "WriteTimeout",
        "ReadTimeout",
        "NoHostAvailable",
        "InvalidRequest",
    }
)

TABLES = (
    """CREATE TABLE IF NOT EXISTS {ks}.ledger (
        ns text, tenant text, sender text, cmid text,
        next_seq bigint,
        stage int, identity blob, conversation text,
        message_seq bigint, conversation_seq bigint, accepted_at_ms bigint,
        intent blob, pub_stream text, pub_entry text, reserve_token uuid,
        PRIMARY KEY ((ns, tenant), sender, cmid))""",
    """CREATE TABLE IF NOT EXISTS {ks}.history (
        ns text, tenant text, conversation text, conversation_seq bigint,
        message_seq bigint, accepted_at_ms bigint, sender text,
        message_type text, custom_type text, body blob, reply_to bigint,
        expires_at_ms bigint,
        PRIMARY KEY ((ns, tenant, conversation), conversation_seq))""",
    """CREATE TABLE IF NOT EXISTS {ks}.recovery (
        ns text, accepted_at_ms bigint, tenant text, sender text, cmid text,
        PRIMARY KEY ((ns), accepted_at_ms, tenant, sender, cmid))""",
    """CREATE TABLE IF NOT EXISTS {ks}.outbox (
        ns text, tenant text, sender text, cmid text,
        entry_id timeuuid, conversation text, message_seq bigint, conversation_seq bigint,
        event blob,
        PRIMARY KEY ((ns), tenant, sender, cmid))""",
)

_COMMIT_COLUMNS = (
    "stage, identity, conversation, message_seq, conversation_seq, accepted_at_ms, "
    "intent, pub_stream, pub_entry, reserve_token"
)
_HISTORY_COLUMNS = (
    "conversation_seq, message_seq, accepted_at_ms, sender, message_type, custom_type, body, "
    "reply_to, expires_at_ms"
)
#: The commit columns one by one (the inspector's raw form, impls/cql/_inspect.py).
COMMIT_COLUMNS = tuple(column.strip() for column in _COMMIT_COLUMNS.split(","))
_COMMIT_ROW = "ns = ? AND tenant = ? AND sender = ? AND cmid = ?"
_HISTORY_PARTITION = "ns = ? AND tenant = ? AND conversation = ?"


@enum.unique
class Statement(enum.Enum):
    """Every statement, prepared once per session and keyspace. Parameters in ``?`` order."""

    # (ns, tenant, sender, cmid)
    READ_COMMIT = f"SELECT {_COMMIT_COLUMNS} FROM {{ks}}.ledger WHERE {_COMMIT_ROW}"
    # (ns, tenant, '#message', '', '#conversation', conversation, sender, cmid)
    READ_RESERVE_STATE = (
        f"SELECT sender, cmid, next_seq, {_COMMIT_COLUMNS} FROM {{ks}}.ledger "
        "WHERE ns = ? AND tenant = ? AND (sender, cmid) IN ((?, ?), (?, ?), (?, ?))"
    )
    # (ns, tenant, '#conversation', conversation)
    READ_SEQUENCE = f"SELECT next_seq FROM {{ks}}.ledger WHERE {_COMMIT_ROW}"
    # (next, ns, tenant, sender, cmid, expected next or null)
    ADVANCE_SEQUENCE = f"UPDATE {{ks}}.ledger SET next_seq = ? WHERE {_COMMIT_ROW} IF next_seq = ?"
    # (ns, tenant, sender, cmid, stage, identity, conversation, message_seq, conversation_seq,
    #  accepted_at_ms, intent, reserve_token)
    CREATE_COMMIT = (
        "INSERT INTO {ks}.ledger (ns, tenant, sender, cmid, stage, identity, conversation, "
        "message_seq, conversation_seq, accepted_at_ms, intent, reserve_token) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS"
    )
    # (ns, tenant, sender, cmid)
    MARK_RECORDED = f"UPDATE {{ks}}.ledger SET stage = 2 WHERE {_COMMIT_ROW} IF stage = 1"
    # (pub_stream, pub_entry, ns, tenant, sender, cmid)
    MARK_OUTBOXED = (
        f"UPDATE {{ks}}.ledger SET stage = 3, pub_stream = ?, pub_entry = ? WHERE {_COMMIT_ROW} IF stage = 2"
    )
    # (ns, tenant, sender, cmid): the body goes, identity, coordinates and publication stay.
    MARK_COMMITTED = (
        f"UPDATE {{ks}}.ledger SET stage = 4, intent = null, reserve_token = null "
        f"WHERE {_COMMIT_ROW} IF stage = 3"
    )
    # (message_seq, accepted_at_ms, sender, message_type, custom_type, body, reply_to,
    #  ns, tenant, conversation, conversation_seq); never touches expires_at_ms.
    PUT_HISTORY = (
        "UPDATE {ks}.history SET message_seq = ?, accepted_at_ms = ?, sender = ?, "
        "message_type = ?, custom_type = ?, body = ?, reply_to = ? "
        f"WHERE {_HISTORY_PARTITION} AND conversation_seq = ?"
    )
    # (expires_at_ms, ns, tenant, conversation, conversation_seq)
    EXPIRE_HISTORY = (
        f"UPDATE {{ks}}.history SET expires_at_ms = ? WHERE {_HISTORY_PARTITION} AND conversation_seq = ?"
    )
    # (ns, tenant, conversation[, anchor])
    HISTORY_NEWEST = (
        f"SELECT {_HISTORY_COLUMNS} FROM {{ks}}.history WHERE {_HISTORY_PARTITION} "
        "ORDER BY conversation_seq DESC"
    )
    HISTORY_BEFORE = (
        f"SELECT {_HISTORY_COLUMNS} FROM {{ks}}.history WHERE {_HISTORY_PARTITION} "
        "AND conversation_seq < ? ORDER BY conversation_seq DESC"
    )
    HISTORY_OLDEST = (
        f"SELECT {_HISTORY_COLUMNS} FROM {{ks}}.history WHERE {_HISTORY_PARTITION} "
        "ORDER BY conversation_seq ASC"
    )
    HISTORY_AFTER = (
        f"SELECT {_HISTORY_COLUMNS} FROM {{ks}}.history WHERE {_HISTORY_PARTITION} "
        "AND conversation_seq > ? ORDER BY conversation_seq ASC"
    )
    # (ns, tenant, conversation): bodies left out, for the lowest live sequence.
    HISTORY_BOUNDS = (
        f"SELECT conversation_seq, expires_at_ms FROM {{ks}}.history WHERE {_HISTORY_PARTITION} "
        "ORDER BY conversation_seq ASC"
    )
    # (ns, accepted_at_ms, tenant, sender, cmid)
    PUT_HINT = "INSERT INTO {ks}.recovery (ns, accepted_at_ms, tenant, sender, cmid) VALUES (?, ?, ?, ?, ?)"
    DELETE_HINT = (
        "DELETE FROM {ks}.recovery WHERE ns = ? AND accepted_at_ms = ? AND tenant = ? "
        "AND sender = ? AND cmid = ?"
    )
    # (ns, older_than)
    SCAN_HINTS = (
        "SELECT accepted_at_ms, tenant, sender, cmid FROM {ks}.recovery WHERE ns = ? AND accepted_at_ms < ?"
    )
    # (ns, tenant, sender, cmid, entry_id, conversation, message_seq, conversation_seq, event)
    PUBLISH = (
        "INSERT INTO {ks}.outbox (ns, tenant, sender, cmid, entry_id, conversation, message_seq, "
        "conversation_seq, event) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS"
    )
    # (ns, tenant, sender, cmid)
    READ_PUBLICATION = (
        "SELECT entry_id FROM {ks}.outbox WHERE ns = ? AND tenant = ? AND sender = ? AND cmid = ?"
    )
    # (ns): every entry of the namespace's outbox, for ``CqlOutbox.entries``
    OUTBOX_ENTRIES = "SELECT tenant, sender, cmid, entry_id FROM {ks}.outbox WHERE ns = ?"
    READINESS = "SELECT release_version FROM system.local"
    # Dropping a namespace (impls.api.NamespaceOwner): whole partitions, never TRUNCATE.
    DROP_LEDGER = "DELETE FROM {ks}.ledger WHERE ns = ? AND tenant = ?"
    DROP_HISTORY = f"DELETE FROM {{ks}}.history WHERE {_HISTORY_PARTITION}"
    DROP_RECOVERY = "DELETE FROM {ks}.recovery WHERE ns = ?"
    DROP_OUTBOX = "DELETE FROM {ks}.outbox WHERE ns = ?"
    # Every partition key of a table: a full scan, for a store that must find what it did not
    # write itself (one opened only to clean up) and for listing namespaces.
    LEDGER_PARTITIONS = "SELECT DISTINCT ns, tenant FROM {ks}.ledger"
    HISTORY_PARTITIONS = "SELECT DISTINCT ns, tenant, conversation FROM {ks}.history"
    RECOVERY_PARTITIONS = "SELECT DISTINCT ns FROM {ks}.recovery"
    OUTBOX_PARTITIONS = "SELECT DISTINCT ns FROM {ks}.outbox"

    def text(self, keyspace: str) -> str:
        return self.value.format(ks=keyspace)


def keyspace_ddl(keyspace: str, replication: Mapping[str, str]) -> str:
    """``CREATE KEYSPACE IF NOT EXISTS`` for validated names; ValueError for anything else."""
    if KEYSPACE_NAME.fullmatch(keyspace) is None:
        raise ValueError("keyspace must be letters, digits and underscores")
    for word in (*replication.keys(), *replication.values()):
        if _REPLICATION_WORD.fullmatch(word) is None:
            raise ValueError("replication options must be plain words")
    options = ", ".join(f"'{name}': '{value}'" for name, value in replication.items())
    return f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = {{{options}}}"
