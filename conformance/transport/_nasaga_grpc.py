"""The transport suite on nasaga's gRPC transport (feature ``grpc-transport``), in its host.

Theory of operation
-------------------
The backend ``nasaga-grpc`` names a target whose ``specialise`` hands the suite this machine. The
world is the order saga on nasaga's runtime (``NasagaRuntime``, PostgreSQL); the host serves, per
participant, nasaga's ``SagaCommandTransport`` (its participant runtime behind it, bound to the
orchestrator's certificate) and ``SagaResultTransport`` (the orchestrator behind it, bound to that
participant's certificate), each a nagrpc listener under mutual TLS with the run's certificates
(``impls.transport.Pki``), plus one result port whose TLS asks for no certificate
(``hosts/nasaga/src/grpc.rs``). The harness is the relay on both sides: it reads the outboxes
back through the host and sends each envelope over gRPC as its producer, beside the model
(``handle_command`` / ``handle_result`` and the receipts of ``model.saga``, S-GRPC-01..05).

nasaga's request carries no producer: the principal is the leaf certificate's SHA-256, frozen to
one producer per service, so a CA-valid certificate bound to another producer authenticates nobody
for this service (model ``DeliveryCall(principal=None)``: ``UNAUTHENTICATED``, N-46); an envelope
claiming another step owner sent under a bound certificate is the model's ``principal_mismatch``.
A lost reply is lost at the client after the server answered (``reply_hook``), which then sends
the same envelope again. Receipts are compared by kind (nasaga's reasons are its own vocabulary,
noted in the program). After every step the orchestrator's instances and outbox, each
participant's effects and result outbox, and the handler calls behind each listener are read back
through the host and compared with the model: every committed effect exactly once.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import rule

from conformance._machine import step
from conformance._violations import HarnessEnvironmentError, Violation
from conformance.saga import _world as w
from conformance.saga._faults import RELAY_CRASH
from conformance.saga._nasaga import NasagaRuntime
from conformance.saga._nasaga_terms import DECISION
from conformance.saga._port import model_observation, model_participant
from conformance.transport import _faults as f
from conformance.transport._base import SagaSideRules, show
from impls.nasaga._grpc import (
    NasagaAnswer,
    NasagaGrpcClient,
    NasagaReceiptKind,
    Refused,
    Service,
    open_listeners,
)
from impls.transport import Pki, TransportError
from model import saga as m

os.environ.setdefault("GRPC_VERBOSITY", "NONE")  # failed handshakes are the point, not news

_PKI: dict[str, Pki] = {}
KINDS = {
    NasagaReceiptKind.COMMITTED: m.ReceiptKind.COMMITTED,
    NasagaReceiptKind.DUPLICATE: m.ReceiptKind.DUPLICATE,
    NasagaReceiptKind.RETRYABLE: m.ReceiptKind.RETRYABLE,
    NasagaReceiptKind.DETERMINISTIC_REJECT: m.ReceiptKind.REJECTED,
}
DECISIONS = {"succeed": m.Decision.SUCCEED, "reject": m.Decision.REJECT, "fail": m.Decision.TRANSIENT_FAILURE}
REFUSED = {
    "wrong_ca": f.WRONG_CA,
    "no_cert": f.MISSING_CERT,
    "unauthenticated": f.UNAUTHENTICATED_CALL,
    "foreign_cert": f.PRINCIPAL_MISMATCH,
    "claims_other": f.PRINCIPAL_MISMATCH,
    "poison": f.POISON,
}
#: Fault kinds of the suite nasaga's gRPC transport cannot be put through, and why.
NASAGA_GRPC_LACKS = {
    f.STREAMS_ONLY: "gRPC delivers one envelope per call: no stream, group or pending list",
    f.KAFKA_ONLY: "gRPC has no partitions or offsets",
    f.SIGNED_ONLY: "nasaga's gRPC transport authenticates the caller by certificate, not the envelope",
    "transport:key-rotated": "nasaga's gRPC transport signs no envelopes",
}


def _clock() -> int:
    """nasaga's result service reads the system clock (epoch ms); the model is given the same."""
    return time.time_ns() // 1_000_000


