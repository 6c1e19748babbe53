"""Reproductions of the nasaga findings, N-01 onward (docs/nasaga-findings.md).

Each test drives the real nasaga runtime through ``hosts/nasaga`` and asserts what nasaga
*actually* does today, precisely: the day a release changes the behaviour, its test fails and the
finding's decision must be revisited (never loosened to make the test pass). Test names carry the
finding ID; the document's entries name their test. One PostgreSQL host serves the module, one
namespace per test (dropped afterwards); N-02 starts its own MySQL-engine host against MariaDB, and
N-23 asks MariaDB directly.

To add a finding: write ``test_nXX_<what>`` below the last one, with a docstring stating the
divergence in one sentence, and add the entry to docs/nasaga-findings.md.
"""

from __future__ import annotations

import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pymysql
import pytest

from impls.endpoints import mysql_params, pg_dsn
from impls.nasaga import HostFailure, NasagaHost, NasagaHostError, OutboxRow

pytestmark = pytest.mark.service("postgres")

TENANT = "t1"
WORKFLOW = "order"
NOW = 1_000_000
TIMEOUT_MS = 5_000
DUE = NOW + TIMEOUT_MS


def _step(name: str, owner: str, **overrides: Any) -> dict[str, Any]:
    step: dict[str, Any] = {
        "name": name,
        "owner": owner,
        "compensation": "compensable",
        "cancel_mode": "local-fenceable",
        "resolution": "forbidden",
        "timeout_ms": TIMEOUT_MS,
        "timeout_policy": "accept-late-success",
    }
    step.update(overrides)
    return step


def _definition(*steps: dict[str, Any], workflow: str = WORKFLOW) -> dict[str, Any]:
    return {"workflow": workflow, "version": 1, "tenant": TENANT, "steps": list(steps)}


ORDER = _definition(_step("reserve", "p0"), _step("charge", "p1"))
# The first step cannot be cancelled locally: a timeout goes to resolution, not to a cancel.
RESOLVE_FIRST = _definition(
    _step("reserve", "p0", cancel_mode="resolve-only", resolution={"mode": "poll", "budget_ms": 60_000}),
    _step("charge", "p1"),
)


def _need_host_binary() -> None:
    if os.environ.get("RATCHET_NASAGA_HOST") or shutil.which("cargo"):
        return
    message = "the nasaga host needs cargo (or RATCHET_NASAGA_HOST naming a built binary)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true: {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="module")
def host() -> Iterator[NasagaHost]:
    _need_host_binary()
    started = NasagaHost.start("postgres", timeout=60.0)
    try:
        yield started
    finally:
        started.close()


World = Callable[..., str]


@pytest.fixture
def world(host: NasagaHost) -> Iterator[World]:
    """``world(definition=ORDER, config=None, activate=True, **activate_args)`` → a fresh
    namespace with ``definition`` published and (by default) activated; dropped afterwards."""
    opened: list[str] = []

    def open_world(
        definition: Mapping[str, Any] | None = ORDER,
        *,
        config: Mapping[str, Any] | None = None,
        activate: bool = True,
        **activate_args: Any,
    ) -> str:
        name = f"f_{uuid.uuid4().hex[:12]}"
        host.open_namespace(name, ["p0", "p1"], config=config)
        opened.append(name)
        if definition is not None:
            host.publish_definition(name, definition)
            if activate:
                host.call(
                    "activate_definition",
                    namespace=name,
                    tenant=TENANT,
                    workflow=definition["workflow"],
                    version=definition["version"],
                    **activate_args,
                )
        return name

    yield open_world
    for name in opened:
        if host.alive():
            host.close_namespace(name, drop=True)


# -- small drivers ---------------------------------------------------------------------------


def _refused(call: Callable[[], object]) -> NasagaHostError:
    with pytest.raises(NasagaHostError) as refused:
        call()
    assert refused.value.failure is HostFailure.REFUSED, refused.value
    return refused.value


def _start(
    host: NasagaHost, ns: str, saga_id: str, *, business_key: str | None = None, payload: Any = None
) -> Any:
    return host.start_saga(
        ns,
        saga_id=saga_id,
        tenant=TENANT,
        workflow=WORKFLOW,
        version=1,
        business_key=business_key or f"bk-{saga_id}",
        now_ms=NOW,
        payload={"order": saga_id} if payload is None else payload,
    )


def _rows(host: NasagaHost, ns: str, role: str, saga_id: str) -> list[OutboxRow]:
    return [row for row in host.read_outbox(ns, role) if row.saga_id == saga_id]


def _last(host: NasagaHost, ns: str, role: str, saga_id: str) -> OutboxRow:
    rows = _rows(host, ns, role, saga_id)
    assert rows, f"no outbox row of {role} for {saga_id}"
    return rows[-1]


def _commands(host: NasagaHost, ns: str, saga_id: str) -> list[tuple[str | None, str | None, int | None]]:
    return [(r.step, r.phase, r.attempt) for r in _rows(host, ns, "orchestrator", saga_id)]


def _answer(host: NasagaHost, ns: str, saga_id: str, owner: str, decision: str, now_ms: int) -> str | None:
    """Delivers the saga's newest command to ``owner`` and its result back; the new status."""
    command = _last(host, ns, "orchestrator", saga_id)
    delivered = host.deliver_command(ns, owner, command.envelope, decision)
    assert delivered.handled in ("executed", "replayed"), delivered
    result = _last(host, ns, owner, saga_id)
    assert result.command_id == command.command_id
    applied = host.deliver_result(ns, result.envelope, now_ms=now_ms)
    assert applied.outcome == "applied"
    return applied.status


def _fire_step_timeout(host: NasagaHost, ns: str, saga_id: str, now_ms: int = DUE) -> Any:
    claim = host.claim_due_timers(ns, "w1", now_ms=now_ms)
    [timer] = [t for t in claim.timers if t.saga_id == saga_id]
    return host.fire_timer(ns, claim.claim, timer.timer_id, now_ms=now_ms)


def _instance(host: NasagaHost, ns: str, saga_id: str) -> Any:
    instance = host.load_instance(ns, TENANT, saga_id)
    assert instance is not None
    return instance


def _transitions(host: NasagaHost, ns: str, saga_id: str) -> list[tuple[str, str]]:
    trail = host.call("load_audit_trail", namespace=ns, tenant=TENANT, saga_id=saga_id)
    return [(t["from"], t["to"]) for t in trail["transitions"]]


def _manage(host: NasagaHost, ns: str, action: str, saga_id: str, operation_id: str, **extra: Any) -> Any:
    return host.call(
        "manage",
        namespace=ns,
        action=action,
        tenant=TENANT,
        saga_id=saga_id,
        operation_id=operation_id,
        **extra,
    )


