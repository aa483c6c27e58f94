"""Deprecated name: the event log's filters are :mod:`duetime.event_filters`, and the records
of retention and the event log :mod:`duetime.model.history`. Importing this module warns."""

from __future__ import annotations

import warnings

from duetime.event_filters import (
    MAX_ACTIVITY_MINUTES,
    MAX_INSTANT_TEXT,
    activity_series,
    activity_window,
    event_filter,
    instant_or_ago,
)
from duetime.model.history import (
    ActivityCount,
    ActivityMinute,
    EventFilter,
    LoggedEvent,
    MaintenanceReport,
    RetentionPolicy,
)

warnings.warn(
    "duetime.history is deprecated: import the event log's filters from duetime.event_filters "
    "and the records (RetentionPolicy, EventFilter, ...) from duetime.model.history",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = [
    "MAX_ACTIVITY_MINUTES",
    "MAX_INSTANT_TEXT",
    "ActivityCount",
    "ActivityMinute",
    "EventFilter",
    "LoggedEvent",
    "MaintenanceReport",
    "RetentionPolicy",
    "activity_series",
    "activity_window",
    "event_filter",
    "instant_or_ago",
]
