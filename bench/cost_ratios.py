"""duetime's costs a job as ratios to its peers' in the same run, each on a line of its own.

A per-job figure alone moves with whatever else the machine runs; the same figure of the
raw-SQL floor (or of pgqueuer) measured in the same run, in alternating rounds, moves with it,
so the ratio is what a change is judged by. Printed: the worker's and PostgreSQL backend's CPU
together and apart, and the WAL, each ÷ raw SQL; the enqueue's rate and client CPU ÷ pgqueuer's;
and the drain as a share of raw's."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol


class _Figure(Protocol):
    scenario: str
    measure: str
    values: dict[str, float | None]


WORKER_CPU = "worker CPU per job"
BACKEND_CPU = "PostgreSQL backend CPU per job"
WAL = "WAL per job (whole server)"
ENQUEUE_CPU = "enqueue: client CPU per job"
ENQUEUE_RATE = "enqueue "  # "enqueue 100,000 (batches of 1000)", "enqueue 50,000 due now"
DRAIN = "drain rate"

TARGETS = {
    "worker+backend CPU ÷ raw": ("≤", 2.0),
    "WAL ÷ raw": ("≤", 1.6),
    "drain ÷ raw": ("≥", 0.6),
    "enqueue rate ÷ pgqueuer": ("≥", 1.2),
    "enqueue client CPU ÷ pgqueuer": ("≤", 1.5),
}


def _value(figures: Sequence[_Figure], scenario: str, prefix: str, system: str) -> float | None:
    for fig in figures:
        if fig.scenario == scenario and fig.measure.startswith(prefix):
            value = fig.values.get(system)
            return None if value is None or value <= 0 else value
    return None


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a / b


def _sum(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def ratio_lines(figures: Sequence[Any]) -> list[str]:
    """One line a ratio and scenario, with its target and verdict where one is set."""
    lines: list[str] = []
    for scenario in dict.fromkeys(f.scenario for f in figures):

        def of(prefix: str, system: str, scenario: str = scenario) -> float | None:
            return _value(figures, scenario, prefix, system)

        ratios = {
            "worker+backend CPU ÷ raw": _ratio(
                _sum(of(WORKER_CPU, "duetime"), of(BACKEND_CPU, "duetime")),
                _sum(of(WORKER_CPU, "raw"), of(BACKEND_CPU, "raw")),
            ),
            "worker CPU ÷ raw": _ratio(of(WORKER_CPU, "duetime"), of(WORKER_CPU, "raw")),
            "backend CPU ÷ raw": _ratio(of(BACKEND_CPU, "duetime"), of(BACKEND_CPU, "raw")),
            "WAL ÷ raw": _ratio(of(WAL, "duetime"), of(WAL, "raw")),
            "drain ÷ raw": _ratio(of(DRAIN, "duetime"), of(DRAIN, "raw")),
            "enqueue rate ÷ pgqueuer": _ratio(
                of(ENQUEUE_RATE, "duetime"), of(ENQUEUE_RATE, "pgqueuer")
            ),
            "enqueue client CPU ÷ pgqueuer": _ratio(
                of(ENQUEUE_CPU, "duetime"), of(ENQUEUE_CPU, "pgqueuer")
            ),
        }
        lines.extend(_lines(scenario, ratios.items()))
    return lines


def _lines(scenario: str, ratios: Iterable[tuple[str, float | None]]) -> Iterable[str]:
    for name, ratio in ratios:
        if ratio is None:
            continue
        text = f"  {scenario}: duetime {name}: {ratio:.2f}x"
        if name in TARGETS:
            sign, target = TARGETS[name]
            passed = ratio <= target if sign == "≤" else ratio >= target
            text += f" (target {sign} {target:g}x: {'PASS' if passed else 'FAIL'})"
        yield text
