"""Rules on the gRPC side (results back to the orchestrator over mutual TLS)."""

from __future__ import annotations

from conformance.transport._base import TransportMachineBase


class GrpcRules(TransportMachineBase):
    def _check_grpc(self) -> None:
        return None

    def _quiesce_grpc(self) -> None:
        return None
