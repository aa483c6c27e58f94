"""A chaos battery for duetime: workers under faults, a producer, and a total-queue check.

``bench/chaos.py`` is the command line; the test suite calls :func:`run` and
:func:`run_skew_scenario` directly (short runs). Everything here uses duetime's public API and
reads the store's tables with SQL for the checks; nothing in ``src/duetime`` depends on it.
The names are imported on first use: the worker, producer and reference clock run as
``python -m bench.chaoslib.<module>`` and must not be imported by the package first.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ChaosConfig", "Report", "run", "run_skew_scenario"]


def __getattr__(name: str) -> Any:
    if name == "Report":
        from bench.chaoslib.classify import Report

        return Report
    if name in __all__:
        from bench.chaoslib import scenario

        return getattr(scenario, name)
    raise AttributeError(name)