class NasagaGrpcMachine(SagaSideRules):
    def __init__(self) -> None:
        super().__init__()
        details = self.context.stats.details
        details["transport:runtime"], details["transport:connector"] = "nasaga", "grpc"
        for key, why in NASAGA_GRPC_LACKS.items():
            details[key] = f"not applicable: {why}"
        self.runtime = NasagaRuntime(
            "postgres", self.context.new_namespace(), self.context.stats, lambda _unit: m.CommitFate.COMMITTED
        )
        self.model = m.OrchestratorStore(trusted_producers=frozenset(w.OWNERS))
        self.parts = {
            o: m.ParticipantState(w.participant_config(o, transient_failure_budget=w.NO_DEAD_LETTERS))
            for o in w.OWNERS
        }
        now = _clock()
        self.model, _ = m.publish_definition(self.model, m.PublishDefinition(w.ARTIFACT, w.DIGEST))
        self.runtime.publish_definition(w.ARTIFACT, w.DIGEST)
        change = m.ChangeLifecycle(w.KEY, m.LifecycleAction.ACTIVATE)
        self.model, _ = m.change_lifecycle(self.model, change, now)
        self.runtime.change_lifecycle(change, now)
        self.pki = pki = _PKI.setdefault(self.context.run_id, Pki.create((w.ORCHESTRATOR, *w.OWNERS)))
        try:
            plant = getattr(self.context.target, "plant", None)
            opened = open_listeners(
                self.runtime.host,
                self.runtime.ns,
                pki,
                w.ORCHESTRATOR,
                tuple(w.OWNERS),
                **({"plant": plant} if plant else {}),
            )
        except Exception as exc:
            raise HarnessEnvironmentError(f"nasaga's gRPC listeners did not open: {exc}") from exc
        self.ports: dict[str, int] = {str(k): int(v) for k, v in opened["listeners"].items()}
        self.lose_reply = False
        self.clients: dict[tuple[str, str], NasagaGrpcClient] = {}
        for owner in w.OWNERS:
            self.clients[("command", owner)] = self._client(f"command:{owner}", w.ORCHESTRATOR)
            self.clients[("result", owner)] = self._client(f"result:{owner}", owner)
        for name, client in self.clients.items():
            if not client.serving():  # readiness: the standard health RPC over the mTLS channel
                raise Violation(
                    "S-GRPC-01", "a listener is not serving after its start", {"listener": ":".join(name)}
                )
        self.published: set[str] = set()  # result message ids acknowledged
        self.refusals = 0
        self.handler_runs = {o: 0 for o in w.OWNERS}  # the model's genuine handler runs per owner
        self.result_calls = 0  # calls the transport let through to the orchestrator

    def _client(self, listener: str, who: str | None, **options: Any) -> NasagaGrpcClient:
        identity = self.pki.clients[who] if who is not None else None
        return NasagaGrpcClient(
            f"127.0.0.1:{self.ports[listener]}", self.pki.ca.pem, identity, reply_hook=self._hook, **options
        )

    def _hook(self, _service: Service) -> bool:
        lose, self.lose_reply = self.lose_reply, False
        return lose

    def _allows(self, kind: Any) -> bool:
        return self.context.faults.allows(kind.name)

    def _seen(self, answer: NasagaAnswer, message_id: str, principal: str | None) -> m.CallAnswer:
        """nasaga's answer in the model's terms (reasons dropped: nasaga's own vocabulary)."""
        if isinstance(answer, Refused):
            return m.Unauthenticated(message_id)
        self.note(f"nasaga: {answer.kind.name} {answer.reason}".rstrip())
        return m.Receipt(KINDS[answer.kind], message_id, principal or "")

    def _expect(self, rule_id: str, expected: m.CallAnswer, actual: m.CallAnswer) -> None:
        if isinstance(expected, m.Receipt):
            expected = m.Receipt(expected.kind, expected.message_id, expected.principal)
        self.note(f"model: {show(expected)}")
        if expected != actual:
            retryable = {m.ReceiptKind.RETRYABLE} & {
                getattr(x, "kind", None) for x in (expected, actual) if isinstance(x, m.Receipt)
            }
            raise Violation(
                "S-GRPC-04" if retryable else rule_id,
                "nasaga's answer differs from the model's",
                {"expected": show(expected), "actual": show(actual)},
            )

    # -- the saga side ----------------------------------------------------------------------

    def _start(self, key: int) -> None:
        now = _clock()
        request = m.StartSaga(w.KEY, w.BUSINESS_KEYS[key], json_payload=w.PAYLOADS[0])
        self.model, expected = m.start_saga(self.model, m.StartAttempt(request, now))
        actual = self.runtime.start_saga(request, now, None)
        if self.runtime.project(expected) != actual:
            raise Violation("S-START-01", "the start differs from the model", {"actual": repr(actual)})

    def _publish(self) -> None:
        """The relay's look at the outbox: what it holds unpublished is the model's (S-ORCH-02).
        Sending is ``deliver_command``'s, one command per step, so faults meet each one."""
        self._pending_command()

    def _pending_command(self) -> m.CommandEnvelope | None:
        expected = m.pending_commands(self.model)
        actual = self.runtime.pending_commands()
        if self.runtime.project(expected) != self.runtime.project(actual):
            raise Violation("S-ORCH-02", "the outbox differs from the model", {"actual": show(actual)})
        return actual[0] if actual else None

    # -- rules ------------------------------------------------------------------------------

    @rule(
        decision=st.sampled_from(["succeed"] * 3 + ["reject", "fail"]),
        lost=st.booleans(),
        relay=st.booleans(),
    )
    @step
    def deliver_command(self, decision: str, lost: bool, relay: bool) -> None:
        """The oldest unpublished command over mTLS as the orchestrator; with ``lost`` its reply is
        lost after the participant committed and the client sends it again (S-GRPC-05); with
        ``relay`` the relay dies before recording the acknowledgement (sent again later)."""
        self._deliver_command(
            DECISIONS[decision],
            lost=lost and self._allows(f.REPLY_LOST),
            relay_crash=relay and self._allows(RELAY_CRASH),
        )

    def _deliver_command(self, decision: m.Decision, *, lost: bool, relay_crash: bool) -> None:
        command = self._pending_command()
        if command is None:
            return
        owner = command.owner
        self.runtime.host.call(
            "grpc_decide", namespace=self.runtime.ns, owner=owner, decision=DECISION[decision]
        )
        expected = self._model_command(command, decision)
        if lost:
            self.context.inject(f.REPLY_LOST.name)
            self.lose_reply = True
            retried = self._model_command(command, decision)
            if expected.kind in m.ACKNOWLEDGING and not m.same_acknowledgement(expected, retried):
                raise Violation("S-GRPC-05", "the model's retry lost its acknowledgement", {})
            expected = retried
        body = json.dumps(self.runtime.commands[command.command_id]).encode()
        answer = self._call(self.clients[("command", owner)], Service.COMMAND, body)
        self._expect(
            "S-GRPC-05" if lost else "S-GRPC-01",
            expected,
            self._seen(answer, command.command_id, w.ORCHESTRATOR),
        )
        if lost and expected.kind is m.ReceiptKind.DUPLICATE:
            self.context.reach("reply-lost-absorbed:command")
        if expected.kind is m.ReceiptKind.RETRYABLE:
            self.context.reach("retryable-kept-unpublished")
        if expected.kind in m.ACKNOWLEDGING:
            if relay_crash:
                self.context.inject(RELAY_CRASH.name)  # acknowledged, not recorded: sent again later
                return
            if expected.kind is m.ReceiptKind.DUPLICATE and not lost:
                self.context.reach("relay-redelivery-absorbed")
            self.model, _ = m.mark_command_published(self.model, command.command_id)
            self.runtime.mark_command_published(command.command_id)

    def _model_command(self, command: m.CommandEnvelope, decision: m.Decision) -> m.Receipt:
        before = self.parts[command.owner]
        self.parts[command.owner], outcome = m.handle_command(
            before, m.CommandDelivery(command, w.ORCHESTRATOR, decision)
        )
        self.handler_runs[command.owner] += m.Stage.HANDLER in m.command_stages(before, command, outcome)
        return m.receipt_for(w.ORCHESTRATOR, command.command_id, outcome)

    @rule(owner=st.sampled_from(w.OWNERS), lost=st.booleans())
    @step
    def deliver_result(self, owner: str, lost: bool) -> None:
        """The oldest unpublished result of ``owner`` (else of the other) over mTLS as its producer;
        with ``lost`` its reply is lost after the orchestrator committed (S-GRPC-05)."""
        picked = self._pending_result(owner)
        if picked is not None:
            self._deliver_result(*picked, lost=lost and self._allows(f.REPLY_LOST))

    def _pending_result(self, owner: str) -> tuple[str, m.ResultEnvelope] | None:
        for who in (owner, w.OWNERS[1 - w.OWNERS.index(owner)]):
            expected = tuple(r for r in self.parts[who].outbox if r.message_id not in self.published)
            actual = self.runtime.pending_results(who)
            if expected != actual:
                raise Violation(
                    "S-PART-01", "a result outbox differs from the model", {"actual": show(actual)}
                )
            if actual:
                return who, actual[0]
        return None

    def _deliver_result(self, owner: str, result: m.ResultEnvelope, *, lost: bool) -> None:
        now = _clock()
        self.model, first = m.handle_result(self.model, m.ResultDelivery(result, owner, now))
        expected = m.receipt_for(owner, result.message_id, first)
        if lost:
            self.context.inject(f.REPLY_LOST.name)
            self.lose_reply = True
            self.model, second = m.handle_result(self.model, m.ResultDelivery(result, owner, now))
            retried = m.receipt_for(owner, result.message_id, second)
            if expected.kind in m.ACKNOWLEDGING and not m.same_acknowledgement(expected, retried):
                raise Violation("S-GRPC-05", "the model's retry lost its acknowledgement", {})
            expected = retried
            self.result_calls += 1
        self.result_calls += 1
        body = json.dumps(self.runtime.results[result.message_id]).encode()
        answer = self._call(self.clients[("result", owner)], Service.RESULT, body)
        self._expect(
            "S-GRPC-05" if lost else "S-GRPC-01", expected, self._seen(answer, result.message_id, owner)
        )
        if lost and expected.kind is m.ReceiptKind.DUPLICATE:
            self.context.reach("reply-lost-absorbed:result")
        if expected.kind in m.ACKNOWLEDGING:
            self.published.add(result.message_id)
            self.runtime.mark_result_published(owner, result.message_id)

    def _call(self, client: NasagaGrpcClient, service: Service, body: bytes) -> NasagaAnswer:
        try:
            return client.deliver(service, body)
        except TransportError as exc:
            raise HarnessEnvironmentError(f"nasaga's gRPC listener did not answer: {exc}") from exc

    @rule(how=st.sampled_from(sorted(REFUSED)))
    @step
    def refused_call(self, how: str) -> None:
        """A call the transport must refuse before any handler ran or anything changed (S-GRPC-02,
        S-GRPC-03): another CA's certificate, none, a port that asks for none, a certificate of the
        CA bound to another producer, an envelope claiming another step's owner; and a body no
        handler can decode (a deterministic reject, S-GRPC-01)."""
        kinds = sorted(REFUSED)  # each example walks the kinds in turn from the drawn one
        how = kinds[(kinds.index(how) + self.refusals) % len(kinds)]
        self.refusals += 1
        picked = self._any_result()
        if picked is None or not self._allows(REFUSED[how]):
            return
        self.context.inject(REFUSED[how].name)
        if how == "poison":  # from the trusted orchestrator: a deterministic reject, no handler call
            body = b"\x00not an envelope"
            answer = self._call(self.clients[("command", w.OWNERS[0])], Service.COMMAND, body)
            expected = m.Receipt(m.ReceiptKind.REJECTED, "", w.ORCHESTRATOR)
            self._expect("S-GRPC-01", expected, self._seen(answer, "", w.ORCHESTRATOR))
            self.context.reach("dead-letter:undecodable")
            return
        owner, result = picked
        body = json.dumps(self.runtime.results[result.message_id]).encode()
        other = w.OWNERS[1 - w.OWNERS.index(owner)]
        if how in ("wrong_ca", "no_cert"):
            client = self._client(f"result:{owner}", None, retries=1, timeout_s=2.0)
            if how == "wrong_ca":
                client = NasagaGrpcClient(
                    client.address, self.pki.ca.pem, self.pki.stranger, retries=1, timeout_s=2.0
                )
            try:
                answer = client.deliver(Service.RESULT, body)
                raise Violation(
                    "S-GRPC-03",
                    "a call without a valid client certificate was answered",
                    {"answer": show(answer)},
                )
            except TransportError:
                pass  # the handshake failed: nothing of nasaga's ran
            finally:
                client.close()
        elif how == "claims_other":
            # owner's result sent under the other participant's bound certificate, on its own port
            answer = self._call(self.clients[("result", other)], Service.RESULT, body)
            claimed = m.answer_call(m.DeliveryCall(result.message_id, owner, other), None)
            self._expect("S-GRPC-02", claimed, self._seen(answer, result.message_id, other))
            self.result_calls += 1  # nasaga's orchestrator is what refuses it (module doc)
            self.context.reach("claimed-producer-rejected")
        else:
            listener, who = {
                "unauthenticated": (f"open:result:{w.OWNERS[0]}", None),
                "foreign_cert": (f"result:{owner}", other),
            }[how]
            client = self._client(listener, who)
            try:
                answer = self._call(client, Service.RESULT, body)
            finally:
                client.close()
            self._expect(
                "S-GRPC-03",
                m.answer_call(m.DeliveryCall(result.message_id, owner, None), None),
                self._seen(answer, result.message_id, who),
            )
            self.context.reach(f"refused:{how}")

    def _any_result(self) -> tuple[str, m.ResultEnvelope] | None:
        for owner in w.OWNERS:
            pending = self.runtime.pending_results(owner)
            if pending:
                return owner, pending[0]
        for owner in w.OWNERS:
            if self.parts[owner].outbox:
                return owner, self.parts[owner].outbox[-1]
        return None

    # -- checks -----------------------------------------------------------------------------

    def after_step(self) -> None:
        """Read back through the host: the orchestrator's instances and outbox (S-ORCH-02), each
        participant's effects (each once, S-PART-03) and result outbox (S-PART-01), and the handler
        calls behind each listener: none for a refused call (S-GRPC-03)."""
        actual = self.runtime.observe()
        expected = self.runtime.project(model_observation(self.model))
        assert isinstance(expected, type(actual))
        if (actual.instances, actual.outbox) != (expected.instances, expected.outbox):
            raise Violation(
                "S-ORCH-02",
                "the orchestrator's rows differ from the model after gRPC deliveries",
                {"expected": show(expected), "actual": show(actual)},
            )
        for owner in w.OWNERS:
            facts = self.runtime.observe_participant(owner)
            if len(set(facts.effects)) != len(facts.effects):
                raise Violation("S-PART-03", "an effect took effect twice", {"effects": list(facts.effects)})
            if facts != self.runtime.project(model_participant(self.parts[owner])):
                raise Violation(
                    "S-PART-01",
                    "business facts or result outbox differ from the model",
                    {"actual": show(facts)},
                )
        calls = self.runtime.host.call("grpc_calls", namespace=self.runtime.ns)
        commands = {str(k): int(v) for k, v in calls["commands"].items()}
        if commands != self.handler_runs or int(calls["results"]) != self.result_calls:
            raise Violation(
                "S-GRPC-03",
                "the handlers behind the listeners ran another number of times than the calls let through",
                {"expected": show((self.handler_runs, self.result_calls)), "actual": show(calls)},
            )

    def at_quiescence(self) -> None:
        """Every command and result delivered fault-free: nothing left unpublished, and every saga
        the model finished is finished in nasaga's rows."""
        for _ in range(40):
            if self._pending_command() is not None:
                self._deliver_command(m.Decision.SUCCEED, lost=False, relay_crash=False)
            elif (picked := self._pending_result(w.OWNERS[0])) is not None:
                self._deliver_result(*picked, lost=False)
            else:
                break
        else:
            raise Violation("S-GRPC-04", "deliveries stayed unacknowledged with faults stopped", {})
        if any(i.status is m.SagaStatus.COMPLETED for i in self.model.instances.values()):
            self.context.reach("saga-completed")
        self.after_step()

    def close(self) -> None:
        try:
            for client in self.clients.values():
                client.close()
            self.runtime.host.call("grpc_close", namespace=self.runtime.ns)
        except Exception:
            pass
        finally:
            self.runtime.close()