def _sql(ns: str, statement: str, *params: object) -> list[tuple[Any, ...]] | int:
    """Direct SQL on the namespace's orchestrator schema: only to stand in for an operator task
    nasaga leaves to the deployment (quota reconciliation, a data retention process)."""
    import psycopg

    with psycopg.connect(pg_dsn(), autocommit=True) as connection:
        connection.execute(f'SET search_path TO "nsg_{ns}_orch"')
        cursor = connection.execute(statement, params)  # type: ignore[arg-type]
        return cursor.fetchall() if cursor.description else cursor.rowcount


def _crate_source(host: NasagaHost, crate: str, relative: str) -> str:
    """A file of the crate version the host linked (``hello``), from the cargo registry."""
    assert host.info is not None
    version = host.info.crates[crate]
    registry = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo")) / "registry" / "src"
    found = sorted(registry.glob(f"*/{crate}-{version}/{relative}"))
    if not found:
        pytest.skip(f"{crate} {version} sources are not in the cargo registry")
    return found[0].read_text(encoding="utf-8")


# -- N-01 .. N-13 ----------------------------------------------------------------------------


def test_n01_manual_close_always_fails_on_postgres(host: NasagaHost, world: World) -> None:
    """N-01: manual_close is refused with a retryable backend error and rolls back, so
    MANUALLY_CLOSED is unreachable on PostgreSQL (EXISTS decoded as an integer)."""
    ns = world(config={"enable_manual_close": True})
    _start(host, ns, "s1")
    assert _answer(host, ns, "s1", "p0", "halted", NOW + 10) == "MANUAL_INTERVENTION"
    for attempt in range(2):  # the "retryable" error is permanent: a retry fails the same way
        failed = _refused(lambda: _manage(host, ns, "manual_close", "s1", "close-1"))
        assert failed.code == "backend.retryable", (attempt, failed)
        assert "database operation failed" in failed.message
    instance = _instance(host, ns, "s1")
    assert (instance.status, instance.version, instance.failure_code) == (
        "MANUAL_INTERVENTION",
        2,
        "step_halted",
    )
    trail = host.call("load_audit_trail", namespace=ns, tenant=TENANT, saga_id="s1")
    assert trail["management_operations"] == []  # the audit row went with the rollback
    assert _transitions(host, ns, "s1") == [("NONE", "RUNNING"), ("RUNNING", "MANUAL_INTERVENTION")]


@pytest.mark.service("mariadb")
def test_n02_nasaga_mysql_refuses_the_schema_it_created_on_mariadb() -> None:
    """N-02: ensure_orchestrator_schema_for creates the tables on MariaDB 10.11 and then refuses
    them (MySQL 8 spelling ``bigint unsigned`` expected, MariaDB reports ``bigint(20) unsigned``)."""
    _need_host_binary()
    with NasagaHost.start("mysql") as mysql:
        assert mysql.info is not None and "MariaDB" in mysql.info.server_version
        refused = _refused(lambda: mysql.open_namespace(f"f_{uuid.uuid4().hex[:12]}", ["p0"]))
        if refused.code == "database.access_denied":  # an environment precondition, not a verdict
            message = "the ratchet user lacks GRANT ALL ON `ratchet\\_nsg\\_%`.* (docs/nasaga.md, MariaDB)"
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail(f"CI=true: {message}", pytrace=False)
            pytest.skip(message)
        assert refused.code == "store.schema_contract_invalid"
        assert "Saga audit table contract is invalid" in refused.message


# The five tables nasaga-runtime 2.0.2 creates only in its private catalog bootstrap
# (src/catalog.rs:21), which its orchestrator needs from the first catalog read on.
CATALOG_TABLES = {
    "nasa_saga_catalog_state",
    "nasa_saga_definition_catalog",
    "nasa_saga_capability_registry",
    "nasa_saga_catalog_audit",
    "nasa_saga_catalog_replica",
}


Steps = list[tuple[str, str | None, str | None]]


def _schema_steps(mysql: NasagaHost, role: str) -> tuple[Steps, set[str], list[str]]:
    """The host's ``schema_steps``: each call's (path, error kind or None, message or None)."""
    try:
        report = mysql.call("schema_steps", namespace=f"f_{uuid.uuid4().hex[:12]}", role=role)
    except NasagaHostError as refused:
        if refused.code != "database.access_denied":
            raise
        message = "the ratchet user lacks GRANT ALL ON `ratchet\\_nsg\\_%`.* (docs/nasaga.md, MariaDB)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true: {message}", pytrace=False)
        pytest.skip(message)
    steps = [(step["call"], step.get("code"), step.get("message")) for step in report["steps"]]
    return steps, set(report["tables"]), report["triggers"]


@pytest.mark.service("mariadb")
def test_n02_the_wrappers_public_schema_calls_one_by_one_leave_the_orchestrator_without_a_catalog() -> None:
    """N-02: called one by one, the public store schema calls the MySQL wrapper makes pass on
    MariaDB except the saga store's audit check; the wrapper's catalog, created only after that check
    and after its own HTTP-replay check (which MariaDB fails too), never exists, nor do the audit
    triggers; the participant's stores pass and only the HTTP-replay check refuses."""
    _need_host_binary()
    with NasagaHost.start("mysql") as mysql:
        orchestrator, tables, triggers = _schema_steps(mysql, "orchestrator")
        audit_refused = (
            "store.schema_contract_invalid",
            "saga store error: Saga audit table contract is invalid",
        )
        assert orchestrator == [
            ("MySqlSagaStore::ensure_schema_on_connection", *audit_refused),
            ("MySqlInbox::ensure_schema_on_connection", None, None),
            ("MySqlOutbox::ensure_schema_on_connection", None, None),
            ("nasaga_runtime::ensure_orchestrator_schema_for", *audit_refused),
        ]
        assert {"saga_instance", "saga_audit_event", "inbox_message", "outbox_event"} <= tables
        assert not tables & CATALOG_TABLES
        assert "nasa_saga_http_replay_claim" not in tables
        assert triggers == []  # nasaga_audit_*: made after the refused check (my/schema.rs:606-611)
        participant, tables, _ = _schema_steps(mysql, "participant")
        replay_refused = ("store.schema_contract_invalid", "Saga HTTP replay schema contract is invalid")
        assert participant == [
            ("MySqlSagaStore::ensure_participant_schema_on_connection", None, None),
            ("MySqlInbox::ensure_schema_on_connection", None, None),
            ("MySqlOutbox::ensure_schema_on_connection", None, None),
            ("nasaga_runtime::ensure_participant_schema_for", *replay_refused),
        ]
        assert {"saga_participant_step", "nasa_saga_http_replay_claim"} <= tables


