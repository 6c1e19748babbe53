"""Failure files: a shrunk counterexample on disk, replayable without Hypothesis.

Format ``ratchet-failure/1`` (JSON, docs/replay.md)::

    {
      "format": "ratchet-failure/1",
      "suite": "store", "backend": "memory",
      "factories": {"store": "impls.memory:open_store", "outbox": "impls.memory:open_outbox"},
      "seed": 1234, "profile": "ci", "faults": "all",
      "hypothesis_version": "6.170.17",
      "rule_id": "C-POST-01", "message": "...", "context": {...},
      "program": [{"rule": "reserve", "args": {"sender": "alice", ...}}, ...],
      "trace": ["reserve(alice/m1) -> ReserveCreated(...)", ...],
      "reproduce_blob": "@reproduce_failure('6.170.17', b'...')",
      "created_at": "2025-01-01T00:00:00Z"
    }

``program`` is the whole truth: replay runs those rule calls in order on a fresh machine.
``reproduce_blob`` only helps someone re-running the same Hypothesis version by hand.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from pathlib import Path
from typing import Any

import attrs

from conformance._machine import Step
from conformance._violations import JsonValue

FORMAT = "ratchet-failure/1"


@attrs.frozen
class FailureFile:
    suite: str
    backend: str
    factories: dict[str, str]
    seed: int | None
    profile: str
    faults: str
    hypothesis_version: str
    rule_id: str
    message: str
    context: dict[str, JsonValue]
    program: tuple[Step, ...]
    trace: tuple[str, ...] = ()
    reproduce_blob: str | None = None
    service: str | None = None  # the real service the backend was reached on, through a fault proxy
    created_at: str = attrs.field(
        factory=lambda: datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    )

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "format": FORMAT,
            "suite": self.suite,
            "backend": self.backend,
            "factories": {k: v for k, v in self.factories.items()},
            "seed": self.seed,
            "profile": self.profile,
            "faults": self.faults,
            "hypothesis_version": self.hypothesis_version,
            "rule_id": self.rule_id,
            "message": self.message,
            "context": self.context,
            "program": [{"rule": s.rule, "args": dict(s.args)} for s in self.program],
            "trace": list(self.trace),
            "reproduce_blob": self.reproduce_blob,
            "created_at": self.created_at,
            **({"service": self.service} if self.service is not None else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FailureFile:
        """Raises ``ValueError`` for a file that is not a ratchet failure file of a known format."""
        if data.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} file (format={data.get('format')!r})")
        try:
            program = tuple(Step(str(s["rule"]), dict(s["args"])) for s in data["program"])
            return cls(
                suite=str(data["suite"]),
                backend=str(data["backend"]),
                factories={str(k): str(v) for k, v in data["factories"].items()},
                seed=data.get("seed"),
                profile=str(data.get("profile", "ci")),
                faults=str(data.get("faults", "all")),
                hypothesis_version=str(data.get("hypothesis_version", "")),
                rule_id=str(data["rule_id"]),
                message=str(data["message"]),
                context=dict(data.get("context") or {}),
                program=program,
                trace=tuple(str(t) for t in data.get("trace") or ()),
                reproduce_blob=data.get("reproduce_blob"),
                service=str(data["service"]) if data.get("service") else None,
                created_at=str(data.get("created_at", "")),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"malformed failure file: {exc!r}") from exc

    @property
    def file_name(self) -> str:
        return self.file_name_with()

    def file_name_with(self, factory: str | None = None) -> str:
        """``<backend>-<suite>-<rule>[-<factory>]-<hash>.json``. ``factory`` is the primary factory's
        path for a backend that is not a registered one (``--store``): two custom stores that break
        the same rule with the same program must not overwrite each other's file."""
        digest = hashlib.sha256(
            json.dumps([[s.rule, s.args] for s in self.program], sort_keys=True).encode()
        ).hexdigest()[:10]
        tag = f"-{_safe(factory.replace(':', '.'))}" if factory else ""
        return f"{_safe(self.backend)}-{self.suite}-{self.rule_id}{tag}-{digest}.json"

    def write(self, directory: Path, *, factory: str | None = None) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / self.file_name_with(factory)
        path.write_text(json.dumps(self.to_json(), indent=2, sort_keys=False) + "\n", encoding="utf-8")
        return path

    @classmethod
    def read(cls, path: Path) -> FailureFile:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"cannot read failure file {path}: {exc}") from exc
        if not isinstance(data, dict):
            raise ValueError(f"{path} does not hold a JSON object")
        return cls.from_json(data)

    def render_program(self) -> str:
        return "\n".join(f"  {i + 1:2d}. {s.render()}" for i, s in enumerate(self.program))


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:80]
