"""Judging one store outcome against the model: which rule a divergence breaks, in one line.

``verdict(op, expected, actual)`` is None when the backend answered exactly as the model did
(errors compare by kind; values compare whole), else ``(rule_id, message)``. The rule is chosen by
what diverged, most specific first: a replayed conflict is C-PRE-03 whatever the operation; changed
coordinates are C-POST-01; a changed publication is C-POST-04; and so on. ``exercised(op, expected)``
names the rules an agreeing outcome has just demonstrated, for the coverage gate.

The outbox's port has no read a model could be compared with (a listing is optional), so its checks
are not outcome comparisons: ``OUTBOX_CHECKS``
names each check the outbox ledger (``_outbox.py``) and the commit machine make, and the rule it
enforces.
"""

from __future__ import annotations

from collections.abc import Mapping

from conformance.commit._vocabulary import T0, key_name
from model.commit import (
    ABSENT_RANK,
    CommitIntent,
    CommitStage,
    CommittedMessage,
    HistoryPage,
    LoadedCommit,
    LoadedCommitted,
    LoadedInFlight,
    MessageCoordinates,
    MessageStoreError,
    OutboxPublication,
    ReserveCommitted,
    ReserveCreated,
    ReserveInFlight,
    StoreErrorKind,
)

# The rule an operation's *result* speaks to when nothing more specific applies.
_RESULT_RULE = {
    "reserve": "C-POST-01",
    "put_record": "C-POST-03",
    "mark_outbox_published": "C-POST-03",
    "mark_published_and_committed": "C-POST-04",
    "mark_committed": "C-POST-03",
    "load_commit": "C-PRE-09",
    "load_commit_for_request": "C-PRE-09",
    "scan_recoverable_commits": "C-POST-02",
    "history_page": "C-POST-11",
}

# The rule a refusal of each kind enforces (the kind the model expected and the backend dropped).
_REFUSAL_RULE = {
    StoreErrorKind.IDENTITY_CONFLICT: "C-PRE-03",
    StoreErrorKind.INVALID_ARGUMENT: "C-ERR-04",
    StoreErrorKind.INTENT_MISMATCH: "C-PRE-02",
    StoreErrorKind.NOT_FOUND: "C-POST-03",
    StoreErrorKind.MISSING_EVIDENCE: "C-POST-03",
    StoreErrorKind.PUBLICATION_MISMATCH: "C-POST-03",
    StoreErrorKind.NOT_A_MEMBER: "C-PRE-05",
}


# Each check of the outbox and of replays (conformance/commit/_outbox.py, _commit_machine.py) -> rule.
OUTBOX_CHECKS: Mapping[str, str] = {
    # publish for a key the store does not hold RECORDED or later (never reserved, or not yet recorded):
    # the committer publishes in the Recorded branch only
    "published-before-recorded": "C-POST-07",
    # a re-publish of a key answered with an entry other than the key's first: one entry per key
    "republish-new-entry": "C-POST-07",
    # publish answered without raising, but with no OutboxPublication: the committer got no ack
    "answer-not-a-publication": "C-POST-07",
    # a publish meeting a wire fault failed with a kind that says nothing was or could be applied
    "publish-refused-on-wire": "C-POST-07",
    # one entry acknowledged for two commit keys
    "entry-of-two-keys": "C-POST-07",
    # the store holds (OUTBOXED/COMMITTED) a publication that is not the outbox's entry for the key
    "publication-not-the-entry": "C-POST-04",
    # a replay of a COMMITTED key is not the original CommittedMessage
    "replay-changed": "C-POST-09",
    # readiness answered ready while the outbox was down
    "readiness-ignored-outbox": "C-PRE-06",
    # the listing (ListableOutbox) holds two entries for one commit key
    "second-entry-for-a-key": "C-POST-07",
    # the listing holds an entry the outbox never acknowledged for that key
    "entry-not-acknowledged": "C-POST-07",
    # an entry the outbox acknowledged is missing from its listing: the ack was not durable
    "acknowledged-entry-missing": "C-POST-07",
}


def combined_step_rule(atomic: bool) -> str:
    """The rule ``mark_published_and_committed`` answers to beyond C-POST-04: atomic (memory, Redis)
    or the default two-step path (C-POST-06)."""
    return "C-POST-05" if atomic else "C-POST-06"


def uncertain_rule(op: str, atomic: bool) -> str:
    """The rule an uncertain write that left neither the state before nor a legal state after breaks."""
    return combined_step_rule(atomic) if op == "mark_published_and_committed" else "C-POST-03"


