"""Fixtures over every commit backend: ``backend``, ``namespace``, ``membership``, ``store``, ``outbox``.

Each test gets a fresh namespace (isolation without FLUSHDB or TRUNCATE). Real servers are marked
``service``: tests/conftest.py skips them locally when the server is down and fails them in CI.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from conformance.backends import COMMIT_BACKENDS, outbox_factory, store_factory
from impls.api import InMemoryMembership, MessageStore, Outbox
from tests._backends import backend_params

STORE_BACKENDS = backend_params("commit")

TENANT = "t1"
OTHER_TENANT = "t2"
CONVERSATION = "c1"
OTHER_CONVERSATION = "c2"
MEMBERS = frozenset({"alice", "bob", "carol"})


@pytest.fixture(params=STORE_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def namespace() -> str:
    return f"contract-{uuid.uuid4().hex[:16]}"


@pytest.fixture
def membership() -> InMemoryMembership:
    directory = InMemoryMembership()
    for tenant in (TENANT, OTHER_TENANT):
        for conversation in (CONVERSATION, OTHER_CONVERSATION):
            directory.set_members(tenant, conversation, MEMBERS)
    return directory


@pytest.fixture
async def store(backend: str, namespace: str, membership: InMemoryMembership) -> AsyncIterator[MessageStore]:
    opened = await store_factory(COMMIT_BACKENDS[backend])(namespace, membership)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def outbox(backend: str, namespace: str) -> AsyncIterator[Outbox]:
    opened = await outbox_factory(COMMIT_BACKENDS[backend])(namespace)
    try:
        yield opened
    finally:
        await opened.close()
