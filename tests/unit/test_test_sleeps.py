"""The suite's own sleeps stay few, and no new test guesses how long "nothing happens" takes.

A test that sleeps a fixed time to let something happen, or to prove that nothing does,
fails on a busy machine (or passes without proving anything). Tests wait for a signal instead:
a worker's observer hook (``tests/signals.py``), a lock another session waits for, a marker
that comes after what it proves; polls go through ``tests/waiting.py``. The sleeps and
wall-clock bounds still here are listed below and may only go: a fixed sleep whose passing
time is what the test is about says so on its line (``# timed: why``).
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

CEILING = 33
"""The most non-zero sleeps the tests may hold, polls and stand-ins for slow work included."""

FIXED_LEFT: dict[str, int] = {}
"""Fixed waits not yet replaced by a signal, per file: none is left, and none may come back."""

BOUNDS_LEFT = {
    "tests/acceptance/test_api_tenant_isolation.py": 2,
    "tests/integration/test_destinations.py": 1,
    "tests/integration/test_failover.py": 1,
    # The guarantee under test: every timer done within the failover's own measured time plus
    # the lease (and a catch-up margin), a bound that grows with the failover it follows.
    "tests/integration/test_patroni_failover.py": 1,
    "tests/integration/test_postgres_workers.py": 1,
    "tests/store/test_postgres_resilience.py": 1,
}
"""Wall-clock upper bounds not yet turned into work bounds, per file: may only fall."""


@functools.cache
def counter() -> ModuleType:
    path = ROOT / "scripts" / "count_test_sleeps.py"
    spec = importlib.util.spec_from_file_location("count_test_sleeps", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@functools.cache
def found_in_tests() -> list[Any]:
    return list(counter().scan_tree(ROOT / "tests"))


def by_file(kind: str) -> Counter[str]:
    found = found_in_tests()
    return Counter(str(f.path.relative_to(ROOT)) for f in found if f.kind == kind)


def test_the_tests_sleep_at_most_the_ceiling() -> None:
    sleeps = [f for f in found_in_tests() if f.kind != "bound"]
    assert len(sleeps) <= CEILING, "\n".join(map(str, sleeps))


def test_no_test_adds_a_fixed_wait() -> None:
    fixed = by_file("fixed")
    grown = {path: n for path, n in fixed.items() if n > FIXED_LEFT.get(path, 0)}
    assert grown == {}, (
        "a test sleeps a fixed time: wait for a signal (tests/signals.py, tests/waiting.py), "
        "or mark the line `# timed: why` when the time passing is the subject"
    )


def test_no_test_adds_a_wall_clock_bound() -> None:
    bounds = by_file("bound")
    grown = {path: n for path, n in bounds.items() if n > BOUNDS_LEFT.get(path, 0)}
    assert grown == {}, "a test asserts how fast something ran: that belongs to bench/"


def test_the_counter_tells_polls_fixed_waits_work_and_bounds_apart(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(
        """
import asyncio, time

def handler(event):
    time.sleep(0.5)

def test_one():
    time.sleep(0.3)
    time.sleep(0)
    time.sleep(1.0)  # timed: a lease runs out
    while not done():
        time.sleep(0.01)
    started = time.monotonic()
    assert time.monotonic() - started < 2.0
    deadline = time.monotonic() + 5
    assert time.monotonic() < deadline

async def test_two():
    async def main():
        await asyncio.sleep(0.2)
    async def handle(event):
        await asyncio.sleep(0.1)
"""
    )
    found = counter().scan_tree(tmp_path)
    assert [(f.line, f.kind) for f in found] == [
        (5, "work"),
        (8, "fixed"),
        (10, "timed"),
        (12, "poll"),
        (14, "bound"),
        (20, "fixed"),
        (22, "work"),
    ]
