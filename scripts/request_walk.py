"""The walk of a request: which of duetime's files a reader passes through, in order.

Run by hand (and by a test, which fails when a walk cannot be traced)::

    .venv/bin/python scripts/request_walk.py            # both walks, their files and counts
    .venv/bin/python scripts/request_walk.py --json     # the same as one JSON object

In one process, on a temporary SQLite database, two real calls are followed with
``sys.setprofile`` (and ``threading.setprofile``: the store's statements run on its threads):

* **create**: ``POST /v1/namespaces/{ns}/timers`` through the ASGI app (httpx's
  ASGITransport), from the entry of the route's function to the statement that inserts the
  timer's row;
* **fire**: a worker's ``tick`` claiming that row, from the tick's entry to the call of the
  user's handler.

Each walk prints duetime's source files in the order execution moves between them (a run in one
file is one entry), and counts:

* ``files``: distinct files visited;
* ``climbs``: moves back into a file the walk had already left, by a function's return (or by a
  coroutine resumed after its await), i.e. the times a reader climbs back up the stack;
* ``returns``: functions of duetime's that returned (not counting a coroutine's suspension at
  an ``await``).

A coroutine suspending at an ``await`` and resuming is not a move: the walk follows the work
awaited, and comes back to the awaiting file when that work is done.
"""

from __future__ import annotations

import argparse
import asyncio
import dis
import json
import sqlite3
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import httpx

import duetime
from duetime import AsyncApp
from duetime.api import ApiSettings, create_api
from duetime.config import Settings

PACKAGE = str(Path(duetime.__file__).parent) + "/"
NAMESPACE = "walk"
EVENT_TYPE = "walk.fire"
_YIELD = dis.opmap["YIELD_VALUE"]


@dataclass
class Walk:
    """One walk: the files in order (runs collapsed) and its counts."""

    name: str
    files: list[str] = field(default_factory=list)
    climbs: int = 0
    returns: int = 0
    started: bool = False
    ended: bool = False

    @property
    def distinct(self) -> int:
        return len(set(self.files))


class Tracer:
    """A profile function recording a :class:`Walk` from the call of ``start`` until ``end``
    is called (a code object) or :meth:`finish` (the inserting statement) is."""

    def __init__(self, walk: Walk, start: CodeType, end: CodeType | None = None) -> None:
        self.walk, self.start, self.end = walk, start, end
        self.current: str | None = None
        self.pending: str | None = None
        self.armed = False
        """Whether the next call of ``start`` begins the walk (earlier ones are warm-ups)."""
        self.left: set[str] = set()
        self.lock = threading.Lock()

    def finish(self) -> None:
        self.walk.ended = True

    def _move(self, to: str, climbing: bool) -> None:
        if to == self.current:
            return
        if self.current is not None:
            self.left.add(self.current)
        if climbing and to in self.left:
            self.walk.climbs += 1
        self.walk.files.append(to)
        self.current = to

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        walk = self.walk
        if walk.ended:
            return
        if event == "call" and not walk.started and self.armed:
            if frame.f_code is not self.start:
                return
            walk.started = True
        if not walk.started:
            return
        with self.lock:
            if event == "call" and _resumed(frame):
                self.pending = _ours(frame)  # the innermost resumed frame is the last
                return
            if event == "return" and _yielding(frame):
                self.pending = None
                return
            if self.pending is not None:  # a coroutine resumed after its await goes on
                self._move(self.pending, climbing=True)
                self.pending = None
            if event == "call":
                if self.end is not None and frame.f_code is self.end:
                    self.finish()
                    return
                file = _ours(frame)
                if file is not None:
                    self._move(file, climbing=False)
            elif event == "return":
                if _ours(frame) is not None:
                    walk.returns += 1
                back = frame.f_back
                file = _ours(back) if back is not None else None
                if file is not None:
                    self._move(file, climbing=True)


def _ours(frame: FrameType) -> str | None:
    """The frame's file, relative to the package, if it is one of duetime's."""
    name = frame.f_code.co_filename
    return name[len(PACKAGE) :] if name.startswith(PACKAGE) else None


def _yielding(frame: FrameType) -> bool:
    """A coroutine's or generator's return event at a suspension, not at its end."""
    code, at = frame.f_code.co_code, frame.f_lasti
    return 0 <= at < len(code) and code[at] == _YIELD


def _resumed(frame: FrameType) -> bool:
    """A call event that resumes a suspended coroutine or generator."""
    code, at = frame.f_code.co_code, frame.f_lasti
    return at >= 2 and code[at - 2] == _YIELD


@contextmanager
def profiled(tracer: Callable[[FrameType, str, Any], None]) -> Iterator[None]:
    """``tracer`` on this thread and on threads started meanwhile."""
    threading.setprofile(tracer)
    sys.setprofile(tracer)
    try:
        yield
    finally:
        sys.setprofile(None)
        threading.setprofile(None)


