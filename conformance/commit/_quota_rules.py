"""C-PRE-08: a send quota the suite sets and exhausts, and what the committer may do with it.

``HarnessQuota`` is the suite's own ``impls.commit.Quota``: it admits ``QUOTA_LIMITS[tenant]`` new
messages per sender in an example (``t2``'s senders have none), and records every question the
committer asks it. ``send_with_quota`` sends through a committer holding it, and judges:

* a key the model already holds is a retry: it is never admitted again (the Ratchet decision of
  C-PRE-08), so asking the quota for it is a violation, and the answer is the ACK (or the conflict,
  when the key was first sent to another conversation);
* a new key from a member is reserved only after the quota was asked and said yes; a quota that
  said no makes the send ``QUOTA_EXCEEDED`` with nothing written (C-PRE-08, C-ERR-04);
* a new key from a non-member is ``NOT_A_MEMBER``, whatever the quota would say.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, multiple, rule

from conformance._machine import ConformanceMachine, step
from conformance.commit import _vocabulary as v
from impls.api import Clock
from impls.commit import MessageCommitter, Quota, SenderQuota
from model.commit import CommitErrorKind, CommitKey, TenantId, UserId

#: New messages each sender of a tenant may start in one example.
QUOTA_LIMITS = {"t1": 1, "t2": 0}
ACK = "ack"


#: Longer than any example's clock span: the shipped quota's whole example is one window.
SHIPPED_WINDOW_MS = 1 << 40


@attrs.define
class HarnessQuota:
    """The suite's quota: a fixed allowance per (tenant, sender); every question is recorded.

    ``shipped``: the shipped ``SenderQuota`` of each tenant, set to the same allowance in one window
    that outlasts the example, is asked beside it; where the two answer differently, ``disagreed``
    says so (its documented policy, at most ``limit`` new messages per sender in a window, is what
    the suite's allowance is)."""

    clock: Clock | None = None
    granted: dict[tuple[TenantId, UserId], int] = attrs.field(factory=dict)
    asked: list[tuple[TenantId, UserId, bool]] = attrs.field(factory=list)
    shipped: dict[TenantId, SenderQuota] = attrs.field(factory=dict)
    disagreed: list[str] = attrs.field(factory=list)

    async def admit(self, tenant: TenantId, sender: UserId) -> bool:
        used = self.granted.get((tenant, sender), 0)
        answer = used < QUOTA_LIMITS.get(tenant, 0)
        if answer:
            self.granted[tenant, sender] = used + 1
        self.asked.append((tenant, sender, answer))
        if self.clock is not None:
            if tenant not in self.shipped:
                limit = QUOTA_LIMITS.get(tenant, 0)
                self.shipped[tenant] = SenderQuota(limit, self.clock, window_ms=SHIPPED_WINDOW_MS)
            if await self.shipped[tenant].admit(tenant, sender) is not answer:
                self.disagreed.append(f"SenderQuota answered {not answer} for {sender} of {tenant}")
        return answer


#: ``quota_window_turns``: a limit above one, so that a count carried over (or started below zero)
#: shows in the window after; three windows, so that a second turn is judged as well as the first.
_TURN_LIMIT = 2
_TURN_WINDOW_MS = 60_000
_TURN_WINDOWS = 3


@attrs.define
class _StepClock:
    """The quota's own clock for ``quota_window_turns``: the machine's time is left where it is."""

    now: int

    def now_ms(self) -> int:
        return self.now


class QuotaRules(ConformanceMachine):
    """Mixed into the commit machine; uses its world (oracle, membership, committer, judge)."""

    reserved = Bundle("reserved")  # the commit machine's bundle of the same name

    if TYPE_CHECKING:
        oracle: Any
        membership: Any
        now: int

        def committer(
            self, gate: Any = None, conversation: str = "c1", real: Any = None, quota: Quota | None = None
        ) -> MessageCommitter: ...

        def drive(self, body: Any) -> Any: ...

        def expect_send(self, key: CommitKey, variant: str) -> frozenset[str]: ...

        def judge(
            self, how: str, key: CommitKey, allowed: frozenset[str], outcome: Any, disturbed: bool
        ) -> None: ...

    def __init__(self) -> None:
        super().__init__()
        self.harness_quota = HarnessQuota(cast(Clock, self))  # the machine is the suites' clock

    def quota_across_time(self) -> None:
        """C-PRE-08, at quiescence: each sender of ``t1`` asks the quota twice with the clock moved
        between, inside the shipped quota's one window. Its answer must not depend on when in the
        window it is asked: a program seldom sends two new keys of one sender across a clock step, so a
        window computed from the time wrongly (``now + window`` for ``now // window``) passed."""
        quota = self.harness_quota
        for sender in v.SENDERS:
            for _ in range(2):
                self.run(quota.admit(TenantId("t1"), UserId(sender)))
                self.now += 1
        if quota.disagreed:
            raise self.oracle.fail("C-PRE-08", quota.disagreed[0]).violation
        self.context.reach("quota-asked-across-time")
        self.quota_window_turns()

    def quota_window_turns(self) -> None:
        """C-PRE-08, at quiescence: the shipped ``SenderQuota`` over a window that turns. Its documented
        allowance is at most ``limit`` new messages per sender in *each* fixed window of ``window_ms``:
        one sender exhausts a window, and a window later (whatever the windows' alignment, ``now`` and
        ``now + window_ms`` lie in two of them) it is admitted ``limit`` times again, and no more.
        The suite's other asks stay inside one window, so the count a new window starts from passed."""
        clock = _StepClock(self.now)
        quota = SenderQuota(_TURN_LIMIT, clock, window_ms=_TURN_WINDOW_MS)
        tenant, sender = TenantId("t1"), UserId(v.SENDERS[0])
        for window in range(_TURN_WINDOWS):
            answers = [self.run(quota.admit(tenant, sender)) for _ in range(_TURN_LIMIT + 1)]
            if answers != [True] * _TURN_LIMIT + [False]:
                raise self.oracle.fail(
                    "C-PRE-08",
                    f"SenderQuota(limit={_TURN_LIMIT}, window_ms={_TURN_WINDOW_MS}) answered {answers} to "
                    f"{_TURN_LIMIT + 1} asks of one sender in window {window + 1} of {_TURN_WINDOWS}: each "
                    f"window admits {_TURN_LIMIT}",
                ).violation
            clock.now += _TURN_WINDOW_MS
        self.context.reach("quota-window-turned")

    @rule(target=reserved, key=st.sampled_from(v.KEYS))
    @step
    def send_with_quota(self, key: str) -> Any:
        """C-PRE-08: a send through a committer with the suite's quota (t1: one new message per
        sender, t2: none): admission before reserve, a retry never re-admitted."""
        quota = self.harness_quota
        commit_key = v.parse_key(key)
        request = v.request(commit_key)
        existed = commit_key in self.oracle.state.commits
        member = commit_key.sender in self.membership.snapshot(commit_key.tenant, request.conversation)
        asks = len(quota.asked)
        before = self.oracle.disturbances
        committer = self.committer(conversation=request.conversation, quota=quota)
        outcome = self.drive(lambda gate: committer.send(request))
        disturbed = self.oracle.disturbances > before
        answers = [answer for _, _, answer in quota.asked[asks:]]
        if quota.disagreed:
            raise self.oracle.fail("C-PRE-08", quota.disagreed[0]).violation
        reserved = commit_key in self.oracle.state.commits
        if existed and answers:
            raise self.oracle.fail(
                "C-PRE-08", f"send for {key} asked the quota again for a key already reserved"
            ).violation
        if not existed and member and reserved and True not in answers:
            raise self.oracle.fail(
                "C-PRE-08", f"send for {key} reserved a new key without the quota admitting it"
            ).violation
        if existed:
            allowed = self.expect_send(commit_key, "same")  # the ACK, or a conflict
        elif not member:
            allowed = frozenset({CommitErrorKind.NOT_A_MEMBER.value})
        elif answers and not answers[-1]:
            allowed = frozenset({CommitErrorKind.QUOTA_EXCEEDED.value})
        else:
            allowed = frozenset({ACK})
        self.judge("send", commit_key, allowed, outcome, disturbed)
        if CommitErrorKind.QUOTA_EXCEEDED.value in allowed:
            self.context.reach("quota-exhausted")
            self.context.reach("rule:C-PRE-08")
        return key if not existed and reserved else multiple()
