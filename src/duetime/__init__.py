"""duetime: a durable, timezone-aware scheduler for time-based events, and an event bus."""

from duetime.app import AsyncApp
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
from duetime.routes import HANDLER, Route
from duetime.schedules import ScheduleRequest
from duetime.sync import App

__version__ = "0.1.0"

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
]
