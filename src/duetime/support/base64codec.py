"""Base64 for sealed values: pybase64's SIMD codec where it is installed, binascii's otherwise.

binascii decodes a character at a time through a jump the processor learns to predict only
when nothing else runs between two decodings; in a worker's claim loop it mispredicts, and
decoding a sealed payload of a few hundred bytes costs about 2 µs, a third of what sealing
adds to a timer. pybase64 decodes it in about 0.25 µs. Both read and write the standard
alphabet with padding, so a value written with either opens with the other, and both refuse
what is not base64 with a ``ValueError`` (``binascii.Error`` or, beyond ASCII, ``ValueError``).
"""

from __future__ import annotations

from binascii import a2b_base64, b2a_base64
from collections.abc import Callable

decode: Callable[[str], bytes]
"""Base64 text → bytes, not strict: characters outside the alphabet are skipped (a sealed
value's tag refuses any change that matters)."""
encode: Callable[[bytes], bytes]
"""Bytes → base64 (ASCII bytes, no newline)."""


def _encode_binascii(data: bytes) -> bytes:
    return b2a_base64(data, newline=False)


try:
    from pybase64 import b64decode as decode
    from pybase64 import b64encode as encode
except ImportError:  # the standard library's, a few µs slower a sealed payload
    decode, encode = a2b_base64, _encode_binascii

FAST = decode is not a2b_base64
"""Whether pybase64 is the codec (``duetime[fast-sealing]``)."""
