"""Which optional extra provides a missing package, so a missing import becomes an instruction.

The library itself (scheduling, workers, webhooks, metrics) needs only duetime's core
dependencies; the ``duetime`` command and the REST API need ``duetime[server]``.
"""

from __future__ import annotations

SERVER_PACKAGES = frozenset({"click", "rich", "fastapi", "starlette", "pydantic", "uvicorn"})
"""Top-level modules that ``pip install 'duetime[server]'`` brings."""


def server_missing(exc: ImportError, what: str) -> str | None:
    """The sentence telling how to get ``what`` working, if ``exc`` is a server package missing."""
    missing = (exc.name or "").partition(".")[0]
    if missing not in SERVER_PACKAGES:
        return None
    return f"{what} needs duetime's server extra ({missing} is not installed): " + (
        "pip install 'duetime[server]'"
    )
