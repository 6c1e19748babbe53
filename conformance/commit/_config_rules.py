"""The configuration a committer and its sweeper document, held at quiescence (C-POST-05, C-POST-02,
C-ERR-04).

The seed asks the committer to register the history expiry a message *should* have (登记应有的 history
expiry): that is defined by the configuration in force, the caller's ``retention_ms`` or, when none is
given, the committer's documented default. The harness knows the documented values of Ratchet's own
committer (``RATCHET_DEFAULTS``, stated in docs/commit-contract.md as Ratchet decisions of C-POST-05
and C-POST-02); a committer given with ``--committer`` declares none, and is held to the rest.

* ``default_retention_held``: every intent of the conversation whose committers keep their default
  (``_vocabulary.DEFAULT_RETENTION_CONVERSATION``) froze exactly the documented retention (target
  ``committer-default-retention-held``). Before, only a default the contract refuses (zero, negative,
  an expiry past 2**63-1) was caught: 30 days made 29 passed.
* ``default_min_age_held``: a ``CommitRecovery`` built without ``min_age_ms`` sweeps the intents
  accepted before now minus the documented minimum age (target ``recovery-default-min-age-held``).
* ``configuration_refused``: the committer factory and ``CommitRecovery`` refuse a configuration
  outside their documented range with ``ValueError`` (bad input gets a clear, typed error, C-ERR-04)
  and accept its edges (target ``configuration-edges-judged``). The suites built valid ones only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import attrs

from conformance._machine import ConformanceMachine
from conformance.commit import _vocabulary as v
from impls.api import Clock
from impls.commit import CommitRecovery, MessageCommitter
from model.commit import MAX_SCAN_ITEMS, TimestampMillis


@attrs.frozen
class CommitterDefaults:
    """What a committer and its sweeper do when a keyword is left out, as their documentation says."""

    retention_ms: int
    recovery_min_age_ms: int


#: Ratchet's ``MessageCommitter`` and ``CommitRecovery`` (docs/commit-contract.md, C-POST-05 and
#: C-POST-02): written here from the documentation, never read from impls, so a changed default differs.
RATCHET_DEFAULTS = CommitterDefaults(retention_ms=30 * 86_400_000, recovery_min_age_ms=60_000)

#: Keyword sets the committer factory must refuse, and the edges it must accept (C-ERR-04).
COMMITTER_REFUSED = ({"retention_ms": 0}, {"retention_ms": -1}, {"max_attempts": 0})
COMMITTER_EDGES = ({"retention_ms": 1}, {"max_attempts": 1}, {"retention_ms": 1, "max_attempts": 1})
RECOVERY_REFUSED = (
    {"min_age_ms": -1},
    {"batch": 0},
    {"batch": MAX_SCAN_ITEMS + 1},
    {"max_batches": 0},
)
RECOVERY_EDGES = ({"min_age_ms": 0}, {"batch": 1}, {"batch": MAX_SCAN_ITEMS}, {"max_batches": 1})


class _OlderThanProbe:
    """Stands in front of a committer for ``CommitRecovery``: records the ``older_than`` it asks for."""

    def __init__(self, committer: MessageCommitter) -> None:
        self._committer = committer
        self.asked: list[int] = []

    async def recover_due(self, older_than: TimestampMillis, max_items: int) -> int:
        self.asked.append(older_than)
        return await self._committer.recover_due(older_than, max_items)


class ConfigRules(ConformanceMachine):
    """Mixed into the commit machine; ``configuration_held`` runs at quiescence, nothing armed."""

    if TYPE_CHECKING:
        oracle: Any
        membership: Any
        outbox: Any
        now: int

        def committer(self, gate: Any = None, conversation: str = "c1") -> MessageCommitter: ...

        def drive(self, body: Any) -> Any: ...

    def __init__(self) -> None:
        super().__init__()
        declared = self.context.target.committer_factory is None  # Ratchet's own: RATCHET_DEFAULTS
        self.context.stats.details.setdefault("committer_defaults", str(declared))

    def configuration_held(self) -> None:
        """Every example: the default retention of its intents; until judged once in the run: the
        constructors and the recovery's default age, which answer alike in every example."""
        factory = self.context.target.committer_factory
        defaults = RATCHET_DEFAULTS if factory is None else None
        if defaults is not None:
            self.default_retention_held(defaults)
        if "configuration-edges-judged" in self.context.stats.reached:
            return  # judged once in this run already
        # The undecorated factory (conformance._opened.named_factory): its own exception is judged,
        # and the committers built only to be refused are not recorded as opened.
        self.configuration_refused(getattr(factory, "ratchet_factory", factory) or MessageCommitter)
        if defaults is not None:
            self.default_min_age_held(defaults)

    def default_retention_held(self, defaults: CommitterDefaults) -> None:
        """C-POST-05: a committer built without ``retention_ms`` freezes its documented default."""
        for key, intent in sorted(self.oracle.intents.items(), key=lambda item: v.key_name(item[0])):
            if intent.conversation != v.DEFAULT_RETENTION_CONVERSATION:
                continue
            if intent.delivery.retention_ms != defaults.retention_ms:
                raise self.oracle.fail(
                    "C-POST-05",
                    f"{v.key_name(key)} was reserved by a committer keeping its default retention with "
                    f"retention_ms={intent.delivery.retention_ms}; the documented default is "
                    f"{defaults.retention_ms} ms, so its history expiry is not the one it should have",
                ).violation
            self.context.reach("committer-default-retention-held")

    def default_min_age_held(self, defaults: CommitterDefaults) -> None:
        """C-POST-02: ``CommitRecovery`` built without ``min_age_ms`` sweeps at its documented age."""
        probe = _OlderThanProbe(self.committer())
        sweep = CommitRecovery(cast(MessageCommitter, probe), cast(Clock, self))
        outcome = self.drive(lambda gate: sweep.run_once())
        if outcome.error is not None or not probe.asked:
            return  # judged by the sweeps of _recovery_rules; here only the age it asks for
        wanted = self.now - defaults.recovery_min_age_ms
        if probe.asked[0] != wanted:
            raise self.oracle.fail(
                "C-POST-02",
                f"CommitRecovery with its default minimum age swept intents older than {probe.asked[0]} "
                f"at {self.now}; its documented minimum age ({defaults.recovery_min_age_ms} ms) "
                f"means {wanted}",
            ).violation
        self.context.reach("recovery-default-min-age-held")

    def configuration_refused(self, factory: Callable[..., Any]) -> None:
        """C-ERR-04: a configuration out of range is refused with ``ValueError``; its edges are legal."""
        assert self.outbox is not None
        membership, clock = self.membership, cast(Clock, self)

        def committer(**config: int) -> Any:
            return factory(self.oracle.real, self.outbox, membership, clock, **config)

        def recovery(**config: int) -> Any:
            return CommitRecovery(
                MessageCommitter(self.oracle.real, self.outbox, membership, clock), clock, **config
            )

        for name, build, refused, edges in (
            ("the committer factory", committer, COMMITTER_REFUSED, COMMITTER_EDGES),
            ("CommitRecovery", recovery, RECOVERY_REFUSED, RECOVERY_EDGES),
        ):
            for config in refused:
                problem = _built(build, config)
                if problem is None:
                    raise self.oracle.fail(
                        "C-ERR-04", f"{name} accepted {_show(config)}, outside its documented range"
                    ).violation
                if not isinstance(problem, ValueError):
                    raise self.oracle.fail(
                        "C-ERR-04",
                        f"{name} refused {_show(config)} with {type(problem).__name__}, not ValueError",
                    ).violation
            for config in edges:
                if (problem := _built(build, config)) is not None:
                    raise self.oracle.fail(
                        "C-ERR-04", f"{name} refused {_show(config)}, a legal edge: {problem!r}"[:300]
                    ).violation
        self.context.reach("configuration-edges-judged")


def _built(build: Callable[..., Any], config: dict[str, int]) -> Exception | None:
    try:
        build(**config)
    except Exception as problem:  # the kind of refusal is what is judged
        return problem
    return None


def _show(config: dict[str, int]) -> str:
    return ", ".join(f"{name}={value}" for name, value in config.items())
