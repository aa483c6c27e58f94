"""A command's output arrives whole, or the command fails: the real console script writing a
large listing into a pipe a slow reader drains, whatever mode the loop left the pipe in."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from duetime import AsyncApp
from duetime.requests import TimerRequest
from duetime.support import eventloop

from .conftest import DUETIME, Cli

TIMERS = 1000
PAD = "x" * 200
"""Each listed timer carries this much payload: the listing is several pipes' worth."""


def seed(cli: Cli) -> None:
    async def store() -> None:
        async with AsyncApp(database_url=cli.db_url, namespace="default") as app:
            requests = [
                TimerRequest("report.due", {"n": n, "pad": PAD}, delay=3600, key=f"r-{n}")
                for n in range(TIMERS)
            ]
            await app.timers.schedule_many(requests)

    eventloop.run(store())


def pipe_capacity(fd: int) -> int:
    return int(fcntl.fcntl(fd, 1032))  # F_GETPIPE_SZ


def queued(fd: int) -> int:
    """Bytes written into the pipe and not read yet (FIONREAD)."""
    answer = fcntl.ioctl(fd, 0x541B, b"\0\0\0\0")
    return int.from_bytes(answer, sys.byteorder)


def slow_read(read_end: int, process: subprocess.Popen[bytes]) -> bytes:
    """Read nothing until the writer has filled the pipe (or ended), then drain it in small
    reads: the writer meets a full pipe, as it would behind a slow reader."""
    capacity = pipe_capacity(read_end)
    while process.poll() is None and queued(read_end) < capacity:
        time.sleep(0.01)  # polling a condition, not a timed wait: the test ends either way
    chunks = []
    with os.fdopen(read_end, "rb", buffering=0) as reader:
        while chunk := reader.read(4096):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_a_large_listing_reaches_a_slow_reader_whole(cli: Cli, loop: str) -> None:
    """The pipe is non-blocking, as uvloop leaves a standard stream it watched (or as a parent
    may hand it over): the command still writes every byte, and says 0 only then."""
    if loop == "uvloop":
        pytest.importorskip("uvloop")
    seed(cli)
    read_end, write_end = os.pipe()
    capacity = pipe_capacity(read_end)
    os.set_blocking(write_end, False)
    process = subprocess.Popen(
        [DUETIME, "ls", "--json", "--limit", str(TIMERS)],
        cwd=cli.cwd,
        env={**cli.env, "DUETIME_EVENT_LOOP": loop},
        stdout=write_end,
        stderr=subprocess.PIPE,
    )
    os.close(write_end)
    written = slow_read(read_end, process)
    assert process.stderr is not None
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=60) == 0, stderr
    assert len(written) > 3 * capacity  # several pipes' worth: the pipe was full many times
    listing = json.loads(written)
    assert [timer["key"] for timer in listing["items"]] == [
        f"r-{n}" for n in reversed(range(TIMERS))
    ]


def test_the_loop_leaves_stdout_as_it_found_it(tmp_path: Path) -> None:
    """uvloop switches a stream it watches to non-blocking and leaves it so; duetime's runner
    puts it back, so whatever the process writes afterwards is not cut short."""
    pytest.importorskip("uvloop")
    script = tmp_path / "watch_stdout.py"
    script.write_text(
        "import asyncio, os, sys\n"
        "from duetime.support import eventloop\n"
        "async def watch():\n"
        "    loop = asyncio.get_running_loop()\n"
        "    loop.add_writer(1, lambda: None)\n"
        "    loop.remove_writer(1)\n"
        "    return os.get_blocking(1)\n"
        "inside = eventloop.run(watch())\n"
        "sys.stderr.write(f'{inside} {os.get_blocking(1)}')\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)],
        env={**os.environ, "DUETIME_EVENT_LOOP": "uvloop"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "False True"  # non-blocking while the loop ran; blocking after


def test_output_that_cannot_be_written_fails_the_command(cli: Cli) -> None:
    """A full disk is an error on stderr and a non-zero status, never a silent success."""
    seed(cli)
    with open("/dev/full", "wb") as full:
        done = subprocess.run(
            [DUETIME, "ls", "--json", "--limit", str(TIMERS)],
            cwd=cli.cwd,
            env=cli.env,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1
    assert done.stderr == "error [output] could not write to stdout: No space left on device\n"


def test_a_reader_that_goes_away_ends_the_command_quietly(cli: Cli) -> None:
    """``duetime ls | head -c 10``: status 1 (the output was not all read), no traceback."""
    seed(cli)
    process = subprocess.Popen(
        [DUETIME, "ls", "--json", "--limit", str(TIMERS)],
        cwd=cli.cwd,
        env=cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    assert process.stdout.read(10) == b'{"items": '
    process.stdout.close()
    assert process.wait(timeout=60) == 1
    assert process.stderr.read() == b""
