"""The skeleton store of docs/backend-authors.md is a whole ``MessageStore`` with the optional ports,
and a run of it is an environment error (every method says UNAVAILABLE), never a pass."""

from __future__ import annotations

import asyncio

from conformance import Verdict, run_conformance
from examples.skeleton_store import make_store
from impls.api import DeclaresInternals, InMemoryMembership, MessageStore, StoreInspector


def test_the_skeleton_is_a_store_with_the_optional_ports() -> None:
    store = asyncio.run(make_store("rtskeleton1", InMemoryMembership()))
    assert isinstance(store, MessageStore)
    assert isinstance(store, StoreInspector) and isinstance(store, DeclaresInternals)


def test_an_unfinished_skeleton_never_passes() -> None:
    report = run_conformance(
        "examples.skeleton_store:make_store",
        suites=("store",),
        examples=2,
        failure_dir=None,
        database_dir=None,
    )
    assert report.results[0].verdict is not Verdict.PASS, report.details()
    assert not report.ok
