"""What a commit-family machine opens per example: a store and an outbox, each on a new namespace."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import attrs

from conformance._machine import ConformanceMachine
from conformance._outage import bounded
from conformance._suites import BackendUnderTest
from conformance._violations import HarnessEnvironmentError
from impls.api import MembershipDirectory, MessageStore, Outbox
from model.commit import MessageStoreError


@attrs.frozen
class CommitTarget:
    """The factories, and the wire (the store's fault proxy) when the backend has one.

    A backend has a wire when it names its service and its store factory takes an ``endpoint``
    keyword (docs/backend-authors.md): the store then opens on the proxy's endpoint, and the
    machines get the ``arm_wire_fault`` rule. An outbox factory that takes ``endpoint`` too opens on
    the same proxy (``outbox_on_wire``), so a wire kind can meet a publish (``_outbox.publish_on_wire``);
    one that does not talks to its server directly and meets the outbox kinds at its port only.
    """

    store_factory: Callable[..., Any]
    outbox_factory: Callable[..., Any]
    wire: Any = None  # a conformance.wire.WireRoute, or None
    #: The committer the commit suite holds against the contract (role ``committer``, ``--committer``):
    #: called as ``impls.commit.MessageCommitter`` is, which it is by default.
    committer_factory: Callable[..., Any] | None = None
    #: On a wire, the store factory before the route's endpoint was bound to it: the endpoint
    #: options are judged with endpoints of their own (``_endpoint_rules.py``).
    unrouted_store_factory: Callable[..., Any] | None = None
    outbox_on_wire: bool = False

    @classmethod
    def of(cls, backend: BackendUnderTest) -> CommitTarget:
        """Raises ``ValueError`` for a bad factory path (a usage error)."""
        from conformance.wire import accepts_endpoint, route

        store = backend.factory("store")
        committer = backend.factory("committer") if "committer" in backend.factories else None
        if backend.service is None or not accepts_endpoint(store):
            return cls(store, backend.factory("outbox"), committer_factory=committer)
        wire = route(backend.service)
        routed = functools.partial(store, endpoint=wire.endpoint)
        outbox = backend.factory("outbox")
        on_wire = accepts_endpoint(outbox)
        if on_wire:
            outbox = functools.partial(outbox, endpoint=wire.endpoint)
        return cls(routed, outbox, wire, committer, store, on_wire)

    @property
    def proxy(self) -> Any:
        return None if self.wire is None else self.wire.proxy

    def specialise(self, base: type[ConformanceMachine]) -> type[ConformanceMachine]:
        """The machine with the wire-fault rule when the store has a wire; ``base`` unchanged if not."""
        if self.wire is None:
            return base
        from conformance.commit._wire_rules import MidCallWireFaultRules, WireFaultRules

        rules = MidCallWireFaultRules if self.wire.mid_call else WireFaultRules
        return type(base.__name__, (rules, base), {})

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
