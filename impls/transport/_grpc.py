"""The gRPC connector: the ``SagaDelivery`` service over mutual TLS, its listener and its client.

The listener's main port demands a client certificate from the run's CA: a client without one,
or with one from another CA, fails the handshake and no code of ours runs (S-GRPC-03). An
interceptor checks again that the call has an authenticated principal before the handler is
reached, so a port whose TLS only *accepts* client certificates (``optional_port``, for probes
behind a load balancer) still lets no unauthenticated call through (S-GRPC-03). The principal is
the certificate's common name and is what the runtime sees as the producer; a call claiming
another producer is rejected before the handler (S-GRPC-02). The handler's outcome becomes one
receipt of the closed set (``model.saga.receipt_for``, S-GRPC-01, S-GRPC-04).

The client retries a call whose reply it did not get (``UNAVAILABLE``, ``DEADLINE_EXCEEDED``)
with the same envelope: the runtime's inbox decides, so the retry gets the acknowledgement the
lost reply carried (S-GRPC-05). ``reply_hook`` is the harness's seam to lose a reply that did
arrive.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent import futures
from typing import Any

import attrs
import grpc

from model.saga import (
    Admitted,
    CallAnswer,
    DeliveryCall,
    Receipt,
    ReceiptKind,
    Unauthenticated,
    admit_call,
    receipt_for,
)

from . import _proto
from ._handlers import DeliveryHandler, PoisonMessage
from ._streams import Lifecycle, TransportError
from ._tls import Identity, Pki

_KINDS = {k: i for i, k in enumerate([None, *ReceiptKind])}
_RETRY = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
COMMAND, RESULT = "DeliverCommand", "DeliverResult"


def principal_of(context: grpc.ServicerContext) -> str | None:
    """The client certificate's common name, or ``None`` when TLS authenticated nobody."""
    names = context.auth_context().get("x509_common_name") or []
    return names[0].decode() if names else None


class AuthenticatedOnly(grpc.ServerInterceptor):  # type: ignore[misc]
    """Refuses a call without a principal with ``UNAUTHENTICATED`` before its handler runs."""

    def intercept_service(self, continuation: Callable[[Any], Any], details: Any) -> Any:
        handler = continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler
        behavior = handler.unary_unary

        def guarded(request: Any, context: grpc.ServicerContext) -> Any:
            if principal_of(context) is None:
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "no authenticated client certificate")
            return behavior(request, context)

        return grpc.unary_unary_rpc_method_handler(
            guarded,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


def to_proto(receipt: Receipt) -> Any:
    return _proto.message(
        "Receipt",
        kind=_KINDS[receipt.kind],
        message_id=receipt.message_id,
        principal=receipt.principal,
        reason=receipt.reason,
    )


def from_proto(reply: Any) -> Receipt:
    kinds = list(ReceiptKind)
    if not 1 <= reply.kind <= len(kinds):
        raise TransportError(f"a receipt outside the closed set: {reply.kind}")
    return Receipt(kinds[reply.kind - 1], reply.message_id, reply.principal, reply.reason)


@attrs.define
class DeliveryServicer:
    """Admission by principal, then the runtime; one receipt per admitted call."""

    commands: DeliveryHandler | None
    results: DeliveryHandler | None

    def DeliverCommand(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._deliver(self.commands, request, context)

    def DeliverResult(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._deliver(self.results, request, context)

    def principal(self, request: Any, context: grpc.ServicerContext) -> str | None:
        """The authenticated principal; never a field of ``request`` (S-GRPC-02)."""
        return principal_of(context)

    def _deliver(self, handler: DeliveryHandler | None, request: Any, context: grpc.ServicerContext) -> Any:
        if handler is None:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "this listener does not take that side")
            raise AssertionError("abort raises")
        admitted = admit_call(
            DeliveryCall(request.message_id, request.producer, self.principal(request, context))
        )
        if isinstance(admitted, Unauthenticated):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "no authenticated principal")
        if isinstance(admitted, Receipt):
            return to_proto(admitted)
        assert isinstance(admitted, Admitted)
        principal = admitted.principal
        try:
            if handler.message_id(request.envelope) != request.message_id:
                return to_proto(
                    Receipt(ReceiptKind.REJECTED, request.message_id, principal, "message_id_mismatch")
                )
            outcome = handler.handle(request.envelope, principal)
        except PoisonMessage:
            return to_proto(Receipt(ReceiptKind.REJECTED, request.message_id, principal, "undecodable"))
        except Exception:
            # Whatever failed, nothing is known to be committed: the client may send it again.
            return to_proto(Receipt(ReceiptKind.RETRYABLE, request.message_id, principal, "handler_failed"))
        return to_proto(receipt_for(principal, request.message_id, outcome))


class EchoServicer:
    def Echo(self, request: Any, context: grpc.ServicerContext) -> Any:
        return _proto.message("EchoReply", payload=request.payload, principal=principal_of(context) or "")


@attrs.define
class GrpcListener:
    """A gRPC server on 127.0.0.1 (ephemeral ports) with its lifecycle: start, ready, drain, stop."""

    pki: Pki
    commands: DeliveryHandler | None = None
    results: DeliveryHandler | None = None
    optional_port: bool = False
    max_workers: int = 4
    servicer: Callable[..., DeliveryServicer] = DeliveryServicer
    interceptors: tuple[grpc.ServerInterceptor, ...] = (AuthenticatedOnly(),)
    port: int = 0
    open_port: int | None = None  # the port whose TLS does not demand a client certificate
    state: Lifecycle = Lifecycle.NEW
    _server: Any = None

    def start(self) -> None:
        _, services = _proto.modules()
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=self.max_workers), interceptors=self.interceptors
        )
        services.add_SagaDeliveryServicer_to_server(self.servicer(self.commands, self.results), server)
        services.add_EchoServicer_to_server(EchoServicer(), server)
        pair = [(self.pki.server.key, self.pki.server.cert)]
        strict = grpc.ssl_server_credentials(
            pair, root_certificates=self.pki.ca.pem, require_client_auth=True
        )
        self.port = server.add_secure_port("127.0.0.1:0", strict)
        if self.optional_port:
            loose = grpc.ssl_server_credentials(
                pair, root_certificates=self.pki.ca.pem, require_client_auth=False
            )
            self.open_port = server.add_secure_port("127.0.0.1:0", loose)
        server.start()
        self._server = server
        self.state = Lifecycle.RUNNING

    def ready(self) -> bool:
        """Serving, and every engine behind it answers."""
        handlers = [h for h in (self.commands, self.results) if h is not None]
        return self.state is Lifecycle.RUNNING and all(h.ready() for h in handlers)

    def drain(self, grace_s: float = 2.0) -> None:
        """Refuse new calls, let calls in flight finish (up to ``grace_s``)."""
        if self._server is not None and self.state is Lifecycle.RUNNING:
            self.state = Lifecycle.DRAINING
            self._server.stop(grace_s).wait()

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(None).wait()
        self.state = Lifecycle.STOPPED

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


