"""Compiled zones (TZif, RFC 8536) read from files that may be damaged.

The standard library's ``zoneinfo`` trusts what it reads: a file cut short inside its footer
(the POSIX TZ string after the data blocks) makes ``ZoneInfo.from_file`` read one byte at a
time for ever, and other cuts end in ``struct.error`` or ``AssertionError``. So a file is read
whole, up to :data:`MAX_BYTES`, and its layout is checked before ``zoneinfo`` parses it: a
damaged file is an error that names it, never a hang or a traceback.
"""

from __future__ import annotations

import io
import struct
from pathlib import Path
from zoneinfo import ZoneInfo

from duetime.errors import InvalidInput

MAX_BYTES = 1 << 20
"""Far more than any real zone (the largest in tzdata are a few kilobytes)."""

_HEADER = struct.Struct(">4sc15x6l")
_VERSIONS = (b"\0", b"2", b"3", b"4")


def read_zone(path: Path, key: str, field: str = "zoneinfo") -> ZoneInfo:
    """The zone compiled in ``path`` (named ``key``); :class:`InvalidInput` on ``field``,
    naming the file, when it cannot be read or is not a whole TZif file."""
    try:
        with path.open("rb") as source:
            data = source.read(MAX_BYTES + 1)
    except OSError as exc:
        raise InvalidInput(field, f"cannot read {str(path)!r}: {exc.strerror or exc}") from exc
    problem = tzif_problem(data)
    if problem is None:
        try:
            return ZoneInfo.from_file(io.BytesIO(data), key=key)
        except Exception as exc:  # zoneinfo's own checks: bad indices, a bad TZ string
            problem = str(exc) or type(exc).__name__
    raise InvalidInput(field, f"{str(path)!r} is not a valid compiled zone (TZif): {problem}")


def tzif_problem(data: bytes) -> str | None:
    """What is wrong with ``data`` as a TZif file (None: its layout is whole)."""
    if len(data) > MAX_BYTES:
        return f"larger than {MAX_BYTES} bytes"
    end, version, problem = _block(data, 0, 4)
    if problem is not None or version == b"\0":
        return problem
    end, _, problem = _block(data, end, 8)
    if problem is not None:
        return problem
    if data[end : end + 1] != b"\n":
        return "the footer is missing (cut short after the data)"
    close = data.find(b"\n", end + 1)
    if close < 0:
        return "the footer is cut short (no closing newline)"
    if close != len(data) - 1:
        return "unexpected bytes after the footer"
    if not data[end + 1 : close].isascii():
        return "the footer is not ASCII"
    return None


def _block(data: bytes, start: int, time_size: int) -> tuple[int, bytes, str | None]:
    """Check one header and its data block: (where the block ends, version, problem)."""
    if len(data) < start + _HEADER.size:
        return start, b"", "cut short inside a header"
    magic, version, isut, isstd, leap, times, types, chars = _HEADER.unpack_from(data, start)
    if magic != b"TZif":
        return start, version, "no TZif header"
    if version not in _VERSIONS:
        return start, version, f"unknown TZif version {version!r}"
    if min(isut, isstd, leap, times, types, chars) < 0 or types == 0 or chars == 0:
        return start, version, "impossible counts in the header"
    if isut not in (0, types) or isstd not in (0, types):
        return start, version, "impossible counts in the header"
    size = times * (time_size + 1) + types * 6 + chars + leap * (time_size + 4) + isstd + isut
    end = start + _HEADER.size + size
    if len(data) < end:
        return end, version, "cut short inside a data block"
    return end, version, None
