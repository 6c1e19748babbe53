"""What the launcher reads from the environment, once: where, which ports, how durable.

``Settings.from_env()`` is the only reader of the launcher's knobs (the endpoints themselves are
``impls.endpoints``'s: each service's main port defaults to the port of its default endpoint, and
``endpoint(name)`` is that default pointed at the port in use, so ``env`` prints what the stores
read). A private set of services beside the project's is the same launcher with other ports and
another ``RATCHET_SERVICES_DIR``.

Knobs: ``RATCHET_SERVICES_DIR`` (default ``<repo>/.services``), ``XDG_CACHE_HOME`` (downloads under
``<cache>/ratchet``), ``RATCHET_DURABILITY`` (``durable``, the default: every acknowledged write
survives kill -9; or ``fast``), the ports in ``PORT_VARS``, ``RATCHET_CASSANDRA_VERSION``,
``MAX_HEAP_SIZE`` / ``HEAP_NEWSIZE`` (Cassandra), ``RATCHET_KAFKA_VERSION``, ``RATCHET_KAFKA_HEAP``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import attrs

from conformance.services._process import ServiceControlError
from impls.endpoints import SERVICE_NAMES, SERVICES, address_of, service, with_address

REPO: Final = Path(__file__).resolve().parents[2]
DURABILITIES: Final = ("durable", "fast")

#: The port each service's endpoint uses (its default from impls.endpoints).
MAIN_PORT_VAR: Final[Mapping[str, str]] = {
    "redis": "RATCHET_REDIS_PORT",
    "cassandra": "RATCHET_CQL_PORT",
    "postgres": "RATCHET_PG_PORT",
    "mariadb": "RATCHET_MARIADB_PORT",
    "kafka": "RATCHET_KAFKA_PORT",
}
#: Ports a server needs beside its endpoint's (no client connects to them).
EXTRA_PORT_VARS: Final[Mapping[str, tuple[tuple[str, int], ...]]] = {
    "cassandra": (
        ("RATCHET_CASSANDRA_STORAGE_PORT", 17000),
        ("RATCHET_CASSANDRA_SSL_STORAGE_PORT", 17001),
        ("RATCHET_CASSANDRA_JMX_PORT", 17199),
    ),
    "kafka": (("RATCHET_KAFKA_CONTROLLER_PORT", 19093),),
}
PORT_VARS: Final = (
    *MAIN_PORT_VAR.values(),
    *(var for extras in EXTRA_PORT_VARS.values() for var, _ in extras),
)


def _port(env: Mapping[str, str], var: str, default: int) -> int:
    value = env.get(var) or str(default)
    if not value.isdigit() or not 0 < int(value) < 65536:
        raise ServiceControlError(f"{var} must be a TCP port, not {value!r}")
    return int(value)


@attrs.frozen
class Settings:
    root: Path  # everything the servers write: data, logs, pid files, generated configuration
    cache: Path  # downloads that are not Debian packages (Cassandra's and Kafka's jars)
    durability: str
    ports: Mapping[str, int]  # PORT_VARS -> port
    cassandra_version: str = "5.0.9"
    cassandra_heap: str = "1G"
    cassandra_newgen: str = "200M"
    kafka_version: str = "4.4.0"
    kafka_heap: str = "512m"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        durability = env.get("RATCHET_DURABILITY") or "durable"
        if durability not in DURABILITIES:
            raise ServiceControlError(f"RATCHET_DURABILITY must be durable or fast, not {durability}")
        ports = {
            var: _port(env, var, address_of(n, service(n).default)[1]) for n, var in MAIN_PORT_VAR.items()
        }
        for extras in EXTRA_PORT_VARS.values():
            ports.update({var: _port(env, var, default) for var, default in extras})
        cache_home = Path(env.get("XDG_CACHE_HOME") or Path(env.get("HOME") or Path.home()) / ".cache")
        return cls(
            root=Path(env.get("RATCHET_SERVICES_DIR") or REPO / ".services"),
            cache=cache_home / "ratchet",
            durability=durability,
            ports=ports,
            cassandra_version=env.get("RATCHET_CASSANDRA_VERSION") or "5.0.9",
            cassandra_heap=env.get("MAX_HEAP_SIZE") or "1G",
            cassandra_newgen=env.get("HEAP_NEWSIZE") or "200M",
            kafka_version=env.get("RATCHET_KAFKA_VERSION") or "4.4.0",
            kafka_heap=env.get("RATCHET_KAFKA_HEAP") or "512m",
        )

    @property
    def durable(self) -> bool:
        return self.durability == "durable"

    def port(self, var: str) -> int:
        return self.ports[var]

    def main_port(self, name: str) -> int:
        return self.ports[MAIN_PORT_VAR[name]]

    def service_ports(self, name: str) -> list[int]:
        return [self.main_port(name), *(self.ports[var] for var, _ in EXTRA_PORT_VARS.get(name, ()))]

    def endpoint(self, name: str) -> str:
        """What a client of ``name`` connects to on this set: the default endpoint, this port."""
        return with_address(name, service(name).default, "127.0.0.1", self.main_port(name))

    def env_lines(self) -> list[str]:
        return [f"export {SERVICES[n].env_var}={self.endpoint(n)}" for n in SERVICE_NAMES]
