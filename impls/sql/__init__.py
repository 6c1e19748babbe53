"""SQL saga backends: one flow of SQL (``_saga``), a codec (``_codec``) and a dialect per engine.

``impls/sql/_sqlite.py`` is the embedded default; PostgreSQL and MariaDB add their own dialect
module beside it and reuse ``SqlSagaBackend`` unchanged.
"""

from ._dialect import Dialect
from ._saga import SqlSagaBackend, SqlTransaction
from ._sqlite import open_sqlite_saga_backend

__all__ = [
    "Dialect",
    "SqlSagaBackend",
    "SqlTransaction",
    "open_mysql_saga_backend",
    "open_postgres_saga_backend",
    "open_sqlite_saga_backend",
]


def __getattr__(name: str) -> object:
    # The server backends import their drivers only when asked for; SQLite needs neither.
    if name == "open_postgres_saga_backend":
        from ._postgres import open_postgres_saga_backend

        return open_postgres_saga_backend
    if name == "open_mysql_saga_backend":
        from ._mysql import open_mysql_saga_backend

        return open_mysql_saga_backend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
