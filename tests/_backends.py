"""Test parameter lists read from the backend registry (conformance/backends.py).

``backend_params("commit")`` is one ``pytest.param`` per registered commit backend; one that needs
a real server carries ``service(name)``, so it is skipped locally and fails under ``CI=true`` when
that server is down (tests/conftest.py). A backend added to the registry is tested with no edit here.
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance.backends import REGISTRIES, backend_names


def backend_params(family: str, *groups: str) -> list[Any]:
    """The registered backends of ``family`` in ``groups`` (default: all), as pytest params."""
    names = dict.fromkeys(n for group in groups or ("all",) for n in backend_names(family, group))
    params = []
    for name in names:
        service = REGISTRIES[family][name].service
        marks = [pytest.mark.service(service)] if service is not None else []
        params.append(pytest.param(name, id=name, marks=marks))
    return params
