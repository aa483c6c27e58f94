"""Run the API under uvicorn in this process, with a graceful stop on SIGTERM and SIGINT."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

import uvicorn
from fastapi import FastAPI
from uvicorn.config import LOGGING_CONFIG

from duetime.api.http_limits import HEAD_TIMEOUT, http_protocol
from duetime.support import eventloop
from duetime.support.escaping import install_log_escaping

SHUTDOWN_TIMEOUT = 10
"""Seconds open HTTP connections get to finish before the workers are stopped (less when the
shutdown grace is shorter): then the requests still running are cancelled, their database
statements with them."""
CLOSE_MARGIN = 5.0
"""Seconds, past the HTTP requests' and the handlers' grace, to close the store."""
HUNG_EXIT = 1

log = logging.getLogger("duetime.api")


class GracefulServer(uvicorn.Server):
    """uvicorn, minus re-raising the signal after shutdown, so a SIGTERM stop exits 0; and on
    the signal, ``on_exit`` (the API ends its live streams, which would otherwise hold the
    shutdown for its whole grace period)."""

    on_exit: Callable[[], None] | None = None
    hard_stop_after: float | None = None
    """Seconds after the first signal at which the process exits whatever it is still doing."""
    _watchdog: threading.Timer | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.on_exit is not None:
            self.on_exit()
        if self.hard_stop_after is not None and self._watchdog is None:
            self._watchdog = threading.Timer(self.hard_stop_after, _hung, (self.hard_stop_after,))
            self._watchdog.daemon = True
            self._watchdog.start()
        super().handle_exit(sig, frame)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in _SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _hung(after: float) -> None:
    """The stop has outlived every grace: something ignores cancellation (a thread stuck in a
    call). Exit now; claimed work is rescued when its lease runs out."""
    log.error("still stopping %.1f s after the signal: exiting now", after)
    logging.shutdown()
    os._exit(HUNG_EXIT)


def run(
    api: FastAPI,
    host: str,
    port: int,
    *,
    log_level: str,
    access_log: bool,
    root_path: str = "",
    json_logs: bool = False,
    head_timeout: float = HEAD_TIMEOUT,
) -> None:
    """Serve until SIGTERM/SIGINT, then stop without dropping work.

    uvicorn stops accepting and lets requests finish; the lifespan then stops the workers (their
    in-flight handlers finish within the shutdown grace) and closes the store. With
    ``root_path`` is the prefix a reverse proxy strips (uvicorn's ``--root-path``). With
    ``json_logs`` uvicorn's loggers keep no handlers of their own: their records reach the
    root logger's JSON handler like duetime's. A request's head is bounded in size, lines and
    ``head_timeout`` seconds (:mod:`duetime.api.http_limits`).

    The stop is bounded whatever the requests do: open requests get the shutdown grace (at
    most :data:`SHUTDOWN_TIMEOUT`) and are then cancelled, handlers get the shutdown grace,
    the store :data:`CLOSE_MARGIN`; past all of that the process exits at once (code 1).
    """
    protocol, max_head = http_protocol(head_timeout)
    service = getattr(api.state, "duetime", None)
    grace = 30.0 if service is None else service.settings.core.shutdown_grace.total_seconds()
    drain = min(float(SHUTDOWN_TIMEOUT), grace)
    config = uvicorn.Config(
        api,
        host=host,
        port=port,
        log_level=log_level,
        access_log=access_log,
        root_path=root_path,
        log_config=None if json_logs else LOGGING_CONFIG,
        lifespan="on",
        server_header=False,
        timeout_graceful_shutdown=max(1, round(drain)),
        http=protocol,
        h11_max_incomplete_event_size=max_head,
    )
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):  # set up by uvicorn.Config
        install_log_escaping(logging.getLogger(name))
    install_log_escaping()
    server = GracefulServer(config)
    server.hard_stop_after = drain + grace + CLOSE_MARGIN
    if service is not None:
        server.on_exit = service.changes.close
    eventloop.run(server.serve())
    if not server.started:
        raise SystemExit(3)
