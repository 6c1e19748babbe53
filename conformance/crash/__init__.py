"""Faults in real processes: ``server-crash`` (kill -9 and restart), ``reopen`` and ``two-clients``.

The service-control seam (``ServiceControl``) is what a backend declares to get ``server-crash``;
the ``durability`` (commit family) and ``saga-durability`` suites inject these kinds beside the
model. docs/faults.md ("Faults in real processes") says what each one checks.
"""

from conformance.crash._control import CrashCycle as CrashCycle
from conformance.crash._control import InFlightCrash as InFlightCrash
from conformance.crash._control import ServiceControl as ServiceControl
from conformance.crash._control import ServiceControlError as ServiceControlError
from conformance.crash._control import crash_cycle as crash_cycle
from conformance.crash._faults import REOPEN as REOPEN
from conformance.crash._faults import SERVER_CRASH as SERVER_CRASH
from conformance.crash._faults import TWO_CLIENTS as TWO_CLIENTS
from conformance.crash._local import LocalRedis as LocalRedis
from conformance.crash._project import ScriptedService as ScriptedService
from conformance.crash._project import cassandra_control as cassandra_control
from conformance.crash._project import kafka_control as kafka_control
from conformance.crash._project import mariadb_control as mariadb_control
from conformance.crash._project import postgres_control as postgres_control
from conformance.crash._project import redis_control as redis_control
