"""Results back to the orchestrator over gRPC with mutual TLS, beside the model (S-GRPC-01..05).

Per run one PKI (a CA, the server's certificate, one client certificate per participant, and a
stranger's from another CA); per example one listener on 127.0.0.1 with an ephemeral port, over
the example's orchestrator, stopped in ``close``. It also opens a port whose TLS does not demand
a certificate, so the interceptor has calls to refuse. Every call that reaches the handler is
recorded (a spy): a call the transport should have refused and that shows up there is a
violation, whatever the runtime then did with it.
"""

from __future__ import annotations

import os

from hypothesis import strategies as st
from hypothesis.stateful import rule

from conformance._machine import step
from conformance._violations import Violation
from conformance.saga import _world as w
from conformance.saga._port import model_observation
from conformance.transport import _faults as f
from conformance.transport._base import TransportMachineBase, show
from impls.saga.codec import result_to_blob
from impls.transport import RESULT, GrpcDeliveryClient, OrchestratorHandler, Pki, TransportError
from model import saga as m

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")  # failed handshakes are the point, not news

_PKI: dict[str, Pki] = {}
REFUSED = {
    "principal_mismatch": f.PRINCIPAL_MISMATCH,
    "wrong_ca": f.WRONG_CA,
    "no_cert": f.MISSING_CERT,
    "unauthenticated": f.UNAUTHENTICATED_CALL,
}
fates = st.sampled_from(["committed"] * 5 + ["rolled_back", "unknown_applied", "unknown_not_applied"])


class _ResultSpy:
    def __init__(self, inner: OrchestratorHandler, calls: list[tuple[str, str]]) -> None:
        self.inner, self.calls = inner, calls

    def handle(self, body: bytes, principal: str) -> m.ResultOutcome:
        self.calls.append((self.inner.message_id(body), principal))
        return self.inner.handle(body, principal)

    def message_id(self, body: bytes) -> str:
        return self.inner.message_id(body)

    def ready(self) -> bool:
        return self.inner.ready()


