"""One measurement of one section on one backend, whose failure is a figure of the report, not a crash."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def guarded(
    errors: dict[str, str], say: Callable[[str], None], section: str, backend: str, body: Callable[[], T]
) -> T | None:
    """``body()``; if it raises, the exception's last line goes to ``errors`` under "<section> <backend>"
    and to ``say``, and the answer is None (a KeyboardInterrupt still stops the bench)."""
    try:
        return body()
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        last = traceback.format_exception(exc)[-1].strip()
        errors[f"{section} {backend}"] = last
        say(f"{section} {backend}: ERROR {last}")
        return None
