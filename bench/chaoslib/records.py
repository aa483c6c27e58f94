"""Append-only record files: what the producer acknowledged and what handlers started.

One file per writing process, one line per record, each line one ``write`` to an ``O_APPEND``
file followed by ``fdatasync``: a kill -9 of the writer loses nothing it had recorded, and the
harness, which is never killed, reads the files after the run. Fields are tab-separated; the
last field of a start is the payload's JSON text as the handler received it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ACKS = "acks-*.log"
STARTS = "starts-*.log"


@dataclass(frozen=True, slots=True)
class Ack:
    """A timer ``schedule_many`` returned for (``acked``), or one it may or may not have
    stored (a batch given up on after errors: ``acked`` False, "in doubt")."""

    key: str
    due_us: int
    expires_after_us: int
    """0: the timer has no ``expires_after``."""
    acked: bool


@dataclass(frozen=True, slots=True)
class Start:
    """One handler start: the reference clock's instant, taken as the handler began."""

    key: str
    attempt: int
    node: str
    at_us: int
    payload: str


class RecordFile:
    """One process's append-only record file."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, lines: list[str]) -> None:
        """Write whole lines (one ``write``), then make them durable."""
        os.write(self.fd, "".join(f"{line}\n" for line in lines).encode())
        os.fdatasync(self.fd)

    def close(self) -> None:
        os.close(self.fd)


def ack_line(key: str, due_us: int, expires_after_us: int, acked: bool = True) -> str:
    return "\t".join(("ack" if acked else "doubt", key, str(due_us), str(expires_after_us)))


def start_line(start: Start) -> str:
    fields = (start.key, str(start.attempt), start.node, str(start.at_us), start.payload)
    return "\t".join(("start", *fields))


def _lines(folder: Path, pattern: str) -> list[list[str]]:
    rows = []
    for path in sorted(folder.glob(pattern)):
        for line in path.read_text(errors="replace").splitlines():
            rows.append(line.split("\t", 5))
    return rows


def read_acks(folder: Path) -> dict[str, Ack]:
    """Every key the producer recorded; an acknowledgement wins over a doubt."""
    acks: dict[str, Ack] = {}
    for row in _lines(folder, ACKS):
        if len(row) != 4 or row[0] not in ("ack", "doubt"):
            continue
        ack = Ack(row[1], int(row[2]), int(row[3]), row[0] == "ack")
        if ack.acked or ack.key not in acks:
            acks[ack.key] = ack
    return acks


def read_starts(folder: Path) -> list[Start]:
    starts = []
    for row in _lines(folder, STARTS):
        if len(row) == 6 and row[0] == "start":
            starts.append(Start(row[1], int(row[2]), row[3], int(row[4]), row[5]))
    return starts
