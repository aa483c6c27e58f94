"""The fast constructors build the same frozen records as ``__init__``."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from duetime.model import Finish, NewTimer, Outcome, PutResult, Status, Timer
from duetime.model.fast_records import (
    make_done,
    make_new_timer,
    make_put_result,
    make_timer,
    slot_setter,
)
from duetime.requests import TimerRequest

NOW = datetime(2026, 3, 29, 1, 30, tzinfo=UTC)


def values() -> list[object]:
    """One distinct value per field, in declaration order, so a swapped pair shows."""
    by_name: dict[str, object] = {
        "id": 7,
        "namespace": "billing",
        "key": "invoice-1",
        "type": "InvoiceDue",
        "payload": {"amount": 12},
        "subject": "customer-9",
        "due_at": NOW,
        "status": Status.RUNNING,
        "attempts": 2,
        "max_attempts": 5,
        "registered_at": NOW - timedelta(days=1),
        "updated_at": NOW - timedelta(hours=1),
        "run_at": NOW + timedelta(minutes=1),
        "correlation_id": "corr",
        "expires_after": timedelta(hours=2),
        "local": datetime(2026, 3, 29, 2, 30),
        "timezone": "Europe/London",
        "disambiguation": "later",
        "fired_at": NOW + timedelta(seconds=1),
        "completed_at": NOW + timedelta(seconds=2),
        "last_error": "boom",
        "lease_owner": "node-1",
        "lease_expires_at": NOW + timedelta(seconds=30),
        "destination": "nats",
        "producer": "api",
        "trace_context": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "priority": 4,
        "claim_token": 987654321,
        "window": timedelta(minutes=15),
        "spread": "even",
    }
    names = [f.name for f in dataclasses.fields(Timer)]
    assert sorted(names) == sorted(by_name), "a field was added: give it a value here"
    return [by_name[name] for name in names]


def test_make_timer_builds_what_the_constructor_builds() -> None:
    fast = make_timer(*values())
    assert type(fast) is Timer
    assert fast == Timer(*values())
    assert fast.key == "invoice-1"
    assert fast.lease_owner == "node-1"
    assert fast.claim_token == Timer(*values()).claim_token == 987654321


def test_a_made_timer_stays_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        make_timer(*values()).status = Status.DONE  # type: ignore[misc]


def test_make_timer_wants_every_field() -> None:
    # The claim's token and the run window are optional (a timer read outside a claim has no
    # token, a claimed one no window); the rest is not.
    with pytest.raises(TypeError):
        make_timer(*values()[:-4])  # type: ignore[call-arg]


def test_make_done_builds_the_done_finish_the_constructor_builds() -> None:
    made = make_done(7, 3, 987654321, NOW)
    assert type(made) is Finish
    assert made == Finish(7, 3, Outcome.DONE, claim_token=987654321, started_at=NOW)
    unknown = make_done(8, 1, None, None)
    assert unknown == Finish(8, 1, Outcome.DONE)
    assert {f.name for f in dataclasses.fields(Finish)} == {
        "timer_id",
        "attempt",
        "outcome",
        "error",
        "run_at",
        "traceback",
        "claim_token",
        "started_at",
    }, "a field was added: make_done must set it"
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.outcome = Outcome.DEAD  # type: ignore[misc]


def test_make_new_timer_sets_every_field_the_constructor_does() -> None:
    by_name: dict[str, object] = {
        "namespace": "billing",
        "key": None,
        "type": "InvoiceDue",
        "payload": {"amount": 12},
        "due_at": NOW,
        "max_attempts": 5,
        "subject": "customer-9",
        "correlation_id": "corr",
        "expires_after": timedelta(hours=2),
        "local": datetime(2026, 3, 29, 2, 30),
        "timezone": "Europe/London",
        "disambiguation": "later",
        "producer": "api",
        "trace_context": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01 k=v",
        "priority": 4,
        "window": timedelta(minutes=15),
        "spread": "even",
        "run_at": NOW + timedelta(minutes=3),
        "payload_json": '{"amount":12}',
    }
    names = [f.name for f in dataclasses.fields(NewTimer)]
    assert names == list(by_name), "a field was added or moved: give it a value here"
    made = make_new_timer(**by_name)  # type: ignore[arg-type]
    assert type(made) is NewTimer
    made_fields = {name: value for name, value in by_name.items() if name != "payload_json"}
    assert made == NewTimer(**made_fields)  # type: ignore[arg-type]
    assert {name: getattr(made, name) for name in names} == by_name


def test_slot_setter_names_a_field() -> None:
    with pytest.raises(AttributeError, match="no field 'to_dict'"):
        slot_setter(Timer, "to_dict")


def test_make_put_result_builds_what_the_constructor_builds() -> None:
    timer = make_timer(*values())
    made = make_put_result("updated", timer)
    assert type(made) is PutResult
    assert made == PutResult("updated", timer)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.action = "kept"  # type: ignore[misc]


def test_a_request_has_every_field_it_was_given_and_stays_frozen() -> None:
    given: dict[str, object] = {
        f.name: f"value of {f.name}" for f in dataclasses.fields(TimerRequest)
    }
    made = TimerRequest(**given)  # type: ignore[arg-type]
    assert type(made) is TimerRequest
    assert {name: getattr(made, name) for name in given} == given
    assert made == TimerRequest(**given)  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.key = "other"  # type: ignore[misc]

    @dataclasses.dataclass(frozen=True, slots=True, init=False)
    class Tagged(TimerRequest):  # a subclass keeps its class and its own slots
        tag: str = "t"

    tagged = Tagged("a.type", {"n": 1}, key="k")
    assert type(tagged) is Tagged
    assert (tagged.type, tagged.payload, tagged.key, tagged.at) == ("a.type", {"n": 1}, "k", None)
