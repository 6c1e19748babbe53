"""Definition catalog: immutable published versions and their lifecycle.

The lifecycle is a table, not scattered conditionals::

    candidate --activate--> active --deprecate--> deprecated --retire--> retired

Each move goes exactly one rank forward; repeating the move that produced the current
state is an idempotent no-op (a retry after an unknown outcome); anything else is an
``IllegalLifecycleTransition`` and changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

import attrs

from ._definition import (
    DefinitionArtifact,
    canonical_document,
    definition_digest,
    definition_problems,
)
from ._errors import (
    ActivationBlocked,
    DefinitionConflict,
    DefinitionNotLoadable,
    DigestMismatch,
    IllegalLifecycleTransition,
    InvalidDefinition,
    RetirementBlocked,
    UnknownDefinition,
)
from ._keys import CapabilityKey, DefinitionReference, Lifecycle, LifecycleAction
from ._values import DefinitionKey

#: Forward-only rank; a lifecycle never moves to a lower rank (S-CAT-04).
LIFECYCLE_RANK: Mapping[Lifecycle, int] = {
    Lifecycle.CANDIDATE: 0,
    Lifecycle.ACTIVE: 1,
    Lifecycle.DEPRECATED: 2,
    Lifecycle.RETIRED: 3,
}

#: The legal lifecycle moves (S-CAT-04).
LIFECYCLE_TRANSITIONS: Mapping[tuple[Lifecycle, LifecycleAction], Lifecycle] = {
    (Lifecycle.CANDIDATE, LifecycleAction.ACTIVATE): Lifecycle.ACTIVE,
    (Lifecycle.ACTIVE, LifecycleAction.DEPRECATE): Lifecycle.DEPRECATED,
    (Lifecycle.DEPRECATED, LifecycleAction.RETIRE): Lifecycle.RETIRED,
}

#: The state each action leads to; repeating it there is an idempotent no-op.
ACTION_TARGET: Mapping[LifecycleAction, Lifecycle] = {
    LifecycleAction.ACTIVATE: Lifecycle.ACTIVE,
    LifecycleAction.DEPRECATE: Lifecycle.DEPRECATED,
    LifecycleAction.RETIRE: Lifecycle.RETIRED,
}


def next_lifecycle(current: Lifecycle, action: LifecycleAction) -> Lifecycle | None:
    """The lifecycle ``action`` moves ``current`` to, or ``None`` if illegal (S-CAT-04).

    post: __return__ is None or LIFECYCLE_RANK[__return__] == LIFECYCLE_RANK[current] + 1
    post: __return__ is None or __return__ == ACTION_TARGET[action]
    """
    return LIFECYCLE_TRANSITIONS.get((current, action))


def admits_new_start(lifecycle: Lifecycle) -> bool:
    """Only an active definition admits a new start (S-CAT-05).

    post: __return__ == (lifecycle is Lifecycle.ACTIVE)
    """
    return lifecycle is Lifecycle.ACTIVE


def is_loadable(lifecycle: Lifecycle) -> bool:
    """Active and deprecated definitions are loaded for instances (S-CAT-06, S-CAT-08).

    post: __return__ == (lifecycle in (Lifecycle.ACTIVE, Lifecycle.DEPRECATED))
    """
    return lifecycle in (Lifecycle.ACTIVE, Lifecycle.DEPRECATED)


def admits_capability(lifecycle: Lifecycle) -> bool:
    """Capabilities may be registered or renewed unless retired (S-CAT-09).

    post: __return__ == (lifecycle is not Lifecycle.RETIRED)
    """
    return lifecycle is not Lifecycle.RETIRED


@attrs.frozen
class CatalogEntry:
    """A published version: artifact, canonical document, digest and lifecycle."""

    artifact: DefinitionArtifact
    document: bytes
    digest: str
    lifecycle: Lifecycle

    @property
    def key(self) -> DefinitionKey:
        return self.artifact.key


@attrs.frozen
class Catalog:
    entries: Mapping[DefinitionKey, CatalogEntry] = attrs.field(factory=dict)


@attrs.frozen
class PublishDefinition:
    """Publish ``artifact``; ``digest`` is the publisher's claim, verified (S-CAT-02)."""

    artifact: DefinitionArtifact
    digest: str


@attrs.frozen
class Published:
    key: DefinitionKey
    digest: str


