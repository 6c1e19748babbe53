"""Wire faults in the saga suite: a unit's COMMIT meets the fault proxy (S-TX-02).

Mixed into ``SagaMachine`` only for a backend reached through a proxy (``SagaTarget.specialise``),
so the machines of embedded backends keep their rules and draws. ``arm_wire_fault`` picks a kind;
the next unit whose fate is decided as a plain COMMIT (``_set_fate``) then really commits on the
server while the proxy meets exactly that COMMIT, armed by the runtime's own fate hook (``_fate``),
which it calls just before it sends COMMIT:

* ``wire-commit-reply-lost``: the server commits and the answer is lost; the driver reports the
  connection gone while COMMIT was in flight, the backend must say OUTCOME_UNKNOWN and the
  runtime report ``OutcomeUnknown``. The model takes the fate "unknown, applied";
* ``wire-commit-reset-before``: the connection is reset as COMMIT leaves, the server rolls the
  transaction back; the backend still cannot tell, so OUTCOME_UNKNOWN again; the model takes
  "unknown, not applied".

Either way the uncertainty is the backend's own, and it is settled on the next read: the
after-step comparison reads every row back and must find the model's side of it. A backend that
turns the lost answer into a definite rollback makes the runtime run the unit again on top of
its own committed writes, which the model does not allow.

Every example on a wire opens with ``wire_walk`` after ``SagaMachine.opening``: each kind once,
met by the next unit that commits. Drawn alone, each was met in 37-38 of 208 PostgreSQL examples
(docs/ci-gate.md, "A gate that does not hang on the seed").
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule

from conformance._faults import FaultKind
from conformance._machine import step
from conformance.saga import _world as w
from conformance.saga._base import indexes, unwrapped
from conformance.saga._machine import SagaMachine
from conformance.wire import SAGA_WIRE_FAULTS, WIRE_COMMIT_REPLY_LOST, FaultProxy, WireAction
from model import saga as m

#: The model's outcomes of units that write nothing (S-START-01 replays, S-PART-02, S-ORCH-03).
NO_WRITE = (m.AlreadyExists, m.DuplicateCommand, m.DuplicateResult)


class SagaWireRules(SagaMachine):
    proxy: FaultProxy

    def __init__(self) -> None:
        # The proxy is the process's: an example that failed inside a step never reached its
        # after_step, so a fault armed for its COMMIT could meet the next example's first one.
        self.proxy.disarm()
        super().__init__()
        self.wire_pending: FaultKind | None = None  # armed by the rule, for the next plain COMMIT
        self.wire_commit: FaultKind | None = None  # given to the unit whose fate was just decided
        self.context.stats.details["wire"] = "True"

    @initialize(key=indexes)
    def opening(self, key: int) -> None:
        """``SagaMachine.opening`` (the same draw), then ``wire_walk``; not a step itself."""
        super().opening(key=key)
        self.wire_walk()

    @step
    def wire_walk(self) -> None:
        """Each kind armed in turn for the next plain COMMIT and met by the unit that follows: the
        first pending command delivered (succeed, committed, acknowledged) or, with none pending, a
        business key not started yet started (S-TX-02). A unit that reached no COMMIT (a duplicate,
        a refusal) hands the fault to the next, up to three units per kind."""
        deliver = unwrapped(type(self).deliver_command)
        for name, kind in SAGA_WIRE_FAULTS.items():
            if not self.context.faults.allows(name):
                continue
            before = self.context.stats.faults[name]
            for _ in range(3):
                self.wire_pending = kind
                self._relay_commands(crash=False)
                if self.wire.commands:
                    deliver(self, index=0, decision="succeed", fate="committed", ack_lost=False)
                elif (fresh := self._unstarted()) is not None:
                    self._start(fresh, 0, -1, "committed")
                else:
                    break
                self.after_step()  # counts what the COMMIT met (``_unit_over``)
                if self.context.stats.faults[name] > before:
                    break
            self.wire_pending = None

    def _unstarted(self) -> int | None:
        for key, business_key in enumerate(w.BUSINESS_KEYS):
            if m.saga_id_for(w.KEY.tenant, w.KEY.workflow, business_key) not in self.model.receipts:
                return key
        return None

    @rule(kind=st.sampled_from(tuple(SAGA_WIRE_FAULTS)))
    @step
    def arm_wire_fault(self, kind: str) -> None:
        """The next unit that commits meets ``kind`` on its COMMIT (S-TX-02)."""
        if self.context.faults.allows(kind):
            self.wire_pending = SAGA_WIRE_FAULTS[kind]

    def _set_fate(self, name: str) -> m.CommitFate:
        self._unit_over(wait=True)
        if self.wire_commit is not None:
            # The unit the last fate was for never reached COMMIT (a refusal): the fault waits for
            # a unit the model is told about, never the next one of the same step.
            self.wire_pending, self.wire_commit = self.wire_commit, None
        fate = super()._set_fate(name)
        kind, self.wire_pending = self.wire_pending, None
        if fate is not m.CommitFate.COMMITTED or kind is None:
            self.wire_pending = kind  # an injected fate of its own goes first; keep the wire for later
            return fate
        self.wire_commit = kind
        self.fate = (
            m.CommitFate.UNKNOWN_APPLIED
            if kind is WIRE_COMMIT_REPLY_LOST
            else m.CommitFate.UNKNOWN_NOT_APPLIED
        )
        return self.fate

    wire_armed: FaultKind | None = None  # met by this step's COMMIT, to count after the step

    def _fate(self, unit: str) -> m.CommitFate:
        fate = super()._fate(unit)
        kind, self.wire_commit = self.wire_commit, None
        if kind is None:
            return fate
        # The runtime sends COMMIT right after asking: the proxy meets that very COMMIT.
        action = WireAction.REPLY_LOST if kind is WIRE_COMMIT_REPLY_LOST else WireAction.RESET_BEFORE
        self.proxy.arm(action, 1, match="COMMIT")
        self.note(f"{unit}: COMMIT goes out through the proxy armed with {kind.name}")
        self.wire_armed = kind
        return m.CommitFate.COMMITTED

    def expect(self, rule_id: str, expected: object, actual: object) -> None:
        """A unit the model answers without writing (a replayed start, a duplicate) may still run
        a transaction in the runtime; if that COMMIT met the fault, the runtime cannot know
        whether it committed and says so: ``OutcomeUnknown`` is its honest answer (S-TX-02;
        docs/nasaga-findings.md N-19). Nothing may have changed (the after-step comparison reads
        it all back) and a redelivery gets the model's answer."""
        if (
            self.wire_armed is not None
            and isinstance(expected, NO_WRITE)
            and actual == self.runtime.project(m.OutcomeUnknown())
            and self.proxy.met()
        ):
            self.note(f"model: {expected!r:.300}; runtime: its read-only COMMIT met the fault (N-19)")
            self.context.reach("read-only-commit-uncertain")
            return
        super().expect(rule_id, expected, actual)

    def at_quiescence(self) -> None:
        self.wire_pending = self.wire_commit = None  # quiescence runs without faults
        super().at_quiescence()

    def _unit_over(self, wait: bool) -> None:
        """The unit the proxy was armed for is over (the next unit's fate is being decided, or
        the step ended): count what its COMMIT met. A runtime that asks for its fate when the
        unit starts rather than just before COMMIT (the nasaga host, ``_nasaga.py``) may have sent
        none, a refusal: the fault then waits for the next unit of the step (``wait``), as for one
        that never asked."""
        kind, self.wire_armed = self.wire_armed, None
        if kind is None:
            return
        hits = self.proxy.disarm()
        if hits:
            self.context.inject(kind.name)
            self.note("; ".join(hit.render() for hit in hits))
        else:
            self.note(f"{kind.name} was armed, but no COMMIT went out")
            if wait:
                self.wire_pending = kind

    def after_step(self) -> None:
        self._unit_over(wait=False)
        if self.wire_commit is not None:
            # The step decided a fate but no unit reached COMMIT (a refusal, nothing to deliver):
            # the fault waits for the next unit that commits.
            self.wire_pending, self.wire_commit = self.wire_commit, None
        super().after_step()
