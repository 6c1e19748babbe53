"""A client of nasaga's gRPC transport as the host serves it (``hosts/nasaga/src/grpc.rs``).

nasaga's ``SagaCommandTransport`` and ``SagaResultTransport`` each have one method, ``Deliver``:
the envelope's JSON bytes in, a ``SagaDeliveryReceipt`` out (committed, duplicate, deterministic
reject with a reason, retryable), or a status when the call was refused before any handler
(``UNAUTHENTICATED``: no verified certificate bound to the service). The stubs are generated from
the ``.proto`` files nasaga's crates ship (``_proto.py``).

The client presents one identity (``Identity`` of ``impls.transport``, PEM key and certificate;
``None``: none) and the run's CA. Like Ratchet's ``GrpcDeliveryClient`` it sends the same envelope
again when a reply did not arrive (``UNAVAILABLE``, ``DEADLINE_EXCEEDED``), and ``reply_hook`` is
the harness's seam to lose a reply that did arrive, after the server committed: the retry then
meets the inbox. A failed handshake (no certificate, another CA's) is ``TransportError``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import attrs
import grpc

from impls.transport import MtlsClient, Pki, TransportError

from ._client import NasagaHost
from ._proto import nasaga_protos

_RETRY = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


class Service(enum.Enum):
    COMMAND = "SagaCommandTransport"
    RESULT = "SagaResultTransport"


class NasagaReceiptKind(enum.Enum):
    """nasaga's ``SagaReceiptKind`` (``UNSPECIFIED`` is no receipt at all: ``TransportError``)."""

    COMMITTED = 1
    DUPLICATE = 2
    DETERMINISTIC_REJECT = 3
    RETRYABLE = 4


@attrs.frozen
class NasagaReceipt:
    kind: NasagaReceiptKind
    reason: str = ""


@attrs.frozen
class Refused:
    """The call got a status instead of a receipt, before any handler (``UNAUTHENTICATED``)."""

    status: str


NasagaAnswer = NasagaReceipt | Refused
ReplyHook = Callable[[Service], bool]  # lose this reply (after it arrived)?


def _keep(_service: Service) -> bool:
    return False


@attrs.define
class NasagaGrpcClient(MtlsClient):
    """One producer's channel to a nasaga listener (command or result service)."""

    reply_hook: ReplyHook = _keep

    def deliver(self, service: Service, envelope_json: bytes) -> NasagaAnswer:
        """Send until an answer arrives; raises ``TransportError`` when every try failed."""
        protos = nasaga_protos()
        stub = getattr(protos.module("saga_transport_pb2_grpc"), f"{service.value}Stub")(self._channel)
        request = protos.module("saga_transport_pb2").SagaDeliveryRequest(envelope_json=envelope_json)
        last: object = None
        for _ in range(self.retries):
            try:
                reply = stub.Deliver(request, timeout=self.timeout_s)
            except grpc.RpcError as exc:
                code = exc.code()
                if code is grpc.StatusCode.UNAUTHENTICATED:
                    return Refused("unauthenticated")
                if code not in _RETRY:
                    raise TransportError(f"{service.value}.Deliver failed: {code}") from exc
                last = code
                continue
            if self.reply_hook(service):
                last = "the reply was lost"
                continue  # the server committed; the reply never reached us: send it again
            try:
                return NasagaReceipt(NasagaReceiptKind(reply.kind), reply.reason)
            except ValueError as exc:
                raise TransportError(f"a receipt of no known kind ({reply.kind})") from exc
        raise TransportError(f"{service.value}.Deliver: no answer after {self.retries} tries: {last}")

    def serving(self) -> bool:
        """The listener's standard health check over this channel: a real RPC through TLS."""
        protos = nasaga_protos()
        stub = protos.module("health_pb2_grpc").HealthStub(self._channel)
        request = protos.module("health_pb2").HealthCheckRequest(service="")
        try:
            reply = stub.Check(request, timeout=self.timeout_s)
        except grpc.RpcError:
            return False
        return bool(reply.status == protos.module("health_pb2").HealthCheckResponse.SERVING)


def open_listeners(
    host: NasagaHost, namespace: str, pki: Pki, orchestrator: str, owners: tuple[str, ...], **extra: Any
) -> dict[str, Any]:
    """The host's ``grpc_open`` with the run's certificates: listeners by name, principals."""
    opened = host.call(
        "grpc_open",
        namespace=namespace,
        server_cert_pem=pki.server.cert.decode(),
        server_key_pem=pki.server.key.decode(),
        client_ca_pem=pki.ca.pem.decode(),
        orchestrator_cert_pem=pki.clients[orchestrator].cert.decode(),
        owner_cert_pems={o: pki.clients[o].cert.decode() for o in owners},
        **extra,
    )
    return dict(opened)
