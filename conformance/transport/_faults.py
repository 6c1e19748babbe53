"""Fault kinds of the transport suite (registered in the shared catalog of conformance/_faults.py).

Each is injected at a real boundary of a connector: the Redis server's pending list, the
consumer process between COMMIT and ``XACK``, the bytes of an entry, the TLS handshake, the
reply of a gRPC call. ``T-STREAM-01`` is the named instant a consumer is killed at.
"""

from collections.abc import Mapping
from typing import Any

from conformance._faults import FaultKind, FaultPointSpec, register_fault_kind, register_fault_point
from conformance.saga._faults import COMMIT_ROLLED_BACK, COMMIT_UNKNOWN, RELAY_CRASH

#: Details a transport machine writes ("not applicable: why") for the connectors it does not run,
#: so the coverage gate demands each kind only where it can happen.
STREAMS_ONLY, GRPC_ONLY, KAFKA_ONLY = "transport:streams", "transport:grpc", "transport:kafka"
#: The envelope kinds need a connector that authenticates the envelope itself (a signature);
#: nasaga's gRPC transport authenticates the caller's certificate instead.
SIGNED_ONLY = "transport:signed-envelopes"

CONSUMER_KILLED = register_fault_kind(
    FaultKind(
        "consumer-killed",
        "a stream consumer died after the unit's COMMIT and before XACK",
        applies_per=(STREAMS_ONLY, "transport:consumer-killed"),
    )
)
CLAIMED_WHILE_WORKING = register_fault_kind(
    FaultKind(
        "claimed-while-working",
        "a second consumer claimed an entry the first still holds",
        applies_per=STREAMS_ONLY,
    )
)
POISON = register_fault_kind(FaultKind("poison", "a signed entry whose body no handler can decode"))
TRIM_UNDER_LAG = register_fault_kind(
    FaultKind(
        "trim-under-lag",
        "a trim while another group lags behind with entries undelivered or pending",
        applies_per=STREAMS_ONLY,
    )
)
FORGED_ENVELOPE = register_fault_kind(
    FaultKind(
        "forged-envelope",
        "an entry signed with the producer's key id and the wrong secret",
        applies_per=SIGNED_ONLY,
    )
)
UNSIGNED_ENVELOPE = register_fault_kind(
    FaultKind(
        "unsigned-envelope",
        "an entry with no signature",
        applies_per=(SIGNED_ONLY, "transport:unsigned-envelope"),
    )
)
OLD_KEY_ENVELOPE = register_fault_kind(
    FaultKind(
        "old-key-envelope",
        "an entry re-signed with a key retired before the run",
        applies_per=(SIGNED_ONLY, "transport:old-key-envelope"),
    )
)
KEY_ROTATED = register_fault_kind(
    FaultKind(
        "key-rotated",
        "the producer rotated its signing key with entries of the old key in flight",
        applies_per="transport:key-rotated",
    )
)
WRONG_CA = register_fault_kind(
    FaultKind(
        "wrong-ca-cert",
        "a gRPC client presents a certificate from another CA",
        applies_per=(GRPC_ONLY, "transport:wrong-ca-cert"),
    )
)
MISSING_CERT = register_fault_kind(
    FaultKind(
        "missing-client-cert",
        "a gRPC client presents no certificate",
        applies_per=(GRPC_ONLY, "transport:missing-client-cert"),
    )
)
UNAUTHENTICATED_CALL = register_fault_kind(
    FaultKind(
        "unauthenticated-call",
        "a call on a listener port whose TLS does not demand a certificate",
        applies_per=(GRPC_ONLY, "transport:unauthenticated-call"),
    )
)
PRINCIPAL_MISMATCH = register_fault_kind(
    FaultKind(
        "principal-mismatch",
        "an authenticated caller claims to be another producer",
        applies_per=(GRPC_ONLY, "transport:principal-mismatch"),
    )
)
REPLY_LOST = register_fault_kind(
    FaultKind(
        "reply-lost",
        "a gRPC reply lost after the server committed; the client retries",
        applies_per=(GRPC_ONLY, "transport:reply-lost"),
    )
)

#: A runtime whose connectors cannot suffer a kind says so under the kind's own detail,
#: ``transport:<kind>`` (``_nasaga.py``); a machine that runs no connector of a family says so
#: under the family's (STREAMS_ONLY, GRPC_ONLY, KAFKA_ONLY).

