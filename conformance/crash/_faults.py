"""Fault kinds below the seam that live in real processes (registered in conformance/_faults.py's catalog).

``server-crash`` needs a backend that declares a ``ServiceControl`` (conformance/crash/_control.py);
``reopen`` and ``two-clients`` need only the backend's own factory, called again on the same
namespace.
"""

from conformance._faults import FaultKind, register_fault_kind

SERVER_CRASH = register_fault_kind(
    FaultKind(
        "server-crash",
        "the real server is killed -9 (between steps or mid-call), restarted on its data dir",
        applies_per="server-crash",
    )
)
REOPEN = register_fault_kind(
    FaultKind(
        "reopen",
        "the store (or saga backend) object is closed and a new one opened on the namespace",
        applies_per="reopen",
    )
)
TWO_CLIENTS = register_fault_kind(
    FaultKind(
        "two-clients",
        "two store objects, each with its own connections, serve concurrent committers",
        applies_per="reopen",  # a second store object on the namespace: what reopen needs
    )
)

CRASH_MOMENTS = ("between-steps", "in-flight")