@pytest.mark.service("mariadb")
def test_n23_nasaga_mysql_locks_with_for_share_which_mariadb_does_not_parse(host: NasagaHost) -> None:
    """N-23: nasaga-mysql's replayed start (``create_instance`` after a unique violation) and its
    quota reconciliation lock rows with MySQL 8's ``FOR SHARE``; MariaDB 10.11 refuses that clause
    as a syntax error (its spelling of the same lock is ``LOCK IN SHARE MODE``)."""
    instance = _crate_source(host, "nasaga-mysql", "src/instance.rs")
    create = instance[instance.index("pub async fn create_instance") :]
    create = create[: create.index("\n    pub async fn ")]
    assert create.count('.push(" FOR SHARE")') == 2  # by saga id, then by business key
    assert "FOR SHARE NOWAIT" in _crate_source(host, "nasaga-mysql", "src/quota.rs")
    params = mysql_params()
    connection = pymysql.connect(
        host=params.host,
        port=params.port,
        user=params.user,
        password=params.password,
        database=params.database,
    )
    try:
        with connection.cursor() as cursor:
            assert "MariaDB" in str(connection.get_server_info())
            cursor.execute("CREATE TEMPORARY TABLE n23_probe (a INT)")
            for clause in ("FOR SHARE", "FOR SHARE NOWAIT"):
                with pytest.raises(pymysql.err.ProgrammingError) as refused:
                    cursor.execute(f"SELECT a FROM n23_probe WHERE a = 1 {clause}")
                assert refused.value.args[0] == 1064  # ER_PARSE_ERROR
            cursor.execute("SELECT a FROM n23_probe WHERE a = 1 LOCK IN SHARE MODE NOWAIT")
            assert cursor.fetchall() == ()
    finally:
        connection.close()


def test_n03_a_timeout_cancels_the_execute_and_never_redispatches_it(host: NasagaHost, world: World) -> None:
    """N-03: a step timeout issues a cancel barrier (CANCELLING), not execute attempt 2; the
    confirmed cancel fences the gate, so the late execute is suppressed and the saga compensates."""
    ns = world()
    _start(host, ns, "s1")
    execute = _last(host, ns, "orchestrator", "s1")
    fired = _fire_step_timeout(host, ns, "s1")
    assert (fired.outcome, fired.status) == ("applied", "CANCELLING")
    assert _commands(host, ns, "s1") == [("reserve", "execute", 1), ("reserve", "cancel", 1)]
    attempts = host.call("load_attempts", namespace=ns, saga_id="s1", step="reserve")["attempts"]
    assert sorted((a["phase"], a["attempt"], a["status"]) for a in attempts) == [
        ("cancel", 1, "STARTED"),
        ("execute", 1, "STARTED"),
    ]
    cancel = _last(host, ns, "orchestrator", "s1")
    answered = host.deliver_command(ns, "p0", cancel.envelope, "cancel_confirmed")
    assert (answered.handled, answered.status, answered.handler_calls) == ("executed", "CANCEL_CONFIRMED", 0)
    result = _last(host, ns, "p0", "s1")
    assert host.deliver_result(ns, result.envelope, now_ms=DUE + 1).status == "COMPENSATED"
    late = host.deliver_command(ns, "p0", execute.envelope, "succeeded")
    assert (late.handled, late.handler_calls) == ("suppressed", 0)
    assert host.effects(ns, "p0") == []
    assert _commands(host, ns, "s1") == [("reserve", "execute", 1), ("reserve", "cancel", 1)]
    assert _transitions(host, ns, "s1") == [
        ("NONE", "RUNNING"),
        ("RUNNING", "CANCELLING"),
        ("CANCELLING", "COMPENSATING"),  # an empty plan: nothing before the cancelled step
        ("COMPENSATING", "COMPENSATED"),
    ]


def test_n03_unanswered_cancels_exhaust_the_orchestrator_budget_into_manual(
    host: NasagaHost, world: World
) -> None:
    """N-03: the only attempt budget is the orchestrator's cancel_max_attempts; when it runs out the
    saga goes to MANUAL_INTERVENTION, still without a second execute."""
    ns = world(config={"cancel_max_attempts": 2})
    _start(host, ns, "s1")
    assert _fire_step_timeout(host, ns, "s1").status == "CANCELLING"
    assert _fire_step_timeout(host, ns, "s1", DUE + TIMEOUT_MS).status == "CANCELLING"
    final = _fire_step_timeout(host, ns, "s1", DUE + 2 * TIMEOUT_MS)
    assert (final.outcome, final.status) == ("applied", "MANUAL_INTERVENTION")
    assert _instance(host, ns, "s1").failure_code == "cancel_attempts_exhausted"
    assert _commands(host, ns, "s1") == [
        ("reserve", "execute", 1),
        ("reserve", "cancel", 1),
        ("reserve", "cancel", 2),
    ]


def test_n04_an_expired_lease_is_refused_even_without_a_takeover(host: NasagaHost, world: World) -> None:
    """N-04: firing or releasing after the lease ran out is refused although nobody claimed the
    timer since; tokens are UUIDv5 hashes (not a counter); the timer store has no renew."""
    ns = world()
    _start(host, ns, "s1")
    _start(host, ns, "s2")
    first = host.claim_due_timers(ns, "w1", now_ms=DUE, lease_ms=1_000, limit=1)
    second = host.claim_due_timers(ns, "w2", now_ms=DUE, lease_ms=1_000, limit=1)
    [timer] = first.timers
    [other] = second.timers
    assert timer.claimed_until_ms == DUE + 1_000
    tokens = [uuid.UUID(first.token), uuid.UUID(second.token)]
    assert [t.version for t in tokens] == [5, 5] and tokens[0] != tokens[1]

    lost = host.fire_timer(ns, first.claim, timer.timer_id, now_ms=DUE + 1_500)
    assert (lost.outcome, lost.status) == ("skipped_fencing_lost", None)
    [row] = [t for t in host.call("read_timers", namespace=ns, saga_id=timer.saga_id)["timers"]]
    assert (row["state"], row["owner"], row["fencing_token"]) == ("CLAIMED", "w1", first.token)
    assert _instance(host, ns, timer.saga_id).status == "RUNNING"
    released = host.call(
        "release_timer",
        namespace=ns,
        claim=second.claim,
        timer_id=other.timer_id,
        now_ms=DUE + 1_500,
        available_at_ms=DUE + 2_000,
    )
    assert released == {"outcome": "lost"}

    taken = host.claim_due_timers(ns, "w3", now_ms=DUE + 1_500)
    assert {t.timer_id for t in taken.timers} == {timer.timer_id, other.timer_id}
    assert host.fire_timer(ns, taken.claim, timer.timer_id, now_ms=DUE + 1_500).status == "CANCELLING"

    traits = _crate_source(host, "nasaga-backend", "src/traits.rs")
    assert "async fn claim_due_timers(" in traits and "async fn release_timer(" in traits
    assert not re.search(r"fn \w*renew\w*\(", traits)


