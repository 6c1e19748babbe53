"""Where the host binary is, and building it when it is missing or stale.

``RATCHET_NASAGA_HOST`` names a prebuilt binary and skips cargo altogether. Otherwise the binary is
``$CARGO_TARGET_DIR/debug/ratchet-nasaga-host`` (default target dir ``~/.cache/ratchet/cargo-target``,
outside the repository, like ``make nasaga-host``), and ``cargo build`` runs first: with a warm
target directory it is a no-op of well under a second, and it rebuilds exactly when a source,
``Cargo.toml`` or ``Cargo.lock`` changed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from ._errors import HostFailure, NasagaHostError

BINARY_NAME = "ratchet-nasaga-host"
HOST_ENV = "RATCHET_NASAGA_HOST"
REPO_ROOT = Path(__file__).resolve().parents[2]
MANIFEST = REPO_ROOT / "hosts" / "nasaga" / "Cargo.toml"


def target_dir() -> Path:
    configured = os.environ.get("CARGO_TARGET_DIR")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "ratchet" / "cargo-target"


def host_binary(*, build: bool = True, timeout: float = 3600.0) -> Path:
    """The host binary's path, built first unless ``RATCHET_NASAGA_HOST`` names one.

    Raises ``NasagaHostError`` (``CRASHED``) when there is no binary and cargo cannot make one.
    """
    explicit = os.environ.get(HOST_ENV)
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise NasagaHostError(HostFailure.CRASHED, "build", f"{HOST_ENV}={explicit} is not a file")
        return path
    binary = target_dir() / "debug" / BINARY_NAME
    cargo = shutil.which("cargo")
    if build and cargo is not None:
        env = {**os.environ, "CARGO_TARGET_DIR": str(target_dir())}
        done = subprocess.run(
            [cargo, "build", "--quiet", "--manifest-path", str(MANIFEST)],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            tail = "\n".join(done.stderr.strip().splitlines()[-20:])
            raise NasagaHostError(HostFailure.CRASHED, "build", f"cargo build failed:\n{tail}")
    if not binary.is_file():
        why = "cargo is not installed" if cargo is None else "cargo produced no binary"
        raise NasagaHostError(HostFailure.CRASHED, "build", f"no host binary at {binary} ({why})")
    return binary
