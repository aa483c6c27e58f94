"""Run the API under uvicorn in this process, with a graceful stop on SIGTERM and SIGINT."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

import uvicorn
from fastapi import FastAPI
from uvicorn.config import LOGGING_CONFIG

from duetime import eventloop
from duetime.api.http_limits import HEAD_TIMEOUT, http_protocol
from duetime.controls import install_log_escaping

SHUTDOWN_TIMEOUT = 10
"""Seconds open HTTP connections get to finish before the workers are stopped."""


class GracefulServer(uvicorn.Server):
    """uvicorn, minus re-raising the signal after shutdown, so a SIGTERM stop exits 0; and on
    the signal, ``on_exit`` (the API ends its live streams, which would otherwise hold the
    shutdown for its whole grace period)."""

    on_exit: Callable[[], None] | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.on_exit is not None:
            self.on_exit()
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
    """
    protocol, max_head = http_protocol(head_timeout)
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
        timeout_graceful_shutdown=SHUTDOWN_TIMEOUT,
        http=protocol,
        h11_max_incomplete_event_size=max_head,
    )
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):  # set up by uvicorn.Config
        install_log_escaping(logging.getLogger(name))
    install_log_escaping()
    server = GracefulServer(config)
    service = getattr(api.state, "duetime", None)
    if service is not None:
        server.on_exit = service.changes.close
    eventloop.run(server.serve())
    if not server.started:
        raise SystemExit(3)
