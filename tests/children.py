"""The processes a test process started and left running, found through ``/proc``.

A fixture that starts ``duetime serve``, a worker or a broker must stop it whatever happens;
one that does not leaves a process running after the suite, holding ports, files and
PostgreSQL connections. The session ends by looking for such processes, stopping them, and
failing with their command lines, so a leak is seen where it was made.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

PROC = Path("/proc")


def _parent_and_state(pid: int) -> tuple[int, str] | None:
    try:
        stat = (PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    fields = stat.rsplit(b")", 1)[1].split()
    return int(fields[1]), fields[0].decode()


def descendants(root: int | None = None) -> dict[int, str]:
    """The living processes below ``root`` (this process by default): pid -> command line.
    Empty where there is no ``/proc``."""
    root = os.getpid() if root is None else root
    if not PROC.is_dir():
        return {}
    children: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            found = _parent_and_state(int(entry.name))
            if found is not None and found[1] != "Z":  # a zombie has ended already
                children.setdefault(found[0], []).append(int(entry.name))
    below, todo = {}, [root]
    while todo:
        for pid in children.get(todo.pop(), []):
            with contextlib.suppress(OSError):
                raw = (PROC / str(pid) / "cmdline").read_bytes()
                below[pid] = raw.replace(b"\0", b" ").decode(errors="replace").strip()
            todo.append(pid)
    return below


def stop_all(pids: dict[int, str]) -> None:
    """Kill each process and reap those that are this process's own children."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, 0)