def test_n05_a_participant_runs_a_step_another_owner_owns(host: NasagaHost, world: World) -> None:
    """N-05: participant p1 executes p0's step (effect written, p1's inbox claims the command);
    only the orchestrator refuses p1's result, before its inbox claim."""
    ns = world()
    _start(host, ns, "s1")
    command = _last(host, ns, "orchestrator", "s1")
    assert command.step == "reserve"  # owned by p0
    stray = host.deliver_command(ns, "p1", command.envelope, "succeeded")
    assert (stray.handled, stray.status, stray.handler_calls) == ("executed", "SUCCEEDED", 1)
    assert [(e["step"], e["command_id"]) for e in host.effects(ns, "p1")] == [("reserve", command.command_id)]
    assert host.call("read_inbox", namespace=ns, role="p1")["claims"] == [
        {"consumer": "p1", "message_id": command.command_id}
    ]
    stray_result = _last(host, ns, "p1", "s1")
    refused = _refused(lambda: host.deliver_result(ns, stray_result.envelope, now_ms=NOW + 10, producer="p1"))
    assert refused.code == "result.producer_unauthorized"
    assert host.call("read_inbox", namespace=ns, role="orchestrator")["claims"] == []
    assert _instance(host, ns, "s1").status == "RUNNING"
    # The owner's own inbox is another database: the genuine delivery is not blocked.
    genuine = host.deliver_command(ns, "p0", command.envelope, "succeeded")
    assert (genuine.handled, genuine.handler_calls) == ("executed", 1)
    result = _last(host, ns, "p0", "s1")
    assert result.event_id == stray_result.event_id  # same derived result id
    assert host.deliver_result(ns, result.envelope, now_ms=NOW + 20).status == "RUNNING"


def test_n06_a_resolve_for_an_effect_never_seen_is_halted(host: NasagaHost, world: World) -> None:
    """N-06: the participant answers HALTED (resolution_contract_violation) without calling the
    resolver and fences the gate as HALTED; the saga goes to MANUAL_INTERVENTION, not compensation."""
    ns = world(RESOLVE_FIRST)
    _start(host, ns, "s1")
    execute = _last(host, ns, "orchestrator", "s1")  # lost in transit: never delivered
    assert _fire_step_timeout(host, ns, "s1").status == "WAITING_RESOLUTION"
    resolve = _last(host, ns, "orchestrator", "s1")
    assert (resolve.phase, resolve.attempt) == ("resolve", 1)
    answered = host.deliver_command(ns, "p0", resolve.envelope, "rejected")
    assert (answered.handled, answered.status, answered.handler_calls) == ("contract_violation", None, 0)
    result = _last(host, ns, "p0", "s1")
    assert (result.status, result.envelope["reason_code"]) == ("HALTED", "resolution_contract_violation")
    [gate] = host.call("read_gates", namespace=ns, owner="p0", saga_id="s1")["gates"]
    assert (gate["forward_status"], gate["resolution_status"]) == ("HALTED", "HALTED")
    assert host.deliver_result(ns, result.envelope, now_ms=DUE + 1).status == "MANUAL_INTERVENTION"
    assert _instance(host, ns, "s1").failure_code == "resolution_halted"
    late = host.deliver_command(ns, "p0", execute.envelope, "succeeded")
    assert (late.handled, late.status, late.handler_calls) == ("replayed", "HALTED", 0)
    assert host.effects(ns, "p0") == []


def test_n07_statuses_the_model_lacks(host: NasagaHost, world: World) -> None:
    """N-07: PAUSED is a control state beside the status; MANUAL_INTERVENTION is left again by
    management; MANUALLY_CLOSED and CANCELLING are statuses; the model's name is not one."""
    ns = world()
    _start(host, ns, "s1")
    assert _manage(host, ns, "pause", "s1", "pause-1") == {"action": "pause", "status": None}
    paused = _instance(host, ns, "s1")
    assert (paused.status, paused.control_state, paused.version, paused.control_version) == (
        "RUNNING",
        "PAUSED",
        1,
        2,
    )
    command = _last(host, ns, "orchestrator", "s1")
    host.deliver_command(ns, "p0", command.envelope, "succeeded")
    result = _last(host, ns, "p0", "s1")
    assert _refused(lambda: host.deliver_result(ns, result.envelope, now_ms=NOW + 1)).code == "result.paused"
    _manage(host, ns, "resume", "s1", "resume-1")
    assert host.deliver_result(ns, result.envelope, now_ms=NOW + 2).status == "RUNNING"

    _start(host, ns, "s2")
    assert _answer(host, ns, "s2", "p0", "succeeded", NOW + 1) == "RUNNING"
    assert _answer(host, ns, "s2", "p1", "rejected", NOW + 2) == "COMPENSATING"
    assert _answer(host, ns, "s2", "p0", "halted", NOW + 3) == "MANUAL_INTERVENTION"
    retried = _manage(host, ns, "retry_compensation", "s2", "retry-1", now_ms=NOW + 4)
    assert retried == {"action": "retry_compensation", "status": "COMPENSATING"}
    assert _answer(host, ns, "s2", "p0", "succeeded", NOW + 5) == "COMPENSATED"
    assert ("MANUAL_INTERVENTION", "COMPENSATING") in _transitions(host, ns, "s2")

    listed = host.call(
        "list_instances", namespace=ns, tenant=TENANT, statuses=["MANUALLY_CLOSED", "CANCELLING"]
    )
    assert listed == {"instances": []}  # both parse as nasaga statuses
    unknown = _refused(
        lambda: host.call(
            "list_instances", namespace=ns, tenant=TENANT, statuses=["AWAITING_MANUAL_INTERVENTION"]
        )
    )
    assert unknown.code == "host.bad_request"


@pytest.mark.parametrize("mode", ["manual", "callback"])
def test_n08_only_poll_resolution_is_hosted(host: NasagaHost, world: World, mode: str) -> None:
    """N-08: a step with manual or callback resolution is refused by the runtime registry, while
    the catalog publishes it; activation then fails when the registry loads it."""
    definition = _definition(
        _step("reserve", "p0", cancel_mode="resolve-only", resolution={"mode": mode, "budget_ms": 60_000}),
        workflow=f"w{mode}",
    )
    ns = world(None)
    refused = _refused(lambda: host.call("register_definition", namespace=ns, definition=definition))
    assert refused.code == "definition.registry_rejected"
    assert "only poll is hosted" in refused.message
    assert host.publish_definition(ns, definition)["disposition"] == "published"
    activation = _refused(lambda: host.activate_definition(ns, TENANT, definition["workflow"], 1))
    assert activation.code == "host.internal" and "only poll is hosted" in activation.message
    record = host.call(
        "load_definition", namespace=ns, tenant=TENANT, workflow=definition["workflow"], version=1
    )
    assert record["record"]["lifecycle"] == "active"  # the catalog moved before the registry refused
    refreshed = _refused(lambda: host.call("refresh_registry", namespace=ns))
    assert "only poll is hosted" in refreshed.message


