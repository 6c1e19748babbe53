"""A client for the real nasaga runtime, hosted by ``hosts/nasaga`` (docs/nasaga.md).

``NasagaHost.start("postgres")`` (or ``"mysql"``) locates or builds the host binary, starts it and
health-checks it; every operation is one JSON-lines request answered synchronously, and every
failure is one ``NasagaHostError`` whose ``failure`` says whose fault it was. This package imports
nothing from ``conformance``.
"""

from ._binary import host_binary as host_binary
from ._client import DEFAULT_TIMEOUT as DEFAULT_TIMEOUT
from ._client import Engine as Engine
from ._client import NasagaHost as NasagaHost
from ._client import iter_commands as iter_commands
from ._errors import HostFailure as HostFailure
from ._errors import NasagaHostError as NasagaHostError
from ._values import CommandDelivery as CommandDelivery
from ._values import HostInfo as HostInfo
from ._values import Instance as Instance
from ._values import NamespaceInfo as NamespaceInfo
from ._values import OutboxRow as OutboxRow
from ._values import ResultDelivery as ResultDelivery
from ._values import StartResult as StartResult
from ._values import Timer as Timer
from ._values import TimerClaim as TimerClaim
from ._values import TimerFire as TimerFire
