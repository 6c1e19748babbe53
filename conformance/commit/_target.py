"""What a commit-family machine opens per example: a store and an outbox, each on a new namespace."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from conformance._outage import bounded
from conformance._suites import BackendUnderTest
from conformance._violations import HarnessEnvironmentError
from impls.api import MembershipDirectory, MessageStore, Outbox
from model.commit import MessageStoreError


@attrs.frozen
class CommitTarget:
    store_factory: Callable[..., Any]
    outbox_factory: Callable[..., Any]

    @classmethod
    def of(cls, backend: BackendUnderTest) -> CommitTarget:
        """Raises ``ValueError`` for a bad factory path (a usage error)."""
        return cls(backend.factory("store"), backend.factory("outbox"))

    async def open_store(self, namespace: str, membership: MembershipDirectory) -> MessageStore:
        store = await _open("store", self.store_factory, namespace, membership)
        if not isinstance(store, MessageStore):
            raise HarnessEnvironmentError(
                f"the store factory returned {type(store).__name__}, which is not an impls.api.MessageStore"
            )
        return store

    async def open_outbox(self, namespace: str) -> Outbox:
        outbox = await _open("outbox", self.outbox_factory, namespace)
        if not isinstance(outbox, Outbox):
            raise HarnessEnvironmentError(
                f"the outbox factory returned {type(outbox).__name__}, which is not an impls.api.Outbox"
            )
        return outbox


async def _open(role: str, factory: Callable[..., Any], *args: Any) -> Any:
    try:
        return await bounded(f"the {role} factory", factory(*args))
    except MessageStoreError as exc:
        raise HarnessEnvironmentError(f"the {role} factory could not open a {role}: {exc}") from exc
    except (OSError, ConnectionError, TimeoutError) as exc:
        raise HarnessEnvironmentError(f"the {role} factory could not reach its server: {exc!r}") from exc
    except TypeError as exc:
        raise HarnessEnvironmentError(
            f"the {role} factory is not an async factory of the documented shape: {exc}"
        ) from exc