def test_n09_a_compensation_cannot_answer_rejected(host: NasagaHost, world: World) -> None:
    """N-09: nasaga's CompensationOutcome has no Rejected; the nearest answer, HALTED, reaches the
    model's outcome for a rejected compensation (manual intervention)."""
    ns = world()
    _start(host, ns, "s1")
    assert _answer(host, ns, "s1", "p0", "succeeded", NOW + 1) == "RUNNING"
    assert _answer(host, ns, "s1", "p1", "rejected", NOW + 2) == "COMPENSATING"
    compensation = _last(host, ns, "orchestrator", "s1")
    assert compensation.phase == "compensate"
    # The host's compensation handler can only map "rejected" onto nasaga's Retryable: rolled back.
    refused = _refused(lambda: host.deliver_command(ns, "p0", compensation.envelope, "rejected"))
    assert refused.code == "step.retryable"
    assert [e["phase"] for e in host.effects(ns, "p0")] == ["execute"]
    assert _answer(host, ns, "s1", "p0", "halted", NOW + 3) == "MANUAL_INTERVENTION"
    assert _instance(host, ns, "s1").failure_code == "compensation_halted"
    outcome = _crate_source(host, "nasaga-core", "src/outcome.rs")
    body = outcome.split("pub enum CompensationOutcome", 1)[1].split("\n}", 1)[0]
    assert re.findall(r"^    (\w+)", body, re.MULTILINE) == ["Succeeded", "Unknown", "Halted"]


def test_n10_the_tenant_quota_counts_sagas_in_flight(host: NasagaHost, world: World) -> None:
    """N-10: with a quota of 1 the second start is refused while the first runs and admitted once
    it completed (released at the terminal status); replays take no unit."""
    ns = world(config={"tenant_quotas": {TENANT: 1}})
    uninitialized = _refused(lambda: _start(host, ns, "s0"))
    assert uninitialized.code == "backend.infrastructure"
    assert "tenant quota ledger is not initialized" in uninitialized.message
    assert _sql(ns, "SELECT count(*) FROM saga_tenant_quota") == [(0,)]  # the refusal rolled back
    # The operator's reconciliation (nasaga's own, the host's op) initializes the ledger.
    assert host.reconcile_tenant_quota(ns, TENANT) == 0
    assert _sql(ns, "SELECT in_flight, initialized FROM saga_tenant_quota") == [(0, True)]
    assert _start(host, ns, "s1").outcome == "started"
    assert host.call("tenant_quota_usage", namespace=ns, tenant=TENANT) == {"in_flight": 1}
    assert _refused(lambda: _start(host, ns, "s2")).code == "start.tenant_quota_exceeded"
    assert _start(host, ns, "s1").outcome == "already_exists"
    assert _answer(host, ns, "s1", "p0", "succeeded", NOW + 1) == "RUNNING"
    assert _answer(host, ns, "s1", "p1", "succeeded", NOW + 2) == "COMPLETED"
    assert host.call("tenant_quota_usage", namespace=ns, tenant=TENANT) == {"in_flight": 0}
    assert _start(host, ns, "s2").outcome == "started"
    assert _start(host, ns, "s1").outcome == "already_exists"
    assert host.call("tenant_quota_usage", namespace=ns, tenant=TENANT) == {"in_flight": 1}
    # A reconciliation counts what is in flight (s2) and leaves the ledger as it was.
    assert host.reconcile_tenant_quota(ns, TENANT) == 1


def _completed_and_deprecated(host: NasagaHost, world: World) -> tuple[str, dict[str, Any]]:
    ns = world(activate=False)
    record = host.call("load_definition", namespace=ns, tenant=TENANT, workflow=WORKFLOW, version=1)["record"]
    host.call(
        "activate_definition", namespace=ns, tenant=TENANT, workflow=WORKFLOW, version=1, lease_ms=5_000
    )
    _start(host, ns, "s1")
    assert _answer(host, ns, "s1", "p0", "succeeded", NOW + 1) == "RUNNING"
    assert _answer(host, ns, "s1", "p1", "succeeded", NOW + 2) == "COMPLETED"
    assert host.call("dispatch_outbox", namespace=ns, role="orchestrator")["published"] == 2
    assert [row.dispatched for row in host.read_outbox(ns, "orchestrator")] == [True, True]
    host.call("deprecate_definition", namespace=ns, tenant=TENANT, workflow=WORKFLOW, version=1)
    return ns, record


# Every per-saga table of the orchestrator schema but the journal and the audit stream.
_SAGA_FACTS = ("saga_step_attempt", "saga_step", "saga_timer", "saga_management_audit", "saga_instance")


def test_n11_retirement_is_blocked_by_terminal_instances_journals_and_dispatched_outbox(
    host: NasagaHost, world: World
) -> None:
    """N-11: with every capability lease run out, retirement stays refused by a COMPLETED
    instance, then by its journal and audit rows, then by already dispatched outbox rows."""
    outbox_first, record = _completed_and_deprecated(host, world)
    journal_first, _ = _completed_and_deprecated(host, world)
    time.sleep(5.5)  # leases are clamped to at least 5 s of database time

    def retire(ns: str, n: int) -> Any:
        operation = {
            "expected_sha256": record["artifact"]["seal"],
            "operation_id": f"retire-{n}",
            "reason": "N-11",
        }
        return host.call(
            "retire_definition",
            namespace=ns,
            tenant=TENANT,
            workflow=WORKFLOW,
            version=1,
            operation=operation,
        )

    def blocked(ns: str, n: int) -> None:
        assert _refused(lambda: retire(ns, n)).code == "catalog.failed_precondition"

    # A terminal instance blocks, in both worlds.
    blocked(outbox_first, 1)
    blocked(journal_first, 1)
    # A retention process drops the saga's facts but keeps dispatched outbox rows: still blocked.
    for table in (*_SAGA_FACTS, "saga_transition", "saga_audit_event"):
        _sql(outbox_first, f"DELETE FROM {table} WHERE saga_id = %s", "s1")
    assert _sql(outbox_first, "SELECT count(*) FROM saga_instance") == [(0,)]
    blocked(outbox_first, 2)
    assert _sql(outbox_first, "DELETE FROM outbox_event") == 2
    assert retire(outbox_first, 3)["record"]["lifecycle"] == "retired"
    # A retention process that keeps the journal (as the model's release_instance does): blocked.
    for table in _SAGA_FACTS:
        _sql(journal_first, f"DELETE FROM {table} WHERE saga_id = %s", "s1")
    assert _sql(journal_first, "DELETE FROM outbox_event") == 2
    blocked(journal_first, 2)
    _sql(journal_first, "DELETE FROM saga_transition WHERE saga_id = %s", "s1")
    blocked(journal_first, 3)  # the orphan audit stream still names the version
    _sql(journal_first, "DELETE FROM saga_audit_event WHERE saga_id = %s", "s1")
    assert retire(journal_first, 4)["record"]["lifecycle"] == "retired"


