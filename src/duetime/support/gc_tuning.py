"""How often the garbage collector runs in duetime's own long-running processes.

CPython collects its young objects every 700 allocations and, every hundred such collections,
the whole heap. A server makes thousands of short-lived objects a request, so those full
collections come every few seconds under load and walk everything startup built (FastAPI,
pydantic, the routes, the drivers): each stalls the event loop while it walks them, and under a
steady load of requests those stalls are what the slowest requests wait for.

So ``duetime serve`` and ``duetime worker``, once started, freeze what startup made
(``gc.freeze``: kept, never scanned again) and collect the young generation every 50,000
allocations, the older ones as CPython's ratios but twice as rarely. Cycles are still collected.
``DUETIME_GC=default`` keeps CPython's own pacing. An application that embeds duetime keeps
its own: this runs only in the processes the command line starts.
"""

from __future__ import annotations

import gc
import os

YOUNG = 50_000
"""Allocations (less deallocations) between two collections of the young generation."""
OLDER = 20
"""Collections of a generation between two of the next (CPython: 10)."""


def pace_for_service() -> None:
    """Freeze the startup heap and collect less often (see the module); a no-op with
    ``DUETIME_GC=default``."""
    if os.environ.get("DUETIME_GC", "").strip().lower() == "default":
        return
    gc.collect()  # what startup left unreachable goes now, not into the frozen heap
    gc.freeze()
    gc.set_threshold(YOUNG, OLDER, OLDER)
