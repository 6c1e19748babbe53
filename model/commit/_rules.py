"""The commit contract's rule IDs and their statements (docs/commit-contract.md states the same).

Harness reports print a violated rule's statement from here; a test keeps the IDs and the text in
step with the contract document.
"""

from __future__ import annotations

from collections.abc import Mapping

RULES: Mapping[str, str] = {
    "C-PRE-01": (
        "An invalid `ClientMessageId` makes `commit` fail with `CommitError::InvalidClientMessageId`, "
        "and nothing is written. *Ratchet decision:* a valid id is 1–64 characters of "
        "`[A-Za-z0-9._:-]`; a store given an invalid one answers `INVALID_ARGUMENT`."
    ),
    "C-PRE-02": (
        "`FrozenDeliveryInput` and the complete canonical `MessageRecord` are fixed before `reserve`. "
        "Neither recovery nor a retry may replace them with the current membership or a payload the "
        "client uploads again: the first reserve's intent wins."
    ),
    "C-PRE-03": (
        "`load_commit_for_request` (and `reserve`) compare the durable canonical request identity. "
        "The same (tenant, sender, cmid) with a different device, conversation, content, mention set "
        "or reply is a conflict — never a replay of the old ACK."
    ),
    "C-PRE-04": ("`put_record` writes `CommitIntent.record` and nothing else."),
    "C-PRE-05": (
        "`history_page` first authorizes `query.actor` as a member of the conversation. *Ratchet "
        "decision:* a malformed query is `INVALID_ARGUMENT` before authorization; a non-member is "
        "`NOT_A_MEMBER` before anything is read."
    ),
    "C-PRE-06": (
        "`readiness` must really reach the production dependencies; an early return, a zero-argument "
        "shortcut, or a lazily built client/producer is no evidence of readiness."
    ),
    "C-PRE-07": (
        "The durable request identity may be stored as a domain-separated digest "
        "(`AuthenticatedSend::reserve_identity_digest`, header `QIMD`); an identity written before "
        "the upgrade (full form, header `QIMC`) is compared byte for byte. *Ratchet decision:* `QIMD` "
        '+ SHA-256 over `b"QIMD\\x00"` + the canonical encoding, a sequence of 4-byte big-endian '
        "length-prefixed fields (tenant, sender, cmid, device, conversation, type, custom type with a "
        "presence byte, body, mention count, each mention sorted, reply with a presence byte)."
    ),
    "C-PRE-08": (
        "The gateway authenticated the sender, but the committer still performs sender membership "
        "admission, content checks and quota checks before `reserve`. *Ratchet decision:* a retry of "
        "a request that is already reserved is not admitted again (it was admitted when reserved, and "
        "C-PRE-02 freezes that decision)."
    ),
    "C-PRE-09": (
        "A committed message only promises the coordinates needed to replay `SEND_ACK`: a `reserve` "
        "hit returns `ReserveResult::Committed`; `load_commit*` return `LoadedCommit::Committed`."
    ),
    "C-PRE-10": (
        "A backend may drop the record body on entering `COMMITTED` (it is then in the conversation "
        "history and the outbox). Redis compacts the commit hash to identity digest + coordinates + "
        "publication (listpack; the seed measured 2,640 B → 552 B for a 100-byte body; Ratchet's "
        "target is ≤ 256 B), and still reads the pre-upgrade full format."
    ),
    "C-POST-01": (
        "The first and every repeated `reserve` of one `CommitKey` return the same coordinates, and a "
        "repeat consumes no new message or conversation sequence number."
    ),
    "C-POST-02": (
        "The intent that `reserve` persists holds, on its own, every message fact the later steps "
        "need; a client that never retries cannot leave an unrecoverable `RESERVED` "
        "(`scan_recoverable_commits` finds it). *Ratchet decision:* Ratchet's `CommitRecovery` sweeps "
        "the intents accepted before now minus its minimum age, 60 000 ms unless configured."
    ),
    "C-POST-03": (
        "`put_record` and `mark_outbox_published` are safe to retry and converge to the same value; "
        "`mark_committed` returns a `CommittedMessage` only when both the record and the publication "
        "have recoverable evidence."
    ),
    "C-POST-04": (
        "`mark_published_and_committed` accepts a durable `OutboxPublication` and on success returns "
        "the `CommittedMessage` of that frozen intent."
    ),
    "C-POST-05": (
        "Memory and Redis perform Recorded + publication → Committed as one atomic backend "
        "transition: a same-value retry replays the original ACK; a different publication, a missing "
        "record or a wrong prior stage leave no partial write; success removes the recovery candidate "
        "and registers the history expiry (`accepted_at_ms + delivery.retention_ms`). *Ratchet "
        "decision:* the retention is the one in force when the committer froze the delivery: its "
        "configured `retention_ms`, else its documented default (Ratchet's `MessageCommitter`: 30 "
        "days, 2 592 000 000 ms)."
    ),
    "C-POST-06": (
        "A backend without that atomic capability uses the default: `mark_outbox_published` then "
        "`mark_committed`. If the second step fails, `OUTBOXED` and its publication stay as a "
        "recoverable fact, and `resume`'s Outboxed branch calls `mark_committed` later. Scylla uses "
        "this default two-step conditional write and claims neither a single LWT nor cross-table "
        "atomicity. *Ratchet decision:* such a store may register the history expiry due at commit "
        "before OUTBOXED → COMMITTED, so that no success lacks it (C-POST-05); a `mark_committed` "
        "that fails between the two leaves OUTBOXED with that very expiry registered, which is legal."
    ),
    "C-POST-07": (
        "In the Recorded branch the committer obtains the outbox's durable ack, passes fault point "
        "`M-COMMIT-04`, then calls `mark_published_and_committed`; a durable Outboxed only ever calls "
        "`mark_committed`."
    ),
    "C-POST-08": (
        "When a response is lost or another worker advanced the commit concurrently, the committer "
        "re-reads the fact source and converges forward only."
    ),
    "C-POST-09": (
        "`commit` or `resume` that meets an intermediate stage continues from the durable state; "
        "meeting `COMMITTED` it only replays the original `CommittedMessage`. `CommitRecovery` uses "
        "the same `resume` semantics."
    ),
    "C-POST-10": (
        "A successful `CommittedMessage` is the one and only basis for `SEND_ACK`; it does not mean "
        "mailbox materialization, push or read."
    ),
    "C-POST-11": (
        "A history page keeps `MessageType`, `custom_type`, the body (reference), direction, anchor, "
        "byte limit and availability bounds; a hole in history is not to be read as loss. *Ratchet "
        "decision:* a message is readable from `RECORDED` on until its registered expiry (by the "
        "reader's `as_of_ms`); `available_through` is the highest sequence ever allocated, so a hole "
        "(in flight or expired) is visible as such; the first entry is returned even over "
        "`max_bytes`. A store without the atomic step (C-POST-06) may write a reserved intent's "
        "history entry before RESERVED -> RECORDED, so that no RECORDED commit lacks it; a "
        "`put_record` that fails between the two writes leaves the commit RESERVED with that entry "
        "readable, which is legal: the entry is fixed at reserve (`put_record` 只能写 "
        "`CommitIntent.record`, and 可安全重试并收敛为同一值), so it is the one the retry or recovery "
        "records (decided 4 December on a random reach seed of cql/store)."
    ),
    "C-POST-12": (
        "*(Ratchet decision, issue 19 item 7)* A `drop_namespace` that returns without an error has "
        "removed everything of its namespace: the namespace opened again reads as never written (no "
        "commit loads, nothing is recoverable, no history, an outbox lists nothing). `namespaces` "
        "names every namespace that holds data, by the name it was opened with, and no dropped one. "
        "A drop that fails with `MessageStoreError` (an outage) is no verdict: its leftovers are "
        "for `conformance clean`."
    ),
    "C-ERR-01": (
        "The store boundary exposes only `MessageStoreError`; no backend conditional-write error, "
        "key, table or script text crosses it."
    ),
    "C-ERR-02": ("The commit boundary exposes only `CommitError`."),
    "C-ERR-03": (
        "`Recoverable { key }` means the work can be continued with the same idempotency key; it is "
        "never dressed up as a successful ACK."
    ),
    "C-ERR-04": (
        "*(Ratchet, from the project brief)* Bad input gets a clear, typed error and loses nothing: "
        "the state after a refused call equals the state before it. *Ratchet decision:* every "
        "integer of the contract — reply id, sequence numbers and anchors, `accepted_at_ms`, `as_of_ms`, "
        "`retention_ms`, the expiry `accepted_at_ms + retention_ms`, membership version — is a signed "
        "64-bit value: 2**63-1 is legal, 2**63 is `INVALID_ARGUMENT` (`model.commit.MAX_INT64`). A "
        "committer or recovery sweeper configured out of range (`retention_ms` or `max_attempts` below "
        "1; `min_age_ms` below 0, `batch` outside 1..1000, `max_batches` below 1) refuses at "
        "construction with `ValueError`; the edges themselves are legal. A store's documented "
        "`endpoint` options are configuration too: a value outside the documented range is refused "
        "with a `MessageStoreError` (by the factory or the store's first call), a value at its edge "
        "opens a store that serves (the CQL store's `replication_factor`: a whole number >= 1)."
    ),
}
