"""A kit for testing your own handlers: pin the clock, fire what is due, assert what is scheduled.

Tests never sleep. A harness swaps a :class:`~duetime.clock.FrozenClock` into the app, moves it
with :meth:`AsyncHarness.advance` / :meth:`AsyncHarness.travel_to`, and fires every timer due
at the pinned instant with :meth:`AsyncHarness.run_due` (the same claim → handler → record path
a worker runs, on the app's real database). :class:`Harness` is the same for the blocking
:class:`~duetime.sync.App`; :func:`make_app` builds an app on a throwaway SQLite file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, TypedDict, Unpack, overload

from duetime.app import AsyncApp
from duetime.clock import Clock, FrozenClock, SystemClock
from duetime.config import Settings
from duetime.durations import add_duration, parse_duration
from duetime.errors import NotFound
from duetime.model import JSON, Attempt, Outcome, Page, Status, Timer
from duetime.sync import App
from duetime.when import resolve_when

__all__ = [
    "ANY_STATUS",
    "PENDING",
    "AsyncHarness",
    "Fired",
    "Harness",
    "Match",
    "harness",
    "make_app",
    "make_sync_app",
]

PENDING = "pending"
"""``status=PENDING`` (the default) matches timers that will still fire: scheduled or retrying."""
ANY_STATUS = None
"""``status=ANY_STATUS`` matches timers in every status, finished ones included."""

DEFAULT_MAX_ROUNDS = 100
_PAGE = 500
_SHOWN = 50
_FAILED = (Outcome.RETRY, Outcome.DEAD)


# -- building apps ----------------------------------------------------------------------------
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
        clock=FrozenClock(_start_at(start)), settings=_settings(directory, namespace, settings)
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
        clock=FrozenClock(_start_at(start)), settings=_settings(directory, namespace, settings)
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


# -- what run_due reports ---------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Fired:
    """One attempt that :meth:`AsyncHarness.run_due` made, and how it ended.

    ``timer`` is the timer as stored after the run (its ``status`` says where it went next);
    ``error`` is this attempt's error, if it had one.
    """

    key: str
    type: str
    attempt: int
    outcome: Outcome
    error: str | None
    timer: Timer

    @property
    def ok(self) -> bool:
        """True when the handler finished the timer (returned normally)."""
        return self.outcome is Outcome.DONE

    def describe(self) -> str:
        text = f"{self.type} key={self.key!r} attempt {self.attempt}: {self.outcome.value}"
        if self.error:
            text += f" ({self.error})"
        return text


class _Recorder:
    """A worker observer that remembers which timers finished, and how."""

    def __init__(self) -> None:
        self.results: list[tuple[Timer, Outcome]] = []

    def claimed(self, namespace: str, count: int, seconds: float) -> None:
        return None

    def started(self, timer: Timer, attempt: int, lateness: timedelta) -> None:
        return None

    def finished(self, timer: Timer, outcome: Outcome) -> None:
        self.results.append((timer, outcome))


# -- matching -----------------------------------------------------------------------------------
class Match(TypedDict, total=False):
    """What ``scheduled`` / ``assert_scheduled`` / ``assert_not_scheduled`` can match on.

    ``payload`` matches a subset (recursively into dicts); ``due_at`` is an aware instant or ISO
    8601 text with an offset; ``status`` is ``"pending"`` (the default: scheduled or retrying),
    a status, several, or ``None`` for any.
    """

    key: str | None
    subject: str | None
    payload: JSON
    due_at: datetime | str | None
    status: Status | str | Iterable[Status | str] | None


@dataclass(frozen=True, slots=True)
class _Criteria:
    """What an assertion looks for; ``None`` fields match anything."""

    type: str | None = None
    key: str | None = None
    subject: str | None = None
    payload: JSON = None
    due_at: datetime | None = None
    status: frozenset[Status] | None = None

    def differences(self, timer: Timer) -> list[str]:
        """The names of the fields on which ``timer`` does not match."""
        wrong = []
        if self.type is not None and timer.type != self.type:
            wrong.append("type")
        if self.key is not None and timer.key != self.key:
            wrong.append("key")
        if self.subject is not None and timer.subject != self.subject:
            wrong.append("subject")
        if self.payload is not None and not _contains(timer.payload, self.payload):
            wrong.append("payload")
        if self.due_at is not None and timer.due_at != self.due_at:
            wrong.append("due_at")
        if self.status is not None and timer.status not in self.status:
            wrong.append("status")
        return wrong

    def matches(self, timer: Timer) -> bool:
        return not self.differences(timer)

    def describe(self) -> str:
        parts = [
            f"{name}={value!r}"
            for name, value in (
                ("type", self.type),
                ("key", self.key),
                ("subject", self.subject),
                ("payload", self.payload),
            )
            if value is not None
        ]
        if self.due_at is not None:
            parts.append(f"due_at={_iso(self.due_at)}")
        if self.status is not None:
            parts.append("status=" + "|".join(sorted(s.value for s in self.status)))
        return ", ".join(parts) or "anything"


def _criteria(type: str | None, match: Match) -> _Criteria:
    unknown = set(match) - set(Match.__annotations__)
    if unknown:
        raise TypeError(f"unknown field to match on: {', '.join(sorted(unknown))}")
    due_at = match.get("due_at")
    return _Criteria(
        type=type,
        key=match.get("key"),
        subject=match.get("subject"),
        payload=match.get("payload"),
        due_at=None if due_at is None else _instant(due_at, "due_at"),
        status=_statuses(match.get("status", PENDING)),
    )


def _statuses(status: Status | str | Iterable[Status | str] | None) -> frozenset[Status] | None:
    if status is None:
        return None
    if status == PENDING:
        return frozenset({Status.SCHEDULED, Status.RETRYING})
    names = [status] if isinstance(status, str) else list(status)
    try:
        return frozenset(Status(name) for name in names)
    except ValueError:
        known = ", ".join([PENDING, *(s.value for s in Status)])
        raise ValueError(f"status must be one of {known} or None, not {status!r}") from None


def _contains(actual: JSON, expected: JSON) -> bool:
    """Subset match: every key of an expected dict must be in ``actual`` and match, recursively."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return False
        return all(
            name in actual and _contains(actual[name], value) for name, value in expected.items()
        )
    return bool(actual == expected)


