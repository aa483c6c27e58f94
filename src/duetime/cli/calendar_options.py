"""The flags of an RFC 5545 calendar rule, shared by ``schedules add|update`` and ``next``.

Repeatable flags (``--exdate``, ``--rdate``, ``--holiday-date``) arrive as tuples; they are
handed on as the lists ``add_schedule`` takes (``exdates``, ``rdates``, ``holiday_dates``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from duetime.timemath.recurrence.business import ROLLS
from duetime.timemath.recurrence.calendar import FEB29

FC = TypeVar("FC", bound=Callable[..., Any])

_REPEATED = {"exdate": "exdates", "rdate": "rdates", "holiday_date": "holiday_dates"}


def calendar_options(func: FC) -> FC:
    """--rrule, --dtstart, --exdate..., --rdate..., --holidays, --holiday-date..., --weekend,
    --roll, --feb29."""
    for decorator in reversed(
        [
            click.option(
                "--rrule", metavar="RULE", help="RFC 5545 rule, e.g. FREQ=MONTHLY;BYMONTHDAY=15."
            ),
            click.option("--dtstart", metavar="LOCAL", help="With --rrule: its first local time."),
            click.option("--exdate", metavar="LOCAL", multiple=True, help="Local time to skip."),
            click.option("--rdate", metavar="LOCAL", multiple=True, help="Local time to add."),
            click.option("--holidays", metavar="CC[-SUB]", help="Public holidays, e.g. DE-BE."),
            click.option(
                "--holiday-date", metavar="DATE", multiple=True, help="Your own non-business day."
            ),
            click.option("--weekend", metavar="DAYS", help="Weekend days [sat,sun], e.g. fri,sat."),
            click.option(
                "--roll",
                type=click.Choice(ROLLS),
                help="An occurrence on a non-business day: skip, forward, backward, or "
                "modified_forward / modified_backward (that way unless it leaves the month).",
            ),
            click.option(
                "--feb29",
                type=click.Choice(FEB29),
                help="A yearly rule on 29 February in common years [feb28].",
            ),
        ]
    ):
        func = decorator(func)
    return func


def calendar_values(fields: dict[str, Any]) -> dict[str, Any]:
    """Take the calendar flags out of ``fields``: the given ones, named as the API names them."""
    values: dict[str, Any] = {}
    for flag in ("rrule", "dtstart", "holidays", "weekend", "roll", "feb29"):
        value = fields.pop(flag, None)
        if value is not None:
            values[flag] = value
    for flag, name in _REPEATED.items():
        given = fields.pop(flag, ())
        if given:
            values[name] = list(given)
    return values
