"""One real protocol request per service: PING, a CQL or SQL query, a Kafka metadata request.

Drivers are imported only when probed, so importing this module is cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from impls.endpoints import (
    CQL_DEFAULT_PORT,
    SERVICE_NAMES,
    SERVICES,
    ServiceName,
    describe,
    mysql_params,
    redact,
    service,
    split_host_port,
)


def how_to_start(name: str) -> str:
    service(name)
    return f"run `make services` or `scripts/services up {name}`"


def _probe_redis(where: str, timeout: float) -> None:
    import redis

    client = redis.Redis.from_url(where, socket_timeout=timeout, socket_connect_timeout=timeout)
    try:
        if client.ping() is not True:
            raise RuntimeError("PING was not answered with PONG")
    finally:
        client.close()


def _probe_cassandra(where: str, timeout: float) -> None:
    import logging

    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import RoundRobinPolicy

    host, port = split_host_port(where, CQL_DEFAULT_PORT)
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


def _probe_postgres(where: str, timeout: float) -> None:
    import psycopg

    with psycopg.connect(where, connect_timeout=max(1, round(timeout))) as conn:
        row = conn.execute("SELECT 1").fetchone()
        if row != (1,):
            raise RuntimeError(f"SELECT 1 returned {row!r}")


def _probe_mariadb(where: str, timeout: float) -> None:
    import pymysql

    params = mysql_params(where)
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


def _probe_kafka(where: str, timeout: float) -> None:
    from confluent_kafka.admin import AdminClient

    quiet: dict[str, str | int | float | bool] = {
        "bootstrap.servers": where,
        "log_level": 0,
        "socket.connection.setup.timeout.ms": 1000,
    }
    metadata = AdminClient(quiet).list_topics(timeout=timeout)
    if not metadata.brokers:
        raise RuntimeError("the cluster metadata lists no broker")


_PROBES: Final[Mapping[ServiceName, Callable[[str, float], None]]] = {
    "redis": _probe_redis,
    "cassandra": _probe_cassandra,
    "postgres": _probe_postgres,
    "mariadb": _probe_mariadb,
    "kafka": _probe_kafka,
}


def probe(name: str, timeout: float = 2.0, endpoint: str | None = None) -> str | None:
    """``None`` if ``name`` answers a real protocol request, else a one-line reason.

    ``endpoint`` (default: the service's environment variable) is where it is asked. ``timeout``
    bounds each network step (connect, request); it is not a hard overall deadline.
    ``ValueError`` for an unknown service name; every other problem is reported as the reason.
    """
    svc = service(name)
    where = svc.endpoint() if endpoint is None else endpoint
    try:
        _PROBES[svc.name](where, timeout)
    except ModuleNotFoundError as exc:
        from conformance.backends import DRIVER_EXTRAS

        extra = DRIVER_EXTRAS.get((exc.name or "").partition(".")[0], "all")
        return f"{name}: its driver is not installed ({exc}); pip install 'ratchet-conformance[{extra}]'"
    except Exception as exc:
        detail = " ".join(str(exc).split()) or "(no message)"
        if len(detail) > 300:
            detail = detail[:297] + "..."
        asked = describe(name) if endpoint is None else f"{name} at {redact(where)}"
        return f"{asked} did not answer: {type(exc).__name__}: {detail}"
    return None


def env_lines() -> list[str]:
    """``export VAR=default`` lines, as printed by ``scripts/services env`` with no port overrides."""
    return [f"export {SERVICES[n].env_var}={SERVICES[n].default}" for n in SERVICE_NAMES]
