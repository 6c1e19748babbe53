"""The memory store's ``impls.api.StoreInspector``, and the check its reads make of what they find.

The memory store keeps one ``_Commit`` value per key; its raw form is that value's attributes
(``stage``, ``identity``, ``conversation``, ``coordinates``, ``intent``, ``publication``).
``write_raw`` replaces it with whatever it is given, as a torn page or a bad restore would, so
``well_formed`` is what stands between such a value and a reader: every read refuses a value that
does not hold together with ``MessageStoreError(CORRUPT)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from model.commit import (
    CommitIntent,
    CommitStage,
    MessageCoordinates,
    OutboxPublication,
    is_well_formed_identity,
)

FIELDS = ("stage", "identity", "conversation", "coordinates", "intent", "publication")


def well_formed(stored: Any) -> bool:
    """Whether a stored commit value holds together (types, identity header, stage evidence)."""
    stage = getattr(stored, "stage", None)
    if not isinstance(stage, CommitStage):
        return False
    identity = stored.identity
    intent, publication = stored.intent, stored.publication
    return (
        isinstance(identity, bytes)
        and is_well_formed_identity(identity)
        and isinstance(stored.conversation, str)
        and isinstance(stored.coordinates, MessageCoordinates)
        and (intent is None if stage is CommitStage.COMMITTED else isinstance(intent, CommitIntent))
        and (publication is None) == (stage.rank < CommitStage.OUTBOXED.rank)
        and (publication is None or isinstance(publication, OutboxPublication))
    )


def raw_of(stored: Any) -> dict[str, object]:
    return {name: getattr(stored, name) for name in FIELDS}


def fields_for(fields: Mapping[str, object]) -> dict[str, Any]:
    """Every attribute of a stored value, those ``fields`` leaves out as None."""
    return {name: fields.get(name) for name in FIELDS}
