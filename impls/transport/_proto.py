"""Generated protobuf/gRPC modules, from ``build/``: one mechanism for every ``.proto`` we serve or call.

Stubs are not committed: ``make proto`` runs ``grpc_tools.protoc`` into
``build/proto/<digest of the .proto files>/``, and the first import does the same when that folder
is missing (a fresh checkout after ``pip install -e '.[dev]'``). The folder is keyed by the files'
digest, so an edited service is regenerated, never served from stale stubs. A ``ProtoSet`` names
the files and their include roots: ``DELIVERY`` is Ratchet's own ``proto/ratchet_delivery.proto``;
``impls/nasaga/_proto.py`` makes one of the files nasaga's crates ship in the cargo registry.
Messages are built by name (``message("Delivery", ...)``); nothing outside the modules that own a
set touches its generated code.
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

import attrs

_lock = threading.Lock()


def build_root() -> Path:
    return Path(os.environ.get("RATCHET_BUILD_DIR", Path(__file__).resolve().parents[2] / "build")) / "proto"


@attrs.frozen
class ProtoSet:
    """``.proto`` files (each relative to its include root) generated and imported together."""

    files: tuple[tuple[Path, str], ...]  # (include root, file under it)
    _modules: dict[str, ModuleType] = attrs.field(factory=dict, init=False, eq=False, repr=False)

    def build_dir(self) -> Path:
        digest = hashlib.sha256()
        for root, name in self.files:
            digest.update(name.encode() + b"\0" + (root / name).read_bytes())
        return build_root() / digest.hexdigest()[:12]

    def generate(self, out: Path | None = None) -> Path:
        """Run protoc (grpcio-tools) into ``out``; returns the folder."""
        from grpc_tools import protoc

        target = out or self.build_dir()
        target.mkdir(parents=True, exist_ok=True)
        roots = sorted({str(root) for root, _ in self.files})
        args = [
            "protoc",
            *(f"-I{root}" for root in roots),
            f"--python_out={target}",
            f"--grpc_python_out={target}",
            *(name for _, name in self.files),
        ]
        if protoc.main(args) != 0:
            raise RuntimeError(f"protoc failed on {[name for _, name in self.files]}")
        return target

    def module(self, name: str) -> ModuleType:
        """A generated module by name (``ratchet_delivery_pb2``), generated on first use if needed."""
        with _lock:
            if not self._modules:
                folder = self.build_dir()
                stems = [Path(name).stem for _, name in self.files]
                if not all((folder / f"{stem}_pb2_grpc.py").exists() for stem in stems):
                    self.generate(folder)
                if str(folder) not in sys.path:
                    sys.path.insert(0, str(folder))
                for stem in stems:
                    for suffix in ("_pb2", "_pb2_grpc"):
                        self._modules[stem + suffix] = importlib.import_module(stem + suffix)
            return self._modules[name]


PROTO = Path(__file__).resolve().parent / "proto" / "ratchet_delivery.proto"
DELIVERY = ProtoSet(((PROTO.parent, PROTO.name),))


def build_dir() -> Path:
    return DELIVERY.build_dir()


def generate(out: Path | None = None) -> Path:
    return DELIVERY.generate(out)


def modules() -> tuple[ModuleType, ModuleType]:
    """``(ratchet_delivery_pb2, ratchet_delivery_pb2_grpc)``, generated on first use if needed."""
    return DELIVERY.module("ratchet_delivery_pb2"), DELIVERY.module("ratchet_delivery_pb2_grpc")


def message(name: str, **fields: Any) -> Any:
    return getattr(modules()[0], name)(**fields)


if __name__ == "__main__":
    print(generate())
