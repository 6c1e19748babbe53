"""The port's methods for what nasaga's port does not drive: timers, capability routes and the
catalog snapshot. Their capabilities are off (``_nasaga_terms.CAPABILITIES``; why, in
docs/nasaga.md "Timers and routes under the model stay off"), so no rule calls them."""

from __future__ import annotations

from model import saga as m


class NasagaUndriven:
    def claim_timer(self, timer_id: str, worker: str, now_ms: int, lease_ms: int) -> object:
        raise NotImplementedError

    def fire_timer(self, timer_id: str, token: int, now_ms: int) -> object:
        raise NotImplementedError

    def renew_timer(self, timer_id: str, token: int, now_ms: int, lease_ms: int) -> object:
        raise NotImplementedError

    def release_timer(self, timer_id: str, token: int, now_ms: int) -> object:
        raise NotImplementedError

    def register_capability(self, request: m.RegisterCapability) -> object:
        raise NotImplementedError

    def renew_capability(self, request: m.RenewCapability) -> object:
        raise NotImplementedError

    def select_capability_routes(self, query: m.RouteQuery, now_ms: int) -> object:
        raise NotImplementedError

    def select_capability_route(self, query: m.RouteQuery, now_ms: int) -> object:
        raise NotImplementedError

    def catalog_snapshot(self, now_ms: int) -> object:
        raise NotImplementedError

    def plant_route(self, route: m.CapabilityRoute) -> bool:
        raise NotImplementedError
