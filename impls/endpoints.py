"""The one home of every real-service endpoint: environment variable and default per service.

Stores, saga backends, the harness (conformance/services/), the service launcher
(scripts/services) and the tests all read these. The defaults match what ``scripts/services up``
starts on loopback; tests/test_services.py checks that ``scripts/services env`` agrees::

    redis      RATCHET_REDIS_URL    redis://127.0.0.1:16379/0
    cassandra  RATCHET_CQL_CONTACT  127.0.0.1:19042
    postgres   RATCHET_PG_DSN       postgresql://ratchet:ratchet@127.0.0.1:15432/ratchet
    mariadb    RATCHET_MYSQL_DSN    mysql://ratchet:ratchet@127.0.0.1:13306/ratchet
    kafka      RATCHET_KAFKA_BOOTSTRAP  127.0.0.1:19092   (bootstrap.servers: host:port[,host:port...])

Nothing here imports a driver or opens a connection.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal
from urllib.parse import SplitResult, unquote, urlsplit

ServiceName = Literal["redis", "cassandra", "postgres", "mariadb", "kafka"]
SERVICE_NAMES: Final[tuple[ServiceName, ...]] = ("redis", "cassandra", "postgres", "mariadb", "kafka")


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
    "kafka": Service("kafka", "RATCHET_KAFKA_BOOTSTRAP", "127.0.0.1:19092"),
}

CQL_DEFAULT_PORT: Final = 9042  # used when RATCHET_CQL_CONTACT names a host without a port
MYSQL_DEFAULT_PORT: Final = 3306
KAFKA_DEFAULT_PORT: Final = 9092


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


def kafka_bootstrap() -> str:
    """``RATCHET_KAFKA_BOOTSTRAP``: librdkafka's ``bootstrap.servers`` (``host:port[,host:port]``)."""
    return endpoint("kafka")


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


def address_of(name: str, value: str) -> tuple[str, int]:
    """The (host, port) an endpoint of service ``name`` connects to (a URL/DSN, or CQL's host:port)."""
    if name == "cassandra":  # a ring's contacts share one port; the first one answers for them
        return split_host_port(value.partition("?")[0].split(",")[0], CQL_DEFAULT_PORT)
    if name == "kafka":
        return split_host_port(value.split(",")[0], KAFKA_DEFAULT_PORT)
    parts = urlsplit(value)
    defaults = {"redis": 6379, "postgres": 5432, "mariadb": MYSQL_DEFAULT_PORT}
    return parts.hostname or "127.0.0.1", parts.port or defaults[service(name).name]


def with_address(name: str, value: str, host: str, port: int) -> str:
    """The endpoint ``value`` of service ``name`` pointed at ``host:port`` instead (e.g. a proxy);
    user, password, database and options (a CQL contact's ``?replication_factor=N``) are kept."""
    if name == "kafka":
        return f"{host}:{port}"
    if name == "cassandra":
        options = value.partition("?")[2]
        return f"{host}:{port}?{options}" if options else f"{host}:{port}"
    parts = urlsplit(value)
    credentials = parts.netloc.rpartition("@")[0]
    netloc = f"{credentials}@{host}:{port}" if credentials else f"{host}:{port}"
    return parts._replace(netloc=netloc).geturl()
