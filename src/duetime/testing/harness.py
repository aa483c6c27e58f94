"""The harnesses: an app on a frozen clock, fired by hand, with assertions on what is scheduled.

:class:`AsyncHarness` drives an :class:`~duetime.app.facade.AsyncApp`, :class:`Harness` the blocking
:class:`~duetime.app.sync.App`; they share their time moves (:class:`PinnedTime`), the matching and
the reports, and differ only in whether the app's calls are awaited.
"""

from __future__ import annotations

from datetime import datetime
from types import TracebackType
from typing import Unpack, overload

from duetime.app.facade import AsyncApp
from duetime.app.sync import App
from duetime.clock import Clock
from duetime.errors import NotFound
from duetime.model import Page, Timer
from duetime.testing.firing import (
    DEFAULT_MAX_ROUNDS,
    Fired,
    Recorder,
    check_failures,
    check_max_rounds,
    check_settled,
    fired,
)
from duetime.testing.matching import (
    PENDING,
    Criteria,
    Match,
    by_due,
    criteria,
    not_found_message,
    unexpected_message,
)
from duetime.testing.pinning import PinnedTime, freeze

_PAGE = 500


class AsyncHarness(PinnedTime):
    """Drive an :class:`AsyncApp` on a frozen clock: move time, fire what is due, assert.

    The frozen clock is swapped in at once (keeping the app's own if it already has one);
    :meth:`close` (or leaving ``async with``) puts the old clock back and closes the app.
    """

    def __init__(self, app: AsyncApp, *, start: datetime | str | None = None) -> None:
        self.app = app
        self._previous: Clock = app.clock
        self.clock = freeze(app.clock, start)
        app.clock = self.clock

    async def __aenter__(self) -> AsyncHarness:
        await self.app.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        self.app.clock = self._previous
        await self.app.close()

    # -- firing ---------------------------------------------------------------------------------
    async def run_due(
        self, *, max_rounds: int = DEFAULT_MAX_ROUNDS, fail_on_error: bool = False
    ) -> list[Fired]:
        """Fire every timer due at the pinned instant, like a worker would, and say how it went.

        Work that handlers make due at the same instant (an ``emit``) fires too, in further
        rounds. With ``fail_on_error`` an attempt that failed (retry or dead) raises
        AssertionError naming its error.
        """
        check_max_rounds(max_rounds)
        recorder = Recorder()
        self.app.observers.append(recorder)
        settled = False
        try:
            for _ in range(max_rounds):
                before = len(recorder.results)
                await self.app.tick()
                if len(recorder.results) == before:
                    settled = True
                    break
        finally:
            self.app.observers.remove(recorder)
        keys = {timer.key for timer, _ in recorder.results}
        stored = {key: await self.app.get(key) for key in keys}
        attempts = {key: await self.app.timers.attempts(key) for key in keys}
        report = fired(recorder.results, stored, attempts)
        if not settled:
            pending = await self.scheduled(status=PENDING)
            check_settled(max_rounds, report, pending, self.app.registry.types, self.now)
        if fail_on_error:
            check_failures(report)
        return report

    # -- looking --------------------------------------------------------------------------------
    async def scheduled(self, type: str | None = None, **match: Unpack[Match]) -> list[Timer]:
        """Timers matching every given field, earliest due first (``payload`` is a subset)."""
        return await self._matching(criteria(type, match))

    async def assert_scheduled(self, type: str | None = None, **match: Unpack[Match]) -> Timer:
        """The earliest-due timer matching every given field; fails listing what there is."""
        wanted = criteria(type, match)
        found = await self._matching(wanted)
        if not found:
            everything = await self._all()
            raise AssertionError(not_found_message(wanted, self.app.namespace, everything))
        return found[0]

    async def assert_not_scheduled(self, type: str | None = None, **match: Unpack[Match]) -> None:
        """Fail, listing them, if any timer matches every given field."""
        wanted = criteria(type, match)
        found = await self._matching(wanted)
        if found:
            raise AssertionError(unexpected_message(wanted, found))

    async def _matching(self, wanted: Criteria) -> list[Timer]:
        if wanted.key is not None:
            try:
                candidates = [await self.app.get(wanted.key)]
            except NotFound:
                candidates = []
        else:
            candidates = await self._all(wanted.subject, wanted.type)
        return by_due(t for t in candidates if wanted.matches(t))

    async def _all(self, subject: str | None = None, type: str | None = None) -> list[Timer]:
        timers: list[Timer] = []
        cursor: str | None = None
        while True:
            page: Page[Timer] = await self.app.timers.history(
                subject, type=type, cursor=cursor, limit=_PAGE
            )
            timers.extend(page.items)
            if page.next_cursor is None:
                return timers
            cursor = page.next_cursor


