"""What a saga machine opens per example: backends on fresh namespaces from one factory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from conformance._suites import BackendUnderTest
from conformance._violations import HarnessEnvironmentError
from impls.saga import SagaBackend, SagaBackendError


@attrs.frozen
class SagaTarget:
    factory: Callable[..., Any]

    @classmethod
    def of(cls, backend: BackendUnderTest) -> SagaTarget:
        return cls(backend.factory("backend"))

    def open(self, namespace: str) -> SagaBackend:
        try:
            backend = self.factory(namespace)
        except SagaBackendError as exc:
            raise HarnessEnvironmentError(
                f"the saga backend factory could not open a backend: {exc}"
            ) from exc
        if not isinstance(backend, SagaBackend):
            raise HarnessEnvironmentError(
                f"the factory returned {type(backend).__name__}, not an impls.saga.SagaBackend"
            )
        return backend
