"""The saga runtime: one flow over any ``SagaBackend`` (seed 002).

``_backend`` is the storage port (rows, capabilities, errors); the runtime modules drive it.
``_metrics`` is the process's one metrics source (stage histogram, counters, facts read through
the port at scrape time; S-OBS-*). The row converters and the unit runner are public for
auditors such as the conformance harness, which reads a backend's rows raw and compares them
with the model.
"""

from ._backend import AwaitingRow as AwaitingRow
from ._backend import CapabilityRow as CapabilityRow
from ._backend import CommandOutboxRow as CommandOutboxRow
from ._backend import DefinitionRow as DefinitionRow
from ._backend import EffectRow as EffectRow
from ._backend import GateRow as GateRow
from ._backend import InstanceRow as InstanceRow
from ._backend import JournalRow as JournalRow
from ._backend import LeaseRow as LeaseRow
from ._backend import NamespacedSagaBackend as NamespacedSagaBackend
from ._backend import ReceiptRow as ReceiptRow
from ._backend import ResultOutboxRow as ResultOutboxRow
from ._backend import SagaBackend as SagaBackend
from ._backend import SagaBackendError as SagaBackendError
from ._backend import SagaBackendErrorKind as SagaBackendErrorKind
from ._backend import SagaBackendFactory as SagaBackendFactory
from ._backend import SagaCapabilities as SagaCapabilities
from ._backend import SagaTransaction as SagaTransaction
from ._backend import TimerRow as TimerRow
from ._convert import instance_from_row as instance_from_row
from ._convert import journal_from_row as journal_from_row
from ._convert import timer_from_row as timer_from_row
from ._management import Management as Management
from ._metrics import Clock as Clock
from ._metrics import MetricsSnapshot as MetricsSnapshot
from ._metrics import RuntimeMetrics as RuntimeMetrics
from ._metrics import StageSnapshot as StageSnapshot
from ._metrics import counted as counted
from ._metrics import process_metrics as process_metrics
from ._metrics import read_facts as read_facts
from ._metrics import with_facts as with_facts
from ._orchestrator import EligibilityCheck as EligibilityCheck
from ._orchestrator import Orchestrator as Orchestrator
from ._orchestrator import UnfencedTimers as UnfencedTimers
from ._orchestrator import always_eligible as always_eligible
from ._participant import Participant as Participant
from ._routes import capability_key_of as capability_key_of
from ._routes import route_from_row as route_from_row
from ._routes import route_to_row as route_to_row
from ._unit import MAX_ATTEMPTS as MAX_ATTEMPTS
from ._unit import Discard as Discard
from ._unit import FateHook as FateHook
from ._unit import Keep as Keep
from ._unit import always_commit as always_commit
from ._unit import read_only as read_only
from ._unit import run_unit as run_unit
