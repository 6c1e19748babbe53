"""scripts/reach.py never runs a crash suite beside another run on the same real server.

With ``--parallel 2`` one seed's saga-durability (``server-crash``: SIGKILL of PostgreSQL, restart)
ran beside another seed's saga suite on the same server: the saga run's sessions ended under it
("terminating connection due to unexpected postmaster exit", a BEGIN refused as ``ROLLED_BACK``),
an outage no program of that run made (docs/ci-gate.md, "Not judged")."""

from __future__ import annotations

import threading
import time
from types import ModuleType

from tests.scripts._load import script


def _reach() -> ModuleType:
    return script("reach")


def test_a_crash_suite_has_its_server_alone() -> None:
    reach = _reach()
    assert reach._server("postgres") == "postgres" and reach._server("sqlite") is None
    servers = reach._Servers()
    spans: dict[str, tuple[float, float]] = {}

    def run(name: str, server: str, kills: bool, seconds: float) -> None:
        with servers.held(server, kills=kills):
            began = time.monotonic()
            time.sleep(seconds)
            spans[name] = (began, time.monotonic())

    plan = [
        ("saga", "postgres", False, 0.3),
        ("saga-durability", "postgres", True, 0.2),
        ("later saga", "postgres", False, 0.1),
        ("redis", "redis", False, 0.1),
    ]
    threads = []
    for args in plan:
        threads.append(threading.Thread(target=run, args=args))
        threads[-1].start()
        time.sleep(0.05)
    for thread in threads:
        thread.join()
    crash = spans["saga-durability"]
    for name in ("saga", "later saga"):
        began, ended = spans[name]
        assert ended <= crash[0] or began >= crash[1], (name, spans)  # never beside the crash run
    assert spans["redis"][0] < crash[1]  # another server is not held up
