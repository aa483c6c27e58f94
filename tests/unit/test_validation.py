"""Field checks shared by every interface: each failure names its field."""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from enum import IntEnum

import pytest
from hypothesis import given
from hypothesis import strategies as st

from duetime import validation
from duetime.errors import InvalidInput
from duetime.model import NewTimer
from duetime.requests import TimerRequest
from duetime.store.codec import payload_text
from duetime.support.jsontext import json_text
from duetime.validation import (
    check_expires_after,
    check_key,
    check_max_attempts,
    check_namespace,
    check_payload,
    check_priority,
    check_subject,
    check_type,
    parse_payload_text,
)


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: check_key(""), "key"),
        (lambda: check_key("   "), "key"),
        (lambda: check_key("x" * 256), "key"),
        (lambda: check_key("a\nb"), "key"),
        (lambda: check_key(12), "key"),
        (lambda: check_type(""), "type"),
        (lambda: check_type("has space"), "type"),
        (lambda: check_subject(""), "subject"),
        (lambda: check_namespace("Bad Name"), "namespace"),
        (lambda: check_namespace(""), "namespace"),
        (lambda: check_payload({"x": float("nan")}), "payload"),
        (lambda: check_payload({"x": object()}), "payload"),
        (lambda: check_payload("x" * 100, max_bytes=50), "payload"),
        (lambda: parse_payload_text("{nope"), "payload"),
        (lambda: check_max_attempts(0), "max_attempts"),
        (lambda: check_max_attempts(True), "max_attempts"),
        (lambda: check_priority(-1), "priority"),
        (lambda: check_priority(10), "priority"),
        (lambda: check_priority("high"), "priority"),
        (lambda: check_priority(True), "priority"),
        (lambda: check_priority(2.0), "priority"),
        (lambda: check_expires_after(-5), "expires_after"),
        (lambda: check_expires_after("soon"), "expires_after"),
    ],
)
def test_bad_values_name_their_field(call: object, field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        call()  # type: ignore[operator]
    assert info.value.field == field
    assert field in str(info.value)


def test_missing_key_is_generated_and_unique() -> None:
    keys = {check_key(None) for _ in range(10_000)}
    assert len(keys) == 10_000
    assert all(len(key) == 32 and set(key) <= set("0123456789abcdef") for key in keys)


def test_generated_keys_sort_by_the_time_they_were_made(monkeypatch: pytest.MonkeyPatch) -> None:
    # Later keys sort later (a unique index takes them at its right edge); keys of the same
    # millisecond differ in their 80 random bits.
    start = 1_764_000_000_000  # 2025-11-24, in milliseconds
    made = []
    for step in range(200):
        now_ns = (start + step) * 1_000_000 + 999_999
        monkeypatch.setattr(validation.time, "time_ns", lambda now_ns=now_ns: now_ns)
        made.extend(check_key(None) for _ in range(3))
    assert made[0][:12] == f"{start:012x}"
    assert sorted(made[::3]) == made[::3]
    assert len(set(made)) == len(made)


def test_keys_drawn_together_are_keys_as_drawn_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # A chunk's keys in one draw: the same layout, none twice, across refills of the random
    # bytes (4 KiB: 409 keys a refill), the millisecond's digits first.
    now_ns = 1_764_000_000_123 * 1_000_000
    monkeypatch.setattr(validation.time, "time_ns", lambda: now_ns)
    alone = check_key(None)
    together = validation.generate_keys(1000) + validation.generate_keys(1) + [check_key(None)]
    assert validation.generate_keys(0) == []
    assert len(together) == 1002
    assert len({alone, *together}) == 1003
    for key in together:
        assert len(key) == 32
        assert set(key) <= set("0123456789abcdef")
        assert key[:12] == alone[:12] == f"{1_764_000_000_123:012x}"


def test_a_forked_child_never_repeats_its_parents_keys() -> None:
    check_key(None)  # the buffer of random bytes is filled and partly used
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next keys, to the parent
        os.close(read)
        os.write(write, " ".join(check_key(None) for _ in range(300)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split())
    os.waitpid(pid, 0)
    parent = {check_key(None) for _ in range(300)}
    assert len(child) == 300
    assert not child & parent


def test_payload_round_trips_through_json() -> None:
    assert check_payload({"a": [1, 2.5, None, True], "b": "é"}) == {
        "a": [1, 2.5, None, True],
        "b": "é",
    }
    assert check_payload((1, 2)) == [1, 2]


def test_expires_after_accepts_seconds_iso_and_timedelta() -> None:
    assert check_expires_after(90) == timedelta(seconds=90)
    assert check_expires_after("PT1H") == timedelta(hours=1)
    assert check_expires_after(timedelta(minutes=5)) == timedelta(minutes=5)
    assert check_expires_after(None) is None


def test_numeric_subject_becomes_text() -> None:
    assert check_subject(1234) == "1234"


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: check_key("\ud800"), "key"),
        (lambda: check_subject("user\ud800"), "subject"),
        (lambda: check_subject("a\x00b"), "subject"),
        (lambda: check_payload({"text": "\ud800"}), "payload"),
        (lambda: check_payload({"text": "nul\x00here"}), "payload"),
        (lambda: check_payload({"k\x00": 1}), "payload"),
    ],
)
def test_text_no_backend_can_store_is_refused(call: object, field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        call()  # type: ignore[operator]
    assert info.value.field == field


def test_a_literal_backslash_u0000_is_fine() -> None:
    assert check_payload({"text": "\\u0000"}) == {"text": "\\u0000"}


@pytest.mark.parametrize(
    "payload",
    [
        {"due": 1764000000.25, "n": 3, "ok": True, "none": None, "s": "é\u2028"},
        {"int subclass": IntEnum("Level", "LOW")["LOW"]},
        {1: "an integer key"},
        {"nested": {"a": [1, (2, 3)]}},
        {"big": 10**200, "tiny": 5e-324, "neg zero": -0.0},
        {},
    ],
    ids=["flat", "int subclass", "integer key", "nested", "numbers", "empty"],
)
def test_a_payload_is_what_its_text_reads_back_as_and_not_the_callers(payload: object) -> None:
    """Flat objects are copied rather than read back from their text: the same value either way,
    of the same exact types, and never the caller's own object."""
    value, text = validation.encode_payload(payload)
    read_back = json.loads(text)
    assert value == read_back
    assert json.dumps(value) == json.dumps(read_back)
    assert [type(item) for item in value.values()] == [  # type: ignore[union-attr]
        type(item) for item in read_back.values()
    ]
    assert value is not payload


def test_a_flat_payload_is_checked_as_any_other() -> None:
    for bad, says in (
        ({"x": float("nan")}, "is not JSON"),
        ({"x": "\u0000"}, "NUL"),
        ({"x": "\ud800"}, "not valid Unicode"),
        ({"x": "é" * 200}, "is 408 bytes as JSON"),  # 6 + 400 + 2
    ):
        with pytest.raises(InvalidInput, match=says) as info:
            validation.encode_payload(bad, max_bytes=400)
        assert info.value.field == "payload"


def test_a_kept_payload_text_belongs_to_that_payload_only() -> None:
    request = TimerRequest("t", {"b": [1, "ü", 2.5], "a": None}, delay=0)
    now = datetime(2025, 3, 1, tzinfo=UTC)
    kept = request.resolve("ns", now, 3, 1000, straight_to_store=True)
    assert kept.payload_json == '{"b":[1,"ü",2.5],"a":null}' == json_text(kept.payload)
    assert payload_text(kept) == kept.payload_json
    assert request.resolve("ns", now, 3, 1000).payload_json is None  # e.g. AsyncApp.prepare
    copy = replace(kept, payload={"other": 1})  # a copy starts without the text
    assert copy.payload_json is None
    assert payload_text(copy) == '{"other":1}'
    assert copy == replace(kept, payload={"other": 1})


def test_a_key_not_given_is_left_to_the_store_only_on_the_way_there() -> None:
    now = datetime(2025, 3, 1, tzinfo=UTC)
    request = TimerRequest("t", None, delay=0)
    assert request.resolve("ns", now, 3, 1000, straight_to_store=True).key is None
    keyed = TimerRequest("t", None, delay=0, key="k")
    assert keyed.resolve("ns", now, 3, 1000, straight_to_store=True).key == "k"
    # Handed to a caller (AsyncApp.prepare), who may send it twice: a key of its own.
    prepared = request.resolve("ns", now, 3, 1000)
    assert prepared.key is not None
    assert len(prepared.key) == 32


def test_the_fast_new_timer_maker_matches_the_dataclass() -> None:
    now = datetime(2025, 3, 1, tzinfo=UTC)
    request = TimerRequest(
        "t",
        {"a": 1},
        local="2025-03-30T02:30",
        timezone="Europe/London",
        key="k",
        subject="s",
        correlation_id="c",
        max_attempts=4,
        expires_after=60,
    )
    made = request.resolve("ns", now, 3, 1000, producer="p")
    assert made == NewTimer(
        namespace="ns",
        key="k",
        type="t",
        payload={"a": 1},
        due_at=made.due_at,
        max_attempts=4,
        subject="s",
        correlation_id="c",
        expires_after=timedelta(seconds=60),
        local=datetime(2025, 3, 30, 2, 30),
        timezone="Europe/London",
        disambiguation="compatible",
        producer="p",
    )
    assert made.due_at == datetime(2025, 3, 30, 1, 30, tzinfo=UTC)


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(JSON_VALUES)
def test_json_text_is_the_standard_compact_encoding(value: object) -> None:
    standard = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    assert json_text(value) == standard


def test_values_json_cannot_hold_are_refused_as_payloads() -> None:
    cyclic: list[object] = []
    cyclic.append(cyclic)
    for value in (cyclic, {"x": float("nan")}, {"s": {1, 2}}, float("inf")):
        with pytest.raises(InvalidInput) as raised:
            check_payload(value)
        assert raised.value.field == "payload"


def test_a_timer_request_takes_its_fields_in_order_with_their_defaults() -> None:
    parameters = list(inspect.signature(TimerRequest).parameters.values())
    fields = dataclasses.fields(TimerRequest)
    assert [p.name for p in parameters] == [f.name for f in fields]
    assert [p.default for p in parameters[1:]] == [f.default for f in fields[1:]]
    made = TimerRequest("t", {"a": 1}, key="k", expires_after=5)
    assert (made.type, made.payload, made.key, made.expires_after) == ("t", {"a": 1}, "k", 5)
    assert made == TimerRequest(type="t", payload={"a": 1}, key="k", expires_after=5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.key = "other"  # type: ignore[misc]


def _nested(levels: int) -> object:
    value: object = 1
    for level in range(levels):
        value = [value] if level % 2 else {"k": value}
    return value


@pytest.mark.parametrize("levels", [64, 65, 1500, 100_000])
def test_payload_nesting_is_bounded(levels: int) -> None:
    value = _nested(levels)
    if levels <= validation.MAX_PAYLOAD_DEPTH:
        assert check_payload(value) == value
        return
    with pytest.raises(InvalidInput, match="deeper than 64 levels") as raised:
        check_payload(value)
    assert raised.value.field == "payload"


def test_deeply_nested_payload_text_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidInput, match="deeper than 64 levels") as raised:
        parse_payload_text("[" * 100_000 + "]" * 100_000)
    assert raised.value.field == "payload"
    wide = "[" + ",".join("[[1]]" for _ in range(1000)) + "]"  # many brackets, 3 levels
    assert check_payload(parse_payload_text(wide)) == json.loads(wide)


@pytest.mark.parametrize("char", ["\n", "\r", "\x1b", "\x7f", "\x85", "\x9b", "\u2028", "\t"])
@pytest.mark.parametrize(
    ("check", "field"),
    [
        (check_key, "key"),
        (check_subject, "subject"),
        (validation.check_correlation_id, "correlation_id"),
        (validation.check_producer, "producer"),
        (check_type, "type"),
        (check_namespace, "namespace"),
    ],
)
def test_identifiers_refuse_control_characters(char: str, check: object, field: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        check(f"user{char}42")  # type: ignore[operator]
    assert raised.value.field == field