def test_n12_a_new_saga_id_with_a_used_business_key_returns_the_first_saga(
    host: NasagaHost, world: World
) -> None:
    """N-12: the start digest does not cover saga_id, so a new saga_id with a used key and the same
    payload is AlreadyExists with the first saga; a used saga_id with another key is a conflict."""
    ns = world()
    same = {"order": "same"}
    assert _start(host, ns, "s1", business_key="k1", payload=same).outcome == "started"
    again = _start(host, ns, "s2", business_key="k1", payload=same)
    assert (again.outcome, again.instance.saga_id) == ("already_exists", "s1")
    assert host.load_instance(ns, TENANT, "s2") is None
    other_payload = _refused(lambda: _start(host, ns, "s3", business_key="k1", payload={"order": "other"}))
    assert other_payload.code == "start.request_conflict"
    other_key = _refused(lambda: _start(host, ns, "s1", business_key="k2", payload=same))
    assert other_key.code == "start.request_conflict"
    assert [row.saga_id for row in host.read_outbox(ns, "orchestrator")] == ["s1"]


def test_n13_a_stale_result_is_applied_with_the_status_unchanged(host: NasagaHost, world: World) -> None:
    """N-13: an execute result that arrives after its step was settled by the cancel barrier is
    ``applied`` (inbox claimed), status and version unchanged, no transition; a copy is duplicate."""
    ns = world()
    _start(host, ns, "s1")
    command = _last(host, ns, "orchestrator", "s1")
    assert host.deliver_command(ns, "p0", command.envelope, "succeeded").handled == "executed"
    late = _last(host, ns, "p0", "s1")  # the participant committed; its result is held back
    assert _fire_step_timeout(host, ns, "s1").status == "CANCELLING"
    cancel = _last(host, ns, "orchestrator", "s1")
    answered = host.deliver_command(ns, "p0", cancel.envelope, "cancel_confirmed")
    assert (answered.handled, answered.status, answered.handler_calls) == ("executed", "ALREADY_TERMINAL", 0)
    cancel_result = _last(host, ns, "p0", "s1")
    assert host.deliver_result(ns, cancel_result.envelope, now_ms=DUE + 1).status == "RUNNING"
    moved_on = _instance(host, ns, "s1")
    assert (moved_on.current_step, moved_on.version) == ("charge", 3)
    before = _transitions(host, ns, "s1")

    stale = host.deliver_result(ns, late.envelope, now_ms=DUE + 2)
    assert (stale.outcome, stale.status) == ("applied", "RUNNING")
    after = _instance(host, ns, "s1")
    assert (after.status, after.current_step, after.version) == ("RUNNING", "charge", 3)
    assert _transitions(host, ns, "s1") == before
    claims = {c["message_id"] for c in host.call("read_inbox", namespace=ns, role="orchestrator")["claims"]}
    assert late.event_id in claims
    assert host.deliver_result(ns, late.envelope, now_ms=DUE + 3).outcome == "duplicate"
    assert _commands(host, ns, "s1") == [
        ("reserve", "execute", 1),
        ("reserve", "cancel", 1),
        ("charge", "execute", 1),
    ]


def test_n14_a_candidate_refuses_a_start_before_the_second_eligibility_checkpoint(
    host: NasagaHost, world: World
) -> None:
    """N-14: a start on a candidate (not loaded) is refused where the snapshot is used: the host's
    eligibility check ran once (checkpoint 0) and its ``false`` for checkpoint 1 was never asked."""
    ns = world(activate=False)
    refused = _refused(
        lambda: host.start_saga(
            ns,
            saga_id="s1",
            tenant=TENANT,
            workflow=WORKFLOW,
            version=1,
            business_key="k1",
            now_ms=NOW,
            payload={"order": "s1"},
            eligibility=[True, False],
        )
    )
    assert refused.code == "start.definition_inactive"


def test_n15_a_start_without_first_step_input_is_admitted(host: NasagaHost, world: World) -> None:
    """N-15: neither ``payload`` nor ``raw_payload``: nasaga starts the saga, its first command
    carries no input and the participant executes it. The model agrees since S-START-10 reads "at
    most one" (it read "exactly one" before); the saga suite draws this start on every runtime."""
    ns = world()
    started = host.start_saga(
        ns, saga_id="s1", tenant=TENANT, workflow=WORKFLOW, version=1, business_key="k1", now_ms=NOW
    )
    assert started.outcome == "started"
    command = _last(host, ns, "orchestrator", "s1")
    assert command.envelope.get("payload") is None
    assert command.envelope.get("raw_payload") is None
    delivered = host.deliver_command(ns, "p0", command.envelope, "succeeded")
    assert (delivered.handled, delivered.status) == ("executed", "SUCCEEDED")


# -- observability (N-40, N-41) ------------------------------------------------------------------

LIFECYCLE = "nasaga_lifecycle_duration_seconds"


def _families(exposition: str) -> dict[str, str]:
    """``# TYPE`` lines of a text exposition: family name -> type."""
    return {
        parts[2]: parts[3]
        for parts in (line.split(" ") for line in exposition.splitlines() if line.startswith("# TYPE "))
    }


def test_n40_lifecycle_quantiles_are_labelled_by_workflow_and_version(host: NasagaHost, world: World) -> None:
    """N-40: once a saga completed, nasaga's operational exposition carries the lifecycle summary's
    quantiles labelled by the definition's workflow and version (and nothing else of its identity)."""
    ns = world()
    _start(host, ns, "s1")
    assert _answer(host, ns, "s1", "p0", "succeeded", NOW + 1) == "RUNNING"
    assert _answer(host, ns, "s1", "p1", "succeeded", NOW + 2) == "COMPLETED"
    read = host.read_metrics(ns, now_ms=NOW + 3)
    lines = [line for line in read["exposition"].splitlines() if line.startswith(LIFECYCLE + "{")]
    labels = sorted(line.split("}")[0].split("{")[1] for line in lines)
    assert labels == [
        f'workflow="{WORKFLOW}",definition_version="1",quantile="{q}"' for q in ("0.5", "0.95", "0.99")
    ]
    [quantiles] = read["operational"]["lifecycle_quantiles"]
    assert (quantiles["workflow"], quantiles["definition_version"], quantiles["sample_count"]) == (
        WORKFLOW,
        1,
        1,
    )
    assert '"s1"' not in read["exposition"] and f'"{TENANT}"' not in read["exposition"]


