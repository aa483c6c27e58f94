"""Apps for the heterogeneous-node tests, run by ``duetime worker --app bus_apps:<name>``.

Each handles one event type and appends ``<type>,<key>,<attempt>,<pid>`` per delivery to the
file ``BUS_LOG`` (one ``write`` to an ``O_APPEND`` file: lines from several processes never
interleave). The database and every other setting come from ``DUETIME_*`` variables.
"""

from __future__ import annotations

import os

from duetime import AsyncApp, Event


def _app(type: str) -> AsyncApp:
    app = AsyncApp()
    fd = os.open(os.environ["BUS_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    @app.handler(type)
    def record(event: Event) -> None:
        os.write(fd, f"{event.type},{event.key},{event.attempt},{os.getpid()}\n".encode())

    return app


alpha = _app("alpha")
beta = _app("beta")
