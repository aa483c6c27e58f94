"""duetime: a durable, timezone-aware scheduler for time-based events, and an event bus.

Every name below is imported on first use, not by ``import duetime``: a program that only needs
:mod:`duetime.timemath.tzmath`, or a worker that never sends a webhook, does not pay for the rest.
"""

from typing import TYPE_CHECKING

from duetime.support.lazy import exports

__version__ = "0.1.0"

_NAMES = {
    "AsyncApp": "duetime.app.facade",
    "Clock": "duetime.clock",
    "FrozenClock": "duetime.clock",
    "SystemClock": "duetime.clock",
    "Settings": "duetime.config",
    "AlreadyExists": "duetime.errors",
    "Conflict": "duetime.errors",
    "DuetimeError": "duetime.errors",
    "InvalidInput": "duetime.errors",
    "NotFound": "duetime.errors",
    "UnknownTimezone": "duetime.errors",
    "Event": "duetime.handlers",
    "Attempt": "duetime.model",
    "Outcome": "duetime.model",
    "Page": "duetime.model",
    "PutResult": "duetime.model",
    "Schedule": "duetime.model",
    "Status": "duetime.model",
    "Timer": "duetime.model",
    "Cancel": "duetime.outcomes",
    "Dead": "duetime.outcomes",
    "Retry": "duetime.outcomes",
    "Snooze": "duetime.outcomes",
    "TimerRequest": "duetime.requests",
    "HANDLER": "duetime.bus.routes",
    "Route": "duetime.bus.routes",
    "ScheduleRequest": "duetime.schedules",
    "anniversary": "duetime.timemath.recurrence.calendar",
    "App": "duetime.app.sync",
}

if TYPE_CHECKING:
    from duetime.app.facade import AsyncApp
    from duetime.app.sync import App
    from duetime.bus.routes import HANDLER, Route
    from duetime.clock import Clock, FrozenClock, SystemClock
    from duetime.config import Settings
    from duetime.errors import (
        AlreadyExists,
        Conflict,
        DuetimeError,
        InvalidInput,
        NotFound,
        UnknownTimezone,
    )
    from duetime.handlers import Event
    from duetime.model import Attempt, Outcome, Page, PutResult, Schedule, Status, Timer
    from duetime.outcomes import Cancel, Dead, Retry, Snooze
    from duetime.requests import TimerRequest
    from duetime.schedules import ScheduleRequest
    from duetime.timemath.recurrence.calendar import anniversary
else:  # hidden from type checkers, so a misspelt name stays an error for them
    __getattr__, __dir__ = exports(__name__, _NAMES)

__all__ = [
    "HANDLER",
    "AlreadyExists",
    "App",
    "AsyncApp",
    "Attempt",
    "Cancel",
    "Clock",
    "Conflict",
    "Dead",
    "DuetimeError",
    "Event",
    "FrozenClock",
    "InvalidInput",
    "NotFound",
    "Outcome",
    "Page",
    "PutResult",
    "Retry",
    "Route",
    "Schedule",
    "ScheduleRequest",
    "Settings",
    "Snooze",
    "Status",
    "SystemClock",
    "Timer",
    "TimerRequest",
    "UnknownTimezone",
    "__version__",
    "anniversary",
]