def test_n41_the_process_source_counts_no_units_outside_kafka(host: NasagaHost, world: World) -> None:
    """N-41: starts, command and result deliveries (duplicates included) through nasaga's runtime
    API move none of its process counters: the process source holds quota and action-rate
    refusals and Kafka units only; every other family is a database fact or the stage histogram."""
    ns = world()
    before = host.read_metrics(ns, now_ms=NOW)["operational"]
    _start(host, ns, "s1")
    command = _last(host, ns, "orchestrator", "s1")
    host.deliver_command(ns, "p0", command.envelope, "succeeded")
    host.deliver_command(ns, "p0", command.envelope, "succeeded")  # a duplicate, absorbed
    result = _last(host, ns, "p0", "s1")
    host.deliver_result(ns, result.envelope, now_ms=NOW + 1)
    host.deliver_result(ns, result.envelope, now_ms=NOW + 2)  # a duplicate, absorbed
    read = host.read_metrics(ns, now_ms=NOW + 3)
    after = read["operational"]
    process = [k for k in after if k.startswith(("kafka_", "quota_", "action_rate_"))]
    assert len(process) == 14
    assert {k: after[k] - before[k] for k in process} == dict.fromkeys(process, 0)
    assert (after["started_total"], after["running_current"]) == (1, 1)
    families = _families(read["exposition"])
    assert families.pop("nasaga_stage_duration_seconds") == "histogram"
    assert {name: kind for name, kind in families.items() if kind != "counter"} == {
        "nasaga_running": "gauge",
        "nasaga_waiting_resolution": "gauge",
        "nasaga_compensating": "gauge",
        "nasaga_manual_intervention": "gauge",
        "nasaga_due_timer": "gauge",
        LIFECYCLE: "summary",
        "nasaga_kafka_result_processing_duration_seconds": "summary",
        "nasaga_kafka_command_processing_duration_seconds": "summary",
    }
    assert not [line for line in read["exposition"].splitlines() if "_total{" in line]  # no labelled counter


def test_n42_a_counter_and_a_gauge_share_one_openmetrics_family(host: NasagaHost, world: World) -> None:
    """N-42: nasaga's exposition declares the counter ``nasaga_manual_intervention_total`` and the
    gauge ``nasaga_manual_intervention``: two names in the text format 0.0.4, one family once a
    counter's ``_total`` is folded (OpenMetrics, prometheus-client's parser)."""
    from prometheus_client.parser import text_string_to_metric_families

    ns = world()
    text = host.read_metrics(ns, now_ms=NOW)["exposition"]
    declared = _families(text)
    assert declared["nasaga_manual_intervention_total"] == "counter"
    assert declared["nasaga_manual_intervention"] == "gauge"
    parsed = [f.name for f in text_string_to_metric_families(text)]
    assert parsed.count("nasaga_manual_intervention") == 2
    assert len(parsed) - len(set(parsed)) == 1  # the only clash


def test_n43_conflicts_and_unknown_results_mean_other_facts(host: NasagaHost, world: World) -> None:
    """N-43: nasaga's ``conflict_total`` counts attempt-outcome conflicts, so a step rejected by
    the business leaves it at 0 (the model's conflicts count such rejections); its
    ``unknown_result_total`` counts attempts recorded UNKNOWN and stays 1 after the resolve."""
    ns = world()
    _start(host, ns, "s1")
    assert _answer(host, ns, "s1", "p0", "succeeded", NOW + 1) == "RUNNING"
    assert _answer(host, ns, "s1", "p1", "rejected", NOW + 2) == "COMPENSATING"
    rejected = host.read_metrics(ns, now_ms=NOW + 3)["operational"]
    assert (rejected["conflict_total"], rejected["compensating_current"]) == (0, 1)

    ns = world(RESOLVE_FIRST)
    _start(host, ns, "s2")
    assert _answer(host, ns, "s2", "p0", "unknown", NOW + 1) == "WAITING_RESOLUTION"
    assert host.read_metrics(ns, now_ms=NOW + 2)["operational"]["unknown_result_total"] == 1
    assert _commands(host, ns, "s2")[-1] == ("reserve", "resolve", 1)
    assert _answer(host, ns, "s2", "p0", "succeeded", NOW + 3) == "RUNNING"
    resolved = host.read_metrics(ns, now_ms=NOW + 4)["operational"]
    assert (resolved["unknown_result_total"], resolved["conflict_total"]) == (1, 0)


def test_n44_a_result_from_another_producer_observes_no_transition_stage(
    host: NasagaHost, world: World
) -> None:
    """N-44: a result delivered by a producer that does not own its step is refused before the
    transition transaction opens: the ``transition_transaction`` count does not move."""
    ns = world()
    _start(host, ns, "s1")
    command = _last(host, ns, "orchestrator", "s1")
    host.deliver_command(ns, "p0", command.envelope, "succeeded")
    result = _last(host, ns, "p0", "s1")

    def transitions() -> int:
        stages = host.read_metrics(ns, now_ms=NOW)["latency"]
        return int(next(s["count"] for s in stages if s["stage"] == "transition_transaction"))

    before = transitions()
    refused = _refused(lambda: host.deliver_result(ns, result.envelope, now_ms=NOW + 1, producer="p1"))
    assert refused.code.startswith("result."), refused
    assert transitions() == before
    assert host.deliver_result(ns, result.envelope, now_ms=NOW + 2).outcome == "applied"
    assert transitions() == before + 1


def test_n44_a_start_refused_before_its_transaction_observes_no_start_stage(
    host: NasagaHost, world: World
) -> None:
    """N-44: a start whose eligibility is revoked at checkpoint 0 is refused on eligibility even
    with an invalid payload, and a start of an inactive definition is refused: neither moves the
    ``start_transaction`` count; an invalid payload alone is refused inside and counted."""
    ns = world()

    def starts() -> int:
        stages = host.read_metrics(ns, now_ms=NOW)["latency"]
        return int(next(s["count"] for s in stages if s["stage"] == "start_transaction"))

    invalid = {"content_type": "application/json", "body_hex": b"not json".hex()}
    args = {"tenant": TENANT, "workflow": WORKFLOW, "version": 1, "now_ms": NOW}
    before = starts()
    revoked = _refused(
        lambda: host.call(
            "start_saga",
            namespace=ns,
            saga_id="s1",
            business_key="k1",
            raw_payload=invalid,
            eligibility=[False],
            **args,
        )
    )
    inactive = _refused(
        lambda: host.call(
            "start_saga", namespace=ns, saga_id="s2", business_key="k2", **{**args, "version": 2}
        )
    )
    assert starts() == before, (revoked.code, inactive.code)
    payload = _refused(
        lambda: host.call(
            "start_saga", namespace=ns, saga_id="s3", business_key="k3", raw_payload=invalid, **args
        )
    )
    assert (revoked.code, inactive.code, payload.code) == (
        "host.eligibility_denied",
        "start.definition_inactive",
        "start.invalid_payload",
    )
    assert starts() == before + 1


