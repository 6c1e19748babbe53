"""Which backend runs which suite: ``--backend`` names and groups, or a third-party backend's flag.

Each suite family takes its third-party backend through a flag of its own (``Family.flag``):
``--store`` is a MessageStore only, ``--saga-backend`` a SagaBackend, ``--streams`` a transport
client; a flag given for a family none of the asked suites belongs to is refused with the flag
that family does take.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

import attrs

from conformance._usage import UsageError
from conformance.backends import expand_backends

if TYPE_CHECKING:
    from conformance._suites import BackendUnderTest, Suite

#: The flags that give a third-party backend, one per suite family (``Family.flag``; a test keeps
#: them equal): each names what its factory returns, so ``--store`` is only ever a MessageStore.
CUSTOM_FLAGS = {
    "--store": "a MessageStore factory (the commit family: store, commit, durability suites)",
    "--saga-backend": "a SagaBackend factory, Ratchet's runtime over it (the saga suites)",
    "--streams": "a transport streams-client factory (the transport suite)",
}


def add_custom_flags(parser: argparse.ArgumentParser, verb: str) -> None:
    for flag, what in CUSTOM_FLAGS.items():
        parser.add_argument(flag, metavar="MODULE:FACTORY", default=None, help=f"{verb} {what}")


def given_customs(args: argparse.Namespace) -> dict[str, str]:
    """Flag -> factory path of every custom-backend flag the user gave."""
    given = {flag: getattr(args, flag.removeprefix("--").replace("-", "_")) for flag in CUSTOM_FLAGS}
    return {flag: path for flag, path in given.items() if path is not None}


def pairs_to_run(args: argparse.Namespace) -> list[tuple[BackendUnderTest, Suite]]:
    from conformance._suites import FAMILIES, load_suites, suite_named

    load_suites()
    suite_names = args.suite or ["store", "commit"]
    if "all" in suite_names:
        suite_names = list(load_suites())  # every registered suite, on the backends each family knows
    try:
        suites = [suite_named(name) for name in suite_names]
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    pairs: list[tuple[BackendUnderTest, Suite]] = []
    given = given_customs(args)
    if given:
        used = {FAMILIES[suite.family].flag for suite in suites}
        for flag in given:
            if flag not in used:
                wanted = ", ".join(sorted({f"{FAMILIES[s.family].flag} for {s.name}" for s in suites}))
                raise UsageError(f"{flag} gives {CUSTOM_FLAGS[flag]}; the suites asked for take {wanted}")
        for suite in suites:
            family = FAMILIES[suite.family]
            primary = given.get(family.flag)
            if primary is None:
                raise UsageError(
                    f"suite {suite.name} tests {family.what}: give its factory with {family.flag}"
                )
            try:
                custom = family.custom_backend(args.name or "custom", primary, args.outbox, args.service)
            except ValueError as exc:
                raise UsageError(f"--outbox with suite {suite.name}: {exc}") from None
            pairs.append((custom, suite))
        return pairs
    names = expand_backends(args.backend or ["memory"], dict.fromkeys(s.family for s in suites))
    for name in names:
        matched = False
        for suite in suites:
            backend = FAMILIES[suite.family].backends().get(name)
            if backend is not None:
                pairs.append((backend, suite))
                matched = True
        if not matched:
            known = sorted({b for s in suites for b in FAMILIES[s.family].backends()})
            raise UsageError(
                f"unknown backend {name!r} for suites {','.join(suite_names)}; known: {', '.join(known)}"
            )
    return pairs


def with_committer_flag(
    pairs: list[tuple[BackendUnderTest, Suite]], committer: str | None
) -> list[tuple[BackendUnderTest, Suite]]:
    """``--committer`` fills the committer role of every commit-family backend of the run."""
    from conformance._runner import with_committer

    if committer is None:
        return pairs
    if not any(backend.family == "commit" for backend, _ in pairs):
        raise UsageError("--committer applies to the commit suites (store, commit) only")
    return [(with_committer(b, committer) if b.family == "commit" else b, s) for b, s in pairs]


def with_control_flag(
    pairs: list[tuple[BackendUnderTest, Suite]], control: str | None
) -> list[tuple[BackendUnderTest, Suite]]:
    """``--control`` fills the ``control`` role (a ``conformance.crash.ServiceControl`` factory) of
    every custom backend of the run; a named backend keeps the registry's own."""
    if control is None:
        return pairs
    if not any(not backend.is_registered() for backend, _ in pairs):
        raise UsageError("--control applies to a custom backend (--store, --saga-backend) only")
    return [
        (b if b.is_registered() else attrs.evolve(b, factories={**b.factories, "control": control}), s)
        for b, s in pairs
    ]
