"""Stores that mishandle a documented option of their endpoint (C-ERR-04), caught on a wire only.

The shipped CQL store documents ``replication_factor`` for its endpoint: "a whole number >= 1"
(``CqlSettings.from_endpoint``). The harness opens each store on the fault proxy's endpoint and,
from the store suite's opening, with each documented option outside its range and at its edge
(``conformance/commit/_endpoint_rules.py``, ``ENDPOINT_OPTIONS`` in conformance/wire/_routes.py)::

    conformance run --store examples.config_stores:cql_replication_unchecked --service cassandra --suite store

=========================  =========  ==========================================================
factory                    rule       the bug
=========================  =========  ==========================================================
cql_replication_unchecked  C-ERR-04   ``replication_factor`` is never read, so a factor of 0,
                                      a negative one or a word opens a store that answers
                                      ready; a ring's deployment would get the default keyspace
                                      without a word
=========================  =========  ==========================================================
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode

from impls.api import MembershipDirectory
from impls.cql import CqlMessageStore, CqlSettings


async def cql_replication_unchecked(
    namespace: str, membership: MembershipDirectory, endpoint: str | None = None
) -> CqlMessageStore:
    """C-ERR-04: the shipped CQL store with the endpoint's ``replication_factor`` left unread."""
    if endpoint is not None:
        contact, _, text = endpoint.partition("?")
        kept = [(name, value) for name, value in parse_qsl(text) if name != "replication_factor"]
        endpoint = f"{contact}?{urlencode(kept)}" if kept else contact
    return CqlMessageStore(namespace, membership, CqlSettings.from_endpoint(endpoint))


#: Each factory: the service it needs and the rule the harness must report.
CONFIG_STORES = {"cql_replication_unchecked": ("cassandra", "C-ERR-04")}
