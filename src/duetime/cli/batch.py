"""``duetime schedule --from-file``: JSON Lines of timer requests, validated first, then stored.

Every line is checked before anything is written, so one bad line (named in the error as
``line 7: local``) stores nothing. Valid files are stored in batches of
:data:`BATCH_SIZE` timers, one transaction each, with a progress bar on stderr.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import IO

from duetime.app.facade import AsyncApp
from duetime.cli import output
from duetime.errors import DuetimeError, InvalidInput
from duetime.model import NewTimer, OnConflict
from duetime.requests import TimerRequest
from duetime.validation import FILE_LINE_DEPTH, parse_json_text

BATCH_SIZE = 1000


@contextmanager
def open_source(path: str) -> Iterator[IO[str]]:
    """The file at ``path``, or stdin for ``-``; unreadable files are bad input."""
    if path == "-":
        yield sys.stdin
        return
    try:
        handle = open(path, encoding="utf-8")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise InvalidInput("from_file", f"cannot read {path}: {exc.strerror}") from exc
    with handle:
        yield handle


def read_lines(source: IO[str]) -> Iterator[tuple[int, str]]:
    """Numbered non-blank lines (numbers count every line, as an editor does)."""
    try:
        for number, line in enumerate(source, start=1):
            if line.strip():
                yield number, line
    except UnicodeDecodeError as exc:
        raise InvalidInput("from_file", f"is not UTF-8 text: {exc.reason}") from exc


def validate(app: AsyncApp, lines: Iterable[tuple[int, str]]) -> list[NewTimer]:
    """Every line as a storable timer, or InvalidInput naming the first bad line and field."""
    timers: list[NewTimer] = []
    for number, line in lines:
        data = parse_json_text(line.rstrip("\r\n"), f"line {number}", depth=FILE_LINE_DEPTH)
        try:
            request = TimerRequest.from_dict(data)
            timers.extend(app.timers.prepare([request]))
        except InvalidInput as exc:
            raise _at_line(number, exc) from exc
    return timers


def _at_line(number: int, error: InvalidInput) -> InvalidInput:
    field = error.field or "body"
    message = error.message.removeprefix(f"{field}: ")
    where = f"line {number}" if field == "body" else f"line {number}: {field}"
    return type(error)(where, message)


async def store(
    app: AsyncApp, timers: list[NewTimer], on_conflict: OnConflict, *, show_progress: bool
) -> Counter[str]:
    """Store ``timers`` in batches; the counts say how many were created, updated or kept."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    counts: Counter[str] = Counter(created=0, updated=0, kept=0)
    progress = Progress(
        TextColumn("scheduling"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=output.stderr(),
        disable=not show_progress,
    )
    stored = 0
    with progress:
        task = progress.add_task("scheduling", total=len(timers))
        try:
            for start in range(0, len(timers), BATCH_SIZE):
                batch = timers[start : start + BATCH_SIZE]
                results = await app.timers.put(batch, on_conflict=on_conflict)
                counts.update(result.action for result in results)
                stored += len(batch)
                progress.advance(task, len(batch))
        except DuetimeError:
            if stored:
                sys.stderr.write(f"note: {stored} timers were stored before this error\n")
            raise
    return counts
