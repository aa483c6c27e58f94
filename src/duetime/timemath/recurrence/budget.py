"""A budget of work for expanding one rule: no rule may hold a thread (or the server) for long.

python-dateutil walks a rule candidate by candidate: a ``FREQ=SECONDLY`` rule that matches only
at 23:00 on 29 February steps through every second of every day in between (over a hundred
million steps), and a rule with ``COUNT`` is always expanded from its DTSTART, however long
ago. Counting the occurrences asked for bounds nothing: the cost lies in the steps between them.

So every expansion spends from an :class:`ExpansionBudget`: one step per wall time a rule
yields (each is resolved in its zone, checked against business days...) and one per candidate
dateutil tries inside a period, plus an optional CPU-time guard read from an injected clock.
Running out raises :class:`~duetime.errors.RuleTooCostly` naming the part at fault. A rule is
refused when it is created if a preview of it would run out; an expansion later that runs out
refuses the rule in the same words instead of running on.

The budget is carried in a context variable while an expansion runs (:func:`bounded`), so the
layers that expand (dateutil's own loop, cronsim's, the business-day filter) charge it without
changing their signatures; with no budget active nothing is charged.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

from dateutil import rrule as du

from duetime.errors import RuleTooCostly
from duetime.timemath.recurrence.rrule_text import RuleParts

MAX_STEPS = 50_000
"""Steps one expansion may take. A step is about a microsecond of CPU: dateutil's candidate in
a period is one, a wall time it yields :data:`WALL_STEPS`, resolving a wall time in its zone
:data:`RESOLVE_STEPS` more; so the budget is some 50 ms, enough for 1000 occurrences of any
rule in a zone, far from the millions of steps a pathological rule takes."""
CREATION_SHARE = 2
"""A rule is accepted only if its checks and previews take at most 1/``CREATION_SHARE`` of the
budget: the headroom keeps a rule accepted today within budget when asked from elsewhere."""
WALL_STEPS = 4
RESOLVE_STEPS = 12
DROP_STEPS = 2 * WALL_STEPS + 2
"""What an occurrence ``roll=skip`` drops costs at most: made, checked against business days,
and the candidates dateutil tried for it. A skip rule's expansion is granted this for each of
the occurrences a lookup may drop in a row (``skips.MAX_DROPPED``) on top of its budget: a rule
accepted for dropping that many must be able to, and they are bounded by that count."""
INSTANT_STEPS = 2 * WALL_STEPS + RESOLVE_STEPS + 1
"""What one instant an expansion gives out costs at most (made, business check, resolved in its
zone, its candidate): what a caller that asks a known number of instants grants per instant."""
MAX_CPU_SECONDS = 0.5
"""CPU seconds one expansion of :data:`MAX_STEPS` may take, a backstop for work the steps do not
see; a budget granted more steps gets proportionally more (:func:`cpu_for`)."""
_CHECK_EVERY = 4096
"""Steps between two readings of the CPU clock (reading it costs more than a step)."""

_T = TypeVar("_T")


class ExpansionBudget:
    """Steps and CPU time one expansion may spend; :meth:`charge` raises when either runs out.

    ``clock`` is the CPU clock (``time.process_time``), injected so a test can drive it.
    ``field`` and ``part`` name what a refusal blames (``rrule`` / ``COUNT``).
    """

    __slots__ = (
        "_next_check",
        "_quarters",
        "_t0",
        "clock",
        "cpu_seconds",
        "field",
        "part",
        "spent",
        "steps",
    )

    def __init__(
        self,
        *,
        steps: int = MAX_STEPS,
        cpu_seconds: float | None = MAX_CPU_SECONDS,
        clock: Callable[[], float] = time.process_time,
        field: str = "rrule",
        part: str = "FREQ",
    ) -> None:
        if steps < 1:
            raise ValueError("steps must be at least 1")
        self.steps = steps
        self.cpu_seconds = cpu_seconds
        self.clock = clock
        self.field = field
        self.part = part
        self.spent = 0
        self._quarters = 0
        self._next_check = _CHECK_EVERY
        self._t0 = clock() if cpu_seconds is not None else 0.0

    def charge(self, steps: int = 1) -> None:
        """Spend ``steps``; raise :class:`RuleTooCostly` once the budget is exhausted."""
        self.spent += steps
        if self.spent > self.steps:
            raise self.refusal(f"more than {self.steps} steps")
        if self.spent >= self._next_check:
            self._next_check = self.spent + _CHECK_EVERY
            if self.cpu_seconds is not None and self.clock() - self._t0 > self.cpu_seconds:
                raise self.refusal(f"more than {self.cpu_seconds:g} s of CPU")

    def charge_quarter(self) -> None:
        """A quarter of a step: a step every fourth call."""
        self._quarters += 1
        if self._quarters == 4:
            self._quarters = 0
            self.charge()

    def refusal(self, spent: str) -> RuleTooCostly:
        return RuleTooCostly(
            self.field,
            self.part,
            f"finding the rule's occurrences takes {spent} of expansion; "
            "no rule may take that much work: make it fire more often or simplify it",
        )


_DAY_PARTS = ("BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYMONTH", "BYDAY")
_TIME_PARTS = ("BYHOUR", "BYMINUTE", "BYSECOND")
_SUB_DAILY = ("HOURLY", "MINUTELY", "SECONDLY")


def costly_part(parts: RuleParts) -> str:
    """The part a refusal of an RRULE names: what makes its expansion long.

    COUNT when the rule is walked from DTSTART period by period (nothing filters its days);
    else the day part of a sub-daily rule (a per-second rule that fires on some days only
    walks the seconds of every day between them); else its time or set parts; else FREQ."""
    names = {name for name, _ in parts.by}
    days = [name for name in _DAY_PARTS if name in names]
    if parts.count is not None and not (days and parts.freq in _SUB_DAILY):
        return "COUNT"
    if days:
        return days[0]
    for name in (*_TIME_PARTS, "BYSETPOS"):
        if name in names:
            return name
    return "INTERVAL" if parts.interval > 1 else "FREQ"


def cpu_for(steps: int) -> float:
    """The CPU guard of a budget of ``steps``: MAX_CPU_SECONDS per MAX_STEPS, never less."""
    return MAX_CPU_SECONDS * max(1.0, steps / MAX_STEPS)


def sized(steps: int, field: str, part: str) -> ExpansionBudget:
    """A budget of ``steps`` whose CPU guard grows with it (see :func:`cpu_for`)."""
    return ExpansionBudget(steps=steps, cpu_seconds=cpu_for(steps), field=field, part=part)


def creation_budget(field: str, part: str, extra: int = 0) -> ExpansionBudget:
    """The share of a budget a rule's checks at creation may spend (see CREATION_SHARE), plus
    ``extra`` steps granted whole (a skip rule's drops, which a later lookup is granted whole
    too: halving them would refuse a rule that drops no more than it may)."""
    return sized(MAX_STEPS // CREATION_SHARE + extra, field, part)


_active: ContextVar[ExpansionBudget | None] = ContextVar("duetime_expansion", default=None)


def charge(steps: int = 1) -> None:
    """Charge the active budget, if any (the expanding layers call this)."""
    budget = _active.get()
    if budget is not None:
        budget.charge(steps)


@contextlib.contextmanager
def spending(budget: ExpansionBudget) -> Iterator[ExpansionBudget]:
    """Run a block of expansion work against ``budget``."""
    token = _active.set(budget)
    try:
        yield budget
    finally:
        _active.reset(token)


def bounded(items: Iterable[_T], budget: ExpansionBudget) -> Iterator[_T]:
    """``items`` with ``budget`` active while each one is computed (and only then: the caller
    between two items spends nothing of it)."""
    source = iter(items)
    while True:
        token = _active.set(budget)
        try:
            item = next(source)
        except StopIteration:
            return
        finally:
            _active.reset(token)
        yield item


class _Metered(du.rrule):  # type: ignore[misc]  # dateutil has no type stubs here
    """dateutil's rule, charging one step per candidate its sub-daily loop tries.

    dateutil's SECONDLY, MINUTELY and HOURLY loops advance through
    ``_rrule__mod_distance`` whenever the frequency's own BYxxx part is set; :func:`metered`
    sets it (to every value, which changes no occurrence) so every candidate passes here. The
    days dateutil tests against the day filters are charged by :class:`_Counting`."""

    def _rrule__mod_distance(self, value: int, byxxx: Any, base: int) -> Any:
        found = super()._rrule__mod_distance(value, byxxx, base)
        budget = _active.get()
        if budget is not None:
            # It stepped INTERVAL at a time to the next value it takes (at most ``base`` steps).
            div, reached = found
            tried = base if div is None else (div * base + reached - value) // self._interval
            budget.charge(max(1, tried))
        return found


class _Counting(tuple[Any, ...]):
    """A BYxxx day filter that charges one step each time dateutil tests a day against it:
    a rule of days that rarely matches is walked day by day, and those tests are its work
    (for a DAILY or shorter rule, a pass of dateutil's loop each)."""

    __slots__ = ()

    def __contains__(self, value: object) -> bool:
        budget = _active.get()
        if budget is not None:
            budget.charge()
        return super().__contains__(value)


class _CountingInBulk(_Counting):
    """The same for a YEARLY, MONTHLY or WEEKLY rule, whose period's days dateutil tests in
    one pass: a test costs a quarter of a step."""

    __slots__ = ()

    def __contains__(self, value: object) -> bool:
        budget = _active.get()
        if budget is not None:
            budget.charge_quarter()
        return tuple.__contains__(self, value)


_DAY_FILTERS = ("_bymonth", "_byweekday", "_bymonthday", "_bynmonthday", "_byyearday")
"""dateutil's day filters in the order it tests a day against them."""
_FULL_SET = {
    du.SECONDLY: ("bysecond", 60),
    du.MINUTELY: ("byminute", 60),
    du.HOURLY: ("byhour", 24),
}


def metered(rule: du.rrule) -> du.rrule:
    """The same rule (same occurrences), charging the active budget as dateutil walks it."""
    if isinstance(rule, _Metered):
        return rule
    kwargs: dict[str, Any] = {
        "freq": rule._freq,
        "dtstart": rule._dtstart,
        "interval": rule._interval,
        "count": rule._count,
        "until": rule._until,
        "wkst": rule._wkst,
    }
    kwargs.update(rule._original_rule)
    own = _FULL_SET.get(kwargs["freq"])
    if own is not None and kwargs.get(own[0]) is None:
        kwargs[own[0]] = tuple(range(own[1]))
    counted = _Metered(**kwargs)
    for name in _DAY_FILTERS:
        values = getattr(counted, name)
        if values:  # the first filter dateutil tests is tested on every day
            bulk = kwargs["freq"] in (du.YEARLY, du.MONTHLY, du.WEEKLY)
            setattr(counted, name, (_CountingInBulk if bulk else _Counting)(values))
            break
    return counted
