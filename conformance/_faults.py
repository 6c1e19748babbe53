"""The fault vocabulary shared by every suite: kinds of fault, and the filter a run applies.

A fault *kind* is a way the world goes wrong (a lost response, a crash at a named point, an
interleaving of workers). Each suite lists the kinds it injects and the named points it can crash
at; the coverage gate asks that every listed kind and point was really injected. Kinds are values,
not an enum, so the saga suites add their own (commit outcome unknown, lease lost, ...) here
without touching the commit side.

A kind that meets one backend call carries its own behaviour (``CallHooks``): the oracle that
makes the call runs ``before`` (which may fail the call before it reaches the backend), the call,
``after_backend`` (the backend call has returned: a proxy is disarmed here, before any read-back),
its checks, then ``after`` (which may take the answer away from the caller). Adding such a kind is
one definition: its hooks, and ``requires`` when only some backends can suffer it (the wire kinds
need a network between driver and server). The runner derives the ``fault:<kind>`` coverage
targets from the suite's kinds (``fault_targets``); a kind whose requirement the backend lacks is
reported not applicable instead of demanded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import attrs


@attrs.define
class CallSite:
    """One backend call a fault meets, as its hooks see it.

    ``unavailable(detail)`` builds the error the caller sees when a fault takes the answer (the
    oracle's own error type: ``MessageStoreError`` UNAVAILABLE with the key, for stores). ``wire``
    is the backend's fault proxy, or None for a backend with no network (``requires="wire"``).
    """

    label: str  # "reserve(t1/alice/m1)": what the trace says
    note: Callable[[str], None]
    inject: Callable[[str], None]  # count one injection of a kind (the coverage gate's fault:<kind>)
    unavailable: Callable[[str], BaseException]
    write: bool = True
    wire: object | None = None
    requests: int = 1  # how many requests of the call a wire fault meets
    skip: int = 0  # how many of the call's requests a wire fault lets through before it meets one


class CallHooks:
    """A kind's behaviour at one call; this base does nothing but count the injection.

    Kinds injected by rules of their own (a crash at a fault point, an interleaving, a clock jump)
    keep it: their behaviour is the rule.
    """

    def taken(self, kind: FaultKind, call: CallSite) -> None:
        """The oracle took the armed fault for this call: it counts as injected now."""
        call.inject(kind.name)

    def before(self, kind: FaultKind, call: CallSite) -> None:
        """Before the model and the backend: raise to fail the call before it applies."""

    def after_backend(self, kind: FaultKind, call: CallSite) -> None:
        """The backend call returned or raised; nothing has been read back yet."""

    def after(self, kind: FaultKind, call: CallSite) -> None:
        """The call was judged: raise to replace the answer the caller sees."""


NO_HOOKS = CallHooks()


class _FailedBefore(CallHooks):
    def before(self, kind: FaultKind, call: CallSite) -> None:
        suffix = ", nothing applied" if call.write else ""
        call.note(f"{call.label} -> injected failed-before: UNAVAILABLE{suffix}")
        raise call.unavailable("injected: failed before it applied")


class _ResponseLost(CallHooks):
    def after(self, kind: FaultKind, call: CallSite) -> None:
        call.note(f"{call.label} -> injected response-lost: the caller sees UNAVAILABLE")
        raise call.unavailable("injected: response lost")


@attrs.frozen
class FaultKind:
    name: str  # the vocabulary of counterexamples and of the summary table: short, kebab-case
    description: str
    hooks: CallHooks = attrs.field(default=NO_HOOKS, eq=False, repr=False)
    requires: str | None = None  # a capability the backend must have (SuiteStats.details == "True")
    # Details the suite writes as "not applicable: why" when the backend cannot suffer this kind:
    # one name, or several (a connector family's, then the kind's own); the first such one wins.
    applies_per: str | tuple[str, ...] | None = None

    def not_applicable(self, details: Mapping[str, str]) -> str | None:
        """Why this backend cannot suffer this kind, or None when it can."""
        keys = (self.applies_per,) if isinstance(self.applies_per, str) else self.applies_per or ()
        for key in keys:
            said = details.get(key, "")
            if said.startswith("not applicable"):
                return said.removeprefix("not applicable").lstrip(": ") or f"{key} does not apply"
        if self.requires is None or details.get(self.requires) == "True":
            return None
        return f"the backend has no {self.requires}"


RESPONSE_LOST = FaultKind(
    "response-lost", "the call applied, then the caller saw UNAVAILABLE (a lost reply)", _ResponseLost()
)
FAILED_BEFORE = FaultKind(
    "failed-before", "the call failed before it reached the backend; nothing applied", _FailedBefore()
)
CRASH = FaultKind("crash", "the worker died at a named fault point; the in-flight work is abandoned")
INTERLEAVE = FaultKind("interleave", "two or three workers on one key, switched at backend-call boundaries")
RECOVERY_SWEEP = FaultKind("recovery-sweep", "a recovery worker sweeps everything older than the clock")
CLOCK_ADVANCE = FaultKind("clock-advance", "the manual clock jumps forward")

FAULT_KINDS: dict[str, FaultKind] = {}


def register_fault_kind(kind: FaultKind) -> FaultKind:
    """Add a kind to the catalog; registering the same value twice is harmless."""
    existing = FAULT_KINDS.setdefault(kind.name, kind)
    if existing != kind:
        raise ValueError(f"fault kind {kind.name!r} is already registered differently")
    return kind


for _kind in (RESPONSE_LOST, FAILED_BEFORE, CRASH, INTERLEAVE, RECOVERY_SWEEP, CLOCK_ADVANCE):
    register_fault_kind(_kind)


def fault_targets(
    kinds: Iterable[FaultKind], details: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """The ``fault:<kind>`` coverage targets of a suite's kinds on one backend, and the kinds that do
    not apply there (name -> why), which the gate reports instead of demanding."""
    targets: dict[str, str] = {}
    skipped: dict[str, str] = {}
    for kind in kinds:
        why = kind.not_applicable(details)
        if why is None:
            targets[f"fault:{kind.name}"] = f"no {kind.name} fault was injected"
        else:
            skipped[kind.name] = why
    return targets, skipped


@attrs.frozen
class FaultPointSpec:
    """A named point where a worker can be killed, with what is durable at that instant."""

    name: str  # the rule-ID style name, e.g. "M-COMMIT-04"
    suite_family: str  # "commit" or "saga"
    description: str


FAULT_POINTS: dict[str, FaultPointSpec] = {}


def register_fault_point(point: FaultPointSpec) -> FaultPointSpec:
    existing = FAULT_POINTS.setdefault(point.name, point)
    if existing != point:
        raise ValueError(f"fault point {point.name!r} is already registered differently")
    return point


@attrs.frozen
class FaultFilter:
    """Which faults a run may inject: all by default, or only some kinds and points.

    Names are fault kinds (``crash``) or fault points (``M-COMMIT-04``); ``-name`` disables one.
    Naming only points keeps every kind; naming only kinds keeps every point. A filtered run is a
    debugging run: the coverage gate still asks for the whole catalog, so it fails the gate.
    """

    kinds: frozenset[str] | None = None  # None: every kind
    points: frozenset[str] | None = None  # None: every point
    without: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, names: Iterable[str] | None) -> FaultFilter:
        """Raises ``ValueError`` for a name that is neither a registered kind nor a point."""
        if names is None:
            return cls()
        wanted = [n.strip() for n in names if n.strip() and n.strip() != "all"]
        kinds: set[str] = set()
        points: set[str] = set()
        without: set[str] = set()
        for raw in wanted:
            name = raw[1:] if raw.startswith("-") else raw
            if name not in FAULT_KINDS and name not in FAULT_POINTS:
                known = ", ".join(sorted(FAULT_KINDS) + sorted(FAULT_POINTS))
                raise ValueError(f"unknown fault {name!r}; known: {known}")
            if raw.startswith("-"):
                without.add(name)
            elif name in FAULT_KINDS:
                kinds.add(name)
            else:
                points.add(name)
        return cls(frozenset(kinds) or None, frozenset(points) or None, frozenset(without))

    def allows(self, kind: str, point: str | None = None) -> bool:
        if kind in self.without or (point is not None and point in self.without):
            return False
        if self.kinds is not None and kind not in self.kinds:
            return False
        return point is None or self.points is None or point in self.points

    @property
    def is_everything(self) -> bool:
        return self.kinds is None and self.points is None and not self.without

    def describe(self) -> str:
        if self.is_everything:
            return "all"
        parts = sorted(self.kinds or ()) + sorted(self.points or ())
        return ",".join(parts + [f"-{n}" for n in sorted(self.without)])


ALL_FAULTS = FaultFilter()