class GrpcRules(TransportMachineBase):
    def _grpc(self) -> None:
        """Start this example's listener the first time a rule needs it."""
        if getattr(self, "listener", None) is not None:
            return
        pki = _PKI.setdefault(self.context.run_id, Pki.create(w.OWNERS))
        self.pki = pki
        self.result_calls: list[tuple[str, str]] = []
        self.results_published: set[str] = set()
        handler = _ResultSpy(OrchestratorHandler(self.runtime.orch, lambda: self.now), self.result_calls)
        self.listener = self.context.target.listener(pki, results=handler, optional_port=True)
        self.listener.start()
        if not self.listener.ready():
            raise Violation("S-GRPC-01", "the listener is not ready over a live engine", {})
        self.lose_reply = False
        self.refusals = 0
        self.clients = {
            o: GrpcDeliveryClient(
                self.listener.address, pki.ca.pem, pki.clients[o], reply_hook=self._reply_hook
            )
            for o in w.OWNERS
        }

    def _reply_hook(self, _method: str, _message_id: str) -> bool:
        lose, self.lose_reply = self.lose_reply, False
        return lose

    @rule(owner=st.sampled_from(w.OWNERS), fate=fates, lost=st.booleans())
    @step
    def deliver_result(self, owner: str, fate: str, lost: bool) -> None:
        """A result over mTLS; with ``lost`` its reply is lost after the server committed and the
        client retries (S-GRPC-01, S-GRPC-04, S-GRPC-05)."""
        picked = self._pick_result(owner)
        if picked is not None:
            self._deliver_genuine(*picked, fate, lost=lost and self._allows(f.REPLY_LOST))

    @rule(owner=st.sampled_from(w.OWNERS), how=st.sampled_from(sorted(REFUSED)))
    @step
    def refused_call(self, owner: str, how: str) -> None:
        """A call the transport must refuse before the handler (S-GRPC-02, S-GRPC-03)."""
        picked = self._pick_result(owner)
        # Each example walks the kinds in turn from the drawn one, so every kind is met often.
        kinds = sorted(REFUSED)
        how = kinds[(kinds.index(how) + self.refusals) % len(kinds)]
        self.refusals += 1
        if picked is not None and self._allows(REFUSED[how]):
            self.context.inject(REFUSED[how].name)
            self._deliver_refused(*picked, how)

    def _pick_result(self, owner: str) -> tuple[str, m.ResultEnvelope] | None:
        """The oldest unpublished result of ``owner`` (or of the other participant when it has
        none); with nothing unpublished, a copy of one already acknowledged (a duplicate)."""
        self._grpc()
        for who in (owner, w.OWNERS[1 - w.OWNERS.index(owner)]):
            expected_pending = tuple(
                r for r in self.parts[who].outbox if r.message_id not in self.results_published
            )
            pending = self.runtime.pending_results(who)
            self.expect("S-PART-01", expected_pending, pending)
            if pending:
                return who, pending[0]
        sent = [r for r in self.parts[owner].outbox if r.message_id in self.results_published]
        return (owner, sent[-1]) if sent else None

    def _deliver_genuine(self, owner: str, result: m.ResultEnvelope, fate: str, lost: bool) -> None:
        commit = self._set_fate(fate)
        self.model, first = m.handle_result(self.model, m.ResultDelivery(result, owner, self.now, commit))
        expected = m.receipt_for(owner, result.message_id, first)
        if lost:
            self.context.inject(f.REPLY_LOST.name)
            self.lose_reply = True  # the server commits, the client never sees the reply, and retries
            self.model, second = m.handle_result(self.model, m.ResultDelivery(result, owner, self.now))
            retried = m.receipt_for(owner, result.message_id, second)
            if first.verdict is m.DeliveryVerdict.ACK and not m.same_acknowledgement(expected, retried):
                raise Violation("S-GRPC-05", "the model's retry lost its acknowledgement", {})
            expected = retried
        answer = self.clients[owner].deliver(RESULT, result.message_id, owner, result_to_blob(result))
        self.fate = m.CommitFate.COMMITTED
        self.expect("S-GRPC-05" if lost else _receipt_rule(expected), expected, answer)
        if expected.kind in m.ACKNOWLEDGING:
            self.results_published.add(result.message_id)
            self.runtime.mark_result_published(owner, result.message_id)

    def _deliver_refused(self, owner: str, result: m.ResultEnvelope, fault: str) -> None:
        """A call the transport must refuse before the handler; the model does not move."""
        before = len(self.result_calls)
        body = result_to_blob(result)
        pki, listener = self.pki, self.listener
        if fault == "principal_mismatch":
            other = w.OWNERS[1 - w.OWNERS.index(owner)]
            answer = self.clients[other].deliver(RESULT, result.message_id, owner, body)
            expected: object = m.answer_call(m.DeliveryCall(result.message_id, owner, other), None)
            self.expect("S-GRPC-02", expected, answer)
        elif fault == "unauthenticated":
            client = GrpcDeliveryClient(f"127.0.0.1:{listener.open_port}", pki.ca.pem, None, retries=1)
            try:
                answer = client.deliver(RESULT, result.message_id, owner, body)
            finally:
                client.close()
            self.expect("S-GRPC-03", m.Unauthenticated(result.message_id), answer)
        else:
            identity = pki.stranger if fault == "wrong_ca" else None
            client = GrpcDeliveryClient(listener.address, pki.ca.pem, identity, retries=1, timeout_s=2.0)
            try:
                answer = client.deliver(RESULT, result.message_id, owner, body)
                raise Violation(
                    "S-GRPC-03",
                    "a call without a valid client certificate was answered",
                    {"answer": show(answer)},
                )
            except TransportError:
                pass  # the handshake failed: no code of ours ran
            finally:
                client.close()
        if len(self.result_calls) != before:
            raise Violation(
                "S-GRPC-03" if fault != "principal_mismatch" else "S-GRPC-02",
                "a call the transport must refuse reached the handler",
                {"fault": fault, "calls": show(self.result_calls[before:])},
            )

    def _check_grpc(self) -> None:
        if getattr(self, "listener", None) is None:
            return
        actual = self.runtime.observe()
        expected = model_observation(self.model)
        if (actual.instances, actual.journal, actual.outbox) != (
            expected.instances,
            expected.journal,
            expected.outbox,
        ):
            raise Violation(
                "S-ORCH-02",
                "the orchestrator's rows differ from the model after gRPC deliveries",
                {"expected": show(expected.journal), "actual": show(actual.journal)},
            )

    def _quiesce_grpc(self) -> None:
        """Every result still in a participant's outbox is delivered, fault-free."""
        self._grpc()
        for owner in w.OWNERS:
            for result in self.runtime.pending_results(owner):
                if result.message_id not in self.results_published:
                    self._deliver_genuine(owner, result, "committed", lost=False)

    def close(self) -> None:
        try:
            if getattr(self, "listener", None) is not None:
                for client in self.clients.values():
                    client.close()
                self.listener.drain(0.5)
                self.listener.stop()
        finally:
            super().close()


def _receipt_rule(receipt: m.Receipt) -> str:
    return "S-GRPC-04" if receipt.kind is m.ReceiptKind.RETRYABLE else "S-GRPC-01"