def _instant(value: datetime | str, field: str) -> datetime:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"{field}: {value!r} is not an ISO 8601 instant") from None
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{field}: {value!s} has no UTC offset; give an aware instant")
    return value.astimezone(UTC)


def _start_at(start: datetime | str | None) -> datetime:
    if start is None:
        return SystemClock().now().replace(microsecond=0)
    return _instant(start, "start")


def _iso(instant: datetime) -> str:
    return instant.isoformat().replace("+00:00", "Z")


def _by_due(timers: Iterable[Timer]) -> list[Timer]:
    return sorted(timers, key=lambda t: (t.due_at, t.id))


def _line(timer: Timer, criteria: _Criteria | None = None) -> str:
    text = (
        f"  - {timer.type} key={timer.key!r} status={timer.status.value} "
        f"due_at={_iso(timer.due_at)}"
    )
    if timer.local is not None and timer.timezone is not None:
        text += f" ({timer.local.isoformat()} {timer.timezone})"
    if timer.subject is not None:
        text += f" subject={timer.subject!r}"
    text += f" payload={timer.payload!r}"
    if criteria is not None:
        wrong = criteria.differences(timer)
        if wrong:
            text += f"  <- differs in {', '.join(wrong)}"
    return text


def _listing(timers: Sequence[Timer], criteria: _Criteria | None = None) -> str:
    if not timers:
        return "  (none)"
    ordered = _by_due(timers)
    lines = [_line(timer, criteria) for timer in ordered[:_SHOWN]]
    if len(ordered) > _SHOWN:
        lines.append(f"  ... and {len(ordered) - _SHOWN} more")
    return "\n".join(lines)


def _not_found_message(criteria: _Criteria, namespace: str, everything: Sequence[Timer]) -> str:
    return (
        f"no timer matched {criteria.describe()}\n"
        f"timers in namespace {namespace!r} ({len(everything)}):\n"
        f"{_listing(everything, criteria)}"
    )


def _unexpected_message(criteria: _Criteria, found: Sequence[Timer]) -> str:
    return (
        f"expected no timer matching {criteria.describe()}, found {len(found)}:\n{_listing(found)}"
    )


def _fired(
    finished: Sequence[tuple[Timer, Outcome]],
    stored: dict[str, Timer],
    attempts: dict[str, list[Attempt]],
) -> list[Fired]:
    result = []
    for timer, outcome in finished:
        number = timer.attempts
        error = next((a.error for a in attempts[timer.key] if a.number == number), None)
        result.append(Fired(timer.key, timer.type, number, outcome, error, stored[timer.key]))
    return result


