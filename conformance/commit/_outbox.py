"""The outbox beside the store: the entry it acknowledged per commit key, and faults on it.

Theory of operation
-------------------
The ``Outbox`` port (impls/api.py) publishes and answers readiness; reading is optional
(``ListableOutbox``). So the harness
keeps the ledger a reader of the stream would build: every publication the real outbox acknowledged,
per ``CommitKey``, seen through ``ObservedOutbox``, the outbox of every committer the commit machine
runs. A key's first acknowledged publication is *its entry*. Checks (rule IDs in
``_judge.OUTBOX_CHECKS``):

* ``publish`` runs only for a key the store holds RECORDED or later, so the outbox never holds an
  entry for a key that was never reserved (C-POST-07: the Recorded branch publishes);
* a re-publish answers with the key's entry, and no entry answers for two keys: one entry per
  commit key (C-POST-07);
* after every step, the publication the store holds for a key (OUTBOXED or COMMITTED) is the
  outbox's entry for it (C-POST-04: the store takes the durable publication);
* at quiescence a probe publishes every committed key again, straight to the real outbox: it must
  answer with the committed publication (C-POST-07).

* at quiescence, when the outbox is a ``ListableOutbox`` (every shipped one is), what a consumer
  would read is exactly the ledger: one entry per acknowledged key, that key's entry, and nothing
  else (C-POST-07). Without the listing, an outbox that appended a second entry and still
  answered with the first would pass: nothing else in the port can see it.

Faults (``arm_outbox_fault``): ``outbox-ack-lost`` (the real publish applies, the committer sees
UNAVAILABLE), ``outbox-failed`` (UNAVAILABLE, the real outbox is not called) and ``outbox-down``
(an outage of N calls: publish and readiness answer UNAVAILABLE without reaching it). A lost ack,
or a crash at M-COMMIT-04, leaves an entry the store does not know yet; when that key is later
COMMITTED with that same entry the run reaches ``outbox-entry-reused-after:<why>``.

On a wire (``CommitTarget.outbox_on_wire``: the outbox factory takes an ``endpoint`` too),
``publish_on_wire`` holds a fresh outbox to the same checks once a run while each wire kind meets a
publish's first request on the store's proxy: whatever its driver makes of a lost, reset or stalled
answer or a lost request (a re-send, a settle, an uncertain error), the key has one entry.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

from conformance._faults import FaultKind
from conformance._outage import bounded
from conformance._violations import HarnessEnvironmentError
from conformance.commit._faults import OUTBOX_ACK_LOST, OUTBOX_DOWN, OUTBOX_FAILED
from conformance.commit._judge import OUTBOX_CHECKS, show
from conformance.commit._oracle import Gate, HaltExample, StoreOracle
from conformance.commit._vocabulary import key_name, never_reserved_intent
from conformance.wire import WIRE_REPLY_LOST, WIRE_REQUEST_LOST, WIRE_RESET_BEFORE, WIRE_STALL
from impls.api import ListableOutbox, NamespaceOwner, Outbox, OutboxEntry
from model.commit import (
    MAX_SCAN_ITEMS,
    CommitIntent,
    CommitKey,
    CommitStage,
    MessageStoreError,
    OutboxPublication,
    StoreErrorKind,
    TenantId,
    UserId,
)

_PROBE_ATTEMPTS = 5
T = TypeVar("T")


#: ``publish_on_wire``: the wire kinds a publish meets, each losing, resetting or holding the answer
#: of the append, or losing the request, so that its driver cannot know what happened.
WIRE_KINDS_ON_PUBLISH = (WIRE_REPLY_LOST, WIRE_RESET_BEFORE, WIRE_STALL, WIRE_REQUEST_LOST)
#: ``audit_long_listing``: one entry more than the largest page any bound of the contract names.
LONG_LISTING = MAX_SCAN_ITEMS + 1
#: Publications of ``audit_long_listing`` in flight at once. One: a CQL outbox's entries share one
#: partition, where side-by-side lightweight transactions contend (Paxos per partition), and the
#: listing is then held to the exact order appended.
LISTING_ROUND = 1


class OutboxOracle:
    """The ledger of one example's outbox, the faults armed on it, and the checks over both."""

    def __init__(self, store: StoreOracle, real: Outbox) -> None:
        self.store = store
        self.real = real
        self.entries: dict[CommitKey, OutboxPublication] = {}  # each key's first acknowledged entry
        self.owners: dict[OutboxPublication, CommitKey] = {}
        self.armed: FaultKind | None = None
        self.armed_calls = 0
        self.reuse_pending: dict[CommitKey, str] = {}  # keys whose entry a later commit must reuse: why

    def fail(self, check: str, message: str, **context: object) -> HaltExample:
        return self.store.fail(OUTBOX_CHECKS[check], message, check=check, **context)

    # --- faults --------------------------------------------------------------------------------

    def arm(self, fault: FaultKind | None, calls: int = 1) -> None:
        self.armed = fault
        self.armed_calls = calls if fault is not None else 0

    @property
    def down(self) -> bool:
        return self.armed is OUTBOX_DOWN

    def take_fault(self, op: str) -> FaultKind | None:
        """The armed fault, if it hits ``op``: an outage hits readiness too, the others publish only."""
        fault = self.armed
        if fault is None or (op == "readiness" and fault is not OUTBOX_DOWN):
            return None
        self.armed_calls -= 1
        if self.armed_calls <= 0:
            self.arm(None)
        self.store.context.inject(fault.name)
        self.store.disturbances += 1  # excuses a RECOVERABLE, as a store fault does
        return fault

    def expect_reuse(self, key: CommitKey, why: str) -> None:
        """``key`` has an entry the store does not know yet: a later commit must take that entry."""
        if key in self.entries:
            self.reuse_pending.setdefault(key, why)

    # --- checks --------------------------------------------------------------------------------

    def acknowledged(self, key: CommitKey, publication: OutboxPublication) -> None:
        """The real outbox acknowledged ``publication`` for ``key`` (raises ``HaltExample``)."""
        name = key_name(key)
        entry = self.store.state.commits.get(key)
        if entry is None or entry.stage.rank < CommitStage.RECORDED.rank:
            stage = "never reserved" if entry is None else entry.stage.name
            raise self.fail(
                "published-before-recorded",
                f"the outbox got an entry for {name} while the store holds it {stage}: only a RECORDED "
                "commit is published",
            )
        first = self.entries.setdefault(key, publication)
        if publication != first:
            raise self.fail(
                "republish-new-entry",
                f"a re-publish of {name} answered {show(publication)}; the outbox's entry for it is "
                f"{show(first)} (one entry per commit key)",
            )
        owner = self.owners.setdefault(publication, key)
        if owner != key:
            raise self.fail(
                "entry-of-two-keys",
                f"the outbox answered {name} with entry {show(publication)}, which it already "
                f"acknowledged for {key_name(owner)}",
            )

    def check_store(self) -> None:
        """After a step: each publication the store holds is the outbox's entry for its key.

        Raises the ``Violation``."""
        for key, entry in self.store.state.commits.items():
            if entry.publication is None:
                continue
            ours = self.entries.get(key)
            if entry.publication != ours:
                what = "never acknowledged an entry for it" if ours is None else f"holds {show(ours)} for it"
                raise self.fail(
                    "publication-not-the-entry",
                    f"the store holds {key_name(key)} {entry.stage.name} with publication "
                    f"{show(entry.publication)}, but the outbox {what}",
                ).violation
            if entry.stage is CommitStage.COMMITTED:
                why = self.reuse_pending.pop(key, None)
                if why is not None:
                    self.store.context.reach(f"outbox-entry-reused-after:{why}")

    async def _at_quiescence(self, op: str, key: CommitKey | None, call: Callable[[], Awaitable[T]]) -> T:
        """A real outbox call with no fault armed: a few tries, then the environment is to blame."""
        for _ in range(_PROBE_ATTEMPTS):
            result = await self.store.call_real(op, key, call)
            if not isinstance(result, MessageStoreError):
                return result
        raise HarnessEnvironmentError(f"{op} stayed unavailable at quiescence: {result}")

    async def probe(self, key: CommitKey, intent: CommitIntent, committed: OutboxPublication) -> None:
        """At quiescence: publishing a committed key again answers with its committed publication."""
        result = await self._at_quiescence("outbox.publish", key, lambda: self.real.publish(intent))
        self.store.note(f"outbox.publish({key_name(key)}) again -> {show(result)}")
        if result != committed:
            raise self.fail(
                "republish-new-entry",
                f"at quiescence a re-publish of {key_name(key)} answered {show(result)}; it was committed "
                f"with {show(committed)}",
            )
        self.store.context.reach("outbox-republish-probed")

    async def audit(self) -> None:
        """At quiescence, on a ``ListableOutbox``: the listing is the ledger (C-POST-07)."""
        real = self.real
        if not isinstance(real, ListableOutbox):
            return
        listing = await self._at_quiescence("outbox.entries", None, real.entries)
        self.store.note(f"outbox.entries() -> {len(listing)} entries")
        listed: dict[CommitKey, OutboxPublication] = {}
        for entry in listing:
            name = key_name(entry.key)
            if entry.key in listed:
                raise self.fail(
                    "second-entry-for-a-key",
                    f"the outbox holds two entries for {name}: {show(listed[entry.key])} and "
                    f"{show(entry.publication)} (one entry per commit key)",
                )
            listed[entry.key] = entry.publication
            ours = self.entries.get(entry.key)
            if ours != entry.publication:
                what = "acknowledged none for it" if ours is None else f"acknowledged {show(ours)} for it"
                raise self.fail(
                    "entry-not-acknowledged",
                    f"the outbox holds {show(entry.publication)} for {name} but {what}",
                )
        for key, publication in self.entries.items():
            if key not in listed:
                raise self.fail(
                    "acknowledged-entry-missing",
                    f"the outbox acknowledged {show(publication)} for {key_name(key)} but does not hold it",
                )
        if self.entries:
            self.store.context.reach("outbox-entries-audited")

    async def audit_long_listing(self, outbox: Outbox) -> None:
        """Once per run, on a fresh ``ListableOutbox``: more entries than the largest page the contract
        names (``MAX_SCAN_ITEMS``), so a listing that pages has a page to continue from; it must list
        each publication once, oldest first (C-POST-07). No example appends that many, so a listing
        whose second page started in the wrong place passed. Published in rounds of
        ``LISTING_ROUND`` side by side: a round's entries may list in any order among themselves,
        never before an earlier round's."""
        if not isinstance(outbox, ListableOutbox):
            return
        round_of: dict[OutboxEntry, int] = {}
        for first in range(0, LONG_LISTING, LISTING_ROUND):
            keys = [
                CommitKey(TenantId("t1"), UserId("alice"), f"listing.{number}")
                for number in range(first, min(first + LISTING_ROUND, LONG_LISTING))
            ]
            publications = await asyncio.gather(
                *(
                    self._at_quiescence("outbox.publish", key, functools.partial(outbox.publish, intent))
                    for key, intent in ((key, never_reserved_intent(key)) for key in keys)
                )
            )
            round_of.update({OutboxEntry(k, p): first for k, p in zip(keys, publications, strict=True)})
        listing = await self._at_quiescence("outbox.entries", None, outbox.entries)
        self.store.note(f"a fresh outbox given {LONG_LISTING} entries lists {len(listing)}")
        seen: set[OutboxEntry] = set()
        seen_keys: set[CommitKey] = set()
        latest = 0
        for place, entry in enumerate(listing, 1):
            where = f"a fresh outbox given {LONG_LISTING} entries listed {len(listing)}: entry {place}"
            if entry.key in seen_keys:
                raise self.fail("second-entry-for-a-key", f"{where}, {show(entry)}, was listed before")
            if entry not in round_of:
                raise self.fail("entry-not-acknowledged", f"{where}, {show(entry)}, was never acknowledged")
            if round_of[entry] < latest:
                raise self.fail(
                    "entry-not-acknowledged",
                    f"{where}, {show(entry)}, lists after entries appended later (oldest first)",
                )
            latest = round_of[entry]
            seen.add(entry)
            seen_keys.add(entry.key)
        if missing := [entry for entry in round_of if entry not in seen]:
            raise self.fail(
                "acknowledged-entry-missing",
                f"a fresh outbox given {LONG_LISTING} entries listed {len(listing)}; {len(missing)} "
                f"acknowledged are missing, the first {show(missing[0])}",
            )
        self.store.context.reach("outbox-long-listing-audited")

    async def publish_meeting(
        self, outbox: Outbox, kind: FaultKind, ready: Callable[[], Awaitable[None]]
    ) -> None:
        """On a fresh outbox on the wire: a publish whose first request, the append, meets ``kind``
        must answer a publication or an uncertain error, and the key ends with one entry, the one
        a publish with no fault then answers (C-POST-07). Target ``outbox-met-wire:<kind>``, once
        the proxy met the request and the checks held."""
        store = self.store
        key = CommitKey(TenantId("t1"), UserId("alice"), f"wire.{kind.name}")
        name = key_name(key)
        publish = functools.partial(outbox.publish, never_reserved_intent(key))
        before = store.context.stats.faults[kind.name]
        store.arm(kind)  # for this one publish: taken at once, as a store call takes an armed fault
        taken = store.take_fault(f"outbox.publish({name})", key, write=True)
        first = await store.call_backend("outbox.publish", key, publish, taken)
        store.note(f"outbox.publish({name}) meeting {kind.name} -> {show(first)}")
        if isinstance(first, MessageStoreError) and not first.kind.is_uncertain:
            raise self.fail(
                "publish-refused-on-wire",
                f"outbox.publish({name}) failed {first.kind.value} on {kind.name}: a fault on the wire "
                "leaves a publish applied or not, never refused",
            )
        await ready()  # a reset connection: the driver reconnects before it sends again
        again = await self._at_quiescence("outbox.publish", key, publish)
        store.note(f"outbox.publish({name}) again -> {show(again)}")
        for answer in (first, again):
            if not isinstance(answer, OutboxPublication | MessageStoreError):
                raise self.fail(
                    "answer-not-a-publication",
                    f"outbox.publish({name}) answered {answer!r}, not an OutboxPublication: no durable ack",
                )
        if isinstance(first, OutboxPublication) and again != first:
            raise self.fail(
                "republish-new-entry",
                f"after {kind.name} a re-publish of {name} answered {show(again)}; the first answered "
                f"{show(first)} (one entry per commit key)",
            )
        if isinstance(outbox, ListableOutbox):
            listing = await self._at_quiescence("outbox.entries", None, outbox.entries)
            held = [entry.publication for entry in listing if entry.key == key]
            if len(held) > 1:
                raise self.fail(
                    "second-entry-for-a-key",
                    f"after {kind.name} the outbox holds {len(held)} entries for {name}",
                )
            if held != [again]:
                raise self.fail(
                    "acknowledged-entry-missing" if not held else "entry-not-acknowledged",
                    f"after {kind.name} the outbox holds {[show(h) for h in held]} for {name}; it answered "
                    f"{show(again)}",
                )
        if store.context.stats.faults[kind.name] > before:
            store.context.reach(f"outbox-met-wire:{kind.name}")


