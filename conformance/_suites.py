"""Suites and the backends they run on: the registry the runner, the CLI and replay share.

A *suite* (``store``, ``commit``; the saga side adds its own) is a state machine plus what it needs
to be judged: the fault kinds it injects and the coverage targets that must be reached. A suite
belongs to a *family* (``commit``, ``saga``); a family knows its backends by name. Modules that
define suites register them on import; ``load_suites`` imports the known ones, so that choosing a
suite never needs its family's drivers unless it runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from conformance._faults import FaultKind
from conformance._machine import ConformanceMachine, SuiteStats
from conformance._opened import named_factory
from conformance.backends import load_object

# Modules that register suites when imported. A family that is not installed is skipped.
SUITE_MODULES = (
    "conformance.commit.suites",
    "conformance.saga.suites",
    "conformance.crash.suites",
    "conformance.transport.suites",
)


@attrs.frozen
class BackendUnderTest:
    """One backend to run a family's suites on.

    ``factories`` maps a role ("store", "outbox", ...) to a ``module:function`` path or to the
    callable itself (a callable given from Python; failure files then record its path if it has an
    importable one). ``service`` names the server it needs (conformance/services/), if any.
    The optional role ``control`` is a ``conformance.crash.ServiceControl`` factory: only a backend
    with one gets the ``server-crash`` fault. ``in_process``: its state lives in the objects its
    factory returns, so ``reopen`` and ``two-clients`` do not apply (the memory store).
    """

    name: str
    family: str
    factories: Mapping[str, str | Callable[..., Any]]
    service: str | None = None
    in_process: bool = False
    #: Examples per profile for a backend whose every step is a process round trip (the nasaga
    #: host): fewer than the suite's own count, never more; ``--examples`` overrides both.
    examples: Mapping[str, int] = attrs.field(factory=dict)
    #: Steps per example per profile for such a backend (the Kafka broker); ``--steps`` overrides.
    steps: Mapping[str, int] = attrs.field(factory=dict)

    def factory(self, role: str) -> Callable[..., Any]:
        """Raises ``ValueError`` for a bad path (a usage error). The callable returned raises
        ``BackendFactoryError`` when the factory itself fails (``_opened.named_factory``)."""
        value = self.factories[role]
        if isinstance(value, str):
            loaded = load_object(value)
            if not callable(loaded):
                raise ValueError(f"{value} is not callable")
            value = loaded
        return named_factory(value, f"backend {self.name}: the {role} factory {factory_path(value)}")

    def factory_paths(self) -> dict[str, str]:
        return {role: factory_path(value) for role, value in self.factories.items()}

    def is_registered(self) -> bool:
        """Whether this is a named backend of its family, with the registry's own factories."""
        family = FAMILIES.get(self.family)
        named = family.backends().get(self.name) if family is not None else None
        return named is not None and named.factory_paths() == self.factory_paths()


def factory_path(value: str | Callable[..., Any]) -> str:
    """``module:qualname`` of a factory, or ``<unimportable ...>`` when replay could not import it."""
    if isinstance(value, str):
        return value
    module = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None)
    if module and qualname and "<" not in qualname:
        path = f"{module}:{qualname}"
        if "." not in qualname:
            try:
                if load_object(path) is value:
                    return path
            except ValueError:
                pass
    return f"<unimportable {value!r}>"


@attrs.frozen
class Suite:
    """A state machine and how a run of it is judged.

    ``machine`` returns the base machine class (imported lazily). ``make_target`` turns the backend
    under test into what the machine reads as ``context.target``. ``coverage_targets`` lists every
    ``sometimes`` target the run must reach, given what it learnt while running (for instance the
    store's capabilities decide which fault points are on the path).
    """

    name: str
    family: str
    description: str
    fault_kinds: tuple[FaultKind, ...]
    machine: Callable[[], type[ConformanceMachine]]
    make_target: Callable[[BackendUnderTest], Any]
    coverage_targets: Callable[[SuiteStats], Mapping[str, str]]  # target -> why it matters
    # Examples per profile when the run does not say (a suite that restarts servers runs fewer).
    examples: Mapping[str, int] = attrs.field(factory=dict)


@attrs.frozen
class Family:
    """A suite family and how a third-party backend of it is given.

    ``custom_roles[0]`` is the role ``flag`` (and ``run_conformance``'s first argument) fills:
    ``store`` for the commit family (``--store``), ``backend`` for the saga family
    (``--saga-backend``); ``outbox`` is the only other role with a flag of its own.
    ``custom_defaults`` fills optional roles nobody gave.
    """

    name: str
    backends: Callable[[], Mapping[str, BackendUnderTest]]  # the named backends of this family
    custom_roles: tuple[str, ...]  # factory roles a custom backend must/may give
    custom_defaults: Mapping[str, str] = attrs.field(factory=dict)
    #: The command-line flag that gives a third-party backend of this family (its primary role).
    flag: str = "--store"
    #: What that factory returns, for messages ("a MessageStore", "a SagaBackend").
    what: str = "a MessageStore"

    @property
    def dest(self) -> str:
        """The flag's argparse destination."""
        return self.flag.removeprefix("--").replace("-", "_")

    @property
    def primary_role(self) -> str:
        return self.custom_roles[0]

    def overrides(
        self, primary: str | Callable[..., Any] | None, outbox: str | Callable[..., Any] | None = None
    ) -> dict[str, str | Callable[..., Any]]:
        """Map ``--store`` / ``--outbox`` onto this family's roles; ``ValueError`` for a role it lacks."""
        given: dict[str, str | Callable[..., Any]] = {}
        if primary is not None:
            given[self.primary_role] = primary
        if outbox is not None:
            if "outbox" not in self.custom_roles:
                raise ValueError(f"{self.name} backends take no outbox factory")
            given["outbox"] = outbox
        return given

    def registered_paths(self) -> dict[str, frozenset[str]]:
        """Role -> every factory path a named backend of this family uses for it (trusted by replay)."""
        paths: dict[str, set[str]] = {}
        for backend in self.backends().values():
            for role, path in backend.factory_paths().items():
                paths.setdefault(role, set()).add(path)
        return {role: frozenset(found) for role, found in paths.items()}

    def custom_backend(
        self,
        name: str,
        primary: str | Callable[..., Any],
        outbox: str | Callable[..., Any] | None = None,
        service: str | None = None,
    ) -> BackendUnderTest:
        """A third-party backend of this family: its primary factory, optional roles defaulted;
        ``service`` the real service its factories reach (through a fault proxy, when they take an
        ``endpoint``)."""
        factories = {**self.custom_defaults, **self.overrides(primary, outbox)}
        return BackendUnderTest(name, self.name, factories, service)


SUITES: dict[str, Suite] = {}
FAMILIES: dict[str, Family] = {}


def register_suite(suite: Suite) -> Suite:
    SUITES[suite.name] = suite
    return suite


def register_family(family: Family) -> Family:
    FAMILIES[family.name] = family
    return family


_loaded = False


def load_suites() -> dict[str, Suite]:
    global _loaded
    if not _loaded:
        for module in SUITE_MODULES:
            try:
                importlib.import_module(module)
            except ModuleNotFoundError as exc:
                # Only an absent suite package is skipped; a broken one must fail loudly.
                if exc.name is None or not module.startswith(exc.name):
                    raise
        _loaded = True
    return SUITES


def suite_named(name: str) -> Suite:
    suites = load_suites()
    if name not in suites:
        raise ValueError(f"unknown suite {name!r}; known: {', '.join(sorted(suites))}")
    return suites[name]
