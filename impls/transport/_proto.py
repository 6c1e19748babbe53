"""The generated protobuf/gRPC modules of ``proto/ratchet_delivery.proto``, from ``build/``.

Stubs are not committed: ``make proto`` runs ``grpc_tools.protoc`` into
``build/proto/<digest of the .proto>/``, and the first import does the same when that folder is
missing (a fresh checkout after ``pip install -e '.[dev]'``). The folder is keyed by the
.proto's digest, so an edited service is regenerated, never served from stale stubs. Messages
are built by name (``message("Delivery", ...)``); nothing outside this module touches the
generated code.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

PROTO = Path(__file__).resolve().parent / "proto" / "ratchet_delivery.proto"
_lock = threading.Lock()
_modules: tuple[ModuleType, ModuleType] | None = None


def build_dir() -> Path:
    root = Path(os.environ.get("RATCHET_BUILD_DIR", Path(__file__).resolve().parents[2] / "build"))
    digest = hashlib.sha256(PROTO.read_bytes()).hexdigest()[:12]
    return root / "proto" / digest


def generate(out: Path | None = None) -> Path:
    """Run protoc (grpcio-tools) into ``out``; returns the folder."""
    from grpc_tools import protoc

    target = out or build_dir()
    target.mkdir(parents=True, exist_ok=True)
    args = [
        "protoc",
        f"-I{PROTO.parent}",
        f"--python_out={target}",
        f"--grpc_python_out={target}",
        str(PROTO),
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {PROTO}")
    return target


def modules() -> tuple[ModuleType, ModuleType]:
    """``(ratchet_delivery_pb2, ratchet_delivery_pb2_grpc)``, generated on first use if needed."""
    global _modules
    with _lock:
        if _modules is None:
            folder = build_dir()
            if not (folder / "ratchet_delivery_pb2_grpc.py").exists():
                generate(folder)
            if str(folder) not in sys.path:
                sys.path.insert(0, str(folder))
            _modules = (
                importlib.import_module("ratchet_delivery_pb2"),
                importlib.import_module("ratchet_delivery_pb2_grpc"),
            )
        return _modules


def message(name: str, **fields: Any) -> Any:
    return getattr(modules()[0], name)(**fields)


if __name__ == "__main__":
    print(generate())
