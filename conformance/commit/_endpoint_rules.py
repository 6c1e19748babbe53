"""A store's documented endpoint options, held at their edges on a wire (C-ERR-04, C-ERR-01).

A backend with a named service takes an ``endpoint`` keyword (docs/backend-authors.md), and its
documentation may name options for it: the CQL store's ``replication_factor`` ("a whole number
>= 1", ``CqlSettings.from_endpoint``). Configuration is input, as the committer's constructor
arguments are (``_config_rules.configuration_refused``): a value outside the documented range gets
a clear, typed error, and at the store boundary that is a ``MessageStoreError`` (C-ERR-01), from
the factory or from the store's first call; a value inside it opens a store that serves. The
suites opened every store on the route's own endpoint, so a store that refused its legal edge, or
took a factor of 0 or a word for one, passed.

``ENDPOINT_OPTIONS`` (conformance/wire/_routes.py) lists each service's documented options,
written from the documentation, never read from impls. ``endpoint_walk`` runs from the store
machine's opening on a wire, until judged once in the run (every example would answer alike);
each store it opens is on the example's namespace and is only asked its readiness, so nothing is
written. Target ``endpoint-options-judged``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from conformance._machine import ConformanceMachine, step
from conformance._outage import bounded
from model.commit import MessageStoreError

if TYPE_CHECKING:
    from conformance.wire import WireRoute

#: Readiness of a store opened with a legal value: asked this many times (with backoff) before its
#: refusal counts, since the suite's own store answered readiness just before (``wire_walk``).
READY_ATTEMPTS = 4


class EndpointRules(ConformanceMachine):
    """Mixed into the store machine; ``endpoint_walk`` is one of its ``directed_on_wire`` steps."""

    if TYPE_CHECKING:
        oracle: Any
        membership: Any
        namespace: str

    @step
    def endpoint_walk(self) -> None:
        """C-ERR-04: each documented endpoint option with values outside its range (refused with a
        ``MessageStoreError``, by the factory or the store's readiness) and at its edge (the store
        opens and answers readiness)."""
        target = self.context.target
        wire: WireRoute | None = target.wire
        factory = target.unrouted_store_factory
        if wire is None or factory is None or not wire.options:
            return
        if "endpoint-options-judged" in self.context.stats.reached:
            return  # judged once in this run already
        # The undecorated factory (conformance._opened.named_factory): its own exception is judged,
        # and the stores opened here, which write nothing, are not recorded for cleanup.
        factory = getattr(factory, "ratchet_factory", factory)
        for option in wire.options:
            for value in option.refused:
                self._refused(factory, wire, option.name, value)
            for value in option.accepted:
                self._accepted(factory, wire, option.name, value)
        self.context.reach("endpoint-options-judged")

    def _open(self, factory: Callable[..., Any], endpoint: str) -> Any:
        return self.run(
            bounded("the store factory", factory(self.namespace, self.membership, endpoint=endpoint))
        )

    def _refused(self, factory: Callable[..., Any], wire: WireRoute, name: str, value: str) -> None:
        shown = f"endpoint option {name}={value!r}"
        endpoint = wire.with_option(name, value)
        store: Any = None
        try:
            store = self._open(factory, endpoint)
            self.run(bounded("the store's readiness", store.readiness()))
        except MessageStoreError:
            return  # a clear, typed refusal
        except Exception as exc:  # the kind of refusal is what is judged
            raise self.oracle.fail(
                "C-ERR-01", f"the store refused {shown} with {type(exc).__name__}, not MessageStoreError"
            ).violation from None
        finally:
            self._close(store)
        raise self.oracle.fail(
            "C-ERR-04", f"the store accepted {shown} and answered ready: outside its documented range"
        ).violation

    def _accepted(self, factory: Callable[..., Any], wire: WireRoute, name: str, value: str) -> None:
        shown = f"endpoint option {name}={value!r}"
        store: Any = None
        try:
            store = self._open(factory, wire.with_option(name, value))
            problem: Exception | None = None
            for attempt in range(READY_ATTEMPTS):
                if attempt:
                    self.run(asyncio.sleep(0.1 * 2**attempt))
                try:
                    self.run(bounded("the store's readiness", store.readiness()))
                    return
                except MessageStoreError as exc:
                    problem = exc
        except Exception as exc:  # a refusal at open, of whatever type
            problem = exc
        finally:
            self._close(store)
        raise self.oracle.fail(
            "C-ERR-04", f"the store refused {shown}, a legal edge: {problem!r}"[:300]
        ).violation

    def _close(self, store: Any) -> None:
        if store is not None:
            with contextlib.suppress(Exception):
                self.run(bounded("the store's close", store.close()))
