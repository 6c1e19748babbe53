"""nasaga's gRPC transport as the host serves it (``hosts/nasaga/src/grpc.rs``), and the replays of
the findings about it (docs/nasaga-findings.md N-46, N-47).

Real components throughout: nasaga's generated services on nagrpc listeners with nagrpc's mutual
TLS, the run's certificates from ``impls.transport.Pki``, Python stubs generated from the
``.proto`` files nasaga ships, PostgreSQL under the host. Fixtures and drivers are the findings
module's (one host per module, one namespace per test).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from impls.nasaga import NasagaHost
from impls.nasaga._grpc import (
    NasagaGrpcClient,
    NasagaReceipt,
    NasagaReceiptKind,
    Refused,
    Service,
    open_listeners,
)
from impls.transport import Identity, Pki, TransportError
from tests.impls.test_nasaga_findings import TENANT, World, _last, _start, host, world

# nasaga_schemas: tests/conftest.py, OWN_SCHEMAS_MARK
pytestmark = [pytest.mark.service("postgres"), pytest.mark.nasaga_schemas]
__all__ = ["host", "world"]  # the findings module's fixtures, used here

PRINCIPALS = ("orchestrator", "p0", "p1")


@pytest.fixture(scope="module")
def pki() -> Pki:
    return Pki.create(PRINCIPALS)


class Listeners:
    def __init__(self, host: NasagaHost, ns: str, pki: Pki) -> None:
        self.host, self.ns, self.pki = host, ns, pki
        opened = open_listeners(host, ns, pki, "orchestrator", ("p0", "p1"))
        self.ports = {str(k): int(v) for k, v in opened["listeners"].items()}
        self.principals = opened["principals"]
        self.opened: list[NasagaGrpcClient] = []

    def client(self, listener: str, identity: Identity | None, **options: object) -> NasagaGrpcClient:
        made = NasagaGrpcClient(f"127.0.0.1:{self.ports[listener]}", self.pki.ca.pem, identity, **options)  # type: ignore[arg-type]
        self.opened.append(made)
        return made

    def calls(self) -> tuple[dict[str, int], int]:
        counted = self.host.call("grpc_calls", namespace=self.ns)
        return {str(k): int(v) for k, v in counted["commands"].items()}, int(counted["results"])

    def close(self) -> int:
        for made in self.opened:
            made.close()
        return int(self.host.call("grpc_close", namespace=self.ns)["stopped"])


@pytest.fixture
def listeners(host: NasagaHost, world: World, pki: Pki) -> Iterator[Listeners]:
    opened = Listeners(host, world(), pki)
    try:
        yield opened
    finally:
        opened.close()


def _command_body(host: NasagaHost, ns: str, saga_id: str) -> bytes:
    return json.dumps(_last(host, ns, "orchestrator", saga_id).envelope).encode()


def _committed(kind: NasagaReceiptKind) -> NasagaReceipt:
    return NasagaReceipt(kind, "")


def test_the_host_serves_nasagas_command_and_result_services_under_mutual_tls(
    host: NasagaHost, listeners: Listeners, pki: Pki
) -> None:
    """Readiness is the standard health RPC over mTLS; a command and its result each commit once
    (a resend is DUPLICATE); the principals are nasaga's leaf fingerprints; close drains and stops
    every listener, after which nothing answers."""
    ns = listeners.ns
    assert set(listeners.ports) == {"command:p0", "command:p1", "result:p0", "result:p1", "open:result:p0"}
    assert all(p.startswith("sha256:") and len(p) == 71 for p in listeners.principals.values())
    orchestrator = listeners.client("command:p0", pki.clients["orchestrator"])
    assert orchestrator.serving()
    _start(host, ns, "g1")
    body = _command_body(host, ns, "g1")
    assert orchestrator.deliver(Service.COMMAND, body) == _committed(NasagaReceiptKind.COMMITTED)
    assert orchestrator.deliver(Service.COMMAND, body) == _committed(NasagaReceiptKind.DUPLICATE)
    result = json.dumps(_last(host, ns, "p0", "g1").envelope).encode()
    p0 = listeners.client("result:p0", pki.clients["p0"])
    assert p0.deliver(Service.RESULT, result) == _committed(NasagaReceiptKind.COMMITTED)
    assert p0.deliver(Service.RESULT, result) == _committed(NasagaReceiptKind.DUPLICATE)
    assert listeners.calls() == ({"p0": 1, "p1": 0}, 2)
    assert [r.step for r in host.read_outbox(ns, "orchestrator") if r.saga_id == "g1"] == [
        "reserve",
        "charge",
    ]
    assert listeners.close() == 5
    with pytest.raises(TransportError):
        NasagaGrpcClient(orchestrator.address, pki.ca.pem, pki.clients["orchestrator"], retries=1).deliver(
            Service.COMMAND, body
        )


def test_certificates_nasaga_must_refuse_fail_before_any_handler(
    host: NasagaHost, listeners: Listeners, pki: Pki
) -> None:
    """Another CA's certificate and no certificate fail the handshake; the port whose TLS asks
    for none answers UNAUTHENTICATED: no handler call, no inbox claim (the genuine call then
    commits)."""
    ns = listeners.ns
    _start(host, ns, "g2")
    body = _command_body(host, ns, "g2")
    for identity in (pki.stranger, None):
        with pytest.raises(TransportError):
            listeners.client("command:p0", identity, retries=1, timeout_s=2.0).deliver(Service.COMMAND, body)
    genuine = listeners.client("command:p0", pki.clients["orchestrator"])
    assert genuine.deliver(Service.COMMAND, body).kind is NasagaReceiptKind.COMMITTED  # type: ignore[union-attr]
    result = json.dumps(_last(host, ns, "p0", "g2").envelope).encode()
    assert listeners.client("open:result:p0", None).deliver(Service.RESULT, result) == Refused(
        "unauthenticated"
    )
    assert listeners.calls() == ({"p0": 1, "p1": 0}, 0)


def test_n46_a_certificate_bound_to_another_producer_is_unauthenticated(
    host: NasagaHost, listeners: Listeners, pki: Pki
) -> None:
    """N-46: a certificate of the run's CA that the service is not bound to gets the status
    UNAUTHENTICATED, not a REJECTED receipt: nasaga's request names no producer, the binding of
    the leaf fingerprint is the whole identity; nothing runs and nothing is claimed."""
    ns = listeners.ns
    _start(host, ns, "g3")
    body = _command_body(host, ns, "g3")
    assert listeners.client("command:p0", pki.clients["p0"]).deliver(Service.COMMAND, body) == Refused(
        "unauthenticated"
    )
    assert listeners.calls() == ({"p0": 0, "p1": 0}, 0)
    listeners.client("command:p0", pki.clients["orchestrator"]).deliver(Service.COMMAND, body)
    result = json.dumps(_last(host, ns, "p0", "g3").envelope).encode()
    assert listeners.client("result:p0", pki.clients["p1"]).deliver(Service.RESULT, result) == Refused(
        "unauthenticated"
    )
    assert listeners.calls() == ({"p0": 1, "p1": 0}, 0)
    genuine = listeners.client("result:p0", pki.clients["p0"]).deliver(Service.RESULT, result)
    assert genuine == _committed(NasagaReceiptKind.COMMITTED)


def test_n47_an_envelope_claiming_another_owner_is_rejected_inside_the_orchestrator(
    host: NasagaHost, listeners: Listeners, pki: Pki
) -> None:
    """N-47: p0's result sent by p1 on p1's own result port (p1's bound certificate) is a
    DETERMINISTIC_REJECT from nasaga's orchestrator, which the transport did call: the handler
    count moves, the instance and the inbox do not (the genuine delivery still commits), also
    once the result was applied (the owner check comes before the inbox)."""
    ns = listeners.ns
    _start(host, ns, "g4")
    listeners.client("command:p0", pki.clients["orchestrator"]).deliver(
        Service.COMMAND, _command_body(host, ns, "g4")
    )
    result = json.dumps(_last(host, ns, "p0", "g4").envelope).encode()
    foreign = listeners.client("result:p1", pki.clients["p1"])
    rejected = foreign.deliver(Service.RESULT, result)
    assert rejected == NasagaReceipt(
        NasagaReceiptKind.DETERMINISTIC_REJECT, "saga_result_producer_unauthorized"
    )
    before = host.load_instance(ns, TENANT, "g4")
    assert listeners.calls() == ({"p0": 1, "p1": 0}, 1)
    genuine = listeners.client("result:p0", pki.clients["p0"]).deliver(Service.RESULT, result)
    assert genuine == _committed(NasagaReceiptKind.COMMITTED)
    assert before is not None and host.load_instance(ns, TENANT, "g4") != before
    assert foreign.deliver(Service.RESULT, result) == rejected