REDIS_RESTART = register_fault_kind(
    FaultKind(
        "redis-restart",
        "the Redis server under the consumers killed -9 with entries pending and undelivered, then "
        "restarted on its data directory",
        applies_per=(STREAMS_ONLY, "transport:redis-restart"),
    )
)

#: ``redis-restart`` kills the server under the streams: only one the target's ``stream_control``
#: names, and only in these profiles (in ``ci`` the project's Redis serves the suites running beside).
RESTART_PROFILES = ("deep",)


def restart_applies(target: Any, profile: str) -> str | None:
    """Why the Redis server is not restarted in this run, or None."""
    if getattr(target, "stream_control", None) is None:
        return "the Redis server is not the suite's to restart (no stream_control role)"
    if profile not in RESTART_PROFILES:
        return (
            f"a Redis restart runs in profile {'/'.join(RESTART_PROFILES)} only "
            "(the server is shared by the suites a ci run runs beside this one)"
        )
    return None


def redis_restart_targets(details: Mapping[str, str]) -> dict[str, str]:
    """Where fault ``redis-restart`` applies (a ``stream_control``, profile deep): what it must reach."""
    if details.get("transport:redis-restart", "").startswith("not applicable"):
        return {}
    return {
        "pending-survived-redis-restart": "no restart met entries pending and undelivered",
        "pending-settled-after-redis-restart": "no entry pending over a restart was settled after it",
    }


KILL_POINT = register_fault_point(
    FaultPointSpec("T-STREAM-01", "transport", "the handler answered (committed or absorbed); XACK not sent")
)

STREAM_FAULTS = (
    COMMIT_ROLLED_BACK,
    COMMIT_UNKNOWN,
    RELAY_CRASH,
    CONSUMER_KILLED,
    CLAIMED_WHILE_WORKING,
    POISON,
    TRIM_UNDER_LAG,
    FORGED_ENVELOPE,
    UNSIGNED_ENVELOPE,
    OLD_KEY_ENVELOPE,
    KEY_ROTATED,
    REDIS_RESTART,
)
GRPC_FAULTS = (WRONG_CA, MISSING_CERT, UNAUTHENTICATED_CALL, PRINCIPAL_MISMATCH, REPLY_LOST)

# Kafka (conformance/transport/_kafka_rules.py); the envelope and commit kinds above are shared.
KAFKA_CONSUMER_KILLED = register_fault_kind(
    FaultKind(
        "kafka-consumer-killed",
        "a Kafka consumer died after the unit's COMMIT and before its offset commit",
        applies_per=KAFKA_ONLY,
    )
)
REBALANCE_MID_UNIT = register_fault_kind(
    FaultKind(
        "rebalance-mid-unit",
        "a second consumer joined or left the group between a unit's COMMIT and its offset commit",
        applies_per=(KAFKA_ONLY, "transport:rebalance-mid-unit"),
    )
)
BROKER_RESTART = register_fault_kind(
    FaultKind(
        "broker-restart",
        "the Kafka broker killed -9 and restarted on its data directory",
        applies_per=(KAFKA_ONLY, "transport:broker-restart"),
    )
)
SLOW_PARTITION = register_fault_kind(
    FaultKind(
        "slow-partition",
        "a transient failure backs one partition off while the other partition is read",
        applies_per=KAFKA_ONLY,
    )
)
KAFKA_KILL_POINT = register_fault_point(
    FaultPointSpec(
        "T-KAFKA-01", "transport", "the handler answered (committed or absorbed); offset not committed"
    )
)

KAFKA_FAULTS = (
    COMMIT_ROLLED_BACK,
    COMMIT_UNKNOWN,
    RELAY_CRASH,
    POISON,
    FORGED_ENVELOPE,
    UNSIGNED_ENVELOPE,
    OLD_KEY_ENVELOPE,
    KEY_ROTATED,
    KAFKA_CONSUMER_KILLED,
    REBALANCE_MID_UNIT,
    BROKER_RESTART,
    SLOW_PARTITION,
)
TRANSPORT_FAULTS = STREAM_FAULTS + GRPC_FAULTS + KAFKA_FAULTS[-4:]