def _check_settled(
    max_rounds: int,
    fired: Sequence[Fired],
    pending: Sequence[Timer],
    types: Sequence[str],
    now: datetime,
) -> None:
    """After ``max_rounds`` busy rounds, fail if a timer with a handler is due still."""
    due = [t for t in pending if t.run_at <= now and t.type in types]
    if due:
        raise AssertionError(
            f"{len(due)} timers were still due after {max_rounds} rounds at {_iso(now)}: a "
            "handler keeps making work due at the pinned instant (Snooze(0), Retry(delay=0), "
            "or an emit loop?)\nstill due:\n"
            + _listing(due)
            + "\nlast attempts:\n"
            + "\n".join(f"  - {f.describe()}" for f in fired[-10:])
        )


def _check_max_rounds(max_rounds: int) -> None:
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
        raise ValueError(f"max_rounds must be a whole number of at least 1, not {max_rounds!r}")


def _check_failures(fired: Sequence[Fired]) -> None:
    failed = [f for f in fired if f.outcome in _FAILED]
    if failed:
        raise AssertionError(
            f"{len(failed)} handler attempts failed:\n"
            + "\n".join(f"  - {f.describe()}" for f in failed)
        )


def _advanced(now: datetime, delta: timedelta | float | str) -> datetime:
    if isinstance(delta, str):
        return add_duration(now, parse_duration(delta, "delta"), None, "compatible", "delta")
    if not isinstance(delta, timedelta):
        delta = timedelta(seconds=delta)
    if delta < timedelta(0):
        raise ValueError("advance() moves forward only; use travel_to() to go back")
    return now + delta


def _destination(now: datetime, when: datetime | str, timezone: str | None) -> datetime:
    if timezone is None:
        return _instant(when, "instant")
    return resolve_when(now=now, local=when, timezone=timezone).due_at


def _freeze(current: Clock, start: datetime | str | None) -> FrozenClock:
    if isinstance(current, FrozenClock):
        if start is not None:
            current.set(_instant(start, "start"))
        return current
    return FrozenClock(_start_at(start))


# -- the async harness ------------------------------------------------------------------------
class AsyncHarness:
    """Drive an :class:`AsyncApp` on a frozen clock: move time, fire what is due, assert.

    The frozen clock is swapped in at once (keeping the app's own if it already has one);
    :meth:`close` (or leaving ``async with``) puts the old clock back and closes the app.
    """

    def __init__(self, app: AsyncApp, *, start: datetime | str | None = None) -> None:
        self.app = app
        self._previous: Clock = app.clock
        self.clock = _freeze(app.clock, start)
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

    # -- time -----------------------------------------------------------------------------------
    @property
    def now(self) -> datetime:
        """The pinned instant (UTC)."""
        return self.clock.now()

    def advance(self, delta: timedelta | float | str) -> datetime:
        """Move the clock forward by a timedelta, seconds, or an ISO 8601 duration ('P1D')."""
        self.clock.set(_advanced(self.clock.now(), delta))
        return self.clock.now()

    def travel_to(self, when: datetime | str, *, timezone: str | None = None) -> datetime:
        """Pin the clock at an aware instant, or at wall-clock ``when`` in ``timezone``."""
        self.clock.set(_destination(self.clock.now(), when, timezone))
        return self.clock.now()

    # -- firing ---------------------------------------------------------------------------------
    async def run_due(
        self, *, max_rounds: int = DEFAULT_MAX_ROUNDS, fail_on_error: bool = False
    ) -> list[Fired]:
        """Fire every timer due at the pinned instant, like a worker would, and say how it went.

        Work that handlers make due at the same instant (an ``emit``) fires too, in further
        rounds. With ``fail_on_error`` an attempt that failed (retry or dead) raises
        AssertionError naming its error.
        """
        _check_max_rounds(max_rounds)
        recorder = _Recorder()
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
        attempts = {key: await self.app.attempts(key) for key in keys}
        fired = _fired(recorder.results, stored, attempts)
        if not settled:
            pending = await self.scheduled(status=PENDING)
            _check_settled(max_rounds, fired, pending, self.app.registry.types, self.now)
        if fail_on_error:
            _check_failures(fired)
        return fired

    # -- looking --------------------------------------------------------------------------------
    async def scheduled(self, type: str | None = None, **match: Unpack[Match]) -> list[Timer]:
        """Timers matching every given field, earliest due first (``payload`` is a subset)."""
        criteria = _criteria(type, match)
        return await self._matching(criteria)

    async def assert_scheduled(self, type: str | None = None, **match: Unpack[Match]) -> Timer:
        """The earliest-due timer matching every given field; fails listing what there is."""
        criteria = _criteria(type, match)
        found = await self._matching(criteria)
        if not found:
            everything = await self._all()
            raise AssertionError(_not_found_message(criteria, self.app.namespace, everything))
        return found[0]

    async def assert_not_scheduled(self, type: str | None = None, **match: Unpack[Match]) -> None:
        """Fail, listing them, if any timer matches every given field."""
        criteria = _criteria(type, match)
        found = await self._matching(criteria)
        if found:
            raise AssertionError(_unexpected_message(criteria, found))

    async def _matching(self, criteria: _Criteria) -> list[Timer]:
        if criteria.key is not None:
            try:
                candidates = [await self.app.get(criteria.key)]
            except NotFound:
                candidates = []
        else:
            candidates = await self._all(criteria.subject, criteria.type)
        return _by_due(t for t in candidates if criteria.matches(t))

    async def _all(self, subject: str | None = None, type: str | None = None) -> list[Timer]:
        timers: list[Timer] = []
        cursor: str | None = None
        while True:
            page: Page[Timer] = await self.app.history(
                subject, type=type, cursor=cursor, limit=_PAGE
            )
            timers.extend(page.items)
            if page.next_cursor is None:
                return timers
            cursor = page.next_cursor


