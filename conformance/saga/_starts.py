"""Starts, lifecycle races and instance releases beside the model (S-START-*, S-CAT-04/05/07/08/11)."""

from __future__ import annotations

from collections.abc import Callable

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from conformance._machine import step
from conformance._violations import HarnessEnvironmentError
from conformance.saga import _world as w
from conformance.saga._base import ASK_AGAIN_TRIES, SagaMachineBase, asking_again, fates, indexes
from conformance.saga._faults import LIFECYCLE_RACE
from model import saga as m

#: How a start gives its payload (S-START-10, S-START-11): JSON bytes, a raw payload with the
#: JSON contract, a raw non-JSON payload with or without its schema, both forms (refused), neither
#: (a start without first-step input, admitted: S-START-10).
PAYLOAD_FORMS: dict[str, Callable[[bytes], tuple[bytes | None, m.SagaPayload | None]]] = {
    "json": lambda data: (data, None),
    "raw_json": lambda data: (None, m.SagaPayload(data, m.JSON_CONTRACT)),
    "raw_schema": lambda _data: (None, m.SagaPayload(w.RAW_BYTES, w.UPLOAD_CONTRACT)),
    "raw_no_schema": lambda _data: (
        None,
        m.SagaPayload(w.RAW_BYTES, m.PayloadContract(w.UPLOAD_CONTRACT.media_type)),
    ),
    "both": lambda data: (data, m.SagaPayload(data, m.JSON_CONTRACT)),
    "none": lambda _data: (None, None),
}


#: Replays ``conflict_on_both_sides`` tries at most: the chance that as many uniformly spread
#: digests all fall on one side of the stored one is 2**-31.
CONFLICT_TRIES = 32


def _start_rule(expected: object, joined: bool) -> str:
    if joined:
        return "S-START-06"
    if isinstance(expected, m.PayloadRejected):
        return "S-START-10" if expected.problem is m.PayloadProblem.BOTH_GIVEN else "S-START-11"
    rules = {
        m.QuotaExhausted: "S-START-13",
        m.DefinitionNotStartable: "S-CAT-05",
        m.Started: "S-START-01",
        m.StartConflict: "S-START-02",  # a different digest (it fell to S-START-08's default)
    }
    return rules.get(type(expected), "S-START-01" if isinstance(expected, m.AlreadyExists) else "S-START-08")


