"""How many timers the slow tier's load tests use: few by default, the full sizes on request.

The properties those tests check (one effect per timer under kills and restarts, a rate held
across processes, nothing lost) hold at a few thousand timers as at fifty thousand; volume for
its own sake belongs to bench/. ``DUETIME_TEST_SCALE=full`` runs them at their full sizes.
"""

from __future__ import annotations

import os

SCALES = ("small", "full")


def _scale() -> str:
    scale = os.environ.get("DUETIME_TEST_SCALE", "").strip().lower() or "small"
    if scale not in SCALES:
        raise ValueError(f"DUETIME_TEST_SCALE must be one of {', '.join(SCALES)}, not {scale!r}")
    return scale


FULL = _scale() == "full"


def sized(small: int, full: int, override: str | None = None) -> int:
    """``full`` under ``DUETIME_TEST_SCALE=full``, else ``small``; the environment variable
    ``override`` names, when set, wins over both (an exact count for one test file)."""
    if override is not None and os.environ.get(override):
        return int(os.environ[override])
    return full if FULL else small
