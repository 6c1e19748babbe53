"""``NasagaHost``: one host process per engine, driven over JSON lines (docs/nasaga.md).

Theory of operation
-------------------
The host reads one request per stdin line and answers each with one stdout line, strictly in
order; this client sends one request and waits for its answer before the next, so every call is
synchronous and the run is deterministic. A reader thread moves stdout lines into a queue so a
call can wait with a timeout: a host that hangs past it is killed and the call raises
``TIMEOUT``; a host that exits raises ``CRASHED`` (with the tail of its stderr, which a second
thread drains so the pipe never fills); a line that is not the answer to this request raises
``PROTOCOL``; an ``error`` answer raises ``REFUSED`` with the host's closed error kind. Nothing
else leaves this module.

``kill()`` is SIGKILL (the crash fault); ``restart()`` starts a fresh process on the same
engine and DSN, which then reopens namespaces with ``mode="attach"`` and resumes from the
database. A host never outlives its client: ``close()`` (or the context manager) ends it.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import queue
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Literal

from impls.endpoints import mysql_dsn, pg_dsn

from ._binary import host_binary
from ._errors import HostFailure, NasagaHostError
from ._values import (
    CommandDelivery,
    HostInfo,
    Instance,
    Json,
    NamespaceInfo,
    OutboxRow,
    ResultDelivery,
    StartResult,
    TimerClaim,
    TimerFire,
)

Engine = Literal["postgres", "mysql"]
DEFAULT_TIMEOUT = 30.0
_EOF = object()


class _Stopped(Exception):
    """The host stopped at an armed crash point (its signal file says where)."""

    def __init__(self, where: str) -> None:
        super().__init__(where)
        self.where = where


def _default_dsn(engine: Engine) -> str:
    return pg_dsn() if engine == "postgres" else mysql_dsn()


def _pump_lines(stream: IO[str], sink: queue.Queue[object]) -> None:
    for line in stream:
        sink.put(line)
    sink.put(_EOF)


def _pump_tail(stream: IO[str], tail: collections.deque[str]) -> None:
    for line in stream:
        tail.append(line.rstrip("\n"))


class NasagaHost:
    """A running host process. Use ``NasagaHost.start(engine)``; every method may raise
    ``NasagaHostError``."""

    def __init__(self, engine: Engine, dsn: str, binary: Path, timeout: float) -> None:
        self.engine: Engine = engine
        self.dsn = dsn
        self.binary = binary
        self.timeout = timeout
        self._ids = itertools.count(1)
        self._lines: queue.Queue[object] = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=200)
        self._process: subprocess.Popen[str] | None = None
        self._dead: str | None = None
        self.info: HostInfo | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        engine: Engine,
        *,
        dsn: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        build: bool = True,
    ) -> NasagaHost:
        """Locates (building if needed) the binary, starts it, and health-checks it with ``hello``."""
        host = cls(engine, dsn or _default_dsn(engine), host_binary(build=build), timeout)
        host._spawn()
        return host

    def _spawn(self) -> None:
        self._lines = queue.Queue()
        self._stderr = collections.deque(maxlen=200)
        self._dead = None
        process = subprocess.Popen(
            [str(self.binary), "--engine", self.engine, "--dsn", self.dsn],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        assert process.stdout is not None and process.stderr is not None
        threading.Thread(target=_pump_lines, args=(process.stdout, self._lines), daemon=True).start()
        threading.Thread(target=_pump_tail, args=(process.stderr, self._stderr), daemon=True).start()
        self._process = process
        self.info = HostInfo.from_json(self.call("hello"))

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None and self._dead is None

    def kill(self) -> None:
        """SIGKILL: the crash fault. Later calls raise ``CRASHED`` until ``restart()``."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._dead = "killed by the client (SIGKILL)"

    def restart(self) -> None:
        """A fresh host on the same engine and DSN (namespaces must be reopened: ``attach``)."""
        self.kill()
        self._spawn()

    def close(self, timeout: float = 10.0) -> None:
        """Asks the host to close its pools and exit; kills it if it does not."""
        process = self._process
        if process is None:
            return
        if process.poll() is None and self._dead is None:
            with contextlib.suppress(NasagaHostError):
                self.call("shutdown", timeout=timeout)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        elif process.poll() is None:
            process.kill()
            process.wait()
        self._dead = "closed"
        self._process = None

    def __enter__(self) -> NasagaHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stderr_tail(self) -> str:
        return "\n".join(self._stderr)

    # -- the protocol ------------------------------------------------------------------------

    def call(
        self, op: str, *, timeout: float | None = None, kill_at: Path | None = None, **args: Any
    ) -> Json:
        """Sends one request and returns its ``ok`` body; raises ``NasagaHostError`` otherwise.

        ``kill_at``: the signal file of a crash point armed with ``arm_crash_point``; if the host
        creates it while this request is in flight (it stopped at the point, mid-transaction), the
        host is killed with SIGKILL at once and the call raises ``KILLED`` with the file's text.
        """
        process = self._process
        if process is None or self._dead is not None or process.poll() is not None:
            raise self._crashed(op)
        request_id = next(self._ids)
        line = json.dumps({"id": request_id, "op": op, **args}, separators=(",", ":"))
        try:
            assert process.stdin is not None
            process.stdin.write(line + "\n")
            process.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise self._crashed(op) from None
        wait = self.timeout if timeout is None else timeout
        try:
            raw = self._answer(wait, kill_at)
        except _Stopped as stopped:
            self.kill()
            self._dead = f"killed at crash point ({stopped.where})"
            raise NasagaHostError(HostFailure.KILLED, op, stopped.where) from None
        except queue.Empty:
            self.kill()
            self._dead = f"hung: no answer to {op} within {wait:.1f}s"
            raise NasagaHostError(HostFailure.TIMEOUT, op, f"no answer within {wait:.1f}s") from None
        if raw is _EOF:
            raise self._crashed(op)
        try:
            response = json.loads(str(raw))
        except json.JSONDecodeError:
            raise NasagaHostError(HostFailure.PROTOCOL, op, f"not JSON: {str(raw)[:200]!r}") from None
        if not isinstance(response, dict) or response.get("id") != request_id:
            raise NasagaHostError(HostFailure.PROTOCOL, op, f"answer is not for request {request_id}")
        if "error" in response:
            error = response["error"]
            if not isinstance(error, dict):
                raise NasagaHostError(HostFailure.PROTOCOL, op, "malformed error object")
            raise NasagaHostError(
                HostFailure.REFUSED, op, str(error.get("message", "")), code=str(error.get("kind", ""))
            )
        body = response.get("ok")
        if not isinstance(body, dict):
            raise NasagaHostError(HostFailure.PROTOCOL, op, "answer has neither ok nor error")
        return body

    def _answer(self, wait: float, kill_at: Path | None) -> object:
        if kill_at is None:
            return self._lines.get(timeout=wait)
        deadline = time.monotonic() + wait
        while True:
            try:
                return self._lines.get(timeout=min(0.01, max(deadline - time.monotonic(), 0.0)))
            except queue.Empty:
                if kill_at.exists():
                    # The host writes it aside and renames it; an older host wrote in place.
                    raise _Stopped(kill_at.read_text().strip() or kill_at.name) from None
                if time.monotonic() >= deadline:
                    raise

    def _crashed(self, op: str) -> NasagaHostError:
        process = self._process
        code = process.poll() if process is not None else None
        why = self._dead or f"host exited with status {code}"
        tail = self.stderr_tail()
        return NasagaHostError(HostFailure.CRASHED, op, why + (f"\n{tail}" if tail else ""))

    # -- typed operations ----------------------------------------------------------------------

    def open_namespace(
        self,
        namespace: str,
        owners: Sequence[str],
        *,
        mode: Literal["create", "attach"] = "create",
        config: Mapping[str, Any] | None = None,
    ) -> NamespaceInfo:
        extra: dict[str, Any] = {} if config is None else {"config": dict(config)}
        return NamespaceInfo.from_json(
            self.call("open_namespace", namespace=namespace, owners=list(owners), mode=mode, **extra)
        )

    def close_namespace(self, namespace: str, *, drop: bool = False) -> None:
        self.call("close_namespace", namespace=namespace, drop=drop)

    def publish_definition(self, namespace: str, definition: Mapping[str, Any]) -> Json:
        return self.call("publish_definition", namespace=namespace, definition=dict(definition))

    def activate_definition(self, namespace: str, tenant: str, workflow: str, version: int) -> Json:
        return self.call(
            "activate_definition", namespace=namespace, tenant=tenant, workflow=workflow, version=version
        )

    def start_saga(
        self,
        namespace: str,
        *,
        saga_id: str,
        tenant: str,
        workflow: str,
        version: int,
        business_key: str,
        now_ms: int,
        payload: Any = None,
        **extra: Any,
    ) -> StartResult:
        return StartResult.from_json(
            self.call(
                "start_saga",
                namespace=namespace,
                saga_id=saga_id,
                tenant=tenant,
                workflow=workflow,
                version=version,
                business_key=business_key,
                now_ms=now_ms,
                payload=payload,
                **extra,
            )
        )

    def read_outbox(
        self, namespace: str, role: str, *, after_id: int = 0, pending_only: bool = False
    ) -> list[OutboxRow]:
        body = self.call(
            "read_outbox", namespace=namespace, role=role, after_id=after_id, pending_only=pending_only
        )
        return [OutboxRow.from_json(row) for row in body["rows"]]

    def deliver_command(
        self,
        namespace: str,
        owner: str,
        envelope: Mapping[str, Any],
        decision: str = "succeeded",
        **extra: Any,
    ) -> CommandDelivery:
        return CommandDelivery.from_json(
            self.call(
                "deliver_command",
                namespace=namespace,
                owner=owner,
                envelope=dict(envelope),
                decision=decision,
                **extra,
            )
        )

    def deliver_result(
        self, namespace: str, envelope: Mapping[str, Any], *, now_ms: int, **extra: Any
    ) -> ResultDelivery:
        return ResultDelivery.from_json(
            self.call("deliver_result", namespace=namespace, envelope=dict(envelope), now_ms=now_ms, **extra)
        )

    def load_instance(self, namespace: str, tenant: str, saga_id: str) -> Instance | None:
        row = self.call("load_instance", namespace=namespace, tenant=tenant, saga_id=saga_id)["instance"]
        return None if row is None else Instance.from_json(row)

    def reconcile_tenant_quota(self, namespace: str, tenant: str) -> int:
        """nasaga's own reconciliation of a capped tenant's in-flight ledger, which it must have
        run before the tenant's first start (docs/nasaga-findings.md N-10); the count in flight."""
        return int(self.call("reconcile_tenant_quota", namespace=namespace, tenant=tenant)["in_flight"])

    def claim_due_timers(
        self, namespace: str, owner: str, *, now_ms: int, lease_ms: int = 60_000, limit: int = 32
    ) -> TimerClaim:
        return TimerClaim.from_json(
            self.call(
                "claim_due_timers",
                namespace=namespace,
                owner=owner,
                now_ms=now_ms,
                lease_ms=lease_ms,
                limit=limit,
            )
        )

    def fire_timer(self, namespace: str, claim: str, timer_id: str, *, now_ms: int) -> TimerFire:
        return TimerFire.from_json(
            self.call("fire_timer", namespace=namespace, claim=claim, timer_id=timer_id, now_ms=now_ms)
        )

    def read_metrics(self, namespace: str, *, now_ms: int) -> Json:
        """nasaga's latency snapshot, its rendered operational metrics and their fields, read at
        one moment (``hosts/nasaga/src/metrics.rs``)."""
        return self.call("read_metrics", namespace=namespace, now_ms=now_ms)

    def effects(self, namespace: str, owner: str) -> list[Json]:
        rows: list[Json] = self.call("read_effects", namespace=namespace, owner=owner)["effects"]
        return rows


def iter_commands(rows: Sequence[OutboxRow]) -> Iterator[OutboxRow]:
    """The command rows of an orchestrator outbox read, in outbox order."""
    return (row for row in rows if row.kind == "command")