class StartRules(SagaMachineBase):
    def _catalog_setup(self) -> None:
        """The order definition published and activated, the upload one a candidate (S-CAT-02, S-CAT-04)."""
        self._set_up("S-CAT-02", m.PublishDefinition(w.ARTIFACT, w.DIGEST))
        self._set_up("S-CAT-04", m.ChangeLifecycle(w.KEY, m.LifecycleAction.ACTIVATE))
        # The upload definition stays a candidate until a ``catalog`` rule activates it.
        self._set_up("S-CAT-02", m.PublishDefinition(w.UPLOAD, w.UPLOAD_DIGEST))

    def _set_up(self, rule_id: str, request: m.PublishDefinition | m.ChangeLifecycle) -> None:
        """One catalog write of the set-up, asked again (``_base.asking_again``) while the
        database refuses it on every attempt (S-TX-01: nothing of it applied, the model went back):
        set-up is the harness's, and an example whose catalog a contended database refused once ran
        on without its definitions (a KeyError at quiescence that no replay reproduced)."""
        for _ in asking_again():
            refusals = self.refusals
            expected: object
            if isinstance(request, m.PublishDefinition):
                self.model, expected = m.publish_definition(self.model, request)
                actual = self.runtime.publish_definition(request.artifact, request.digest)
            else:
                self.model, expected = m.change_lifecycle(self.model, request, self.now)
                actual = self.runtime.change_lifecycle(request, self.now)
            self.expect(rule_id, expected, actual)
            if self.refusals == refusals:
                return
        raise HarnessEnvironmentError(f"the database refused the catalog's set-up {ASK_AGAIN_TRIES} times")

    # -- starts and catalog ---------------------------------------------------------------

    @step
    def first_start(self, key: int) -> None:
        """The first step of every example (``SagaMachine.opening``): one saga admitted, so
        deliveries have work from the first step (swarm testing may switch ``start`` off for a
        whole example); for odd keys it is a start without first-step input (S-START-10); for
        even ones, on a runtime that joins starts to a host's transaction, a joined start whose
        eligibility is revoked at the host's own checkpoint (S-START-06: it passes the runtime's
        gates). Every fourth key was not enough: Hypothesis draws an example's first choice from
        the examples before it, and one random PostgreSQL seed opened 87 examples without 2 or 6."""
        joined = key % 2 == 0 and self.caps.joined_starts
        self._start(
            key, 0, 1 if joined else -1, "committed", form="none" if key % 2 else "declared", joined=joined
        )

    @rule(
        key=indexes,
        payload=indexes,
        revoked=st.sampled_from([-1, -1, -1, 0, 1]),
        fate=fates,
        definition=st.sampled_from(["order"] * 4 + ["upload"]),
        form=st.sampled_from(["declared"] * 6 + list(PAYLOAD_FORMS)),
        joined=st.sampled_from([False, False, False, True]),
    )
    @step
    def start(
        self,
        key: int,
        payload: int,
        revoked: int,
        fate: str,
        definition: str = "order",
        form: str = "declared",
        joined: bool = False,
    ) -> None:
        self._start(key, payload, revoked, fate, definition, form, joined)

    def _start(
        self,
        key: int,
        payload: int,
        revoked: int,
        fate: str,
        definition: str = "order",
        form: str = "declared",
        joined: bool = False,
        data: bytes | None = None,
    ) -> object:
        """A start beside the model (S-START-01..13, S-CAT-05, S-CAT-08).

        ``definition`` picks the order saga or the upload one (a candidate until activated,
        then admitting its schema-declared non-JSON input); ``form`` how the payload is given
        (``declared``: the definition's own contract); the fourth order key is tried only once
        the tenant's quota is full; ``joined`` runs the start inside a transaction the harness
        owns as the host (S-START-06); ``data``: these payload bytes instead of ``payload``'s.
        """
        if definition == "upload":
            def_key, business_key = w.UPLOAD_KEY, w.UPLOAD_KEYS[key % len(w.UPLOAD_KEYS)]
        elif key % 4 == 3 and self.caps.quota and self.model.quota_used.get(w.KEY.tenant, 0) >= w.QUOTA_LIMIT:
            def_key, business_key = w.KEY, w.OVER_QUOTA_KEY
        else:
            def_key, business_key = w.KEY, w.BUSINESS_KEYS[key % len(w.BUSINESS_KEYS)]
        joined = joined and self.caps.joined_starts
        if form == "declared":
            form = "raw_schema" if definition == "upload" else "json"
        given = w.PAYLOADS[payload % len(w.PAYLOADS)] if data is None else data
        json_payload, raw_payload = PAYLOAD_FORMS[form](given)
        request = m.StartSaga(def_key, business_key, json_payload=json_payload, raw_payload=raw_payload)
        eligibility = m.Eligibility(None if revoked < 0 else revoked)
        commit = self._set_fate(fate)
        attempt = m.StartAttempt(
            request, self.now, eligibility=eligibility, joined_outer=joined, commit=commit
        )
        before = self.model
        self.model, expected = m.start_saga(before, attempt)
        if joined:
            actual = self.runtime.start_saga_joined(request, self.now, eligibility.revoked_at)
        else:
            actual = self.runtime.start_saga(request, self.now, eligibility.revoked_at)
        self.fate = m.CommitFate.COMMITTED
        if self.database_refused(commit, actual):
            refused = attrs.evolve(attempt, commit=m.CommitFate.ROLLED_BACK)
            self.model, expected = m.start_saga(before, refused)
            self.refated()
        self.expect(_start_rule(expected, joined), expected, actual)
        self.context.reach(f"start:{type(expected).__name__}")
        if joined and revoked == 1 and not isinstance(expected, m.EligibilityRevoked):
            self.context.reach("joined-start-left-last-gate")
        if isinstance(expected, m.Started) and raw_payload is not None and form == "raw_schema":
            self.context.reach("non-json-start-admitted")
        if isinstance(expected, m.Started) and form == "none":
            self.context.reach("start-without-input-admitted")
        return expected

    def revoke_at_each_checkpoint(self) -> None:
        """A start refused at each eligibility checkpoint the runtime passes (S-START-04): the
        model's ``checkpoints`` of an attempt with no resumption (the runtime's create transaction
        is never resumed: r = 0), so 0 before the snapshot and 1 before COMMIT. Each is
        EligibilityRevoked at that checkpoint and writes nothing (``after_step``), in every example."""
        request = m.StartAttempt(m.StartSaga(w.KEY, w.BUSINESS_KEYS[0]), self.now)
        for checkpoint in m.checkpoints(request):
            expected = self._start(0, 0, checkpoint, "committed")
            self.after_step()
            if expected == m.EligibilityRevoked(checkpoint):
                self.context.reach(f"eligibility-revoked:{checkpoint}")

    def conflict_on_both_sides(self) -> None:
        """A replay of the first business key's start with other JSON payloads, until one's start
        digest sorts before the stored one and another's after it (S-START-02: a different digest
        is StartConflict, whichever way it sorts). The drawn replays use the world's few payloads,
        so a runtime comparing digests by order (``>=`` for ``==``) met a conflict from one side
        only, or none, as its stored digest and the drawn payload fell. Each replay writes nothing
        (``after_step``); nothing is drawn from Hypothesis."""
        sides: set[bool] = set()
        for quantity in range(1, CONFLICT_TRIES + 1):
            expected = self._start(0, 0, -1, "committed", data=b'{"qty":%d}' % quantity)
            self.after_step()
            if isinstance(expected, m.StartConflict):
                sides.add(expected.offered_digest < expected.existing_digest)
                if len(sides) == 2:
                    self.context.reach("start-conflict-both-orders")
                    return
            elif not isinstance(expected, m.AlreadyExists):
                return  # the definition no longer loads (retired): no replay is judged by digest

    @rule(action=st.sampled_from(["activate"] * 8 + ["deprecate", "retire"]))
    @step
    def lifecycle(self, action: str) -> None:
        if not self._allows(LIFECYCLE_RACE):
            return
        if action != "activate" and len(self.model.instances) < 2:
            action = "activate"  # keep the definition startable until some sagas run
        if action == "retire" and not self.caps.retirement:
            action = "deprecate"
        self.context.inject(LIFECYCLE_RACE.name)
        self.catalog_touched = True
        change = m.ChangeLifecycle(w.KEY, m.LifecycleAction(action))
        self.model, expected = m.change_lifecycle(self.model, change, self.now)
        self.expect(
            "S-CAT-07" if action == "retire" else "S-CAT-04",
            expected,
            self.runtime.change_lifecycle(change, self.now),
        )

    def release_beside_pending(self) -> bool:
        """A finished saga released while another saga still has an unpublished command: only its
        own pending commands may hold it (S-CAT-11). True once one was released."""
        if not self.caps.instance_release:
            return True
        pending = {e.command.saga_id for e in self.model.outbox.values() if not e.published}
        tenants = [i.definition.tenant for i in self.model.instances.values()]
        for saga_id, instance in sorted(self.model.instances.items()):
            finished = instance.status in m.TERMINAL_STATUSES
            # one of several sagas of its tenant: the world keeps its tenants for later checks
            if (
                finished
                and saga_id not in pending
                and pending
                and tenants.count(instance.definition.tenant) > 1
            ):
                self._release(saga_id)
                self.context.reach("released-beside-pending")
                self.after_step()
                return True
        return False

    def release_settled(self) -> None:
        """At quiescence, every retained saga asked to go: each finished one with nothing pending
        is released, the others are refused, vs the model (S-CAT-11; target
        ``released-at-quiescence``). The random program seldom met a finished saga, so a release
        that never succeeded (its delete answered the wrong way) passed."""
        if not self.caps.instance_release:
            return
        for saga_id in sorted(self.model.instances):
            self._release(saga_id)
            if saga_id not in self.model.instances:
                self.context.reach("released-at-quiescence")
        self.after_step()

    @precondition(lambda self: self.caps.instance_release)
    @rule(index=indexes)
    @step
    def release_instance(self, index: int) -> None:
        ids = sorted(self.model.instances)
        if not ids:
            return
        finished = [s for s in ids if self.model.instances[s].status in m.TERMINAL_STATUSES]
        pool = finished if finished and index % 4 else ids  # released as well as refused
        self._release(pool[index % len(pool)])

    def _release(self, saga_id: str) -> None:
        self.model, expected = m.release_instance(self.model, saga_id)
        self.expect("S-CAT-11", expected, self.runtime.release_instance(saga_id))