def refusal_rule(op: str, kind: StoreErrorKind, atomic: bool = True) -> str:
    """The rule that a write refused with ``kind`` must leave the state unchanged under."""
    if op == "mark_published_and_committed" and kind in (
        StoreErrorKind.PUBLICATION_MISMATCH,
        StoreErrorKind.MISSING_EVIDENCE,
        StoreErrorKind.INTENT_MISMATCH,
    ):
        return combined_step_rule(atomic)  # nothing changes on refusal, on either path
    return _REFUSAL_RULE.get(kind, "C-ERR-04" if kind is StoreErrorKind.INVALID_ARGUMENT else "C-POST-03")


def verdict(op: str, expected: object, actual: object, atomic: bool = True) -> tuple[str, str] | None:
    if isinstance(expected, MessageStoreError) and isinstance(actual, MessageStoreError):
        if expected.kind is actual.kind:
            return None
        rule = _REFUSAL_RULE.get(expected.kind) or _REFUSAL_RULE.get(actual.kind) or "C-ERR-01"
        return rule, f"{op} failed as {actual.kind.value}; the contract says {expected.kind.value}"
    if isinstance(expected, MessageStoreError):
        rule = refusal_rule(op, expected.kind, atomic)
        what = "replayed an old result for a conflicting request" if rule == "C-PRE-03" else "succeeded"
        return rule, f"{op} {what} ({show(actual)}); the contract says {expected.kind.value}"
    if isinstance(actual, MessageStoreError):
        if actual.kind is StoreErrorKind.IDENTITY_CONFLICT:
            rule = "C-PRE-03"
        elif actual.kind is StoreErrorKind.NOT_A_MEMBER:
            rule = "C-PRE-05"
        elif actual.kind is StoreErrorKind.INVALID_ARGUMENT:
            rule = "C-ERR-04"
        else:
            rule = _RESULT_RULE.get(op, "C-ERR-01")
        return rule, f"{op} failed as {actual.kind.value}; the contract says {show(expected)}"
    if expected == actual:
        return None
    return _value_rule(
        op, expected, actual
    ), f"{op} returned {show(actual)}; the contract says {show(expected)}"


def _value_rule(op: str, expected: object, actual: object) -> str:
    e_coords, a_coords = _coordinates(expected), _coordinates(actual)
    if e_coords is not None and a_coords is not None and e_coords != a_coords:
        return "C-POST-01"
    if op == "reserve" and type(expected) is not type(actual):
        # A repeat that came back as a fresh reservation allocated again; a fresh one that came
        # back as a repeat invented history.
        return "C-POST-01"
    e_pub, a_pub = _publication(expected), _publication(actual)
    if e_pub != a_pub and e_pub is not None and a_pub is not None:
        return "C-POST-04"
    e_stage, a_stage = _stage(expected), _stage(actual)
    if e_stage is not None and a_stage is not None and e_stage != a_stage:
        return "C-POST-08" if a_stage < e_stage else "C-POST-03"
    e_intent, a_intent = _intent(expected), _intent(actual)
    if e_intent is not None and a_intent is not None and e_intent.identity != a_intent.identity:
        return "C-PRE-07"  # the durable request identity is not the QIMD digest of the request
    if e_intent is not None and a_intent is not None and e_intent != a_intent:
        return "C-PRE-02"
    if op == "history_page" and isinstance(expected, HistoryPage) and isinstance(actual, HistoryPage):
        if actual.entries == expected.entries and actual.available_through > expected.available_through:
            return "C-POST-01"  # sequence numbers were allocated that no reserve of a new key explains
        expected_seqs = {e.coordinates.conversation_seq for e in expected.entries}
        extra = [e for e in actual.entries if e.coordinates.conversation_seq not in expected_seqs]
        if extra and len(actual.entries) > len(expected.entries):
            return "C-POST-05"  # an entry the model says has expired: expiry was not registered
        return "C-POST-11"
    if op == "scan_recoverable_commits" and isinstance(expected, list) and isinstance(actual, list):
        if not set(map(_intent_key, expected)) <= set(map(_intent_key, actual)):
            return "C-POST-02"  # a recoverable commit is missing: it could be stranded
        return "C-POST-05"  # an extra candidate: commit did not remove it
    return _RESULT_RULE.get(op, "C-ERR-01")


