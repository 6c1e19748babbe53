"""The one error the nasaga host client raises, and whose fault it was.

``CRASHED``, ``TIMEOUT`` and ``PROTOCOL`` are environment errors: the host process died, hung past
the per-call timeout, or answered something that is not the protocol. A harness reports them as
an outage (exit 2), never as a verdict. ``REFUSED`` is the host answering the request with an
``error`` object; ``code`` is then its closed kind (``start.definition_inactive``,
``command.producer_unauthorized``, ``host.bad_request``, ...; docs/nasaga.md), which is nasaga's
own verdict whenever the layer before the dot is not ``host``. ``KILLED`` is the crash fault: the
client killed the host (SIGKILL) because it stopped at the crash point the caller armed
(``NasagaHost.call(kill_at=...)``); a harness that armed it expects it, anyone else sees an outage.
"""

from __future__ import annotations

import enum

import attrs


class HostFailure(enum.Enum):
    CRASHED = "crashed"
    TIMEOUT = "timeout"
    PROTOCOL = "protocol"
    REFUSED = "refused-by-host"
    KILLED = "killed-at-crash-point"


@attrs.frozen(auto_exc=True)
class NasagaHostError(Exception):
    failure: HostFailure
    op: str
    message: str
    code: str | None = None

    @property
    def is_environment(self) -> bool:
        """True when the host itself failed (crash, hang, garbage), not the request."""
        return self.failure is not HostFailure.REFUSED

    def __str__(self) -> str:
        code = f" [{self.code}]" if self.code else ""
        return f"nasaga host {self.failure.value} on {self.op}{code}: {self.message}"
