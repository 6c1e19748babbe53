"""Registers the commit family: its backends (conformance/backends.py) and its two suites.

``store``: every ``MessageStore`` call beside the model (``_store_machine``).
``commit``: ``MessageCommitter`` + store + outbox under crashes, lost responses (of the store and of
the outbox), an outbox outage and interleavings (``_commit_machine``, ``_outbox``).

Each suite's coverage targets are its ``sometimes`` properties: the run fails its gate unless every
rule ran, every fault kind was injected, every fault point on the store's path was crashed at,
every commit stage was reached and every listed contract rule was exercised.
"""

from __future__ import annotations

from collections.abc import Mapping

from conformance._faults import (
    CLOCK_ADVANCE,
    CRASH,
    FAILED_BEFORE,
    INTERLEAVE,
    RECOVERY_SWEEP,
    RESPONSE_LOST,
    FaultPointSpec,
    register_fault_point,
)
from conformance._machine import ConformanceMachine, SuiteStats, step_names
from conformance._suites import BackendUnderTest, Family, Suite, register_family, register_suite
from conformance.backends import COMMIT_BACKENDS
from conformance.commit._edge_rules import EDGE_TARGETS
from conformance.commit._faults import OUTBOX_ACK_LOST, OUTBOX_DOWN, OUTBOX_FAILED
from conformance.commit._outbox import WIRE_KINDS_ON_PUBLISH
from conformance.commit._target import CommitTarget
from conformance.wire import PARTITION, WIRE_REPLY_LOST, WIRE_REQUEST_LOST, WIRE_RESET_BEFORE, WIRE_STALL
from model.commit import MAX_SCAN_ITEMS, CommitStage, FaultPoint, StoreCapabilities, fault_points_for

# docs/faults.md holds the full text; these lines are what `conformance faults` prints.
FAULT_POINT_TEXT = {
    FaultPoint.M_COMMIT_01: "request validated and frozen; nothing durable yet",
    FaultPoint.M_COMMIT_02: "reserve durable (RESERVED, coordinates allocated); record not written",
    FaultPoint.M_COMMIT_03: "record durable (RECORDED); nothing published",
    FaultPoint.M_COMMIT_04: "outbox durably acked; the store does not know the publication yet",
    FaultPoint.M_COMMIT_05: "OUTBOXED durable (two-step path only); not committed",
    FaultPoint.M_COMMIT_06: "COMMITTED durable; the ACK has not reached the client",
}
for _point, _text in FAULT_POINT_TEXT.items():
    register_fault_point(FaultPointSpec(_point.value, "commit", _text))

STORE_RULES = (
    "C-PRE-02",
    "C-PRE-06",
    "C-PRE-07",
    "C-PRE-03",
    "C-PRE-04",
    "C-PRE-05",
    "C-PRE-09",
    "C-POST-01",
    "C-POST-02",
    "C-POST-03",
    "C-POST-11",
    "C-ERR-01",
    "C-ERR-04",
)
ATOMIC_STORE_RULES = ("C-POST-04", "C-POST-05")
TWO_STEP_STORE_RULES = ("C-POST-04", "C-POST-06")
COMMIT_RULES = (
    "C-PRE-01",
    "C-PRE-03",
    "C-PRE-05",
    "C-PRE-06",
    "C-PRE-08",
    "C-POST-09",
    "C-POST-10",
    "C-ERR-01",
    "C-ERR-02",
    "C-ERR-03",
)


#: On a backend with a network between driver and server (``requires="wire"``); elsewhere the gate
#: reports them not applicable.
WIRE_FAULT_KINDS = (WIRE_REPLY_LOST, WIRE_RESET_BEFORE, WIRE_STALL, PARTITION)
STORE_FAULT_KINDS = (RESPONSE_LOST, FAILED_BEFORE, CLOCK_ADVANCE, *WIRE_FAULT_KINDS)
COMMIT_FAULT_KINDS = (
    RESPONSE_LOST,
    FAILED_BEFORE,
    CRASH,
    INTERLEAVE,
    RECOVERY_SWEEP,
    CLOCK_ADVANCE,
    OUTBOX_ACK_LOST,
    OUTBOX_FAILED,
    OUTBOX_DOWN,
    *WIRE_FAULT_KINDS,
    WIRE_REQUEST_LOST,  # on an outbox on the wire only (``_outbox.publish_on_wire``)
)


