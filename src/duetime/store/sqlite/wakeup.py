"""Cross-process wake-ups for SQLite, the embedded stand-in for PostgreSQL's LISTEN/NOTIFY.

Each process using a database file binds a Unix datagram socket in a directory derived from the
file's real path; whoever stores a timer sends one small datagram (the earliest ``run_at`` it
wrote) to every socket there. A worker that hears of a timer earlier than its planned wake-up
re-reads the next due instant. Datagrams are hints only: a lost one costs latency (the worker's
bounded safety re-check still runs), never a timer. Sockets of dead processes are removed by
whoever finds them refusing datagrams.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import socket
import struct
import tempfile
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from duetime.store.codec import from_micros, to_micros

log = logging.getLogger(__name__)

_UNKNOWN = -1
_FORMAT = "!q"


def channel_dir(db_path: Path) -> Path:
    """A short directory for the sockets of one database file (socket paths max ~107 bytes)."""
    digest = hashlib.sha256(str(db_path.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"duetime-{os.getuid()}" / digest


class WakeupChannel:
    """Receives wake-ups for one database file and broadcasts this process's own."""

    def __init__(self, db_path: Path, on_wakeup: Callable[[datetime | None], None]) -> None:
        self._dir = channel_dir(db_path)
        self._on_wakeup = on_wakeup
        self._sock: socket.socket | None = None
        self._path: Path | None = None
        self._sender = Broadcaster(db_path)
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        try:
            self._dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._path = self._dir / f"{os.getpid()}-{os.urandom(4).hex()}.sock"
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sock.setblocking(False)
            sock.bind(str(self._path))
        except OSError as exc:  # no Unix sockets here: workers fall back to the safety re-check
            log.warning("cross-process wake-ups unavailable (%s); relying on re-checks", exc)
            self._path = None
            return
        self._sock = sock
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(sock.fileno(), self._read)

    async def stop(self) -> None:
        if self._sock is not None and self._loop is not None:
            self._loop.remove_reader(self._sock.fileno())
            self._sock.close()
            self._sock = None
        if self._path is not None:
            with contextlib.suppress(FileNotFoundError):
                self._path.unlink()
            self._path = None
        self._sender.close()

    def _read(self) -> None:
        assert self._sock is not None
        earliest: int | None = None
        unknown = False
        while True:
            try:
                data = self._sock.recv(64)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                break
            if len(data) != struct.calcsize(_FORMAT):
                continue
            (micros,) = struct.unpack(_FORMAT, data)
            if micros == _UNKNOWN:
                unknown = True
            else:
                earliest = micros if earliest is None else min(earliest, micros)
        if unknown:
            self._on_wakeup(None)
        elif earliest is not None:
            self._on_wakeup(from_micros(earliest))

    def broadcast(self, earliest: datetime | None) -> None:
        """Send the hint to every other process on this database; never blocks, never raises."""
        self._sender.send(earliest, skip=str(self._path) if self._path else None)


class Broadcaster:
    """Sends wake-ups to every socket of one database file (a channel's, or on its own)."""

    def __init__(self, db_path: Path) -> None:
        self._dir = channel_dir(db_path)
        self._sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sender.setblocking(False)
        self._peers: list[str] = []
        self._peers_mtime = -1

    def send(self, earliest: datetime | None, *, skip: str | None = None) -> None:
        """The hint to every socket but ``skip``; never blocks, never raises."""
        message = struct.pack(_FORMAT, _UNKNOWN if earliest is None else to_micros(earliest))
        for peer in self._list_peers():
            if peer == skip:
                continue
            try:
                self._sender.sendto(message, peer)
            except (ConnectionRefusedError, FileNotFoundError):
                with contextlib.suppress(OSError):
                    os.unlink(peer)  # its process is gone
                self._peers_mtime = -1
            except OSError:
                continue  # full receive buffer: it has wake-ups pending already

    def close(self) -> None:
        self._sender.close()

    def _list_peers(self) -> list[str]:
        try:
            mtime = self._dir.stat().st_mtime_ns
        except OSError:
            return []
        if mtime != self._peers_mtime:
            self._peers = [str(p) for p in self._dir.glob("*.sock")]
            self._peers_mtime = mtime
        return self._peers
