"""A limit's glob matched in Python (``glob_match``, for the claims that can tell every type is
governed) as the stores match it in SQL."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from duetime.model.flow_rules import glob_match

patterns = st.text("ab.*", min_size=1, max_size=5)


def matches(pattern: str, text: str) -> bool:
    """A glob as SQLite's GLOB and PostgreSQL's LIKE take it here: ``*`` any run."""
    regex = ".*".join(re.escape(part) for part in pattern.split("*"))
    return re.fullmatch(regex, text, re.DOTALL) is not None


@given(patterns, st.text("ab.\n", max_size=8))
def test_glob_match_is_the_stores_glob(pattern: str, text: str) -> None:
    assert glob_match(pattern.split("*"), text) == matches(pattern, text)
