"""The CQL store's settings as a contact string gives them: one node, or a ring (impls/cql/_session.py).

Pure parsing, no server: the ring's three contact points and its replication factor reach the
keyspace the store creates; a malformed option is UNAVAILABLE, never a raw ValueError.
"""

from __future__ import annotations

import pytest

from impls.cql import CqlSettings
from impls.cql._session import _contact_points
from model.commit import MessageStoreError, StoreErrorKind

RING = "127.0.0.1:31042,127.0.0.2:31042,127.0.0.3:31042"


def test_a_single_contact_keeps_replication_factor_one() -> None:
    settings = CqlSettings.from_endpoint("127.0.0.1:19042?request_timeout_s=1.5")
    assert settings.contact == "127.0.0.1:19042"
    assert settings.request_timeout_s == 1.5
    assert settings.replication == {"class": "SimpleStrategy", "replication_factor": "1"}
    assert _contact_points(settings.contact) == (["127.0.0.1"], 19042)


def test_a_ring_gives_every_contact_point_and_its_replication_factor() -> None:
    settings = CqlSettings.from_endpoint(f"{RING}?replication_factor=3")
    assert settings.replication == {"class": "SimpleStrategy", "replication_factor": "3"}
    assert settings.request_timeout_s == 10.0
    assert _contact_points(settings.contact) == (["127.0.0.1", "127.0.0.2", "127.0.0.3"], 31042)


@pytest.mark.parametrize(
    "endpoint",
    [f"{RING}?replication_factor=three", f"{RING}?replication_factor=0", "127.0.0.1:1?request_timeout_s=x"],
)
def test_a_malformed_option_is_unavailable(endpoint: str) -> None:
    with pytest.raises(MessageStoreError) as raised:
        CqlSettings.from_endpoint(endpoint)
    assert raised.value.kind is StoreErrorKind.UNAVAILABLE


def test_ring_contact_points_must_share_a_port() -> None:
    with pytest.raises(MessageStoreError) as raised:
        _contact_points("127.0.0.1:9042,127.0.0.2:9043")
    assert raised.value.kind is StoreErrorKind.UNAVAILABLE
