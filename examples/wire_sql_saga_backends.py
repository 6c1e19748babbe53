"""A SQL saga backend that passes every fault above the seam and is caught only on the wire.

``lost_commit_is_rollback`` is the shared SQL backend with one change: when the connection is lost
while COMMIT is in flight it reports ``ROLLED_BACK`` (definitely not applied) instead of
``OUTCOME_UNKNOWN``. Above the seam the harness decides a COMMIT's fate itself, so the backend's
own classification of a lost COMMIT is never asked; through the fault proxy
(``wire-commit-reply-lost``) the server commits, the answer is lost, and the runtime, told "rolled
back", runs the unit again on top of its own committed writes (S-TX-02)::

    conformance run --suite saga --service postgres \\
        --saga-backend examples.wire_sql_saga_backends:postgres_lost_commit_is_rollback

``WIRE_SQL_SAGA_BACKENDS`` maps each factory to the service it needs and the rule the harness
must report.
"""

from __future__ import annotations

from examples.broken_sql_saga_backends import BrokenSqlBackend
from impls.endpoints import mysql_dsn, mysql_params, pg_dsn
from impls.saga import SagaBackendError, SagaBackendErrorKind
from impls.sql._mysql import MysqlEngine
from impls.sql._postgres import PostgresEngine
from impls.sql._saga import SqlTransaction


class LostCommitIsRollback(SqlTransaction):
    """S-TX-02: a COMMIT whose answer never came is reported as a definite rollback."""

    def commit(self) -> None:
        try:
            super().commit()
        except SagaBackendError as error:
            if error.kind is not SagaBackendErrorKind.OUTCOME_UNKNOWN:
                raise
            raise SagaBackendError(SagaBackendErrorKind.ROLLED_BACK, "the commit failed") from None


def postgres_lost_commit_is_rollback(namespace: str, endpoint: str | None = None) -> BrokenSqlBackend:
    return BrokenSqlBackend(
        PostgresEngine(endpoint or pg_dsn(), lock_timeout_ms=1000), namespace, LostCommitIsRollback
    )


def mysql_lost_commit_is_rollback(namespace: str, endpoint: str | None = None) -> BrokenSqlBackend:
    engine = MysqlEngine(mysql_params(endpoint or mysql_dsn()), lock_wait_timeout_s=1)
    return BrokenSqlBackend(engine, namespace, LostCommitIsRollback)


WIRE_SQL_SAGA_BACKENDS = {
    "postgres_lost_commit_is_rollback": ("postgres", "S-PART-01"),
    "mysql_lost_commit_is_rollback": ("mariadb", "S-PART-01"),
}