class Harness(PinnedTime):
    """:class:`AsyncHarness` for the blocking :class:`App`: the same methods, without ``await``."""

    def __init__(self, app: App, *, start: datetime | str | None = None) -> None:
        self.app = app
        self._previous: Clock = app.core.clock
        self.clock = freeze(app.core.clock, start)
        app.core.clock = self.clock

    def __enter__(self) -> Harness:
        self.app.open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self.app.core.clock = self._previous
        self.app.close()

    def run_due(
        self, *, max_rounds: int = DEFAULT_MAX_ROUNDS, fail_on_error: bool = False
    ) -> list[Fired]:
        """Fire every timer due at the pinned instant; see :meth:`AsyncHarness.run_due`."""
        check_max_rounds(max_rounds)
        recorder = Recorder()
        self.app.core.observers.append(recorder)
        settled = False
        try:
            for _ in range(max_rounds):
                before = len(recorder.results)
                self.app.tick()
                if len(recorder.results) == before:
                    settled = True
                    break
        finally:
            self.app.core.observers.remove(recorder)
        keys = {timer.key for timer, _ in recorder.results}
        stored = {key: self.app.get(key) for key in keys}
        attempts = {key: self.app.timers.attempts(key) for key in keys}
        report = fired(recorder.results, stored, attempts)
        if not settled:
            pending = self.scheduled(status=PENDING)
            check_settled(max_rounds, report, pending, self.app.core.registry.types, self.now)
        if fail_on_error:
            check_failures(report)
        return report

    def scheduled(self, type: str | None = None, **match: Unpack[Match]) -> list[Timer]:
        """Timers matching every given field, earliest due first (``payload`` is a subset)."""
        return self._matching(criteria(type, match))

    def assert_scheduled(self, type: str | None = None, **match: Unpack[Match]) -> Timer:
        """The earliest-due timer matching every given field; fails listing what there is."""
        wanted = criteria(type, match)
        found = self._matching(wanted)
        if not found:
            raise AssertionError(not_found_message(wanted, self.app.namespace, self._all()))
        return found[0]

    def assert_not_scheduled(self, type: str | None = None, **match: Unpack[Match]) -> None:
        """Fail, listing them, if any timer matches every given field."""
        wanted = criteria(type, match)
        found = self._matching(wanted)
        if found:
            raise AssertionError(unexpected_message(wanted, found))

    def _matching(self, wanted: Criteria) -> list[Timer]:
        if wanted.key is not None:
            try:
                candidates = [self.app.get(wanted.key)]
            except NotFound:
                candidates = []
        else:
            candidates = self._all(wanted.subject, wanted.type)
        return by_due(t for t in candidates if wanted.matches(t))

    def _all(self, subject: str | None = None, type: str | None = None) -> list[Timer]:
        timers: list[Timer] = []
        cursor: str | None = None
        while True:
            page = self.app.timers.history(subject, type=type, cursor=cursor, limit=_PAGE)
            timers.extend(page.items)
            if page.next_cursor is None:
                return timers
            cursor = page.next_cursor


@overload
def harness(app: AsyncApp, *, start: datetime | str | None = None) -> AsyncHarness: ...


@overload
def harness(app: App, *, start: datetime | str | None = None) -> Harness: ...


def harness(app: AsyncApp | App, *, start: datetime | str | None = None) -> AsyncHarness | Harness:
    """The harness for ``app``: ``async with harness(async_app)`` or ``with harness(app)``."""
    if isinstance(app, App):
        return Harness(app, start=start)
    return AsyncHarness(app, start=start)