def exercised(op: str, expected: object, atomic: bool = True) -> tuple[str, ...]:
    """The rules an outcome equal to ``expected`` just demonstrated (coverage targets)."""
    if isinstance(expected, MessageStoreError):
        if op == "mark_published_and_committed":
            return (combined_step_rule(atomic), refusal_rule(op, expected.kind, atomic))
        return (_REFUSAL_RULE.get(expected.kind, "C-ERR-01"),)
    if op == "reserve":
        if isinstance(expected, ReserveCreated):
            return ("C-POST-01", "C-PRE-07")
        if isinstance(expected, ReserveCommitted):
            return ("C-POST-01", "C-PRE-09")
        return ("C-POST-01", "C-PRE-02")
    if op == "put_record":
        return ("C-PRE-04", "C-POST-03")
    if op == "mark_published_and_committed":
        return ("C-POST-04",)
    if op == "mark_committed":
        return ("C-POST-03", "C-POST-10")
    if op in ("load_commit", "load_commit_for_request") and isinstance(expected, LoadedCommitted):
        return ("C-PRE-09",)
    if op == "scan_recoverable_commits" and expected:
        return ("C-POST-02",)
    if op == "history_page" and isinstance(expected, HistoryPage) and expected.entries:
        return ("C-POST-11",)
    return ()


# --- reading values --------------------------------------------------------------------------


def _coordinates(value: object) -> MessageCoordinates | None:
    if isinstance(value, ReserveCreated | ReserveInFlight | LoadedInFlight):
        return value.intent.coordinates
    if isinstance(value, ReserveCommitted | LoadedCommitted):
        return value.message.coordinates
    if isinstance(value, CommittedMessage):
        return value.coordinates
    return None


def _publication(value: object) -> OutboxPublication | None:
    if isinstance(value, ReserveInFlight | LoadedInFlight):
        return value.publication
    if isinstance(value, ReserveCommitted | LoadedCommitted):
        return value.message.publication
    if isinstance(value, CommittedMessage):
        return value.publication
    return None


def _stage(value: object) -> int | None:
    if isinstance(value, ReserveCreated):
        return CommitStage.RESERVED.rank
    if isinstance(value, ReserveInFlight | LoadedInFlight):
        return value.stage.rank
    if isinstance(value, ReserveCommitted | LoadedCommitted | CommittedMessage):
        return CommitStage.COMMITTED.rank
    return None


def _intent(value: object) -> CommitIntent | None:
    if isinstance(value, ReserveCreated | ReserveInFlight | LoadedInFlight):
        return value.intent
    return None


def _intent_key(value: object) -> str:
    return key_name(value.key) if isinstance(value, CommitIntent) else repr(value)


# --- rendering -------------------------------------------------------------------------------


def show(value: object) -> str:
    """A short, readable rendering for messages and traces (sequence numbers, stage, publication)."""
    if value is None:
        return "None"
    if isinstance(value, MessageStoreError):
        return f"error {value.kind.value}"
    if isinstance(value, MessageCoordinates):
        return f"seq {value.message_seq}/{value.conversation_seq} @T0+{value.accepted_at_ms - T0}"
    if isinstance(value, OutboxPublication):
        return value.entry_id
    if isinstance(value, CommitIntent):
        return f"intent {key_name(value.key)} in {value.conversation} {show(value.coordinates)}"
    if isinstance(value, ReserveCreated):
        return f"ReserveCreated({show(value.intent.coordinates)})"
    if isinstance(value, ReserveInFlight | LoadedInFlight):
        pub = f", {show(value.publication)}" if value.publication is not None else ""
        return f"{type(value).__name__}({value.stage.name}, {show(value.intent.coordinates)}{pub})"
    if isinstance(value, ReserveCommitted | LoadedCommitted):
        return f"{type(value).__name__}({show(value.message.coordinates)}, {show(value.message.publication)})"
    if isinstance(value, CommittedMessage):
        return (
            f"CommittedMessage({key_name(value.key)} in {value.conversation}, "
            f"{show(value.coordinates)}, {show(value.publication)})"
        )
    if isinstance(value, HistoryPage):
        seqs = ",".join(str(e.coordinates.conversation_seq) for e in value.entries)
        return (
            f"HistoryPage([{seqs}], has_more={value.has_more}, "
            f"available={value.available_from}..{value.available_through})"
        )
    if isinstance(value, list):
        return "[" + ", ".join(show(v) for v in value) + "]"
    return repr(value)


def rank_of(loaded: LoadedCommit | MessageStoreError | None) -> int:
    """The stage rank a read shows (C-POST-08: it never goes down); absent for none or an error."""
    if loaded is None or isinstance(loaded, MessageStoreError):
        return ABSENT_RANK
    if isinstance(loaded, LoadedCommitted):
        return CommitStage.COMMITTED.rank
    return loaded.stage.rank