def _capabilities(stats: SuiteStats) -> StoreCapabilities:
    return StoreCapabilities(stats.details.get("atomic_publish_and_commit") == "True")


#: Recorded steps of the base machines run only by the opening on a wire (``directed_on_wire``).
ON_WIRE_ONLY = ("legacy_walk", "repeat_walk", "stalled_send", "endpoint_walk")


def _common_targets(
    stats: SuiteStats, machine: type[ConformanceMachine], rules: tuple[str, ...]
) -> dict[str, str]:
    targets = {f"step:{name}": "this rule never ran" for name in step_names(machine)}
    targets.update({f"stage:{s.name}": f"no commit reached {s.name}" for s in CommitStage})
    targets.update({f"rule:{r}": f"no step exercised {r}" for r in rules})
    if stats.details.get("wire") == "True":  # the rules CommitTarget.specialise adds
        targets["step:arm_wire_fault"] = "this rule never ran"
        targets["step:readiness_partitioned"] = "this rule never ran"
        targets["readiness-refused:partition"] = "readiness was never asked with the server partitioned"
        targets["step:wire_walk"] = "the opening on a wire never walked the wire faults"
        targets["step:seam_walk"] = "the opening on a wire never walked the seam's faults"
    else:  # steps of the machines that only the opening on a wire runs (_wire_rules.wire_opening)
        for name in ON_WIRE_ONLY:
            targets.pop(f"step:{name}", None)
    targets["error-detail-scanned"] = "no store error's detail was scanned for backend text (C-ERR-01)"
    return targets


def _store_machine() -> type[ConformanceMachine]:
    from conformance.commit._store_machine import StoreMachine

    return StoreMachine


def _commit_machine() -> type[ConformanceMachine]:
    from conformance.commit._directed import DirectedCommitMachine

    return DirectedCommitMachine


def store_targets(stats: SuiteStats) -> Mapping[str, str]:
    atomic = _capabilities(stats).atomic_publish_and_commit
    rules = STORE_RULES + (ATOMIC_STORE_RULES if atomic else TWO_STEP_STORE_RULES)
    # fault:<kind> targets are the runner's, from the suite's kinds (conformance._faults.fault_targets)
    targets = _common_targets(stats, _store_machine(), rules)
    targets.update({t: "no step drew this value at the contract's edge" for t in EDGE_TARGETS})
    targets["history-at-expiry-edge"] = "no history was read at the edge of a registered expiry (C-POST-05)"
    targets["stage-walk"] = "no key was walked through every stage of the default path at quiescence"
    if stats.details.get("drops_namespaces") == "True":  # impls.api.NamespaceOwner: C-POST-12 judged
        targets["namespace-read-back"] = "no dropped namespace was read back, reopened (C-POST-12)"
        targets["namespace-listing-judged"] = (
            "the namespace listing was never judged around a drop (C-POST-12)"
        )
    if stats.details.get("inspector") == "True":  # impls.api.StoreInspector: corrupt_stored runs
        targets["stored-form-compared"] = "no stored form was compared with the model (C-PRE-07)"
        targets["corrupt-refused"] = "no corrupted commit was read back as CORRUPT"
    else:
        targets.pop("step:corrupt_stored")
    if stats.details.get("endpoint_options") == "True":  # a wire whose service documents options
        targets["endpoint-options-judged"] = (
            "no documented endpoint option was judged at its edges (C-ERR-04)"
        )
    if stats.details.get("legacy_import") == "True":  # impls.api.LegacyImport: legacy_commit runs
        targets["legacy-compared"] = "no pre-upgrade (QIMC) commit was handed to the store and read"
        targets["legacy-sequences-continued"] = "no new key was reserved after a pre-upgrade commit"
    else:
        targets.pop("step:legacy_commit")
        targets.pop("step:legacy_walk", None)
    return targets


