"""The one home of the real-service endpoints Ratchet's tests and backends talk to.

Each service has an environment variable and a default that matches what ``scripts/services up``
starts on loopback (``scripts/services env`` prints the same values; tests/test_services.py checks
that the two agree)::

    redis      RATCHET_REDIS_URL    redis://127.0.0.1:16379/0
    cassandra  RATCHET_CQL_CONTACT  127.0.0.1:19042
    postgres   RATCHET_PG_DSN       postgresql://ratchet:ratchet@127.0.0.1:15432/ratchet
    mariadb    RATCHET_MYSQL_DSN    mysql://ratchet:ratchet@127.0.0.1:13306/ratchet

``probe(name)`` sends one real protocol request (PING, a CQL or SQL query) and returns ``None``
when it is answered, otherwise a one-line reason. Drivers are imported only when probed, so
importing this module is cheap. ``python -m conformance.services [env | probe NAME ...]`` gives
the same from a shell.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal
from urllib.parse import SplitResult, unquote, urlsplit

ServiceName = Literal["redis", "cassandra", "postgres", "mariadb"]
SERVICE_NAMES: Final[tuple[ServiceName, ...]] = ("redis", "cassandra", "postgres", "mariadb")


@dataclass(frozen=True)
class Service:
    name: ServiceName
    env_var: str
    default: str

    def endpoint(self) -> str:
        """The configured endpoint: the environment variable if set and non-empty, else the default."""
        return os.environ.get(self.env_var) or self.default


SERVICES: Final[Mapping[ServiceName, Service]] = {
    "redis": Service("redis", "RATCHET_REDIS_URL", "redis://127.0.0.1:16379/0"),
    "cassandra": Service("cassandra", "RATCHET_CQL_CONTACT", "127.0.0.1:19042"),
    "postgres": Service("postgres", "RATCHET_PG_DSN", "postgresql://ratchet:ratchet@127.0.0.1:15432/ratchet"),
    "mariadb": Service("mariadb", "RATCHET_MYSQL_DSN", "mysql://ratchet:ratchet@127.0.0.1:13306/ratchet"),
}

CQL_DEFAULT_PORT: Final = 9042  # used when RATCHET_CQL_CONTACT names a host without a port
MYSQL_DEFAULT_PORT: Final = 3306


def service(name: str) -> Service:
    """The ``Service`` called ``name``; ``ValueError`` for an unknown name."""
    for known in SERVICE_NAMES:
        if name == known:
            return SERVICES[known]
    raise ValueError(f"unknown service {name!r} (expected one of: {', '.join(SERVICE_NAMES)})")


def endpoint(name: str) -> str:
    return service(name).endpoint()


def redis_url() -> str:
    return endpoint("redis")


def pg_dsn() -> str:
    return endpoint("postgres")


def mysql_dsn() -> str:
    return endpoint("mariadb")


def cql_contact() -> tuple[str, int]:
    """``RATCHET_CQL_CONTACT`` as (host, port); accepts ``host``, ``host:port``, ``[v6]:port``."""
    return split_host_port(endpoint("cassandra"), CQL_DEFAULT_PORT)


def split_host_port(value: str, default_port: int) -> tuple[str, int]:
    value = value.strip()
    if value.startswith("["):  # [::1]:9042
        host, _, rest = value[1:].partition("]")
        port = rest.removeprefix(":")
        return host, int(port) if port else default_port
    if value.count(":") == 1:
        host, port = value.split(":")
        return host, int(port)
    return value, default_port


@dataclass(frozen=True)
class MysqlParams:
    host: str
    port: int
    user: str
    password: str
    database: str


def mysql_params(dsn: str | None = None) -> MysqlParams:
    """Split a ``mysql://user:password@host:port/database`` DSN into PyMySQL's keyword arguments."""
    parts = urlsplit(dsn if dsn is not None else mysql_dsn())
    if parts.scheme not in ("mysql", "mariadb", "mysql+pymysql"):
        raise ValueError(f"not a mysql:// DSN: {_redact(parts)}")
    return MysqlParams(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or MYSQL_DEFAULT_PORT,
        user=unquote(parts.username or ""),
        password=unquote(parts.password or ""),
        database=parts.path.lstrip("/"),
    )


def how_to_start(name: str) -> str:
    service(name)
    return f"run `make services` or `scripts/services up {name}`"


def describe(name: str) -> str:
    """``name`` with where it is expected, password hidden: ``redis (RATCHET_REDIS_URL=...)``."""
    svc = service(name)
    return f"{name} ({svc.env_var}={redact(svc.endpoint())})"


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for messages)."""
    return _redact(urlsplit(url)) if "://" in url else url


def _redact(parts: SplitResult) -> str:
    if parts.password is None:
        return parts.geturl()
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


# ----------------------------------------------------------------------------------- probes


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


_PROBES: Final[Mapping[ServiceName, Callable[[float], None]]] = {
    "redis": _probe_redis,
    "cassandra": _probe_cassandra,
    "postgres": _probe_postgres,
    "mariadb": _probe_mariadb,
}


def probe(name: str, timeout: float = 2.0) -> str | None:
    """``None`` if ``name`` answers a real protocol request, else a one-line reason.

    ``timeout`` bounds each network step (connect, request); it is not a hard overall deadline.
    ``ValueError`` for an unknown service name; every other problem is reported as the reason.
    """
    svc = service(name)
    try:
        _PROBES[svc.name](timeout)
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
