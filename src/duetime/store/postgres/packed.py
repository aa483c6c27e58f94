"""A batch's columns as PostgreSQL binary arrays, packed in one pass a column.

``timer_batch_params`` sends every column of a batch as an array (``unnest`` makes the rows).
psycopg dumps a list element by element through a generic array dumper — choosing a dumper for
the list, then one for each element, then framing each — which cost more of the client's CPU
than validating the requests (``bench/README.md``, "Enqueue: where the client's CPU went").
The columns a batch sends are of a few known types, so they are packed here directly into the
binary array format (a header, then each element's length and bytes) and handed to psycopg as
bytes it passes through (:class:`PackedDumper`). The server reads the same arrays as before.

A connection learns the dumpers once (:func:`teach`): the pool's as they are made, a caller's
own (the outbox) when a batch is first written on it.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import ClassVar

from psycopg import errors
from psycopg.abc import AdaptContext, Buffer
from psycopg.adapt import Dumper, PyFormat
from psycopg.pq import Format

_HEADER = struct.Struct(">iiiii")  # dimensions, has NULLs, element type, length, lower bound
_EMPTY = struct.Struct(">iii")  # no dimensions, no NULLs, element type
_LENGTH = struct.Struct(">i").pack
_NULL = _LENGTH(-1)
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)  # PostgreSQL's, of its binary timestamps


class Packed:
    """A binary array ready to send, and its PostgreSQL type (:attr:`oid`)."""

    __slots__ = ("data",)
    oid: ClassVar[int]
    element: ClassVar[int]

    def __init__(self, data: bytes) -> None:
        self.data = data

    @classmethod
    def empty(cls) -> Packed:
        return cls(_EMPTY.pack(0, 0, cls.element))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Packed) and type(other) is type(self) and other.data == self.data

    def __hash__(self) -> int:
        return hash(self.data)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.data!r})"


class TextArray(Packed):
    __slots__ = ()
    oid, element = 1009, 25


class TimestamptzArray(Packed):
    __slots__ = ()
    oid, element = 1185, 1184


class TimestampArray(Packed):
    __slots__ = ()
    oid, element = 1115, 1114


class IntervalArray(Packed):
    __slots__ = ()
    oid, element = 1187, 1186


class Int4Array(Packed):
    __slots__ = ()
    oid, element = 1007, 23


class Int2Array(Packed):
    __slots__ = ()
    oid, element = 1005, 21


def text_array(values: Sequence[str | None]) -> TextArray:
    """``text[]`` of ``values`` (None: NULL)."""
    if not values:
        return TextArray(_EMPTY.pack(0, 0, TextArray.element))
    parts: list[bytes] = []
    append, length = parts.append, _LENGTH
    nulls = 0
    for value in values:
        if value is None:
            append(_NULL)
            nulls = 1
        else:
            data = value.encode()
            append(length(len(data)))
            append(data)
    header = _HEADER.pack(1, nulls, TextArray.element, len(values), 1)
    return TextArray(header + b"".join(parts))


def timestamptz_array(values: Sequence[datetime]) -> TimestamptzArray:
    """``timestamptz[]`` of aware instants (microseconds since 2000-01-01 UTC)."""
    if not values:
        return TimestamptzArray(_EMPTY.pack(0, 0, TimestamptzArray.element))
    epoch = _EPOCH
    micros: list[int] = []
    append = micros.append
    for value in values:
        since = value - epoch
        append((since.days * 86_400 + since.seconds) * 1_000_000 + since.microseconds)
    header = _HEADER.pack(1, 0, TimestamptzArray.element, len(values), 1)
    return TimestamptzArray(header + struct.pack(">" + "iq" * len(values), *_framed(micros, 8)))


def int4_array(values: Sequence[int]) -> Int4Array:
    """``integer[]`` of ``values`` (none None)."""
    if not values:
        return Int4Array(_EMPTY.pack(0, 0, Int4Array.element))
    header = _HEADER.pack(1, 0, Int4Array.element, len(values), 1)
    return Int4Array(header + struct.pack(">" + "ii" * len(values), *_framed(values, 4)))


def int2_array(values: Sequence[int]) -> Int2Array:
    """``smallint[]`` of ``values`` (none None)."""
    if not values:
        return Int2Array(_EMPTY.pack(0, 0, Int2Array.element))
    header = _HEADER.pack(1, 0, Int2Array.element, len(values), 1)
    return Int2Array(header + struct.pack(">" + "ih" * len(values), *_framed(values, 2)))


def _framed(values: Sequence[int], width: int) -> list[int]:
    """Each value after its length (``width``), for one ``struct.pack`` of them all."""
    framed = [width] * (2 * len(values))
    framed[1::2] = values
    return framed


class PackedDumper(Dumper):
    """Sends a :class:`Packed` array's bytes as they are, in binary, typed as its class says."""

    format = Format.BINARY
    packed: ClassVar[type[Packed]]

    def __init__(self, cls: type, context: AdaptContext | None = None) -> None:
        super().__init__(cls, context)
        self.oid = self.packed.oid

    def dump(self, obj: Packed) -> Buffer:
        return obj.data


def _dumper(packed: type[Packed]) -> type[PackedDumper]:
    return type(f"{packed.__name__}Dumper", (PackedDumper,), {"packed": packed})


DUMPERS = {
    cls: _dumper(cls)
    for cls in (TextArray, TimestamptzArray, TimestampArray, IntervalArray, Int4Array, Int2Array)
}


def teach(conn: AdaptContext) -> None:
    """Give ``conn`` the dumpers of the packed arrays (once: a connection that has them keeps
    them)."""
    adapters = conn.adapters
    try:
        adapters.get_dumper(TextArray, PyFormat.BINARY)
    except errors.ProgrammingError:
        for cls, dumper in DUMPERS.items():
            adapters.register_dumper(cls, dumper)
