"""The status of many rules from counts per type (``tally``), checked against the per-rule
filters the claims apply (``FlowPlan.counted_by``), which the stores once ran one query each."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from duetime.model.limits import (
    FlowRule,
    RuleFilter,
    TypeCount,
    destination_key,
    glob_match,
    plan_of,
    tally,
)

NOW = datetime(2025, 3, 1, tzinfo=UTC)
LETTERS = "ab.*"
patterns = st.text(LETTERS, min_size=1, max_size=5)
types = st.text("ab.", min_size=0, max_size=6)


def matches(pattern: str, text: str) -> bool:
    """A glob as SQLite's GLOB and PostgreSQL's LIKE take it here: ``*`` any run."""
    regex = ".*".join(re.escape(part) for part in pattern.split("*"))
    return re.fullmatch(regex, text, re.DOTALL) is not None


@given(patterns, st.text("ab.\n", max_size=8))
def test_glob_match_is_the_stores_glob(pattern: str, text: str) -> None:
    assert glob_match(pattern.split("*"), text) == matches(pattern, text)


def counted(rows: RuleFilter, count: TypeCount) -> bool:
    """Whether a rule whose counting filter is ``rows`` counts the rows of ``count``."""
    if rows.destination is not None and count.destination != rows.destination:
        return False
    if count.destination is not None and count.destination in rows.destinations:
        return False
    if not matches(rows.only, count.type):
        return False
    return not any(matches(p, count.type) for p in rows.excluded)


rules_of = st.lists(
    st.tuples(patterns, st.booleans(), st.booleans()), max_size=8, unique_by=lambda r: r[0]
)
counts_of = st.lists(
    st.tuples(types, st.sampled_from([None, "hook", "bus"]), st.integers(0, 3), st.integers(0, 3)),
    max_size=10,
)


@given(rules_of, st.booleans(), counts_of)
def test_tally_counts_what_each_rules_filter_takes(
    specs: list[tuple[str, bool, bool]],
    hook_rule: bool,
    raw: list[tuple[str, str | None, int, int]],
) -> None:
    rules = [
        FlowRule("ns", p, concurrency=1 if limited or not paused else None, paused=paused)
        for p, limited, paused in specs
    ]
    if hook_rule:
        rules.append(FlowRule("ns", destination_key("hook"), concurrency=1, destination="hook"))
    counts = [
        TypeCount(t, d, running, held, NOW - timedelta(seconds=held) if held else None)
        for t, d, running, held in raw
    ]
    plan = plan_of(rules)
    for status in tally(rules, rules, counts):
        mine = [c for c in counts if counted(plan.counted_by(status.rule), c)]
        assert status.running == sum(c.running for c in mine), status.rule
        assert status.held == sum(c.held for c in mine), status.rule
        oldest = [c.oldest_held_at for c in mine if c.oldest_held_at is not None]
        assert status.oldest_held_at == min(oldest, default=None)


def test_a_page_shows_only_its_rules_but_every_rule_shadows() -> None:
    rules = [FlowRule("ns", "a.*", concurrency=1), FlowRule("ns", "a.b", concurrency=1)]
    counts = [TypeCount("a.b", None, 0, 2, NOW), TypeCount("a.c", None, 0, 1, NOW)]
    (only,) = tally(rules, rules[:1], counts)
    assert (only.rule.pattern, only.held) == ("a.*", 1)  # a.b is its own rule's