@contextmanager
def statements_seen(on_insert: Callable[[], None]) -> Iterator[list[Callable[[], None]]]:
    """Each SQLite connection opened meanwhile calls the current ``on_insert`` (the last of the
    yielded list) when it runs the statement inserting a timer's row."""
    hooks = [on_insert]
    real_connect = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = real_connect(*args, **kwargs)

        def seen(statement: str) -> None:
            if "INSERT INTO TIMERS" in " ".join(statement.upper().split()):
                hooks[-1]()

        conn.set_trace_callback(seen)
        return conn

    sqlite3.connect = connect  # type: ignore[assignment]
    try:
        yield hooks
    finally:
        sqlite3.connect = real_connect


def _route_code(api: Any) -> CodeType:
    """The function of the first route answering ``POST /v1/namespaces/{ns}/timers``."""
    path = f"/v1/namespaces/{NAMESPACE}/timers"
    for route in api.router.routes:
        methods = getattr(route, "methods", None) or ()
        regex = getattr(route, "path_regex", None)
        if "POST" in methods and regex is not None and regex.match(path):
            endpoint = route.endpoint
            return endpoint.__code__  # type: ignore[no-any-return]
    raise SystemExit(f"no route answers POST {path}")


async def walk_both(url: str) -> list[Walk]:
    """Both walks on one database, each after a first request of its kind (opening the
    namespace's app, the worker's first tick) so that they follow what every request does."""
    create = Walk("create: POST /v1/namespaces/{ns}/timers -> INSERT INTO timers")
    fire = Walk("fire: a worker's tick -> the handler")
    api = create_api(ApiSettings(core=Settings(database_url=url)))
    app = AsyncApp(namespace=NAMESPACE, database_url=url)
    fired: list[str] = []

    async def handler(event: Any) -> None:
        fired.append(event.key)

    app.handler(EVENT_TYPE)(handler)
    creating = Tracer(create, _route_code(api))
    firing = Tracer(fire, _tick_code(app), handler.__code__)
    tracing: list[Tracer] = [creating]

    def dispatch(frame: FrameType, event: str, arg: Any) -> None:
        tracing[-1](frame, event, arg)

    with statements_seen(lambda: None) as hooks, profiled(dispatch):
        async with api.router.lifespan_context(api):
            transport = httpx.ASGITransport(app=api)
            async with httpx.AsyncClient(transport=transport, base_url="http://walk") as client:
                await _post(client, "/v1/namespaces", {"name": NAMESPACE})
                timers = f"/v1/namespaces/{NAMESPACE}/timers"
                await _post(client, timers, {"type": EVENT_TYPE, "key": "first", "delay": "P1D"})
                await app.open()
                try:
                    worker = app.worker()
                    await worker.tick()  # nothing is due: the first tick
                    creating.armed = True
                    hooks.append(creating.finish)
                    await _post(client, timers, {"type": EVENT_TYPE, "key": "walked", "delay": 0})
                    hooks.append(lambda: None)
                    tracing.append(firing)
                    firing.armed = True
                    await worker.tick()
                finally:
                    await app.close()
    if fired != ["walked"]:
        raise SystemExit(f"the handler was given {fired}, not the walked timer")
    for walk in (create, fire):
        if not (walk.started and walk.ended and walk.files):
            raise SystemExit(
                f"{walk.name}: not traced (started {walk.started}, ended {walk.ended})"
            )
    return [create, fire]


def _tick_code(app: AsyncApp) -> CodeType:
    return type(app.worker()).tick.__code__


async def _post(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> None:
    answer = await client.post(path, json=body)
    if answer.status_code >= 300:
        raise SystemExit(f"POST {path}: {answer.status_code} {answer.text}")


def walks() -> list[Walk]:
    """Both walks, on a temporary SQLite database."""
    with tempfile.TemporaryDirectory(prefix="duetime-walk-") as tmp:
        return asyncio.run(walk_both(f"sqlite:///{Path(tmp) / 'walk.db'}"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="Print the walks as JSON.")
    args = parser.parse_args()
    walked = walks()
    if args.json:
        shown = [{**asdict(w), "distinct": w.distinct} for w in walked]
        print(json.dumps({"package": PACKAGE, "walks": shown}, indent=1))
        return
    print(f"duetime from {PACKAGE}")
    for walk in walked:
        print(f"\n{walk.name}")
        for number, name in enumerate(walk.files, 1):
            print(f"  {number:3} {name}")
        print(
            f"  {len(walk.files)} moves, {walk.distinct} files, {walk.climbs} climbs back up, "
            f"{walk.returns} returns"
        )


if __name__ == "__main__":
    main()
