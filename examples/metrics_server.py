"""A saga runtime with metrics on, scraped over HTTP (docs/observability.md).

The orchestrator runs on the in-memory backend and its participant on SQLite, in one process with
one metrics source (S-OBS-04). Two sagas run: one completes, one's first attempt times out and its
timer fires 250 ms late. Then prometheus-client's HTTP server serves the process metrics on
``--port``, and ``--port + 1`` serves them with the orchestrator backend's facts, read through the
port at scrape time (S-OBS-06)::

    .venv/bin/python examples/metrics_server.py --port 9464 --seconds 30 &
    curl -s localhost:9464/metrics | grep nasaga_stage_duration_seconds_count
    curl -s localhost:9465/ | grep nasaga_instances
"""

from __future__ import annotations

import argparse
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Thread

from prometheus_client import start_http_server

from impls.saga import Orchestrator, Participant, process_metrics, with_facts
from impls.saga.memory import open_memory_saga_backend
from impls.sql import open_sqlite_saga_backend
from model.saga import (
    JSON_CONTRACT,
    ChangeLifecycle,
    Decision,
    DefinitionArtifact,
    DefinitionKey,
    LifecycleAction,
    ParticipantConfig,
    StartSaga,
    StepBinding,
    StepDefinition,
    TimerClaimed,
    UncertainPolicy,
    definition_digest,
)

KEY = DefinitionKey("acme", "order", 1)
ARTIFACT = DefinitionArtifact(
    KEY, (StepDefinition("reserve", "p0", "reserve", None, UncertainPolicy.RESOLVE, 100, 2, 2),)
)


def run_some_sagas() -> Orchestrator:
    orchestrator = Orchestrator(open_memory_saga_backend("orch"), frozenset({"p0"}))
    digest = definition_digest(ARTIFACT)
    binding = StepBinding(KEY, digest, 0, JSON_CONTRACT)
    participant = Participant(
        open_sqlite_saga_backend("p0"),
        ParticipantConfig("p0", frozenset({"orchestrator"}), frozenset({binding})),
    )
    orchestrator.publish_definition(ARTIFACT, digest)
    orchestrator.change_lifecycle(ChangeLifecycle(KEY, LifecycleAction.ACTIVATE), 0)
    orchestrator.start_saga(StartSaga(KEY, "k1", json_payload=b'{"qty":1}'), 0)
    orchestrator.start_saga(StartSaga(KEY, "k2", json_payload=b'{"qty":2}'), 0)
    first, _second = orchestrator.pending_commands()
    for command in orchestrator.pending_commands():
        orchestrator.mark_command_published(command.command_id)
    # The first saga's command is delivered twice (the copy is absorbed) and answered; the second
    # is lost on the way, so its timeout timer fires, 250 ms after it was due.
    for _ in range(2):
        participant.handle_command(first, "orchestrator", Decision.SUCCEED)
    for result in participant.pending_results():
        orchestrator.handle_result(result, "p0", 50)
    for timer in orchestrator.due_timers(350):
        claim = orchestrator.claim_timer(timer.timer_id, "worker", 350, 1000)
        if isinstance(claim, TimerClaimed):
            orchestrator.fire_timer(timer.timer_id, claim.token, 350)
    return orchestrator


def serve_facts(orchestrator: Orchestrator, port: int) -> ThreadingHTTPServer:
    class Facts(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            _, text = with_facts(process_metrics(), orchestrator.backend)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(text)

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Facts)
    Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=9464)
    parser.add_argument("--seconds", type=float, default=30.0, help="serve this long, then exit")
    args = parser.parse_args()
    orchestrator = run_some_sagas()
    start_http_server(args.port, addr="127.0.0.1")  # /metrics: the process source alone
    serve_facts(orchestrator, args.port + 1)  # any path: process source plus the backend's facts
    print(f"serving on 127.0.0.1:{args.port} (process) and :{args.port + 1} (with facts)", flush=True)
    time.sleep(args.seconds)


if __name__ == "__main__":
    main()
