"""Why the test PostgreSQL server refused a connection with "too many clients", said plainly.

The server is reachable and ``DUETIME_TEST_PG`` names it rightly when it says so: it is full.
Each test process holds a few connections (its schema pool's one, each open store's pool,
the workers and servers it starts), and several test processes run at once; a server shared
with others, or with a small ``max_connections``, runs out. The explanation gives the
server's limit, how many connections it had in use, how many test processes run, and how many
connections this one and its children hold, with what to do about it.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

TOO_MANY = "too many clients"
"""What PostgreSQL says (SQLSTATE 53300) when every connection slot is taken."""


@dataclass(frozen=True)
class ServerLoad:
    """The server's connection limit and use, read while it still had a free slot."""

    max_connections: int
    in_use: int


def read_load(conn: psycopg.Connection[Any]) -> ServerLoad:
    """``max_connections`` and the connections in use, over an open psycopg connection."""
    row = conn.execute(
        "SELECT current_setting('max_connections')::int, count(*)::int FROM pg_stat_activity"
        " WHERE backend_type = 'client backend'"
    ).fetchone()
    assert row is not None
    return ServerLoad(int(row[0]), int(row[1]))


def suite_processes() -> int:
    """How many test processes run at once (pytest-xdist's count; 1 without it)."""
    return int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)


def held_connections(port: int, root: int | None = None) -> int:
    """Open TCP connections to ``port`` held by process ``root`` (this one by default) and
    the processes it started. 0 where there is no ``/proc``."""
    from tests.children import descendants

    root = os.getpid() if root is None else root
    to_port = _socket_inodes_to(port)
    held = set()
    for pid in [root, *descendants(root)]:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if target.startswith("socket:["):
                        inode = int(target[len("socket:[") : -1])
                        if inode in to_port:
                            held.add(inode)
    return len(held)


def _socket_inodes_to(port: int) -> set[int]:
    """Inodes of this machine's established TCP connections whose remote port is ``port``."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                remote_port = int(fields[2].rsplit(":", 1)[1], 16)
                if remote_port == port and fields[3] == "01":  # ESTABLISHED
                    found.add(int(fields[9]))
    return found


def explain(url: str, port: int | None, load: ServerLoad | None) -> str:
    """The real cause of a "too many clients" refusal, and what to do about it."""
    processes = suite_processes()
    lines = [
        f"PostgreSQL at {url} refused a connection: it has no free connection slot "
        "(too many clients). It is reachable and DUETIME_TEST_PG is right: the server is full.",
    ]
    if load is not None:
        lines.append(
            f"It allows max_connections={load.max_connections}; {load.in_use} were in use "
            "when this test process first connected."
        )
    if port is not None:
        lines.append(
            f"This suite runs {processes} test process(es); this one and the processes it "
            f"started hold {held_connections(port)} connection(s) to it now."
        )
    lines.append(
        "Run fewer test processes (DUETIME_TEST_PROCESSES=2 ./test), stop other clients of "
        "that server, or raise its max_connections (postgresql.conf, then restart it)."
    )
    return "\n".join(lines)