class ObservedOutbox:
    """The real outbox behind a worker's gate, with the armed faults and the ledger's checks."""

    def __init__(self, oracle: OutboxOracle, gate: Gate | None = None) -> None:
        self._oracle = oracle
        self._real = oracle.real
        self._gate = gate

    async def publish(self, intent: CommitIntent) -> OutboxPublication:
        if self._gate is not None:
            await self._gate()
        ledger = self._oracle
        store = ledger.store
        key = intent.key
        name = key_name(key)
        fault = ledger.take_fault("publish")
        if fault is OUTBOX_FAILED or fault is OUTBOX_DOWN:
            store.note(f"outbox.publish({name}) -> injected {fault.name}: UNAVAILABLE, nothing appended")
            store.failed_calls.append(StoreErrorKind.UNAVAILABLE)
            raise MessageStoreError(StoreErrorKind.UNAVAILABLE, f"injected: {fault.name}", key)
        result = await store.call_real("outbox.publish", key, lambda: self._real.publish(intent))
        store.note(f"outbox.publish({name}) -> {show(result)}")
        if isinstance(result, MessageStoreError):
            if result.kind.is_uncertain:
                store.disturbances += 1
            store.failed_calls.append(result.kind)
            raise result
        if not isinstance(result, OutboxPublication):
            raise ledger.fail(
                "answer-not-a-publication",
                f"outbox.publish({name}) answered {result!r}, not an OutboxPublication: no durable ack",
            )
        republished = key in ledger.entries
        ledger.acknowledged(key, result)
        if republished:
            store.context.reach("outbox-republished-first-entry")
        if fault is OUTBOX_ACK_LOST:
            ledger.expect_reuse(key, OUTBOX_ACK_LOST.name)
            store.note(f"outbox.publish({name}) -> injected {fault.name}: the committer sees UNAVAILABLE")
            store.failed_calls.append(StoreErrorKind.UNAVAILABLE)
            raise MessageStoreError(StoreErrorKind.UNAVAILABLE, "injected: the outbox's answer was lost", key)
        return result

    async def readiness(self) -> None:
        if self._gate is not None:
            await self._gate()
        store = self._oracle.store
        fault = self._oracle.take_fault("readiness")
        if fault is not None:
            store.note(f"outbox.readiness -> injected {fault.name}: UNAVAILABLE")
            raise MessageStoreError(StoreErrorKind.UNAVAILABLE, f"injected: {fault.name}")
        result = await store.call_real("outbox.readiness", None, self._real.readiness)
        if isinstance(result, MessageStoreError):
            raise result

    async def close(self) -> None:
        """The harness closes the real outbox."""


