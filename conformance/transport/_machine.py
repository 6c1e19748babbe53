"""The transport suite's machine: stream (and gRPC) rules beside the model, checked after every step.

``after_step`` reads the stream server raw (``XRANGE``, ``XINFO GROUPS``, ``XPENDING``, the
dead-letter stream) and the participants' databases, and holds them against the model:

- the entries still on the stream are the model's: nothing a group needed was trimmed (S-STREAM-07);
- each group's last-delivered id and pending list (consumer, delivery count) are the model's
  (S-STREAM-01..03); an entry gone from the pending list that the model still holds was
  acknowledged without its unit's verdict (S-STREAM-04);
- the dead letters are the model's, each once, and none of them is still pending (S-STREAM-06);
- every acknowledged genuine entry's command is claimed in the participant's inbox (committed or
  absorbed) or dead-lettered by the runtime (S-STREAM-04, S-DLV-01);
- no planted (unsigned, forged, old-key) command ever reached a handler or an inbox (S-STREAM-05,
  S-GRPC-03);
- business facts and result outboxes are the model's, each effect once (S-PART-01, S-PART-03).

At quiescence faults stop: dead consumers' entries are claimed, everything is processed and read by
both groups, and a safe trim must then empty each stream.
"""

from __future__ import annotations

from typing import Any

from conformance._violations import Violation
from conformance.saga import _world as w
from conformance.saga._base import unwrapped
from conformance.transport._base import GROUP_AUDIT, show
from conformance.transport._grpc_rules import GrpcRules
from conformance.transport._stream_restart import StreamRestart
from model import saga as m


class TransportMachine(StreamRestart, GrpcRules):
    def after_step(self) -> None:
        for owner in w.OWNERS:
            self._check_stream(owner)
            self._check_participant(owner)
        self._check_grpc()

    def _check_stream(self, owner: str) -> None:
        names, model, ordinal = self.names[owner], self.streams[owner], self.ordinal[owner]
        present = [ordinal.get(i.decode(), -1) for i, _ in self._raw(self.client.xrange(names.stream))]
        expected = [e.entry_id for e in model.entries]
        if present != expected:
            missing = sorted(set(expected) - set(present))
            raise Violation(
                "S-STREAM-07" if missing else "S-STREAM-01",
                "entries a group still needed are gone from the stream"
                if missing
                else "the stream's entries differ",
                {"owner": owner, "expected": show(expected), "actual": show(present)},
            )
        letters = []
        for _, fields in self._raw(self.client.xrange(names.dead_letters)):
            source = ordinal.get(fields[b"source"].decode(), -1)
            letters.append((fields[b"group"].decode(), source, fields[b"reason"].decode()))
        want = [(d.group, d.entry_id, d.reason) for d in model.dead_letters]
        if letters != want:
            raise Violation(
                "S-STREAM-06",
                "the dead letters differ from the model",
                {"owner": owner, "expected": show(want), "actual": show(letters)},
            )
        infos = {self._text(i["name"]): i for i in self._raw(self.client.xinfo_groups(names.stream))}
        for group, state in model.groups.items():
            info = infos.get(group)
            last = self._text(info["last-delivered-id"]) if info else "0-0"
            if (0 if last == "0-0" else ordinal.get(last, -1)) != state.last_delivered:
                raise Violation(
                    "S-STREAM-01",
                    "a group's last-delivered id differs from the model",
                    {"group": group, "actual": last},
                )
            rows = self._raw(self.client.xpending_range(names.stream, group, "-", "+", 1000))
            real = {
                ordinal.get(self._text(r["message_id"]), -1): (
                    self._text(r["consumer"]),
                    int(r["times_delivered"]),
                )
                for r in rows
            }
            held = {k: (p.consumer, p.deliveries) for k, p in state.pending.items()}
            lettered = {d.entry_id for d in model.dead_letters if d.group == group} | {
                e for e in real if any(letter[:2] == (group, e) for letter in letters)
            }
            if set(real) & lettered:
                raise Violation(
                    "S-STREAM-06",
                    "a dead-lettered entry is still pending",
                    {"group": group, "entries": show(sorted(set(real) & lettered))},
                )
            if real != held:
                lost = sorted(set(held) - set(real))
                raise Violation(
                    "S-STREAM-04" if lost else "S-STREAM-02",
                    "entries were acknowledged without their unit's verdict"
                    if lost
                    else "a pending list differs from the model",
                    {"group": group, "expected": show(held), "actual": show(real)},
                )
        mine = model.groups[owner]
        for entry_id, command in self.commands[owner].items():
            done = entry_id <= mine.last_delivered and entry_id not in mine.pending
            dead = any(d.entry_id == entry_id for d in model.dead_letters if d.group == owner)
            if done and not dead and not self._claimed(owner, command.command_id):
                raise Violation(
                    "S-STREAM-04",
                    "an entry was acknowledged before its unit committed",
                    {"owner": owner, "entry": entry_id, "command_id": command.command_id},
                )

    @staticmethod
    def _raw(value: Any) -> Any:
        return value or []

    @staticmethod
    def _text(value: Any) -> str:
        return value.decode() if isinstance(value, bytes) else str(value)

    def at_quiescence(self) -> None:
        """Faults stop; every entry ends acknowledged or dead-lettered in both groups, and a safe
        trim empties the stream (S-STREAM-02, S-STREAM-06, S-STREAM-07)."""
        self.killing.clear()
        for _ in range(6):
            self._publish()
            for owner in w.OWNERS:
                self._drain(owner)
            self._quiesce_grpc()
            if not m.pending_commands(self.model):
                break
        for owner in w.OWNERS:
            stream = self.names[owner].stream
            while m.backlog(self.streams[owner], GROUP_AUDIT) != m.Backlog(0, 0):
                unwrapped(type(self).audit)(self, owner=owner, count=50)
            unwrapped(type(self).trim)(self, owner=owner)
            if self.client.xlen(stream) != 0 or self.streams[owner].entries:
                raise Violation(
                    "S-STREAM-07",
                    "a stream every group finished was not trimmed empty",
                    {"owner": owner, "left": int(self.client.xlen(stream))},
                )
        self.after_step()

    def _drain(self, owner: str) -> None:
        process = unwrapped(type(self)._process)
        for _ in range(20):
            for consumer in ("c1", "c2"):
                while self.in_hand[(owner, consumer)]:
                    process(self, owner, consumer, m.Decision.SUCCEED, "committed", False)
            group = self.streams[owner].groups[owner]
            if not group.pending and group.last_delivered == self.streams[owner].last_id:
                return
            unwrapped(type(self).claim)(self, owner=owner, consumer="c1", expired=True)
            unwrapped(type(self).fetch)(self, owner=owner, consumer="c1", count=50)
        raise Violation("S-STREAM-02", "entries stayed pending with faults stopped", {"owner": owner})
