"""A deliberately broken listener set for nasaga's gRPC transport, so the harness shows it catches one.

nasaga's code is not changed: the host (``hosts/nasaga/src/grpc.rs``, ``grpc_open {plant}``) serves
the same services with one listener setting wrong, and the transport suite on ``nasaga-grpc`` must
report the rule it breaks::

    # tests/conformance/test_nasaga_grpc_planted.py passes the ``target`` role override

=====================================  ===========  ==============================================
factory                                rule broken  the bug
=====================================  ===========  ==============================================
``result_listeners_ask_no_certificate``  S-GRPC-01    the result listeners' TLS asks for no client
                                                    certificate (``GrpcTlsIdentity::server``): no
                                                    caller's principal is verified, so the genuine
                                                    participant's results get ``UNAUTHENTICATED``
                                                    instead of a receipt (met before any refused
                                                    call, which the port would answer too: S-GRPC-03)
=====================================  ===========  ==============================================
"""

from __future__ import annotations

from conformance._suites import BackendUnderTest
from conformance.transport._nasaga_target import NasagaGrpcTarget

BROKEN_NASAGA_GRPC = {"result_listeners_ask_no_certificate": "S-GRPC-01"}


def result_listeners_ask_no_certificate(_backend: BackendUnderTest) -> NasagaGrpcTarget:
    return NasagaGrpcTarget(plant="result_tls_asks_none")
