"""Whether the real services answer: one real protocol request per service.

The endpoints themselves (environment variable and default per service) live in
``impls.endpoints``; this module re-exports them for the harness and the tests.

``probe(name)`` sends one real protocol request (PING, a CQL or SQL query, a Kafka metadata
request) and returns ``None`` when it is answered, otherwise a one-line reason. Drivers are
imported only when probed, so importing this module is cheap.
``python -m conformance.services [env | probe NAME ...]`` gives the same from a shell.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from impls.endpoints import CQL_DEFAULT_PORT as CQL_DEFAULT_PORT
from impls.endpoints import MYSQL_DEFAULT_PORT as MYSQL_DEFAULT_PORT
from impls.endpoints import SERVICE_NAMES as SERVICE_NAMES
from impls.endpoints import SERVICES as SERVICES
from impls.endpoints import MysqlParams as MysqlParams
from impls.endpoints import Service as Service
from impls.endpoints import ServiceName as ServiceName
from impls.endpoints import cql_contact as cql_contact
from impls.endpoints import describe as describe
from impls.endpoints import endpoint as endpoint
from impls.endpoints import kafka_bootstrap as kafka_bootstrap
from impls.endpoints import mysql_dsn as mysql_dsn
from impls.endpoints import mysql_params as mysql_params
from impls.endpoints import pg_dsn as pg_dsn
from impls.endpoints import redact as redact
from impls.endpoints import redis_url as redis_url
from impls.endpoints import service as service
from impls.endpoints import split_host_port as split_host_port


def how_to_start(name: str) -> str:
    service(name)
    return f"run `make services` or `scripts/services up {name}`"


def _probe_redis(timeout: float) -> None:
    import redis

    client = redis.Redis.from_url(redis_url(), socket_timeout=timeout, socket_connect_timeout=timeout)
    try:
        if client.ping() is not True:
            raise RuntimeError("PING was not answered with PONG")
    finally:
        client.close()


def _probe_cassandra(timeout: float) -> None:
    import logging

    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import RoundRobinPolicy

    host, port = cql_contact()
    profile = ExecutionProfile(load_balancing_policy=RoundRobinPolicy(), request_timeout=timeout)
    driver_log = logging.getLogger("cassandra")
    level = driver_log.level
    driver_log.setLevel(logging.CRITICAL)  # the driver logs every refused connection as an error
    cluster = Cluster(
        [host],
        port=port,
        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
        connect_timeout=timeout,
        control_connection_timeout=timeout,
    )
    try:
        row = cluster.connect().execute("SELECT release_version FROM system.local").one()
        if row is None:
            raise RuntimeError("system.local returned no row")
    finally:
        cluster.shutdown()
        driver_log.setLevel(level)


def _probe_postgres(timeout: float) -> None:
    import psycopg

    with psycopg.connect(pg_dsn(), connect_timeout=max(1, round(timeout))) as conn:
        row = conn.execute("SELECT 1").fetchone()
        if row != (1,):
            raise RuntimeError(f"SELECT 1 returned {row!r}")


def _probe_mariadb(timeout: float) -> None:
    import pymysql

    params = mysql_params()
    conn = pymysql.connect(
        host=params.host,
        port=params.port,
        user=params.user,
        password=params.password,
        database=params.database,
        connect_timeout=timeout,
        read_timeout=timeout,
        write_timeout=timeout,
    )
    try:
        with conn.cursor() as cursor:
            cursor.execute("SELECT 1")
            row = cursor.fetchone()
        if row != (1,):
            raise RuntimeError(f"SELECT 1 returned {row!r}")
    finally:
        conn.close()


def _probe_kafka(timeout: float) -> None:
    from confluent_kafka.admin import AdminClient

    quiet: dict[str, str | int | float | bool] = {
        "bootstrap.servers": kafka_bootstrap(),
        "log_level": 0,
        "socket.connection.setup.timeout.ms": 1000,
    }
    metadata = AdminClient(quiet).list_topics(timeout=timeout)
    if not metadata.brokers:
        raise RuntimeError("the cluster metadata lists no broker")


_PROBES: Final[Mapping[ServiceName, Callable[[float], None]]] = {
    "redis": _probe_redis,
    "cassandra": _probe_cassandra,
    "postgres": _probe_postgres,
    "mariadb": _probe_mariadb,
    "kafka": _probe_kafka,
}


def probe(name: str, timeout: float = 2.0) -> str | None:
    """``None`` if ``name`` answers a real protocol request, else a one-line reason.

    ``timeout`` bounds each network step (connect, request); it is not a hard overall deadline.
    ``ValueError`` for an unknown service name; every other problem is reported as the reason.
    """
    svc = service(name)
    try:
        _PROBES[svc.name](timeout)
    except ModuleNotFoundError as exc:
        from conformance.backends import DRIVER_EXTRAS

        extra = DRIVER_EXTRAS.get((exc.name or "").partition(".")[0], "all")
        return f"{name}: its driver is not installed ({exc}); pip install 'ratchet-conformance[{extra}]'"
    except Exception as exc:
        detail = " ".join(str(exc).split()) or "(no message)"
        if len(detail) > 300:
            detail = detail[:297] + "..."
        return f"{describe(name)} did not answer: {type(exc).__name__}: {detail}"
    return None


def env_lines() -> list[str]:
    """``export VAR=default`` lines, as printed by ``scripts/services env``."""
    return [f"export {SERVICES[n].env_var}={SERVICES[n].default}" for n in SERVICE_NAMES]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    command = args.pop(0) if args else "probe"
    if command == "env":
        print("\n".join(env_lines()))
        return 0
    if command != "probe":
        print("usage: python -m conformance.services [env | probe [NAME ...]]", file=sys.stderr)
        return 2
    status = 0
    for name in args or SERVICE_NAMES:
        reason = probe(name)
        print(f"{name}: {'ok' if reason is None else reason}")
        if reason is not None:
            status = 1
    return status


if __name__ == "__main__":
    raise SystemExit(main())
