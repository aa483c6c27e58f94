"""Sleeping on the event loop to an instant finer than a millisecond.

A worker holds a row claimed ahead of its instant and starts it then. The event loop's own
timers cannot end such a hold on time: uvloop's count whole milliseconds (a delay is rounded
to the nearest one and counted from the loop's cached time), asyncio's wait in ``epoll`` with
a timeout in whole milliseconds. A hold then ends anywhere up to half a millisecond after the
instant, or, shorter than half of one, turns the loop over and over until it passes, a core
busy all the while.

On Linux a ``timerfd`` expires at the nanosecond it is set to, and the process wakes from
``epoll`` then, without rounding:
:func:`sleep_precisely` keeps one per event loop, armed for the earliest sleep, and the loop
watches its descriptor like a socket. Every sleep of the loop shares it; a sleep ends in the
loop's first turn after its deadline, nothing spins, and no thread is involved. The timer is
set relative to now (never to an absolute instant), so a process whose clock is shifted
(``faketime``) sleeps for as long as it asked. Python 3.13 has ``os.timerfd_create``; before
that it is reached through ``ctypes``. Where neither works (not Linux; a loop that cannot watch
a descriptor; a kernel that refuses to arm the timer) the loop's own timers serve.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import heapq
import itertools
import math
import os
import sys
import time
import weakref
from collections.abc import Callable

MIN_LOOP_SLEEP = 0.0005
"""Seconds: the shortest sleep on the loop's own timers when no timerfd is at hand. On uvloop,
which rounds a delay to the nearest millisecond (half to even), this is a turn of the loop."""


class _TimeSpec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _ITimerSpec(ctypes.Structure):
    _fields_ = [("it_interval", _TimeSpec), ("it_value", _TimeSpec)]


TimerFd = tuple[Callable[[], int], Callable[[int, int], None]]
"""(make a non-blocking timerfd on the monotonic clock, arm it ``ns`` nanoseconds from now)."""


def stdlib_timerfd() -> TimerFd | None:
    """The standard library's timerfd (Python 3.13+ on Linux), or None."""
    if sys.version_info < (3, 13) or not hasattr(os, "timerfd_create"):
        return None
    flags = os.TFD_NONBLOCK | os.TFD_CLOEXEC

    def create() -> int:
        return os.timerfd_create(time.CLOCK_MONOTONIC, flags=flags)

    def arm(fd: int, ns: int) -> None:
        os.timerfd_settime_ns(fd, initial=ns)

    return create, arm


def libc_timerfd() -> TimerFd | None:
    """The C library's timerfd through ``ctypes`` (Linux), or None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        timerfd_create, timerfd_settime = libc.timerfd_create, libc.timerfd_settime
    except (OSError, AttributeError):
        return None
    timerfd_create.argtypes = [ctypes.c_int, ctypes.c_int]
    timerfd_settime.argtypes = [
        ctypes.c_int,
        ctypes.c_int,
        ctypes.POINTER(_ITimerSpec),
        ctypes.POINTER(_ITimerSpec),
    ]

    def failed() -> OSError:
        errno = ctypes.get_errno()
        return OSError(errno, os.strerror(errno))

    def create() -> int:
        # Linux's TFD_NONBLOCK and TFD_CLOEXEC are O_NONBLOCK and O_CLOEXEC
        fd = int(timerfd_create(time.CLOCK_MONOTONIC, os.O_NONBLOCK | os.O_CLOEXEC))
        if fd < 0:
            raise failed()
        return fd

    def arm(fd: int, ns: int) -> None:
        seconds, rest = divmod(ns, 1_000_000_000)
        spec = _ITimerSpec(_TimeSpec(0, 0), _TimeSpec(seconds, rest))
        if timerfd_settime(fd, 0, ctypes.byref(spec), None) != 0:
            raise failed()

    return create, arm


TIMERFD: TimerFd | None = stdlib_timerfd() or libc_timerfd()
"""The timerfd every loop's sleeper uses; None: the loop's own timers serve."""


class PreciseSleeper:
    """One loop's sleeps on one timerfd: a heap of (deadline, order, future), the timer armed
    for the earliest deadline, every future whose deadline has passed set when it fires.
    It holds no reference to its loop (the loop holds it, as the descriptor's reader), so the
    loop can be collected and its descriptor closed with it."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        create: Callable[[], int],
        arm: Callable[[int, int], None],
    ) -> None:
        self._fd = create()
        self._arm_fd = arm
        self._sleeps: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._armed_for: float | None = None
        self.broken = False
        """Set when the kernel refused to arm the timer: the loop's own timers serve from then."""
        try:
            loop.add_reader(self._fd, self._fired)
        except BaseException:
            os.close(self._fd)
            raise
        weakref.finalize(loop, os.close, self._fd)

    async def sleep_until(self, deadline: float) -> None:
        """Return in the loop's first turn after ``deadline`` (monotonic clock), or sooner if
        the timer breaks meanwhile (:attr:`broken`)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleeps, (deadline, next(self._order), future))
        if self._armed_for is None or deadline < self._armed_for:
            self._arm(deadline)
        await future

    def _arm(self, deadline: float) -> None:
        # Rounded up: the kernel's timer on the same clock then never fires before the deadline.
        try:
            self._arm_fd(self._fd, max(1, math.ceil((deadline - time.monotonic()) * 1e9)))
        except OSError:
            self._break()
            return
        self._armed_for = deadline

    def _break(self) -> None:
        """Give up the timer: every sleep waiting on it returns now, to finish on the loop's."""
        self.broken = True
        self._armed_for = None
        for _, _, future in self._sleeps:
            if not future.done():
                future.set_result(None)
        self._sleeps.clear()

    def _fired(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.read(self._fd, 8)  # the expiry count: reading it quiets the descriptor
        self._armed_for = None
        now = time.monotonic()
        sleeps = self._sleeps
        while sleeps and (sleeps[0][0] <= now or sleeps[0][2].done()):
            future = heapq.heappop(sleeps)[2]
            if not future.done():  # a cancelled sleep is dropped here
                future.set_result(None)
        if sleeps:
            self._arm(sleeps[0][0])


_sleepers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, PreciseSleeper | None] = (
    weakref.WeakKeyDictionary()
)


def _sleeper(loop: asyncio.AbstractEventLoop) -> PreciseSleeper | None:
    """The loop's sleeper, made on first use; None where it cannot have one."""
    try:
        return _sleepers[loop]
    except KeyError:
        pass
    sleeper: PreciseSleeper | None = None
    if TIMERFD is not None:
        try:
            sleeper = PreciseSleeper(loop, *TIMERFD)
        except (OSError, NotImplementedError, RuntimeError):
            sleeper = None  # no timerfd here, or a loop that cannot watch descriptors
    _sleepers[loop] = sleeper
    return sleeper


async def sleep_precisely(seconds: float) -> None:
    """Sleep at least ``seconds`` and end as soon after as the system allows: on the loop's
    timerfd (see the module), else on the loop's own timers (each at least
    :data:`MIN_LOOP_SLEEP`, and again for what is left when one ends a hair early)."""
    loop = asyncio.get_running_loop()
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        sleeper = _sleeper(loop)
        if sleeper is not None and not sleeper.broken:
            await sleeper.sleep_until(deadline)
        else:
            await asyncio.sleep(max(left, MIN_LOOP_SLEEP))
