"""The JSON text duetime stores, and reading it back: one encoder and one decoder for every path.

Payloads are encoded once a scheduled timer (validation) and decoded once a claimed or read
timer (both stores), so both are made once here instead of once a call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_decode = json.JSONDecoder().raw_decode

# ``JSONEncoder.encode`` makes a new C encoder for every call, most of the cost of a small
# payload; this one is made once, with the arguments
# ``JSONEncoder.iterencode`` gives it for the options above. ``c_make_encoder`` is the json
# module's own speed-up, not a public name: without it (another Python) the encoder above serves.
_make_c_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_c_encoder: Callable[[Any, int], Sequence[str]] | None = (
    None
    if _make_c_encoder is None
    else _make_c_encoder(
        None,  # no check for cycles: a cyclic value ends in RecursionError (refused as not JSON)
        _ENCODER.default,
        json.encoder.encode_basestring,  # UTF-8 as is (ensure_ascii=False)
        None,  # no indent
        ":",
        ",",
        False,  # keys as given
        False,  # no key skipped
        False,  # no NaN or infinities
    )
)


def json_text(value: Any) -> str:
    """The compact JSON text duetime stores: UTF-8 as is, no NaN or infinities (ValueError),
    the same text as ``json.dumps(value, separators=(",", ":"), ensure_ascii=False,
    allow_nan=False)``."""
    if _c_encoder is None:
        return _ENCODER.encode(value)
    return "".join(_c_encoder(value, 0))


def load_json(text: str) -> Any:
    """``json.loads(text)`` for text that holds one JSON value, as duetime and PostgreSQL write
    it: without ``loads``' encoding detection and whitespace scan, done for every payload read;
    anything else (leading or trailing whitespace, a second value) goes through ``loads``."""
    try:
        value, end = _decode(text)
    except json.JSONDecodeError:
        return json.loads(text)
    return value if end == len(text) else json.loads(text)
