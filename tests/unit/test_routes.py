"""Routes as pure functions: patterns, the claim rule, where an event goes, delivery keys."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from duetime.bus.routes import (
    HANDLER,
    Direct,
    Fan,
    Route,
    check_pattern,
    claim_filter,
    claims,
    delivery_key,
    describe,
    destinations_for,
    event_key,
    fan_out_note,
    matches,
    plan,
    subscriptions_of,
)
from duetime.errors import InvalidInput
from duetime.model import ClaimFilter, Subscription
from duetime.store.codec import like_pattern

TYPE_CHARS = "ab_.:/-"
types = st.text(TYPE_CHARS, min_size=1, max_size=12).filter(lambda t: t[0] not in ".:/-")
patterns = st.text(TYPE_CHARS + "*", min_size=1, max_size=12).filter(lambda p: p[0] not in ".:/-")


@pytest.mark.parametrize(
    ("pattern", "type", "expected"),
    [
        ("order.paid", "order.paid", True),
        ("order.paid", "order.paid.v2", False),
        ("order.*", "order.paid", True),
        ("order.*", "order.paid.v2", True),
        ("order.*", "order.", True),
        ("order.*", "order", False),
        ("order.*", "orders.paid", False),
        ("*", "anything:at/all", True),
        ("*.created", "user.created", True),
        ("*.created", "user.created.v2", False),
        ("a_*", "a_b", True),
        ("a_*", "aXb", False),  # _ is literal here, whatever SQL LIKE makes of it
        ("a*b*c", "aXXbYYc", True),
        ("a*b*c", "acb", False),
    ],
)
def test_matches(pattern: str, type: str, expected: bool) -> None:
    assert matches(check_pattern(pattern), type) is expected


@pytest.mark.parametrize("bad", ["", "order paid", "order.?", "[ab]", "%", ".x", 3, None])
def test_a_bad_pattern_names_the_field(bad: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        check_pattern(bad, "routes[2].type")
    assert caught.value.field == "routes[2].type"


def test_a_long_pattern_is_refused() -> None:
    with pytest.raises(InvalidInput):
        check_pattern("a" * 201)


def _like(pattern: str, value: str) -> bool:
    """SQL LIKE with backslash escapes, as PostgreSQL reads it."""
    out = []
    chars = iter(pattern)
    for ch in chars:
        if ch == "\\":
            out.append(re.escape(next(chars)))
        elif ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        else:
            out.append(re.escape(ch))
    return re.fullmatch("".join(out), value, re.DOTALL) is not None


@given(patterns, types)
def test_the_like_pattern_matches_exactly_what_the_glob_does(pattern: str, type: str) -> None:
    assert _like(like_pattern(pattern), type) == matches(pattern, type)


@given(types)
def test_an_exact_pattern_matches_only_itself(type: str) -> None:
    assert matches(type, type)
    assert matches("*", type)
    assert not matches(type + "x", type)


@given(st.lists(st.tuples(patterns, st.lists(st.sampled_from(["h1", "h2", HANDLER]), min_size=1))))
def test_claim_filter_takes_an_event_iff_a_subscription_matches(
    raw: list[tuple[str, list[str]]],
) -> None:
    subscriptions = [
        Subscription("ns", p, tuple(dict.fromkeys(d)))
        for p, d in raw
        if HANDLER not in d or "*" not in p  # handlers are for exact types only
    ]
    claim = claim_filter(subscriptions)
    for type in ["a", "a.b", "b_a", "ab:c"]:
        wanted = any(matches(s.pattern, type) for s in subscriptions)
        assert claims(claim, type, None) == wanted
        for destination in ("h1", "h2", HANDLER):
            served = any(
                destination in s.destinations and (destination != HANDLER or s.pattern == type)
                for s in subscriptions
            )
            assert claims(claim, type, destination) == served


def test_claim_filter_splits_exact_types_globs_and_destinations() -> None:
    subscriptions = subscriptions_of(
        "ns",
        ["user.created", "order.paid"],
        [Route("order.*", ("hook", "bus")), Route("audit.logged", ("bus",))],
    )
    assert claim_filter(subscriptions) == ClaimFilter(
        types=("user.created", "order.paid", "audit.logged"),
        patterns=("order.*",),
        destinations=("hook", "bus"),
        handler_types=("user.created", "order.paid"),
    )
    assert ClaimFilter.of_types(["x"]) == ClaimFilter(types=("x",), handler_types=("x",))


def test_destinations_for_is_the_union_handler_first() -> None:
    everyone = [
        Subscription("ns", "order.*", ("hook", "bus")),
        Subscription("ns", "order.paid", (HANDLER,)),
        Subscription("ns", "*", ("audit",)),
        Subscription("other", "order.paid", ("elsewhere",)),
    ]
    assert destinations_for("order.paid", "ns", everyone) == (HANDLER, "audit", "bus", "hook")
    assert destinations_for("user.created", "ns", everyone) == ("audit",)
    assert destinations_for("user.created", "nobody", everyone) == ()


@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "a.*", "*", "b"]), st.sampled_from(["x", "y", HANDLER]))
    ),
    st.sets(st.sampled_from(["x", "y", HANDLER])),
    st.sampled_from(["a", "a.b", "b"]),
)
def test_plan_delivers_directly_only_to_the_one_destination_served_here(
    raw: list[tuple[str, str]], served: set[str], type: str
) -> None:
    everyone = [Subscription("ns", p, (d,)) for p, d in raw]
    wanted = destinations_for(type, "ns", everyone)
    decided = plan(type, "ns", everyone, frozenset(served))
    if len(wanted) == 1 and wanted[0] in served:
        assert decided == Direct(wanted[0])
    elif not wanted:
        assert decided == Direct(HANDLER)
    else:
        assert decided == Fan(wanted)
        assert len(set(decided.destinations)) == len(decided.destinations)


def test_a_single_destination_served_elsewhere_fans_out() -> None:
    everyone = [Subscription("ns", "order.*", ("hook",))]
    assert plan("order.paid", "ns", everyone, frozenset([HANDLER])) == Fan(("hook",))
    assert plan("order.paid", "ns", everyone, frozenset(["hook"])) == Direct("hook")


@given(st.text(min_size=1, max_size=30), st.sampled_from(["hook", HANDLER, "a.b-c_d"]))
def test_delivery_keys_give_back_the_event_key(key: str, destination: str) -> None:
    row = delivery_key(key, destination)
    assert row == f"{key}@{destination}"
    assert event_key(row, destination) == key
    assert event_key(key, None) == key


def test_notes_and_descriptions() -> None:
    assert fan_out_note(("hook",)) == "fanned out to 1 delivery: hook"
    assert fan_out_note((HANDLER, "bus")) == "fanned out to 2 deliveries: handler, bus"
    subscriptions = (
        Subscription("ns", "order.*", ("hook", "bus")),
        Subscription("ns", "user.created", (HANDLER,)),
    )
    assert describe(subscriptions) == "ns: order.* → hook, bus; user.created → handler"
    assert describe(()) == ""
    assert Subscription.from_dict(subscriptions[0].to_dict()) == subscriptions[0]
