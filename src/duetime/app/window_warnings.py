"""The warning given when a run window cannot hold its timers at their type's rate limit.

A group of timers due at one instant with one window asks for ``total`` starts within the
window; a rate limit on their type grants at most ``burst + window * rate`` there
(docs/flow-control.md), so the rest start after the window's end. Nothing is refused: the
timers are stored, and the answer says so (``window_over_rate``, naming ``window``).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from duetime.model import JSON, Timer
from duetime.model.flow_rules import FlowRule, glob_match, specificity
from duetime.store.run_windows import SpreadGroup, SpreadStore
from duetime.timemath.run_window import window_holds

WINDOW_OVER_RATE = "window_over_rate"
"""The code of the warning: a window too short for its timers at their type's rate."""
log = logging.getLogger("duetime.app")
_collected: ContextVar[list[dict[str, JSON]] | None] = ContextVar("window_warnings", default=None)


class WindowOverRate(UserWarning):
    """Timers were stored with a window their type's rate limit cannot start them all within."""


def rate_rule(rules: Iterable[FlowRule], type: str) -> FlowRule | None:
    """The rate limit that governs ``type``: the most specific rule with a rate matching it."""
    for rule in sorted(rules, key=lambda r: specificity(r.pattern)):
        governs = rule.rate is not None and rule.destination is None
        if governs and glob_match(rule.pattern.split("*"), type):
            return rule
    return None


async def window_warnings(
    timers: Iterable[Timer], rules: list[FlowRule], spreads: SpreadStore
) -> list[dict[str, JSON]]:
    """A warning for each group (namespace, type, due instant, window) of ``timers`` whose
    pending timers, counted in the store, the rate limit on its type cannot start within its
    window."""
    groups = {
        SpreadGroup(t.namespace, t.type, t.due_at, t.window): None
        for t in timers
        if t.window is not None
    }
    found: list[dict[str, JSON]] = []
    for group in groups:
        type, due_at, window = group.type, group.due_at, group.window
        rule = rate_rule(rules, type)
        if rule is None or rule.rate is None:
            continue
        total = await spreads.group_size(group)
        if window_holds(total, window, rule.rate.count, rule.rate.period, rule.effective_burst):
            continue
        message = (
            f"{total} timer(s) of {type!r} due {due_at.isoformat()} in a window of {window} "
            f"exceed the rate limit {rule.rate} (burst {rule.effective_burst}) of "
            f"{rule.pattern!r}: the last start after the window ends"
        )
        found.append({"code": WINDOW_OVER_RATE, "field": "window", "message": message})
    return found


@contextmanager
def collecting() -> Iterator[list[dict[str, JSON]]]:
    """Collect the warnings of the puts made within (in this task) instead of issuing them as
    Python warnings: the REST API answers them."""
    found: list[dict[str, JSON]] = []
    token = _collected.set(found)
    try:
        yield found
    finally:
        _collected.reset(token)


def warn(found: list[dict[str, JSON]]) -> None:
    """Tell the log, and a Python caller (``warnings``) unless :func:`collecting`."""
    target = _collected.get()
    for warning in found:
        log.warning("%s", warning["message"])
        if target is None:
            warnings.warn(str(warning["message"]), WindowOverRate, stacklevel=4)
        else:
            target.append(warning)
