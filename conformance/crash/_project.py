"""Service control for the servers the launcher starts (the project's, or a private set).

A ``ScriptedService`` finds its server through the launcher's pid file under the services
directory (``RATCHET_SERVICES_DIR``, default ``<repo>/.services``) and kills it only if that process
is alive *and* serves the endpoint the backend uses (its command line names the endpoint's port): a
stale pid file, a recycled pid or a server of another checkout is never touched. It restarts the
server through the launcher (``conformance.services.restart``, in process) under the same ports and
the same durability it was started with (the launcher records it), so a restart leaves the service
as it was.

The named backends' ``control`` factories are the functions at the bottom (``redis_control``, ...).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import attrs

from conformance.services import ServiceControlError, command_line, kill_tree, pid_alive
from conformance.services._launcher import restart
from conformance.services._settings import REPO, Settings
from impls import endpoints

RESTART_TIMEOUT_S = {"redis": 60.0, "postgres": 120.0, "mariadb": 180.0, "cassandra": 360.0, "kafka": 180.0}
_LOOPBACK = ("127.", "localhost", "::1")


def services_dir() -> Path:
    return Path(os.environ.get("RATCHET_SERVICES_DIR") or REPO / ".services")


@attrs.frozen
class ScriptedService:
    """One service of ``scripts/services`` (``service`` is the launcher's name for it)."""

    service: str  # redis | postgres | mariadb | cassandra | kafka
    host: str
    port: int
    root: Path  # the services directory

    @property
    def name(self) -> str:
        return f"{self.service} at {self.host}:{self.port}"

    @property
    def crash_profiles(self) -> tuple[str, ...]:
        # A Cassandra restart costs tens of seconds (JVM start, commit log replay): deep only.
        return ("deep",) if self.service == "cassandra" else ("ci", "deep")

    @property
    def data_dir(self) -> Path:
        base = self.root / self.service
        return base if self.service == "cassandra" else base / "data"

    @property
    def _pid_file(self) -> Path:
        base = self.root / self.service
        return {
            "redis": base / "redis.pid",
            "postgres": base / "data" / "postmaster.pid",
            "mariadb": base / "mariadbd.pid",
            "cassandra": base / "cassandra.pid",
            "kafka": base / "kafka.pid",
        }[self.service]

    def _marker(self) -> str:
        """What the server's command line must contain to be the one serving our endpoint."""
        if self.service == "redis":
            return f":{self.port}"
        if self.service == "postgres":
            return f"-p {self.port}"
        if self.service == "mariadb":
            return f"--port={self.port}"
        if self.service == "kafka":
            return str(self.root / "kafka" / "conf" / "server.properties")
        return f"-Dcassandra.config=file://{self.root / 'cassandra' / 'conf' / 'cassandra.yaml'}"

    def pid(self) -> int:
        try:
            text = self._pid_file.read_text().split("\n", 1)[0].strip()
        except OSError:
            raise ServiceControlError(f"{self.name}: no pid file at {self._pid_file}") from None
        if not text.isdigit() or not pid_alive(int(text)):
            raise ServiceControlError(f"{self.name}: the pid file {self._pid_file} names no live process")
        pid = int(text)
        if self._marker() not in command_line(pid):
            raise ServiceControlError(
                f"{self.name}: pid {pid} (from {self._pid_file}) is not the server of this endpoint"
            )
        if self.service == "cassandra" and f"native_transport_port: {self.port}" not in self._yaml():
            raise ServiceControlError(f"{self.name}: the Cassandra under {self.root} listens elsewhere")
        return pid

    def kill(self) -> None:
        kill_tree(self.pid())

    def restart(self) -> None:
        timeout = RESTART_TIMEOUT_S[self.service]
        try:
            restart(self.service, Settings.from_env({**os.environ, **self._launcher_env()}))
        except ServiceControlError as exc:
            raise ServiceControlError(f"{self.name}: the launcher could not restart it: {exc}") from None
        _wait_answering(self.service, timeout)

    def durability(self) -> str:
        try:
            recorded = (self.root / self.service / "durability").read_text().strip()
        except OSError:
            recorded = "fast"  # started by a launcher from before durability was a setting
        return f"{recorded} (scripts/services)"

    # --- what the launcher needs to start it again as it was -------------------------------------

    def _yaml(self) -> str:
        try:
            return (self.root / "cassandra" / "conf" / "cassandra.yaml").read_text()
        except OSError:
            return ""

    def _launcher_env(self) -> dict[str, str]:
        env = {
            "RATCHET_SERVICES_DIR": str(self.root),
            "RATCHET_DURABILITY": self.durability().split()[0],
        }
        port_var = {
            "redis": "RATCHET_REDIS_PORT",
            "postgres": "RATCHET_PG_PORT",
            "mariadb": "RATCHET_MARIADB_PORT",
            "cassandra": "RATCHET_CQL_PORT",
            "kafka": "RATCHET_KAFKA_PORT",
        }[self.service]
        env[port_var] = str(self.port)
        if self.service == "cassandra":
            yaml = self._yaml()
            for var, field in (
                ("RATCHET_CASSANDRA_STORAGE_PORT", "storage_port"),
                ("RATCHET_CASSANDRA_SSL_STORAGE_PORT", "ssl_storage_port"),
            ):
                found = re.search(rf"^{field}: (\d+)$", yaml, re.MULTILINE)
                if found:
                    env[var] = found.group(1)
            jmx = re.search(r"-Dcassandra\.jmx\.local\.port=(\d+)", self._last_cmdline)
            if jmx:
                env["RATCHET_CASSANDRA_JMX_PORT"] = jmx.group(1)
        if self.service == "kafka":
            try:
                props = (self.root / "kafka" / "conf" / "server.properties").read_text()
            except OSError:
                props = ""
            controller = re.search(r"CONTROLLER://[^:,]+:(\d+)", props)
            if controller:
                env["RATCHET_KAFKA_CONTROLLER_PORT"] = controller.group(1)
        return env

    @property
    def _last_cmdline(self) -> str:
        try:
            return command_line(self.pid())
        except ServiceControlError:
            return ""


def _wait_answering(service: str, timeout_s: float) -> None:
    """Until ``service`` answers a real protocol request through the harness's own probe."""
    from conformance.services import probe

    deadline = time.monotonic() + timeout_s
    reason = probe(service)
    while reason is not None:
        if time.monotonic() > deadline:
            raise ServiceControlError(f"{service} did not answer after a restart: {reason}")
        time.sleep(0.1)
        reason = probe(service)


def scripted(service: str, host: str, port: int) -> ScriptedService:
    if not host.startswith(_LOOPBACK):
        raise ServiceControlError(
            f"{service} at {host}:{port} is not on loopback: the harness will not kill it"
        )
    return ScriptedService(service, host, port, services_dir())


def _url_endpoint(url: str, default_port: int) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or default_port


def redis_control() -> ScriptedService:
    return scripted("redis", *_url_endpoint(endpoints.redis_url(), 6379))


def postgres_control() -> ScriptedService:
    return scripted("postgres", *_url_endpoint(endpoints.pg_dsn(), 5432))


def mariadb_control() -> ScriptedService:
    params = endpoints.mysql_params()
    return scripted("mariadb", params.host, params.port)


def cassandra_control() -> ScriptedService:
    return scripted("cassandra", *endpoints.cql_contact())


def kafka_control() -> ScriptedService:
    return scripted("kafka", *endpoints.address_of("kafka", endpoints.kafka_bootstrap()))


CONTROLS: dict[str, Callable[[], ScriptedService]] = {
    "redis": redis_control,
    "postgres": postgres_control,
    "mariadb": mariadb_control,
    "cassandra": cassandra_control,
    "kafka": kafka_control,
}