@attrs.frozen
class AlreadyPublished:
    key: DefinitionKey
    digest: str
    lifecycle: Lifecycle


PublishOutcome: TypeAlias = (
    Published | AlreadyPublished | InvalidDefinition | DigestMismatch | DefinitionConflict
)


def publish(catalog: Catalog, request: PublishDefinition) -> tuple[Catalog, PublishOutcome]:
    """Publish a definition version as a candidate (S-DEF-01, S-CAT-01..03).

    Same key and digest: ``AlreadyPublished`` whatever the lifecycle; a different digest
    under the same key: ``DefinitionConflict``. Both change nothing.
    """
    artifact = request.artifact
    key = artifact.key
    problems = definition_problems(artifact)
    if problems:
        return catalog, InvalidDefinition(key, problems)
    computed = definition_digest(artifact)
    if request.digest != computed:
        return catalog, DigestMismatch(key, request.digest, computed)
    existing = catalog.entries.get(key)
    if existing is not None:
        if existing.digest == computed:
            return catalog, AlreadyPublished(key, computed, existing.lifecycle)
        return catalog, DefinitionConflict(key, existing.digest, computed)
    entry = CatalogEntry(artifact, canonical_document(artifact), computed, Lifecycle.CANDIDATE)
    return Catalog({**catalog.entries, key: entry}), Published(key, computed)


@attrs.frozen
class ChangeLifecycle:
    key: DefinitionKey
    action: LifecycleAction


@attrs.frozen
class LifecycleChanged:
    key: DefinitionKey
    before: Lifecycle
    after: Lifecycle


@attrs.frozen
class LifecycleUnchanged:
    """The action had already been applied; nothing changed (idempotent retry)."""

    key: DefinitionKey
    lifecycle: Lifecycle


LifecycleOutcome: TypeAlias = (
    LifecycleChanged
    | LifecycleUnchanged
    | UnknownDefinition
    | IllegalLifecycleTransition
    | RetirementBlocked
    | ActivationBlocked
)


def change_lifecycle(
    catalog: Catalog,
    request: ChangeLifecycle,
    references: frozenset[DefinitionReference],
    invalid_routes: tuple[CapabilityKey, ...],
) -> tuple[Catalog, LifecycleOutcome]:
    """Apply one lifecycle move (S-CAT-04, S-CAT-07, S-CAT-11, S-ROUTE-04).

    ``references`` are the live facts naming the definition (the store computes them);
    retiring is refused while any exists. ``invalid_routes`` are registered routes of
    the definition that fail the shared transport contract; activation is refused while
    any exists. Retiring changes the lifecycle only: no fact is deleted.
    """
    entry = catalog.entries.get(request.key)
    if entry is None:
        return catalog, UnknownDefinition(request.key)
    if ACTION_TARGET[request.action] is entry.lifecycle:
        return catalog, LifecycleUnchanged(request.key, entry.lifecycle)
    target = next_lifecycle(entry.lifecycle, request.action)
    if target is None:
        return catalog, IllegalLifecycleTransition(request.key, entry.lifecycle, request.action)
    if request.action is LifecycleAction.RETIRE and references:
        return catalog, RetirementBlocked(request.key, references)
    if request.action is LifecycleAction.ACTIVATE and invalid_routes:
        return catalog, ActivationBlocked(request.key, invalid_routes)
    changed = attrs.evolve(entry, lifecycle=target)
    return (
        Catalog({**catalog.entries, request.key: changed}),
        LifecycleChanged(request.key, entry.lifecycle, target),
    )


def load_definition(
    catalog: Catalog, key: DefinitionKey
) -> CatalogEntry | UnknownDefinition | DefinitionNotLoadable:
    """The definition snapshot for running instances (S-CAT-06, S-CAT-08).

    Candidates and retired definitions are not loaded.
    """
    entry = catalog.entries.get(key)
    if entry is None:
        return UnknownDefinition(key)
    if not is_loadable(entry.lifecycle):
        return DefinitionNotLoadable(key, entry.lifecycle)
    return entry


def query_definition(catalog: Catalog, key: DefinitionKey) -> CatalogEntry | UnknownDefinition:
    """Read a published artifact in any lifecycle, retired included (S-CAT-10)."""
    entry = catalog.entries.get(key)
    return UnknownDefinition(key) if entry is None else entry
