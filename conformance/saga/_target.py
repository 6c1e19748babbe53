"""What a saga machine opens per example: a runtime under test on fresh namespaces.

A saga backend is given as a ``backend`` factory (Ratchet's runtime runs over it) or as a
``runtime`` factory (a runtime that brings its own storage, such as the nasaga host).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import attrs

from conformance._machine import SuiteStats
from conformance._suites import BackendUnderTest
from conformance.saga._port import FateHook, SagaRuntime
from conformance.saga._ratchet import RatchetRuntime


@attrs.frozen
class SagaTarget:
    open: Callable[[str, FateHook, SuiteStats], SagaRuntime]

    @classmethod
    def of(cls, backend: BackendUnderTest) -> SagaTarget:
        if "runtime" in backend.factories:
            return cls(cast(Callable[[str, FateHook, SuiteStats], SagaRuntime], backend.factory("runtime")))
        factory: Callable[..., Any] = backend.factory("backend")
        return cls(lambda namespace, fates, stats: RatchetRuntime(factory, namespace, fates, stats))
