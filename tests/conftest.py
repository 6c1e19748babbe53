"""Real-service gating for tests: ``@pytest.mark.service("redis")`` or ``require_service("redis")``.

When the service does not answer (conformance/services/ ``probe``), the test is skipped with a
message naming the service and how to start it -- unless ``CI`` is ``true`` (any case), where it
fails instead: CI starts its services, so a missing one is a broken run, never a silent skip.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

# Failed TLS handshakes are what the transport tests provoke; gRPC logs each one at INFO.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from conformance.services import SERVICE_NAMES, endpoint, how_to_start, probe

pytest_plugins = ["pytester"]

# (service, endpoint) -> probe result, so a session probes each server once (a refused CQL
# connection costs the driver a while, and there may be hundreds of such tests).
_probed: dict[tuple[str, str], str | None] = {}


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


def require_service(name: str) -> None:
    """Return if ``name`` answers; otherwise fail (CI=true) or skip the running test."""
    if name not in SERVICE_NAMES:
        pytest.fail(f"unknown service {name!r} (expected one of: {', '.join(SERVICE_NAMES)})")
    key = (name, endpoint(name))
    if key not in _probed:
        _probed[key] = probe(name, timeout=5.0)
    reason = _probed[key]
    if reason is None:
        return
    if in_ci():
        pytest.fail(f"CI=true: required service unavailable: {reason}; {how_to_start(name)}", pytrace=False)
    pytest.skip(f"needs {name}: {reason}; {how_to_start(name)}")


@pytest.fixture(name="require_service")
def _require_service_fixture() -> Callable[[str], None]:
    """The ``require_service`` helper, for tests that decide at run time what they need."""
    return require_service


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "service(name, ...): the test needs a real service (redis, cassandra, postgres, mariadb, kafka)",
    )
    for name in sorted(SHARED_TABLE_SERVICES):
        config.addinivalue_line(
            "markers", f"sql_{name}: needs {name}'s shared SQL saga tables (added with sql_tables)"
        )
    config.addinivalue_line(
        "markers",
        f"{OWN_SCHEMAS_MARK}: the nasaga runtime's tests; their rows live in schemas of their own",
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in item.iter_markers(name="service"):
        if not marker.args:
            pytest.fail("@pytest.mark.service needs at least one service name", pytrace=False)
        for name in marker.args:
            require_service(name)


#: The SQL saga backends keep every namespace in one table set per schema, so two processes
#: running against PostgreSQL or MariaDB at once contend on the same tables (serialization
#: failures and deadlocks the runtime retries; a planted bug that writes outside its transaction
#: then meets its own rows): the tests that need these servers are marked ``sql_tables``, and
#: make test runs them in a process of their own, one after another (``pytest-sql``).
#: (Not an xdist group: ``--dist loadgroup`` ignores every group under pytest 9.2, whose
#: structured node ids drop the suffix it adds; pytest-xdist issue #1386.)
SHARED_TABLE_SERVICES = frozenset({"postgres", "mariadb"})
#: The nasaga runtime keeps its rows in schemas it creates for each test (impls/nasaga), never in
#: Ratchet's shared SQL saga tables: its test modules are marked ``nasaga_schemas`` and make test
#: runs them in a process of their own (``pytest-nasaga``), beside the suites that use those tables.
OWN_SCHEMAS_MARK = "nasaga_schemas"
#: The project's one Cassandra node is kept busy by the lightweight transactions of
#: conformance-live-cql-store and -commit; a test that needs its answers on time (a suite run that
#: must not end in an outage) is marked ``cql_server`` and make test runs it after those phases
#: (``pytest-cql``).
QUIET_SERVICES = frozenset({"cassandra"})


# A wrapper, so the mark is there before ``-m`` selects on it (the mark plugin's own
# implementation of this hook).
@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    for item in items:
        services = {name for marker in item.iter_markers(name="service") for name in marker.args}
        if item.get_closest_marker(OWN_SCHEMAS_MARK) is not None:
            continue
        if services & SHARED_TABLE_SERVICES:
            item.add_marker(pytest.mark.sql_tables)
            # The table sets are per engine: make test runs each engine's tests in its own process.
            for name in sorted(services & SHARED_TABLE_SERVICES):
                item.add_marker(getattr(pytest.mark, f"sql_{name}"))
        elif services & QUIET_SERVICES:
            item.add_marker(pytest.mark.cql_server)
    return (yield)
