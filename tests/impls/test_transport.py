"""The connectors on their own: lifecycle, verdict mapping, dead letters, safe trim, mTLS refusals."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from bench._saga_workload import command_for, participant
from conformance.backends import STREAM_BACKENDS, load_object
from conformance.saga import _world as w
from impls.saga.codec import command_to_blob
from impls.saga.memory import open_memory_saga_backend
from impls.transport import (
    COMMAND,
    GrpcDeliveryClient,
    GrpcListener,
    Lifecycle,
    ParticipantHandler,
    Pki,
    StreamAdmin,
    StreamConsumer,
    StreamNames,
    StreamPublisher,
    TransportError,
    to_fields,
)
from model.saga import (
    Decision,
    DeliveryVerdict,
    KeyRing,
    KeyState,
    ReceiptKind,
    SignedEnvelope,
    SigningKey,
    Unauthenticated,
    add_key,
)
from tests._backends import backend_params

RING = add_key(KeyRing(), SigningKey("k1", w.ORCHESTRATOR, b"s1", KeyState.SIGNING))


@pytest.fixture(params=[p for p in backend_params("transport") if p.values[0] in STREAM_BACKENDS])
def client(request: pytest.FixtureRequest) -> Iterator[Any]:
    factory = load_object(STREAM_BACKENDS[request.param].streams or "")
    assert callable(factory)
    made = factory()
    yield made
    made.close()


@pytest.fixture
def names(client: Any) -> Iterator[StreamNames]:
    found = StreamNames.of(f"ratchet:test{uuid.uuid4().hex[:10]}", "cmd")
    yield found
    client.delete(found.stream, found.dead_letters)  # this test's keys only


def consumer_for(client: Any, names: StreamNames, decision: Decision = Decision.SUCCEED) -> StreamConsumer:
    handler = ParticipantHandler(participant(open_memory_saga_backend(uuid.uuid4().hex)), lambda _c: decision)
    made = StreamConsumer(client, names, "p0", "c1", lambda: RING, handler)
    made.start()
    return made


def test_a_command_is_committed_then_acknowledged_and_a_refused_one_dead_lettered(
    client: Any, names: StreamNames
) -> None:
    consumer = consumer_for(client, names)
    assert consumer.ready()
    publisher = StreamPublisher(client, names, w.ORCHESTRATOR, lambda: RING)
    publisher.publish(command_to_blob(command_for(1)))
    publisher.append_raw(
        to_fields(SignedEnvelope(command_to_blob(command_for(2)), w.ORCHESTRATOR, None, None))
    )
    settled = consumer.poll_once()
    assert [(s.verdict, s.acknowledged, s.reason) for s in settled] == [
        (DeliveryVerdict.ACK, True, ""),
        (DeliveryVerdict.DEAD_LETTER, True, "unsigned"),
    ]
    assert client.xpending(names.stream, "p0")["pending"] == 0
    (letter,) = client.xrange(names.dead_letters)
    assert letter[1][b"reason"] == b"unsigned"


def test_a_transient_failure_stays_pending_and_a_claim_redelivers_it(client: Any, names: StreamNames) -> None:
    consumer = consumer_for(client, names, Decision.TRANSIENT_FAILURE)
    StreamPublisher(client, names, w.ORCHESTRATOR, lambda: RING).publish(command_to_blob(command_for(1)))
    (first,) = consumer.poll_once()
    assert (first.verdict, first.acknowledged) == (DeliveryVerdict.REDELIVER, False)
    assert consumer.claim(3_600_000, 10) == []  # its consumer is still within the idle time
    (again,) = consumer.claim(0, 10)
    assert client.xpending_range(names.stream, "p0", "-", "+", 10)[0]["times_delivered"] == 2
    assert consumer.process(again).verdict is DeliveryVerdict.DEAD_LETTER  # the budget of 2 is spent


def test_safe_trim_never_passes_a_pending_entry_of_any_group(client: Any, names: StreamNames) -> None:
    consumer = consumer_for(client, names)
    client.xgroup_create(names.stream, "audit", id="0")
    publisher = StreamPublisher(client, names, w.ORCHESTRATOR, lambda: RING)
    ids = [publisher.publish(command_to_blob(command_for(n))) for n in range(1, 4)]
    consumer.poll_once()
    admin = StreamAdmin(client, names)
    assert admin.safe_trim() == 0  # audit has read nothing
    client.xreadgroup("audit", "a1", {names.stream: ">"}, count=2)
    client.xack(names.stream, "audit", ids[0])
    assert admin.safe_trim() == 1  # audit still holds ids[1] pending
    assert {b.group: b.total for b in admin.backlog()} == {"p0": 0, "audit": 2}


def test_the_consumer_loop_drains_and_stops(client: Any, names: StreamNames) -> None:
    consumer = consumer_for(client, names)
    thread = threading.Thread(target=consumer.run, kwargs={"idle_sleep_s": 0.01})
    thread.start()
    StreamPublisher(client, names, w.ORCHESTRATOR, lambda: RING).publish(command_to_blob(command_for(1)))
    consumer.drain()
    thread.join(5)
    assert not thread.is_alive() and consumer.state is Lifecycle.DRAINING and not consumer.ready()
    consumer.stop()
    assert consumer.state is Lifecycle.STOPPED


@pytest.fixture(scope="module")
def pki() -> Pki:
    return Pki.create((w.ORCHESTRATOR, "p1"))


@pytest.fixture
def listener(pki: Pki) -> Iterator[GrpcListener]:
    handler = ParticipantHandler(
        participant(open_memory_saga_backend(uuid.uuid4().hex)), lambda _c: Decision.SUCCEED
    )
    made = GrpcListener(pki, commands=handler, optional_port=True)
    made.start()
    yield made
    made.stop()


def test_commands_over_mtls_get_closed_receipts_bound_to_the_principal(
    pki: Pki, listener: GrpcListener
) -> None:
    assert listener.ready()
    command = command_for(1)
    body = command_to_blob(command)
    client = GrpcDeliveryClient(listener.address, pki.ca.pem, pki.clients[w.ORCHESTRATOR])
    first = client.deliver(COMMAND, command.command_id, w.ORCHESTRATOR, body)
    again = client.deliver(COMMAND, command.command_id, w.ORCHESTRATOR, body)
    assert [getattr(r, "kind", None) for r in (first, again)] == [
        ReceiptKind.COMMITTED,
        ReceiptKind.DUPLICATE,
    ]
    stranger = GrpcDeliveryClient(listener.address, pki.ca.pem, pki.clients["p1"])
    refused = stranger.deliver(COMMAND, command.command_id, w.ORCHESTRATOR, body)
    assert (getattr(refused, "kind", None), getattr(refused, "reason", None)) == (
        ReceiptKind.REJECTED,
        "principal_mismatch",
    )
    assert client.echo(b"x") == b"x"
    for closing in (client, stranger):
        closing.close()


def test_calls_without_a_valid_certificate_never_reach_the_handler(pki: Pki, listener: GrpcListener) -> None:
    command = command_for(2)
    body = command_to_blob(command)
    for identity in (None, pki.stranger):
        client = GrpcDeliveryClient(listener.address, pki.ca.pem, identity, retries=1, timeout_s=2.0)
        with pytest.raises(TransportError):
            client.deliver(COMMAND, command.command_id, w.ORCHESTRATOR, body)
        client.close()
    loose = GrpcDeliveryClient(f"127.0.0.1:{listener.open_port}", pki.ca.pem, None, retries=1)
    assert loose.deliver(COMMAND, command.command_id, w.ORCHESTRATOR, body) == Unauthenticated(
        command.command_id
    )
    loose.close()
    listener.drain(0.1)
    assert not listener.ready()