def commit_targets(stats: SuiteStats) -> Mapping[str, str]:
    capabilities = _capabilities(stats)
    path_rule = "C-POST-07" if capabilities.atomic_publish_and_commit else "C-POST-06"
    targets = _common_targets(stats, _commit_machine(), (*COMMIT_RULES, path_rule))
    for point in fault_points_for(capabilities):
        targets[f"crash-at:{point.value}"] = (
            f"no committer was killed at {point.value} ({FAULT_POINT_TEXT[point]})"
        )
    resumable = [CommitStage.RESERVED, CommitStage.RECORDED, CommitStage.COMMITTED]
    if not capabilities.atomic_publish_and_commit:
        resumable.append(CommitStage.OUTBOXED)
    else:
        targets.pop(f"stage:{CommitStage.OUTBOXED.name}")  # the atomic path never stops there
    for stage in resumable:
        targets[f"continued-from:{stage.name}"] = f"no new committer finished a commit found {stage.name}"
    targets["recovered"] = "no recovery sweep finished a due commit"
    targets["concurrent-acknowledged"] = "no interleaving of committers ended in an ACK"
    targets["quiescent-all-committed"] = "no example ended with every reserved key committed"
    for why in (FaultPoint.M_COMMIT_04.value, OUTBOX_ACK_LOST.name):
        targets[f"outbox-entry-reused-after:{why}"] = (
            f"no key with an outbox entry unknown to the store (after {why}) was committed with that entry"
        )
    targets["readiness-refused:outbox-down"] = "readiness was never asked while the outbox was down"
    targets["quota-exhausted"] = "no send met the suite's quota exhausted (C-PRE-08)"
    targets["quota-asked-across-time"] = "the quotas were never asked across a clock step (C-PRE-08)"
    targets["recovery-batches-continued"] = "no CommitRecovery sweep went on past a full batch (C-POST-02)"
    targets["recovery-loop-swept-after-failure"] = (
        "no recovery loop swept again after a failed sweep (C-POST-02)"
    )
    targets["committer-default-retention"] = "no committer kept its own default retention (C-ERR-04)"
    targets["quota-window-turned"] = "the shipped SenderQuota was never asked across a turning window"
    targets["configuration-edges-judged"] = "no committer configuration was judged at its edges (C-ERR-04)"
    if stats.details.get("committer_defaults") == "True":  # Ratchet's committer: documented defaults
        targets["committer-default-retention-held"] = (
            "no intent frozen by a committer keeping its default retention was judged (C-POST-05)"
        )
        targets["recovery-default-min-age-held"] = (
            "no CommitRecovery with its default minimum age was judged (C-POST-02)"
        )
    targets["outbox-republish-probed"] = "no committed key was published again at quiescence"
    if stats.details.get("outbox_on_wire") == "True":  # CommitTarget.outbox_on_wire: publish_on_wire
        for kind in WIRE_KINDS_ON_PUBLISH:
            why = f"no outbox publish met {kind.name} on the wire (C-POST-07)"
            targets[f"outbox-met-wire:{kind.name}"] = why
    if stats.details.get("outbox_lists_entries") == "True":
        targets["outbox-entries-audited"] = "the outbox's listing was never compared with its ledger"
        targets["outbox-long-listing-audited"] = (
            f"no outbox was listed with more entries than a page of {MAX_SCAN_ITEMS} (C-POST-07)"
        )
    return targets


def _named_backends() -> Mapping[str, BackendUnderTest]:
    return {
        name: BackendUnderTest(
            name,
            "commit",
            {"store": spec.store_factory, "outbox": spec.outbox_factory}
            | ({"control": spec.control} if spec.control else {}),
            spec.service,
            spec.in_process,
            examples=spec.examples,
        )
        for name, spec in COMMIT_BACKENDS.items()
    }


COMMIT_FAMILY = register_family(
    Family("commit", _named_backends, ("store", "outbox"), {"outbox": "impls.memory:open_outbox"})
)

STORE_SUITE = register_suite(
    Suite(
        name="store",
        family="commit",
        description="every MessageStore call beside the model; lost responses and failed calls",
        fault_kinds=STORE_FAULT_KINDS,
        machine=_store_machine,
        make_target=CommitTarget.of,
        coverage_targets=store_targets,
    )
)

COMMIT_SUITE = register_suite(
    Suite(
        name="commit",
        family="commit",
        description="MessageCommitter + store + outbox: crashes, lost responses, outbox faults, "
        "interleavings, recovery",
        fault_kinds=COMMIT_FAULT_KINDS,
        machine=_commit_machine,
        make_target=CommitTarget.of,
        coverage_targets=commit_targets,
    )
)
