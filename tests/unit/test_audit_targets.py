"""What an audit entry says a bulk action took, and who: every field of the filter, a long
selection as its count and digest, and an actor of one kind only."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

from duetime.model import TimerFilter
from duetime.model.audit import Actor, describe_target, filter_target
from duetime.model.tokens import TokenInfo
from duetime.timer_filters import payload_match

CREATED = datetime(2025, 3, 1, 12, tzinfo=UTC)


def test_every_field_of_the_filter_is_written() -> None:
    chosen = TimerFilter(type="order.*", payload=payload_match('customer.id="42"'), keys=("a", "b"))
    assert filter_target(chosen, ["a"]) == {
        "keys": ["a"],
        "filter": {"type": "order.*", "payload": 'customer.id="42"', "keys": ["a", "b"]},
    }
    assert describe_target(filter_target(chosen, ["a"])) == (
        'keys a; type=order.* payload=customer.id="42" keys=a,b'
    )


def test_a_long_selection_is_its_count_and_digest_and_the_entry_stays_small() -> None:
    keys = [f"order-{n:04d}-" + "k" * 240 for n in range(1000)]
    target = filter_target(TimerFilter(keys=tuple(keys), subject="s" * 300), keys)
    digest = hashlib.sha256("\n".join(keys).encode()).hexdigest()
    assert target["keys"] == {"count": 1000, "sha256": digest}
    assert target["filter"] == {
        "keys": {"count": 1000, "sha256": digest},
        "subject": {"length": 300, "sha256": hashlib.sha256(b"s" * 300).hexdigest()},
    }
    assert len(json.dumps(target)) < 600
    few = [f"k{n}" for n in range(20)]
    assert filter_target(TimerFilter(), few)["keys"] == few  # a short list stays as it is


def test_an_actor_names_its_kind() -> None:
    assert Actor("reconciler").name == "python:reconciler"
    assert Actor("token:ops").name == "python:token:ops"  # a Python caller is not a token
    assert Actor("python").name == "python"
    assert Actor("cli:root@host", "cli").name == "cli:root@host"
    assert Actor("root@host", "cli").name == "cli:root@host"
    assert Actor.of_token(None).name == "api:anonymous"
    assert Actor.of_token(None, "console") == Actor("api:anonymous", "console")
    assert Actor.cli().name.startswith("cli:")
    assert Actor.cli().via == "cli"


def test_a_token_actor_is_its_name_or_its_id() -> None:
    named = TokenInfo(1, "ops", ("shop",), False, CREATED)
    unnamed = TokenInfo(3, None, ("shop",), False, CREATED)
    assert Actor.of_token(named).name == "token:ops"
    assert Actor.of_token(unnamed, "console") == Actor("token:#3", "console")
