"""The saga runtime: one flow over any ``SagaBackend`` (seed 002).

``_backend`` is the storage port (rows, capabilities, errors); the runtime modules drive it.
"""

from ._backend import (
    AwaitingRow,
    CapabilityRow,
    CommandOutboxRow,
    DefinitionRow,
    EffectRow,
    GateRow,
    InstanceRow,
    JournalRow,
    LeaseRow,
    NamespacedSagaBackend,
    ReceiptRow,
    ResultOutboxRow,
    SagaBackend,
    SagaBackendError,
    SagaBackendErrorKind,
    SagaBackendFactory,
    SagaCapabilities,
    SagaTransaction,
    TimerRow,
)
from ._orchestrator import EligibilityCheck, Orchestrator, always_eligible
from ._participant import Participant
from ._unit import FateHook, always_commit

__all__ = [
    "AwaitingRow",
    "CapabilityRow",
    "CommandOutboxRow",
    "DefinitionRow",
    "EffectRow",
    "EligibilityCheck",
    "FateHook",
    "GateRow",
    "InstanceRow",
    "JournalRow",
    "LeaseRow",
    "NamespacedSagaBackend",
    "Orchestrator",
    "Participant",
    "ReceiptRow",
    "ResultOutboxRow",
    "SagaBackend",
    "SagaBackendError",
    "SagaBackendErrorKind",
    "SagaBackendFactory",
    "SagaCapabilities",
    "SagaTransaction",
    "TimerRow",
    "always_commit",
    "always_eligible",
]
