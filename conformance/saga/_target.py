"""What a saga machine opens per example: a runtime under test on fresh namespaces.

A saga backend is given as a ``backend`` factory (Ratchet's runtime runs over it) or as a
``runtime`` factory (a runtime that brings its own storage, such as the nasaga host). A backend
factory that names its service and takes an ``endpoint`` keyword is opened through the fault
proxy (``conformance.wire``), and the machine gets the wire-fault rule (``_wire.SagaWireRules``);
so is a runtime factory that takes an ``endpoint`` (the nasaga host's database). A runtime
factory also gives the machine the host-crash rule (``_host_faults.HostFaultRules``), which runs
only on a runtime whose capabilities say ``host_crash``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, cast

import attrs

from conformance._machine import ConformanceMachine, SuiteStats
from conformance._suites import BackendUnderTest
from conformance.saga._port import FateHook, SagaRuntime
from conformance.saga._ratchet import RatchetRuntime

Opener = Callable[[str, FateHook, SuiteStats], SagaRuntime]


@attrs.frozen
class SagaTarget:
    open: Opener
    wire: Any = None  # a conformance.wire.WireRoute, or None
    #: The machine gets the host-crash rule (``_host_faults``); keyword-only, so subclasses keep
    #: their positional fields.
    host_faults: bool = attrs.field(default=False, kw_only=True)

    @classmethod
    def of(cls, backend: BackendUnderTest) -> SagaTarget:
        from conformance.wire import accepts_endpoint, route

        if "runtime" in backend.factories:
            # A runtime that brings its own storage and takes an ``endpoint`` reaches it through
            # the fault proxy too (the nasaga host's DSN): its COMMITs can meet the wire faults.
            runtime: Callable[..., Any] = backend.factory("runtime")
            # Its host may be killed mid-unit where it says so (``RuntimeCapabilities.host_crash``).
            if backend.service is not None and accepts_endpoint(runtime):
                proxy = route(backend.service)
                proxied = functools.partial(runtime, endpoint=proxy.endpoint)
                return cls(cast(Opener, proxied), proxy, host_faults=True)
            return cls(cast(Opener, runtime), None, host_faults=True)

        factory: Callable[..., Any] = backend.factory("backend")
        wire = None
        if backend.service is not None and accepts_endpoint(factory):
            wire = route(backend.service)
            factory = functools.partial(factory, endpoint=wire.endpoint)
        opened = factory
        # A backend whose state lives in its object has no other writer: its database never
        # refuses a unit, so no ROLLED_BACK it reports is excused as a refusal (S-TX-01).
        refusals = not backend.in_process
        return cls(
            lambda namespace, fates, stats: RatchetRuntime(opened, namespace, fates, stats, refusals), wire
        )

    def specialise(self, base: type[ConformanceMachine]) -> type[ConformanceMachine]:
        """The machine with the wire-fault rule (conformance/saga/_wire.py) when there is a wire,
        and the host-crash rule (conformance/saga/_host_faults.py) when the host can be killed."""
        machine = base
        if self.wire is not None:
            from conformance.saga._wire import SagaWireRules

            machine = type(base.__name__, (SagaWireRules, machine), {"proxy": self.wire.proxy})
        if self.host_faults:
            from conformance.saga._host_faults import HostFaultRules

            # Outermost: its opening draws more than the others' and runs theirs first (super()).
            machine = type(base.__name__, (HostFaultRules, machine), {})
        return machine
