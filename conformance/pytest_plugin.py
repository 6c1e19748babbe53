"""pytest plug-in: command-line options for the conformance base classes (``conformance.testing``).

Loaded by the ``pytest11`` entry point (or ``pytest_plugins = ["conformance.pytest_plugin"]``).
It imports nothing of the harness at load time, so it can never break an unrelated pytest run.

Options: ``--ratchet-profile ci|deep``, ``--ratchet-examples N``, ``--ratchet-seed N``,
``--ratchet-failures DIR``. The base classes read them (and the RATCHET_PROFILE / RATCHET_EXAMPLES /
RATCHET_SEED environment variables when the plug-in is not loaded).
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ratchet", "Ratchet conformance harness")
    group.addoption("--ratchet-profile", default=None, help="conformance profile: ci (default) or deep")
    group.addoption(
        "--ratchet-examples", type=int, default=None, help="examples per suite (overrides the profile)"
    )
    group.addoption("--ratchet-seed", type=int, default=None, help="Hypothesis seed for conformance suites")
    group.addoption(
        "--ratchet-failures", default=None, help="directory for failure files (.ratchet/failures)"
    )
