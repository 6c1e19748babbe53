"""Debian packages the servers need, installed with apt-get when missing (the machine runs us as root).

The packages' maintainer scripts must not start the distribution's own daemons (they would take the
default ports and a data directory of their own): while installing, ``/usr/sbin/policy-rc.d``
answers 101 ("action forbidden") unless the machine already has one. A stale package list can name
versions the mirror no longer has: it is refreshed once and the install retried.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from conformance.services._process import ServiceControlError

POLICY_RC_D = Path("/usr/sbin/policy-rc.d")
_LOCK_WAIT = ["-o", "DPkg::Lock::Timeout=300"]


def installed(package: str) -> bool:
    done = subprocess.run(
        ["dpkg-query", "-W", "-f=${db:Status-Status}", package], capture_output=True, text=True, check=False
    )
    return done.stdout.strip() == "installed"


def has_candidate(package: str) -> bool:
    out = subprocess.run(["apt-cache", "policy", package], capture_output=True, text=True, check=False).stdout
    for line in out.splitlines():
        if line.strip().startswith("Candidate:"):
            return line.split(":", 1)[1].strip() not in ("", "(none)")
    return False


def _apt_get(args: Sequence[str], log: Path) -> bool:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    with log.open("a") as out:
        return (
            subprocess.run(
                ["apt-get", *args], stdout=out, stderr=subprocess.STDOUT, env=env, check=False
            ).returncode
            == 0
        )


def install_packages(packages: Sequence[str], say: Callable[[str], None]) -> None:
    missing = [pkg for pkg in dict.fromkeys(packages) if not installed(pkg)]
    if not missing:
        return
    if os.geteuid() != 0:
        raise ServiceControlError(f"need root to install {' '.join(missing)} (apt-get)")
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "apt.log"
        refreshed = False

        def refresh() -> bool:
            nonlocal refreshed
            say("apt-get update")
            refreshed = True
            return _apt_get(["update", "-q", *_LOCK_WAIT], log)

        for pkg in missing:
            if not refreshed and not has_candidate(pkg):
                say(f"apt-cache does not know {pkg} yet")
                if not refresh():
                    raise ServiceControlError("apt-get update failed")
        ours = not POLICY_RC_D.exists()
        if ours:
            POLICY_RC_D.write_text("#!/bin/sh\nexit 101\n")
            POLICY_RC_D.chmod(0o755)
        try:
            say(f"installing Debian packages: {' '.join(missing)}")
            begin = time.monotonic()
            install = ["install", "-y", "-q", "--no-install-recommends", *_LOCK_WAIT, *missing]
            if not _apt_get(install, log) and (refreshed or not refresh() or not _apt_get(install, log)):
                tail = log.read_text(errors="replace").strip().splitlines()[-15:]
                raise ServiceControlError(f"apt-get install {' '.join(missing)} failed: " + " | ".join(tail))
        finally:
            if ours:
                POLICY_RC_D.unlink(missing_ok=True)
        say(f"installed {' '.join(missing)} in {time.monotonic() - begin:.1f}s")
