"""The real-service plumbing: conformance/services/, the gating in tests/conftest.py and
scripts/services. Nothing here starts a server: the gating tests point an endpoint at a closed
port, and the tests marked ``service(...)`` probe what ``scripts/services up`` left running."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from conformance import services
from conformance.services import SERVICE_NAMES, SERVICES, how_to_start, probe
from impls import endpoints

REPO = Path(__file__).resolve().parent.parent

GATED_TESTS = """
import pytest

@pytest.mark.service("redis")
def test_marked():
    pass

def test_helper(require_service):
    require_service("redis")
"""


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def unreachable(name: str, port: int) -> str:
    return {
        "redis": f"redis://127.0.0.1:{port}/0",
        "cassandra": f"127.0.0.1:{port}",
        "postgres": f"postgresql://ratchet:ratchet@127.0.0.1:{port}/ratchet",
        "mariadb": f"mysql://ratchet:ratchet@127.0.0.1:{port}/ratchet",
        "kafka": f"127.0.0.1:{port}",
    }[name]


@pytest.fixture
def gated(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, closed_port: int) -> pytest.Pytester:
    """A test directory whose tests need redis, with RATCHET_REDIS_URL pointing at a closed port."""
    monkeypatch.setenv("RATCHET_REDIS_URL", unreachable("redis", closed_port))
    pytester.makeconftest(
        "from tests.conftest import _require_service_fixture, pytest_configure, pytest_runtest_setup\n"
    )
    pytester.makepyfile(GATED_TESTS)
    return pytester


def run_inner(pytester: pytest.Pytester) -> pytest.RunResult:
    # The inner run needs only the conftest under test, not the project's other plug-ins.
    return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:asyncio", "-p", "no:ratchet", "-rs")


@pytest.mark.parametrize("ci", ["true", "TRUE"])
def test_unreachable_service_fails_under_ci(
    gated: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str
) -> None:
    monkeypatch.setenv("CI", ci)
    result = run_inner(gated)
    result.assert_outcomes(errors=1, failed=1)
    result.stdout.fnmatch_lines(["*CI=true: required service unavailable: redis (RATCHET_REDIS_URL=*"])


@pytest.mark.parametrize("ci", [None, "", "false", "1"])
def test_unreachable_service_skips_outside_ci(
    gated: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str | None
) -> None:
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    result = run_inner(gated)
    result.assert_outcomes(skipped=2)
    how = "run `make services` or `scripts/services up redis`"
    result.stdout.fnmatch_lines(
        [f"SKIPPED *needs redis: redis (RATCHET_REDIS_URL=*) did not answer: *; {how}"]
    )


@pytest.mark.parametrize("name", SERVICE_NAMES)
def test_probe_gives_one_line_reason(name: str, monkeypatch: pytest.MonkeyPatch, closed_port: int) -> None:
    monkeypatch.setenv(services.service(name).env_var, unreachable(name, closed_port))
    reason = probe(name, timeout=1.0)
    assert reason is not None
    assert "\n" not in reason
    assert reason.startswith(f"{name} ({services.service(name).env_var}=")
    assert str(closed_port) in reason
    assert ":ratchet@" not in reason  # the password is masked


def test_unknown_service_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown service 'oracle'"):
        probe("oracle")
    with pytest.raises(ValueError):
        how_to_start("oracle")


def test_how_to_start() -> None:
    assert how_to_start("cassandra") == "run `make services` or `scripts/services up cassandra`"


def test_endpoints_follow_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for svc in SERVICES.values():
        monkeypatch.delenv(svc.env_var, raising=False)
    assert services.cql_contact() == ("127.0.0.1", 19042)
    expected = services.MysqlParams("127.0.0.1", 13306, "ratchet", "ratchet", "ratchet")
    assert services.mysql_params() == expected
    monkeypatch.setenv("RATCHET_CQL_CONTACT", "[::1]:9142")
    assert services.cql_contact() == ("::1", 9142)
    monkeypatch.setenv("RATCHET_CQL_CONTACT", "cassandra.local")
    assert services.cql_contact() == ("cassandra.local", services.CQL_DEFAULT_PORT)
    monkeypatch.setenv("RATCHET_MYSQL_DSN", "mysql://u:p%40ss@db:3307/x")
    assert services.mysql_params() == services.MysqlParams("db", 3307, "u", "p@ss", "x")
    monkeypatch.setenv("RATCHET_PG_DSN", "")  # empty means unset
    assert services.pg_dsn() == SERVICES["postgres"].default


def test_an_endpoint_pointed_elsewhere_keeps_its_options() -> None:
    # The fault proxy stands in for a server: a ring's replication factor must reach the store.
    ring = "127.0.0.1:9042,127.0.0.2:9042?replication_factor=3"
    assert endpoints.address_of("cassandra", ring) == ("127.0.0.1", 9042)
    assert endpoints.with_address("cassandra", ring, "127.0.0.9", 5) == "127.0.0.9:5?replication_factor=3"
    assert endpoints.with_address("cassandra", "db:9042", "127.0.0.9", 5) == "127.0.0.9:5"
    dsn = "postgresql://u:p@db:5432/x?sslmode=disable"
    assert (
        endpoints.with_address("postgres", dsn, "127.0.0.9", 5)
        == "postgresql://u:p@127.0.0.9:5/x?sslmode=disable"
    )


def test_script_env_matches_module_defaults() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RATCHET_")}
    out = subprocess.run(
        [str(REPO / "scripts" / "services"), "env"], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert out.splitlines() == services.env_lines()


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.service(n)) for n in SERVICE_NAMES])
def test_service_answers(name: str) -> None:
    assert probe(name, timeout=5.0) is None


# --- the launcher (conformance/services/_launcher.py) ---------------------------------------------


def _private_env(tmp_path: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RATCHET_")}
    return {**env, "RATCHET_SERVICES_DIR": str(tmp_path / "svc"), "RATCHET_REDIS_PORT": str(port)}


def _script(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(REPO / "scripts" / "services"), *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_env_follows_the_port_knobs(tmp_path: Path) -> None:
    env = {**_private_env(tmp_path, 28999), "RATCHET_PG_PORT": "28998", "RATCHET_KAFKA_PORT": "28997"}
    lines = services.Settings.from_env(env).env_lines()
    assert "export RATCHET_REDIS_URL=redis://127.0.0.1:28999/0" in lines
    assert "export RATCHET_PG_DSN=postgresql://ratchet:ratchet@127.0.0.1:28998/ratchet" in lines
    assert "export RATCHET_KAFKA_BOOTSTRAP=127.0.0.1:28997" in lines
    assert _script("env", env=env).stdout.splitlines() == lines


@pytest.mark.parametrize(
    ("args", "knobs", "code", "message"),
    [
        (["up", "oracle"], {}, 1, "unknown service 'oracle'"),
        (
            ["up", "redis"],
            {"RATCHET_DURABILITY": "sometimes"},
            2,
            "RATCHET_DURABILITY must be durable or fast",
        ),
        (["up", "redis"], {"RATCHET_REDIS_PORT": "http"}, 2, "RATCHET_REDIS_PORT must be a TCP port"),
        (["frob"], {}, 2, "usage: scripts/services"),
    ],
)
def test_launcher_refusals(
    tmp_path: Path, args: list[str], knobs: dict[str, str], code: int, message: str
) -> None:
    done = _script(*args, env={**_private_env(tmp_path, 28999), **knobs})
    assert done.returncode == code
    assert message in done.stderr and "Traceback" not in done.stderr


def test_status_of_a_set_never_started_is_down(tmp_path: Path, closed_port: int) -> None:
    done = _script("status", "redis", env=_private_env(tmp_path, closed_port))
    assert done.returncode == 3
    assert done.stdout.split() == ["redis", "down"]


@pytest.mark.service("redis")  # the shared server being up means redis-server is installed
def test_a_private_redis_up_killed_restarted_and_down(tmp_path: Path, closed_port: int) -> None:
    """The launcher's whole cycle on a private port, as the crash suite uses it (kill -9, restart)."""
    env = _private_env(tmp_path, closed_port)
    settings = services.Settings.from_env(env)
    try:
        assert _script("up", "redis", env=env).returncode == 0
        assert probe("redis", endpoint=settings.endpoint("redis")) is None
        assert (tmp_path / "svc" / "redis" / "durability").read_text().strip() == "durable"
        first = int((tmp_path / "svc" / "redis" / "redis.pid").read_text())
        services.kill_tree(first)
        assert not services.pid_alive(first)
        services.restart("redis", settings)
        assert probe("redis", endpoint=settings.endpoint("redis")) is None
        again = _script("up", "redis", env=env)
        assert "already up" in again.stdout
    finally:
        down = _script("down", "redis", env=env)
    assert down.returncode == 0 and "stopped" in down.stdout
    assert _script("status", "redis", env=env).returncode == 3


def test_script_ring_status_names_three_nodes_and_exits_3_when_down(tmp_path: Path) -> None:
    """``scripts/services ring`` is the three-node ring's launcher (deep profile, docs/faults.md);
    with nothing started in a fresh services directory every node is down: exit 3, as ``status``."""
    env = {**os.environ, "RATCHET_SERVICES_DIR": str(tmp_path)}
    script = str(REPO / "scripts" / "services")
    done = subprocess.run([script, "ring", "status"], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 3, done.stdout + done.stderr
    assert [line.split(")")[1] for line in done.stdout.splitlines()] == [": down"] * 3, done.stdout
    wrong = subprocess.run([script, "ring", "sideways"], env=env, capture_output=True, text=True, check=False)
    assert wrong.returncode == 2 and "ring up|down|status" in wrong.stdout + wrong.stderr