@pytest.mark.service("redis")
def test_n45_the_safe_trim_keeps_each_groups_last_delivered_entry(host: NasagaHost, world: World) -> None:
    """N-45: once every group acknowledged every entry, nasaga's ``safe_trim_by_group_frontier``
    still keeps the newest one: its frontier is a group's last-delivered id itself."""
    import redis

    from impls.endpoints import redis_url

    ns = world()
    prefix = f"ratchet:{ns}"
    opened = host.call(
        "stream_open",
        namespace=ns,
        redis_url=redis_url(),
        prefix=prefix,
        routes=[{"owner": "p0", "step": "reserve"}],
        consumers=["c1"],
        group="work",
        signing={"key_id": "k1", "secret": b"k".hex()},
        verifying={"k1": b"k".hex()},
    )
    stream = opened["streams"]["p0"]["stream"]
    client = redis.Redis.from_url(redis_url())
    try:
        _start(host, ns, "s1")
        _start(host, ns, "s2")
        assert host.call("stream_dispatch", namespace=ns)["published"] == 2
        polled = host.call("stream_poll", namespace=ns, owner="p0", consumer="c1", decision="succeeded")
        assert (polled["acked"], polled["handler_calls"]) == (2, 2)
        assert client.xpending(stream, "work")["pending"] == 0
        assert host.call("stream_trim", namespace=ns, owner="p0")["removed"] == 1
        assert client.xlen(stream) == 1
        assert host.call("stream_trim", namespace=ns, owner="p0")["removed"] == 0
    finally:
        host.call("stream_close", namespace=ns)
        client.delete(stream, opened["streams"]["p0"]["dead_letters"])
        client.close()


# -- N-19 .. N-20: real faults (issue 20 item 4) -----------------------------------------------


@pytest.fixture
def proxied(host: NasagaHost) -> Iterator[tuple[NasagaHost, Any]]:
    """A second host whose PostgreSQL connections go through the harness's fault proxy."""
    from conformance.wire import route

    wire = route("postgres")
    through = NasagaHost.start("postgres", dsn=wire.endpoint, timeout=60.0)
    try:
        yield through, wire.proxy
    finally:
        wire.proxy.disarm()
        through.close()


def test_n19_a_replayed_start_rides_on_a_commit_whose_answer_can_be_lost(
    proxied: tuple[NasagaHost, Any], world: World, host: NasagaHost
) -> None:
    """N-19: nasaga answers a replayed start inside the creation transaction and commits it; with
    that COMMIT's answer lost the replay is ``transaction.commit_uncertain``; nothing changed and a
    retry is ``already_exists``."""
    from conformance.wire import WireAction

    through, proxy = proxied
    ns = world()
    through.open_namespace(ns, ["p0", "p1"], mode="attach")
    assert _start(through, ns, "s1").outcome == "started"
    before = (_transitions(host, ns, "s1"), _commands(host, ns, "s1"))
    proxy.arm(WireAction.REPLY_LOST, 1, match="COMMIT")
    refused = _refused(lambda: _start(through, ns, "s1"))
    hits = proxy.disarm()
    assert refused.code == "transaction.commit_uncertain"
    assert [hit.request for hit in hits] == ["COMMIT"]
    assert (_transitions(host, ns, "s1"), _commands(host, ns, "s1")) == before
    assert _start(through, ns, "s1").outcome == "already_exists"
    through.close_namespace(ns)


def test_n20_a_host_killed_inside_a_step_leaves_nothing_and_the_redelivery_takes_effect_once(
    host: NasagaHost, world: World, tmp_path: Path
) -> None:
    """N-20: SIGKILL while the step handler holds the participant transaction (crash point
    ``step``): no business row, claim or result survives; a fresh host executes the redelivery
    once. Then a COMMIT reset as it leaves: ``commit_uncertain``, and the redelivery executes."""
    ns = world()
    _start(host, ns, "s1")
    command = _last(host, ns, "orchestrator", "s1")
    signal = tmp_path / "stopped"
    host.call("arm_crash_point", point="step", at=1, signal_path=str(signal))
    with pytest.raises(NasagaHostError) as killed:
        host.deliver_command(ns, "p0", command.envelope, "succeeded", kill_at=signal)
    assert killed.value.failure is HostFailure.KILLED
    assert killed.value.message.startswith("step 1 ")
    host.restart()
    host.open_namespace(ns, ["p0", "p1"], mode="attach")
    assert host.effects(ns, "p0") == []
    assert _rows(host, ns, "p0", "s1") == []
    assert host.call("read_inbox", namespace=ns, role="p0")["claims"] == []
    again = host.deliver_command(ns, "p0", command.envelope, "succeeded")
    assert (again.handled, again.handler_calls) == ("executed", 1)
    assert [e["command_id"] for e in host.effects(ns, "p0")] == [command.command_id]
    assert host.deliver_command(ns, "p0", command.envelope, "succeeded").handled == "duplicate"


def test_n20_two_hosts_racing_one_timer_fire_it_once(host: NasagaHost, world: World) -> None:
    """N-20: a second host on the same namespace; both claim the due timer at once (two requests in
    flight), one gets it; after the lease runs out the other takes it over and both fire at the
    same harness time: the stale holder is refused, the new one applies, one cancel command."""
    import threading

    ns = world()
    _start(host, ns, "s1")
    other = NasagaHost.start("postgres", timeout=60.0)
    try:
        other.open_namespace(ns, ["p0", "p1"], mode="attach")
        hosts = (host, other)
        claims: list[Any] = [None, None]

        def claim(index: int, owner: str, now_ms: int) -> None:
            claims[index] = hosts[index].claim_due_timers(ns, owner, now_ms=now_ms, lease_ms=1_000)

        threads = [threading.Thread(target=claim, args=(i, f"w{i}", DUE)) for i in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        held = [[t.timer_id for t in c.timers if t.saga_id == "s1"] for c in claims]
        assert sorted(len(h) for h in held) == [0, 1]
        winner = 0 if held[0] else 1
        loser = 1 - winner
        [timer] = held[winner]
        later = DUE + 1_000
        retaken = hosts[loser].claim_due_timers(ns, f"w{loser}", now_ms=later, lease_ms=1_000)
        assert [t.timer_id for t in retaken.timers] == [timer]
        fires: list[str] = ["", ""]
        tries = ((winner, claims[winner].claim), (loser, retaken.claim))

        def fire(index: int, handle: str) -> None:
            fires[index] = hosts[index].fire_timer(ns, handle, timer, now_ms=later).outcome

        threads = [threading.Thread(target=fire, args=t) for t in tries]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert (fires[winner], fires[loser]) == ("skipped_fencing_lost", "applied")
        assert _instance(host, ns, "s1").status == "CANCELLING"
        assert [c for c in _commands(host, ns, "s1") if c[1] == "cancel"] == [("reserve", "cancel", 1)]
        other.close_namespace(ns)
    finally:
        other.close()