# -- the blocking harness ---------------------------------------------------------------------
class Harness:
    """:class:`AsyncHarness` for the blocking :class:`App`: the same methods, without ``await``."""

    def __init__(self, app: App, *, start: datetime | str | None = None) -> None:
        self.app = app
        self._previous: Clock = app.core.clock
        self.clock = _freeze(app.core.clock, start)
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

    @property
    def now(self) -> datetime:
        """The pinned instant (UTC)."""
        return self.clock.now()

    def advance(self, delta: timedelta | float | str) -> datetime:
        """Move the clock forward by a timedelta, seconds, or an ISO 8601 duration ('P1D')."""
        self.clock.set(_advanced(self.clock.now(), delta))
        return self.clock.now()

    def travel_to(self, when: datetime | str, *, timezone: str | None = None) -> datetime:
        """Pin the clock at an aware instant, or at wall-clock ``when`` in ``timezone``."""
        self.clock.set(_destination(self.clock.now(), when, timezone))
        return self.clock.now()

    def run_due(
        self, *, max_rounds: int = DEFAULT_MAX_ROUNDS, fail_on_error: bool = False
    ) -> list[Fired]:
        """Fire every timer due at the pinned instant; see :meth:`AsyncHarness.run_due`."""
        _check_max_rounds(max_rounds)
        recorder = _Recorder()
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
        attempts = {key: self.app.attempts(key) for key in keys}
        fired = _fired(recorder.results, stored, attempts)
        if not settled:
            pending = self.scheduled(status=PENDING)
            _check_settled(max_rounds, fired, pending, self.app.core.registry.types, self.now)
        if fail_on_error:
            _check_failures(fired)
        return fired

    def scheduled(self, type: str | None = None, **match: Unpack[Match]) -> list[Timer]:
        """Timers matching every given field, earliest due first (``payload`` is a subset)."""
        return self._matching(_criteria(type, match))

    def assert_scheduled(self, type: str | None = None, **match: Unpack[Match]) -> Timer:
        """The earliest-due timer matching every given field; fails listing what there is."""
        criteria = _criteria(type, match)
        found = self._matching(criteria)
        if not found:
            raise AssertionError(_not_found_message(criteria, self.app.namespace, self._all()))
        return found[0]

    def assert_not_scheduled(self, type: str | None = None, **match: Unpack[Match]) -> None:
        """Fail, listing them, if any timer matches every given field."""
        criteria = _criteria(type, match)
        found = self._matching(criteria)
        if found:
            raise AssertionError(_unexpected_message(criteria, found))

    def _matching(self, criteria: _Criteria) -> list[Timer]:
        if criteria.key is not None:
            try:
                candidates = [self.app.get(criteria.key)]
            except NotFound:
                candidates = []
        else:
            candidates = self._all(criteria.subject, criteria.type)
        return _by_due(t for t in candidates if criteria.matches(t))

    def _all(self, subject: str | None = None, type: str | None = None) -> list[Timer]:
        timers: list[Timer] = []
        cursor: str | None = None
        while True:
            page = self.app.history(subject, type=type, cursor=cursor, limit=_PAGE)
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
