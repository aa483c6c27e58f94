"""The standard streams, written whole whatever mode an event loop or a parent left them in.

An event loop may switch a descriptor it watches to non-blocking mode and leave it so (uvloop
does, for a standard stream registered with it), and a parent may hand a process a pipe
already in that mode. A write into a full pipe then takes only what fits (64 KiB on Linux),
and Python's buffered streams may drop the rest without an error: output cut short under exit
status 0. So :func:`modes_kept` puts each standard descriptor back in the mode it was found in
once a loop has run, and a command's streams write through :class:`WholeWriter`, which waits
for a non-blocking descriptor to take more rather than give up: its output arrives whole, or
the command fails.
"""

from __future__ import annotations

import io
import os
import select
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

STANDARD_FDS = (0, 1, 2)


class OutputLost(Exception):
    """A standard stream refused the rest of a command's output (a full disk, an I/O error)."""

    def __init__(self, name: str, error: OSError) -> None:
        super().__init__(f"could not write to {name}: {error.strerror or error}")
        self.name = name
        self.error = error


@contextmanager
def modes_kept(fds: tuple[int, ...] = STANDARD_FDS) -> Iterator[None]:
    """Afterwards, each of ``fds`` is blocking or not as it was before (a closed one is left)."""
    kept: dict[int, bool] = {}
    for fd in fds:
        try:
            kept[fd] = os.get_blocking(fd)
        except OSError:
            continue
    try:
        yield
    finally:
        for fd, blocking in kept.items():
            try:
                if os.get_blocking(fd) != blocking:
                    os.set_blocking(fd, blocking)
            except OSError:
                continue


def wait_writable(fd: int) -> None:
    """Until ``fd`` can take more (or is broken: the next write then says how)."""
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    poller.poll()


class WholeWriter(io.RawIOBase):
    """A descriptor every write of which goes out whole: a partial write continues and a
    non-blocking descriptor's "not now" waits until it is writable. A reader that went away is
    ``BrokenPipeError``; any other failure is :class:`OutputLost`. After either, what is still
    written is dropped quietly, so the stream's last flush at exit does not fail again."""

    def __init__(self, fd: int, name: str) -> None:
        super().__init__()
        self._fd = fd
        self.label = name
        self._broken = False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data: object) -> int:
        view = memoryview(data).cast("B")  # type: ignore[arg-type]  # any bytes-like object
        if self._broken:
            return len(view)
        done = 0
        while done < len(view):
            try:
                done += os.write(self._fd, view[done:])
            except BlockingIOError:
                wait_writable(self._fd)
            except BrokenPipeError:
                self._broken = True
                raise
            except OSError as exc:
                self._broken = True
                raise OutputLost(self.label, exc) from exc
        return done


def whole(stream: TextIO, name: str) -> TextIO:
    """``stream`` writing through a :class:`WholeWriter` on its descriptor, with its encoding
    and buffering; ``stream`` itself when it has no descriptor (an in-memory capture)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return stream
    stream.flush()
    buffered = io.BufferedWriter(WholeWriter(fd, name))
    return io.TextIOWrapper(
        buffered,
        encoding=stream.encoding,
        errors=stream.errors,
        line_buffering=bool(stream.line_buffering),
        write_through=bool(getattr(stream, "write_through", False)),  # PYTHONUNBUFFERED
    )


@contextmanager
def whole_streams() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` written whole (:func:`whole`) until the block ends,
    when they are flushed (a failure then raises as a write would) and put back."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = whole(sys.stdout, "stdout"), whole(sys.stderr, "stderr")
    failed = True
    try:
        yield
        failed = False
    finally:
        replaced = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = saved
        first: BaseException | None = None
        for stream in replaced:
            if stream in saved:
                continue
            try:
                stream.flush()
            except (OSError, OutputLost) as exc:
                first = first or exc
        if first is not None and not failed:
            raise first
