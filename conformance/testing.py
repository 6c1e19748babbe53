"""A base class a backend author subclasses in one line to run the commit suites under pytest::

    from conformance.testing import StoreConformance
    from mypkg.store import make_store

    class TestMyStore(StoreConformance):
        store_factory = staticmethod(make_store)

Each suite is one test (``test_store_suite``, ``test_commit_suite``). A failure prints the rule ID,
the shrunk program and the path of the failure file to replay. Options come from the pytest
plug-in (``--ratchet-profile``, ``--ratchet-examples``, ``--ratchet-seed``, ``--ratchet-failures``)
or from RATCHET_PROFILE / RATCHET_EXAMPLES / RATCHET_SEED.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from conformance._runner import DEFAULT_DATABASE_DIR, DEFAULT_FAILURE_DIR, run_conformance


def _option(request: pytest.FixtureRequest, name: str, env: str) -> Any:
    value = request.config.getoption(name, default=None)
    if value is None:
        value = os.environ.get(env) or None
    return value


class StoreConformance:
    """Runs the ``store`` and ``commit`` suites on ``store_factory`` (and ``outbox_factory``)."""

    store_factory: ClassVar[Callable[..., Any] | str]
    outbox_factory: ClassVar[Callable[..., Any] | str | None] = None
    #: A committer held against the contract in the commit suite (default impls.commit.MessageCommitter).
    committer_factory: ClassVar[Callable[..., Any] | str | None] = None
    backend_name: ClassVar[str | None] = None  # default: the test class's name
    profile: ClassVar[str] = "ci"
    examples: ClassVar[int | None] = None
    faults: ClassVar[tuple[str, ...] | None] = None

    def _run_suite(self, request: pytest.FixtureRequest, suite: str) -> None:
        cls = type(self)
        examples = _option(request, "ratchet_examples", "RATCHET_EXAMPLES")
        seed = _option(request, "ratchet_seed", "RATCHET_SEED")
        report = run_conformance(
            cls.store_factory,
            outbox_factory=cls.outbox_factory,
            committer_factory=cls.committer_factory,
            backend=cls.backend_name or cls.__name__,
            suites=(suite,),
            profile=_option(request, "ratchet_profile", "RATCHET_PROFILE") or cls.profile,
            examples=int(examples) if examples is not None else cls.examples,
            seed=int(seed) if seed is not None else None,
            faults=cls.faults,
            failure_dir=_option(request, "ratchet_failures", "RATCHET_FAILURES") or DEFAULT_FAILURE_DIR,
            database_dir=DEFAULT_DATABASE_DIR,
        )
        if not report.ok:
            # The first line is what `pytest -r` shows: the rule and the message, not a table header.
            pytest.fail(
                f"{report.headline()}\n\n{report.summary_table()}\n\n{report.details()}", pytrace=False
            )

    def test_store_suite(self, request: pytest.FixtureRequest) -> None:
        self._run_suite(request, "store")

    def test_commit_suite(self, request: pytest.FixtureRequest) -> None:
        self._run_suite(request, "commit")
