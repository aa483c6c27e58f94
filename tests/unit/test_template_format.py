"""A custom envelope's text: what an absent value becomes inside a string."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from duetime.destinations.base import Delivery
from duetime.destinations.formats import make_format
from duetime.handlers import Event

DUE = datetime(2025, 3, 15, 13, 0, tzinfo=UTC)


def rendered(template: object, *, subject: str | None, payload: object) -> object:
    event = Event(
        id=7,
        namespace="shop",
        key="k1",
        type="order.paid",
        payload=payload,
        subject=subject,
        due_at=DUE,
        attempt=1,
        max_attempts=3,
        correlation_id=None,
        fired_at=None,
    )
    message = make_format({"template": template}).render(Delivery.from_event(event, "hook"), "http")
    return json.loads(message.body)


def test_a_missing_subject_is_empty_text_not_null() -> None:
    template = {
        "text": "user {subject} / corr {correlation_id} / fired {fired_at}",
        "whole": "{subject}",
        "note": "{payload.note}!",
        "count": "n={payload.count}",
    }
    out = rendered(template, subject=None, payload={"note": None, "count": 3})
    assert out == {
        "text": "user  / corr  / fired ",
        "whole": None,  # exactly "{field}" keeps its JSON type
        "note": "!",
        "count": "n=3",
    }
    named = rendered(template, subject="ada", payload={"note": "hi", "count": 3})
    assert named["text"].startswith("user ada / corr  /")
    assert named["whole"] == "ada"
