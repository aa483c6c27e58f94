"""Apps for tests: a throwaway SQLite file, a frozen clock, and settings from arguments only."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from duetime.app.facade import AsyncApp
from duetime.app.sync import App
from duetime.clock import FrozenClock
from duetime.config import Settings
from duetime.testing.pinning import start_at


def make_app(
    directory: str | Path,
    *,
    namespace: str = "default",
    start: datetime | str | None = None,
    **settings: Any,
) -> AsyncApp:
    """An :class:`AsyncApp` on a fresh SQLite file in ``directory``, its clock frozen at ``start``.

    Settings come from the arguments only, never from ``DUETIME_*`` variables, so a developer's
    environment cannot point a test at a real database.
    """
    return AsyncApp(
        clock=FrozenClock(start_at(start)), settings=_settings(directory, namespace, settings)
    )


def make_sync_app(
    directory: str | Path,
    *,
    namespace: str = "default",
    start: datetime | str | None = None,
    **settings: Any,
) -> App:
    """The blocking :class:`App` twin of :func:`make_app`."""
    return App(
        clock=FrozenClock(start_at(start)), settings=_settings(directory, namespace, settings)
    )


def _settings(directory: str | Path, namespace: str, overrides: dict[str, Any]) -> Settings:
    url = f"sqlite:///{Path(directory).resolve() / 'duetime.db'}"
    for name, value in list(overrides.items()):
        if isinstance(value, int | float) and not isinstance(value, bool):
            default = getattr(Settings(), name, None)
            if isinstance(default, timedelta):
                overrides[name] = timedelta(seconds=value)
    settings = replace(Settings(), database_url=url, namespace=namespace, **overrides)
    settings.check()
    return settings
