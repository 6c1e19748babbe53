"""Fault kinds of the saga suites (registered in the shared catalog of conformance/_faults.py)."""

from conformance._faults import FaultKind, register_fault_kind

# ``requires``: a runtime capability (conformance/saga/_port.py), recorded as "runtime:<name>".
COMMIT_ROLLED_BACK = register_fault_kind(
    FaultKind(
        "commit-rolled-back", "a local transaction failed before COMMIT", requires="runtime:injectable_fates"
    )
)
COMMIT_UNKNOWN = register_fault_kind(
    FaultKind(
        "commit-unknown",
        "COMMIT was sent and its answer lost (applied or not)",
        requires="runtime:injectable_fates",
    )
)
ACK_LOST = register_fault_kind(
    FaultKind("ack-lost", "a delivery committed but its ACK was lost; redelivered")
)
DUPLICATE = register_fault_kind(FaultKind("duplicate", "an envelope delivered again after it was absorbed"))
REORDER = register_fault_kind(FaultKind("reorder", "an envelope delivered ahead of earlier ones"))
FORGED = register_fault_kind(FaultKind("forged", "a result with a wrong owner, digest or untrusted producer"))
EFFECT_UNCERTAIN = register_fault_kind(
    FaultKind("effect-uncertain", "a participant's external effect left unknown")
)
LEASE_LOST = register_fault_kind(
    FaultKind(
        "lease-lost", "a timer worker's lease taken over while it holds its token", requires="runtime:timers"
    )
)
RELAY_CRASH = register_fault_kind(
    FaultKind("relay-crash", "an outbox relay died between publishing and recording")
)
LIFECYCLE_RACE = register_fault_kind(
    FaultKind("lifecycle-race", "a catalog lifecycle move between starts and results")
)
STALE_GENERATION = register_fault_kind(
    FaultKind(
        "stale-generation",
        "a replica renews its route with a generation a re-registration superseded",
        requires="runtime:routes",
    )
)

HOST_CRASH = register_fault_kind(
    FaultKind(
        "host-crash",
        "the runtime's host killed (SIGKILL) inside a unit, before COMMIT; a fresh host resumed",
        requires="runtime:host_crash",
    )
)

TIMER_RACE = register_fault_kind(
    FaultKind(
        "timer-race",
        "two host processes claim and fire the same due timers at one harness time, with a takeover",
        requires="runtime:timer_race",
    )
)

SAGA_FAULTS = (
    COMMIT_ROLLED_BACK,
    COMMIT_UNKNOWN,
    ACK_LOST,
    DUPLICATE,
    REORDER,
    FORGED,
    EFFECT_UNCERTAIN,
    LEASE_LOST,
    RELAY_CRASH,
    LIFECYCLE_RACE,
    STALE_GENERATION,
    HOST_CRASH,
    TIMER_RACE,
)
