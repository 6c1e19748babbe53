"""nasaga's gRPC protocol as Python stubs, generated from the ``.proto`` files its crates ship.

Nothing is copied into this repository: the files are read where cargo unpacked the crates the
host is built from (``$CARGO_HOME/registry/src/<index>/<crate>-<version>/proto/``, the versions
pinned in ``hosts/nasaga/Cargo.lock``): ``saga_transport.proto`` of nasaga-runtime-core
(``SagaCommandTransport`` / ``SagaResultTransport``: ``Deliver``, a ``SagaDeliveryReceipt`` of
four kinds) and ``health.proto`` of tonic-health, the standard health service nagrpc's listener
serves beside them. ``impls.transport._proto.ProtoSet`` generates them into
``build/proto/<digest>/`` on first use (``python -m impls.nasaga._proto``: now).
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

from impls.transport._proto import ProtoSet

from ._binary import MANIFEST
from ._errors import HostFailure, NasagaHostError

#: crate -> the file of its ``proto/`` folder we need.
FILES = {"nasaga-runtime-core": "saga_transport.proto", "tonic-health": "health.proto"}


def _cargo_home() -> Path:
    return Path(os.environ.get("CARGO_HOME") or Path.home() / ".cargo")


def locked_version(crate: str) -> str:
    """The version of ``crate`` in the host's ``Cargo.lock``."""
    lock = (MANIFEST.parent / "Cargo.lock").read_text()
    found = re.search(rf'name = "{re.escape(crate)}"\nversion = "([^"]+)"', lock)
    if found is None:
        raise NasagaHostError(HostFailure.CRASHED, "proto", f"{crate} is not in the host's Cargo.lock")
    return found.group(1)


def proto_root(crate: str) -> Path:
    """``proto/`` of the unpacked crate (``cargo build`` or ``cargo fetch`` unpacks it)."""
    version = locked_version(crate)
    for index in sorted((_cargo_home() / "registry" / "src").glob("*")):
        folder = index / f"{crate}-{version}" / "proto"
        if folder.is_dir():
            return folder
    raise NasagaHostError(
        HostFailure.CRASHED,
        "proto",
        f"{crate} {version} is not unpacked under {_cargo_home()}/registry/src (make nasaga-host)",
    )


@functools.cache
def nasaga_protos() -> ProtoSet:
    return ProtoSet(tuple((proto_root(crate), name) for crate, name in FILES.items()))


if __name__ == "__main__":
    print(nasaga_protos().generate())
