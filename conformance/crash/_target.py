"""What the durability suites add to a family's target: the backend's service control, if declared.

The control factory is called once per run, at the first example, so an unreachable or foreign
server is an environment error of the run (exit 2), never a verdict. ``crash_profiles`` on a
control (optional) names the profiles that may restart it: a Cassandra restart costs tens of
seconds, so it runs in ``deep`` only.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import attrs

from conformance._machine import RunContext
from conformance._suites import BackendUnderTest
from conformance._violations import HarnessEnvironmentError
from conformance.crash._control import CrashCycle, ServiceControl, ServiceControlError, crash_cycle

ALL_PROFILES = ("ci", "deep")


@attrs.define(eq=False)
class ControlSlot:
    """The run's one control, made on first use, and the crash cycles it went through."""

    factory: Callable[[], Any] | None
    control: ServiceControl | None = None
    cycles: list[CrashCycle] = attrs.field(factory=list)
    waits: list[float] = attrs.field(factory=list)

    def get(self, context: RunContext) -> ServiceControl | None:
        """The control if ``server-crash`` applies to this run; records why not in the details."""
        details = context.stats.details
        if self.factory is None:
            details.setdefault("server-crash", "not applicable: the backend declares no service control")
            return None
        if self.control is None:
            try:
                made = self.factory()
                if not isinstance(made, ServiceControl):
                    raise HarnessEnvironmentError(
                        f"the control factory returned {type(made).__name__}, not a ServiceControl"
                    )
                made.pid()  # ours and alive, or the run stops here
            except ServiceControlError as exc:
                raise HarnessEnvironmentError(f"server-crash: {exc}") from None
            self.control = made
        profiles = getattr(self.control, "crash_profiles", ALL_PROFILES)
        if context.profile not in profiles:
            details.setdefault(
                "server-crash", f"not applicable in profile {context.profile} (runs in {', '.join(profiles)})"
            )
            return None
        details.setdefault("server-crash", f"on {self.control.name}, {self.control.durability()}")
        return self.control

    def cycle(self, context: RunContext, control: ServiceControl) -> CrashCycle:
        try:
            cycle = crash_cycle(control)
        except ServiceControlError as exc:
            raise HarnessEnvironmentError(f"server-crash: {exc}") from None
        self.record(context, cycle)
        return cycle

    def waited(self, context: RunContext, seconds: float) -> None:
        """Time a control's ``before_crash`` held the run (the ring: its last victim rejoining)."""
        self.waits.append(seconds)
        context.stats.details["server-crash waits"] = (
            f"{len(self.waits)} before a kill, {sum(self.waits):.0f}s in all, max {max(self.waits):.0f}s"
        )

    def record(self, context: RunContext, cycle: CrashCycle) -> None:
        self.cycles.append(cycle)
        totals = [c.total_s for c in self.cycles]
        context.stats.details["server-crash cycle"] = (
            f"{len(totals)} cycles, median {statistics.median(totals):.2f}s, max {max(totals):.2f}s"
        )


def control_slot(backend: BackendUnderTest) -> ControlSlot:
    """Raises ``ValueError`` for a bad control path (a usage error)."""
    return ControlSlot(backend.factory("control") if "control" in backend.factories else None)
