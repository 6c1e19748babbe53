"""Routing a backend through a fault proxy: one ``FaultProxy`` per real endpoint, per process.

A backend opts in by naming its service (``BackendSpec.service``) and by factories that take an
``endpoint`` keyword (docs/backend-authors.md). ``route(service)`` starts (once) the proxy in
front of the service's configured endpoint and returns the endpoint to hand the factory instead:
the same URL or DSN with the proxy's address, plus the client options a stall needs to end (the
Redis client's read timeout; the other drivers bound their reads themselves or are reset by the
proxy when a stall ends).
"""

from __future__ import annotations

import inspect
import os
import threading
from collections.abc import Callable
from typing import Any

import attrs

from conformance.wire._proxy import FaultProxy
from impls import endpoints

#: How long a stalled answer is held before the proxy resets the connection, and the client
#: timeout that makes a driver give up first (so the stall is "past the client's timeout").
STALL_S = 1.0
REDIS_CLIENT_TIMEOUT_S = 0.5
#: cassandra-driver multiplexes one connection and, past its request timeout, forgets the request
#: but keeps the connection: a stall on it holds the answers ``CQL_STALL_S`` and then delivers them
#: (``FaultProxy.release_stalls``), and a store reached through the proxy gets a request timeout
#: below that (its endpoint's ``?request_timeout_s=``), so the driver really times the request out
#: (``OperationTimedOut``: a lightweight transaction's outcome unknown) and its next statements
#: arrive on the same connection once the stall ends. Off the proxy the store keeps its 10 s.
CQL_STALL_S = 1.5
CQL_CLIENT_TIMEOUT_S = 1.0
#: Services whose stores' calls are several statements each (the CQL store reads at SERIAL, may
#: write a side table, then sends its lightweight transaction): their wire faults may pass a call's
#: first requests and meet a later one (``conformance/commit/_wire_rules.MidCallWireFaultRules``).
MID_CALL_SERVICES = frozenset({"cassandra"})


@attrs.frozen
class EndpointOption:
    """One option a service's store documents for its ``endpoint`` (docs/backend-authors.md).

    Configuration is input, so a value outside the documented range gets a clear, typed error
    (``MessageStoreError``) and a value inside it opens a store that serves (C-ERR-04;
    ``conformance/commit/_endpoint_rules.py`` holds the store to both, on a wire).
    """

    name: str
    refused: tuple[str, ...]
    accepted: tuple[str, ...]


#: The documented endpoint options of each service's stores, written here from the backend's
#: documentation (impls/cql: ``CqlSettings.from_endpoint``'s docstring), never read from impls: a
#: changed range differs. ``request_timeout_s`` is not listed: the proxy's route sets it already.
ENDPOINT_OPTIONS: dict[str, tuple[EndpointOption, ...]] = {
    # A ring's keyspace: N replicas, "a whole number >= 1"; 1 is the single test node's. A factor
    # above the node count (a ring's 3) cannot be judged on the single test node: the server itself
    # refuses to set the keyspace up with it ("the database could not be set up").
    "cassandra": (EndpointOption("replication_factor", refused=("0", "-1", "two", "1.5"), accepted=("1",)),),
}

_lock = threading.Lock()
_proxies: dict[tuple[str, str], FaultProxy] = {}


def _forget_after_fork() -> None:
    """A forked process (a ``--workers`` worker, conformance/_workers.py) inherits the parent's
    proxies without the threads that serve them: it starts its own."""
    global _lock
    _lock = threading.Lock()
    _proxies.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


@attrs.frozen
class WireRoute:
    """A service reached through a proxy: the proxy to arm, the endpoint to give the factories."""

    service: str
    proxy: FaultProxy = attrs.field(eq=False)
    endpoint: str
    mid_call: bool = False  # a wire fault may let a call's first requests through (MID_CALL_SERVICES)
    options: tuple[EndpointOption, ...] = ()  # the service's documented endpoint options

    def with_option(self, name: str, value: str) -> str:
        """The route's endpoint with ``name=value`` added to its options."""
        joiner = "&" if "?" in self.endpoint else "?"
        return f"{self.endpoint}{joiner}{name}={value}"


def route(service: str) -> WireRoute:
    """The proxied route to ``service``'s configured endpoint; ``ValueError`` for an unknown one."""
    upstream = endpoints.endpoint(service)
    with _lock:
        proxy = _proxies.get((service, upstream))
        if proxy is None:
            cql = service == "cassandra"
            proxy = FaultProxy(
                service,
                endpoints.address_of(service, upstream),
                stall_s=CQL_STALL_S if cql else STALL_S,
                release_stalls=cql,
            )
            _proxies[(service, upstream)] = proxy
        host, port = proxy.start()
    proxied = endpoints.with_address(service, upstream, host, port)
    if service == "redis":
        joiner = "&" if "?" in proxied else "?"
        proxied = f"{proxied}{joiner}socket_timeout={REDIS_CLIENT_TIMEOUT_S}"
    elif service == "cassandra":
        joiner = "&" if "?" in proxied else "?"
        proxied = f"{proxied}{joiner}request_timeout_s={CQL_CLIENT_TIMEOUT_S}"
    return WireRoute(service, proxy, proxied, service in MID_CALL_SERVICES, ENDPOINT_OPTIONS.get(service, ()))


def accepts_endpoint(factory: Callable[..., Any]) -> bool:
    """Whether a factory takes the ``endpoint`` keyword (how a backend opts in to the wire faults)."""
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False
    parameter = parameters.get("endpoint")
    return parameter is not None and parameter.kind in (
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.KEYWORD_ONLY,
    )
