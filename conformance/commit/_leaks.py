"""C-ERR-01: what an error's ``detail`` may not carry, and the scan that looks for it.

A ``MessageStoreError``'s detail is the store's own sentence (model/commit/_errors.py): never a
backend's exception text, key, table or script. Three vocabularies are scanned, each a plain list of
fragments matched case-sensitively:

* the example's namespace (every key, row and partition of the store lives under it);
* what the store declares its internals look like (``impls.api.DeclaresInternals``: key prefixes,
  table names, script and statement fragments — each shipped store declares its own);
* what the common drivers and engines print (``DRIVER_TEXT``): exception class names, tracebacks,
  the bytes reprs and statement keywords that a store passing ``str(error)`` through would carry.
"""

from __future__ import annotations

from impls.api import DeclaresInternals, MessageStore
from model.commit import MessageStoreError

#: Text of drivers and engines that no store's own sentence contains.
DRIVER_TEXT = frozenset(
    {
        "Traceback",
        "Exception",
        "Error(",
        "Error:",
        "redis.",
        "cassandra.",
        "psycopg",
        "pymysql",
        "sqlite3",
        "lupa",
        "redis.call",
        "KEYS[",
        "ARGV[",
        "EVALSHA",
        "NOSCRIPT",
        "WRONGTYPE",
        "INSERT INTO",
        "DELETE FROM",
        "SELECT ",
        " WHERE ",
        "IF NOT EXISTS",
        "[applied]",
        "b'",
        'b"',
        "\\x",
    }
)


def vocabulary(store: MessageStore) -> frozenset[str]:
    """Everything ``store``'s error details may not contain, its namespace aside."""
    declared = store.internal_text if isinstance(store, DeclaresInternals) else frozenset()
    return DRIVER_TEXT | frozenset(t for t in declared if t)


def declares_internals(store: MessageStore) -> bool:
    return isinstance(store, DeclaresInternals) and bool(store.internal_text)


def leaked(error: MessageStoreError, namespace: str, terms: frozenset[str]) -> str | None:
    """The first forbidden fragment in ``error`` (the namespace anywhere, the rest in ``detail``)."""
    if namespace and namespace in str(error):
        return namespace
    detail = error.detail
    for term in sorted(terms):
        if term in detail:
            return term
    return None
