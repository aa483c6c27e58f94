"""The source says why, not what a benchmark once measured: figures from one machine on one day
go stale while the code stays, so they belong in commit messages and bench/README.md.

Each pattern is a shape such a note took: a timing per job, CPU before and after, a share of a
run on a loaded machine, a speed-up, a pointer to the benchmarks' results.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "duetime"

LAB_NOTES = [
    r"bench/README",
    r"\d[\d,.]* ?(µs|ms|s) of CPU",
    r"\d ?(µs|ms|s|%),? instead of \d",
    r"loaded (\d-core )?machine",
    r"at the median",
    r"about (a quarter|a third|half) (less|more|of)",
    r"\d+(\.\d+)? ?µs (a|per) (job|payload|call|request)",
    "(x|\u00d7|times) faster",
    r"\(\d+ ?% of",
    r"~\d+ ?ms",
]
SOURCES = sorted(PACKAGE.rglob("*.py"))


def test_the_source_is_read_at_all() -> None:
    assert len(SOURCES) > 200


@pytest.mark.parametrize("pattern", LAB_NOTES)
def test_no_measurement_is_kept_in_the_source(pattern: str) -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for path in SOURCES
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(pattern, line)
    ]
    assert found == []
