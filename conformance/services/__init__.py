"""Whether the real services answer: one real protocol request per service.

The endpoints themselves (environment variable and default per service) live in
``impls.endpoints``; this module re-exports them for the harness and the tests.

``probe(name)`` sends one real protocol request (PING, a CQL or SQL query, a Kafka metadata
request) and returns ``None`` when it is answered, otherwise a one-line reason. Drivers are
imported only when probed, so importing this module is cheap.
``probe(name, endpoint=...)`` asks another endpoint (the launcher's readiness check of the
ports it starts a server on).

The launcher lives here too (``up``, ``down``, ``status``, one module per server: ``_redis``,
``_postgres``, ``_mariadb``, ``_cassandra``, ``_kafka``; ``scripts/services`` is its shell
bootstrap), with the process helpers the crash suite kills and restarts servers through
(``kill_tree``, ``pid_alive``, ``command_line``). ``python -m conformance.services up|down|status|env
[service ...]`` or ``probe [NAME ...]`` from a shell.
"""

from __future__ import annotations

from conformance.services._launcher import down as down
from conformance.services._launcher import main as main
from conformance.services._launcher import restart as restart
from conformance.services._launcher import status as status
from conformance.services._launcher import up as up
from conformance.services._probe import env_lines as env_lines
from conformance.services._probe import how_to_start as how_to_start
from conformance.services._probe import probe as probe
from conformance.services._process import ServiceControlError as ServiceControlError
from conformance.services._process import command_line as command_line
from conformance.services._process import kill_tree as kill_tree
from conformance.services._process import pid_alive as pid_alive
from conformance.services._settings import Settings as Settings
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