ReplyHook = Callable[[str, str], bool]  # (method, message id) -> lose this reply?


def _keep(_method: str, _message_id: str) -> bool:
    return False


@attrs.define
class MtlsClient:
    """A producer's channel to one listener: the run's CA, its certificate (``None``: none),
    how often a call is tried and how long each try may take."""

    address: str
    ca_pem: bytes
    identity: Identity | None
    retries: int = 3
    timeout_s: float = 5.0
    _channel: Any = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=self.ca_pem,
            private_key=self.identity.key if self.identity else None,
            certificate_chain=self.identity.cert if self.identity else None,
        )
        # The run's server certificate is issued to "localhost"; clients dial 127.0.0.1.
        options = [("grpc.ssl_target_name_override", "localhost")]
        self._channel = grpc.secure_channel(self.address, credentials, options=options)

    def close(self) -> None:
        self._channel.close()


@attrs.define
class GrpcDeliveryClient(MtlsClient):
    """One producer's channel to Ratchet's delivery service."""

    reply_hook: ReplyHook = _keep

    def deliver(self, method: str, message_id: str, producer: str, envelope: bytes) -> CallAnswer:
        """Send until a receipt arrives; ``Unauthenticated`` when refused so; raises
        ``TransportError`` when every try failed (a failed handshake, a dead server)."""
        _, services = _proto.modules()
        call = getattr(services.SagaDeliveryStub(self._channel), method)
        request = _proto.message("Delivery", message_id=message_id, producer=producer, envelope=envelope)
        last: Exception | None = None
        for _ in range(self.retries):
            try:
                reply = call(request, timeout=self.timeout_s)
            except grpc.RpcError as exc:
                code = exc.code()
                if code is grpc.StatusCode.UNAUTHENTICATED:
                    return Unauthenticated(message_id)
                if code not in _RETRY:
                    raise TransportError(f"{method} failed: {code}") from exc
                last = exc
                continue
            if self.reply_hook(method, message_id):
                last = TransportError("the reply was lost")
                continue  # the server committed; the reply never arrived: send it again
            return from_proto(reply)
        raise TransportError(f"{method}: no receipt after {self.retries} tries: {last}")

    def echo(self, payload: bytes) -> bytes:
        _, services = _proto.modules()
        reply = services.EchoStub(self._channel).Echo(
            _proto.message("EchoRequest", payload=payload), timeout=self.timeout_s
        )
        return bytes(reply.payload)