async def long_listing(oracle: OutboxOracle, context: Any) -> None:
    """``OutboxOracle.audit_long_listing`` on an outbox of a namespace of its own, dropped after."""
    async with _fresh_outbox(context) as outbox:
        await oracle.audit_long_listing(outbox)


async def publish_on_wire(
    oracle: OutboxOracle, context: Any, kinds: Sequence[FaultKind], ready: Callable[[], Awaitable[None]]
) -> None:
    """``OutboxOracle.publish_meeting`` for each of ``kinds`` on an outbox of a namespace of its own
    (on the wire, ``CommitTarget.outbox_on_wire``), with ``ready`` awaited before each publish: a
    driver whose connection a fault reset sends nothing until it has reconnected. A namespace of its
    own, as for the long listing, so that running it once a run leaves every example's own program
    and state as they were, for shrinking and replay alike."""
    async with _fresh_outbox(context) as outbox:
        for kind in kinds:
            await ready()
            await oracle.publish_meeting(outbox, kind, ready)


@contextlib.asynccontextmanager
async def _fresh_outbox(context: Any) -> AsyncIterator[Outbox]:
    outbox: Any = await context.target.open_outbox(context.new_namespace())
    try:
        yield outbox
    finally:
        # Under the watchdog like every backend call: a frozen server is an outage, not a hang.
        if isinstance(outbox, NamespaceOwner):
            with contextlib.suppress(MessageStoreError):
                await bounded("the fresh outbox's drop", outbox.drop_namespace(), context)
        with contextlib.suppress(MessageStoreError):
            await bounded("the fresh outbox's close", outbox.close(), context)
