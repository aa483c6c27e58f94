"""Checks on every field a caller sends, each failure an InvalidInput naming the field.

The same checks run for the Python API, the CLI, the REST API and broker sources, so every path
refuses the same things with the same words.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from datetime import timedelta
from typing import Any

from duetime.errors import InvalidInput
from duetime.formats import NAMESPACE_PATTERN, TYPE_PATTERN
from duetime.model import JSON, MAX_BULK_KEYS
from duetime.support.escaping import IDENTIFIER_CONTROL
from duetime.support.jsontext import json_text, load_json
from duetime.support.sealing import MARK as SEALED_MARK
from duetime.support.sealing import SealKeyMissing, Unopened

MAX_KEY_LENGTH = 255
MAX_STORED_KEY_LENGTH = MAX_KEY_LENGTH + 64
"""A delivery row's key is its event's plus ``@<destination>`` (a name of at most 63)."""
MAX_PRODUCER_LENGTH = 255
MAX_TYPE_LENGTH = 200
MAX_SUBJECT_LENGTH = 255
DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024
MAX_ATTEMPTS_LIMIT = 1000
MAX_PAYLOAD_DEPTH = 64
"""Arrays and objects nested deeper than this are refused: no reader recurses out of stack."""
_TOO_DEEP = f"nests arrays and objects deeper than {MAX_PAYLOAD_DEPTH} levels"
FILE_LINE_DEPTH = MAX_PAYLOAD_DEPTH + 1
"""A ``--from-file`` line is an object around its payload: one level more."""

_NAMESPACE = re.compile(NAMESPACE_PATTERN)
_TYPE = re.compile(TYPE_PATTERN)


def check_namespace(value: object, field: str = "namespace") -> str:
    if not isinstance(value, str) or not _NAMESPACE.fullmatch(value):
        raise InvalidInput(
            field,
            f"{value!r} is not a namespace name: 1-63 characters of a-z, 0-9, '_', '.', '-',"
            " starting with a letter or digit",
        )
    return value


def check_key(value: object, field: str = "key") -> str:
    if value is None:
        return generate_key()
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be a string, not {type(value).__name__}")
    if not value.strip():
        raise InvalidInput(field, "must not be empty")
    if len(value) > MAX_KEY_LENGTH:
        raise InvalidInput(field, f"is {len(value)} characters; at most {MAX_KEY_LENGTH}")
    return check_identifier_text(value, field)


def check_lookup_key(value: object, field: str = "key") -> str:
    """A key to look up, cancel or replay: a caller's key, or a delivery row's (longer)."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(field, "must be a non-empty string")
    if len(value) > MAX_STORED_KEY_LENGTH:
        raise InvalidInput(field, f"is {len(value)} characters; at most {MAX_STORED_KEY_LENGTH}")
    return (
        check_key(value, field)
        if len(value) <= MAX_KEY_LENGTH
        else check_identifier_text(value, field)
    )


def check_keys(value: object, field: str = "keys", most: int = MAX_BULK_KEYS) -> list[str]:
    """A selection of keys (a bulk action's, a filter's): 1 to ``most`` of them, each a key to
    look up (``keys[3]`` named when bad); repeats are read once."""
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise InvalidInput(field, "must be a list of keys")
    if not 1 <= len(value) <= most:
        raise InvalidInput(field, f"must hold 1 to {most} keys, not {len(value)}")
    keys = [check_lookup_key(key, f"{field}[{index}]") for index, key in enumerate(value)]
    return list(dict.fromkeys(keys))


def check_producer(value: object, field: str = "producer") -> str:
    """Who stores timers (a node id, ``api``, ``cli``…), as the envelope shows it."""
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_PRODUCER_LENGTH:
        raise InvalidInput(field, f"must be a string of 1-{MAX_PRODUCER_LENGTH} characters")
    return check_identifier_text(value, field)


def type_name(value: object) -> str:
    """The name of ``value``'s type, for error messages."""
    return type(value).__name__


def generate_key() -> str:
    """A key for callers who gave none: unique, so the timer is never merged with another.

    32 hex digits, laid out as a UUIDv7 is: the time in milliseconds (48 bits) first, then 80
    bits from the operating system's random source. Keys made later sort later, so a store's
    unique index on (namespace, key) takes new keys at its right edge, as it does ids, instead
    of on a random leaf: with purely random keys every insert, and every new version of a row
    that a claim or an outcome writes, dirtied a leaf anywhere in an index that outgrows
    memory. The random source is read 4 KiB at a time, kept as hex, and the time's 12 digits
    are written once a millisecond: a system call, a hex conversion and a formatted time a key
    cost more than the rest of validating a request with no key. A forked child starts with
    an empty buffer, so it never hands out its parent's bytes again.
    """
    return generate_keys(1)[0]


def generate_keys(count: int) -> list[str]:
    """``count`` keys as :func:`generate_key` makes them, the time read and the lock taken
    once for all of them."""
    global _random_hex, _random_at, _millis, _millis_hex
    millis = time.time_ns() // 1_000_000
    width = _RANDOM_DIGITS
    with _random_lock:
        if millis != _millis:
            _millis, _millis_hex = millis, f"{millis & 0xFFFF_FFFF_FFFF:012x}"
        prefix, at, hex_ = _millis_hex, _random_at, _random_hex
        keys: list[str] = []
        while len(keys) < count:
            if at + width > len(hex_):
                hex_, at = os.urandom(_RANDOM_READ).hex(), 0
            take = min(count - len(keys), (len(hex_) - at) // width)
            keys += [prefix + hex_[i : i + width] for i in range(at, at + take * width, width)]
            at += take * width
        _random_hex, _random_at = hex_, at
        return keys


_RANDOM_DIGITS = 20  # 80 bits
_RANDOM_READ = 4096
_random_hex = ""  # empty: the first key reads the source
_random_at = 0
_millis = -1
_millis_hex = ""
_random_lock = threading.Lock()


def _forget_random_bytes() -> None:
    global _random_hex, _random_at
    _random_hex, _random_at = "", 0


os.register_at_fork(after_in_child=_forget_random_bytes)


def check_type(value: object, field: str = "type") -> str:
    if type(value) is str and value in _good_types:  # a batch's types repeat
        return value
    if not isinstance(value, str) or not value:
        raise InvalidInput(field, "an event type is required, e.g. 'birthday.greeting'")
    if len(value) > MAX_TYPE_LENGTH or not _TYPE.fullmatch(value):
        raise InvalidInput(
            field,
            f"{value[:50]!r} is not an event type: letters, digits and _ . : / - "
            f"(at most {MAX_TYPE_LENGTH})",
        )
    if type(value) is str:
        if len(_good_types) >= _GOOD_TYPES_KEPT:
            _good_types.clear()
        _good_types.add(value)
    return value


_GOOD_TYPES_KEPT = 1024
_good_types: set[str] = set()
"""Event types :func:`check_type` passed (a few hundred at most in any application; all
forgotten when there are more), so a batch of one type is matched once, not once a request."""


def check_subject(value: object, field: str = "subject") -> str | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(field, "must be a non-empty string (e.g. a user id)")
    if len(value) > MAX_SUBJECT_LENGTH:
        raise InvalidInput(field, f"is {len(value)} characters; at most {MAX_SUBJECT_LENGTH}")
    return check_identifier_text(value, field)


def check_correlation_id(value: object, field: str = "correlation_id") -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_KEY_LENGTH:
        raise InvalidInput(field, f"must be a string of 1-{MAX_KEY_LENGTH} characters")
    return check_identifier_text(value, field)


def check_identifier_text(value: str, field: str) -> str:
    """An identifier: :func:`check_text`, and no control characters — C0 (tab too), DEL, C1,
    U+2028 and U+2029 (a newline or an escape sequence in a subject would reach every terminal
    that lists it). The one rule for every name a caller gives: keys, subjects, token names,
    broker names."""
    if IDENTIFIER_CONTROL.search(value) is not None:
        raise InvalidInput(field, "must not contain control characters")
    return check_text(value, field)


def check_text(value: str, field: str) -> str:
    """Text every backend can store: valid UTF-8 (no lone surrogates) and no NUL characters."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(field, "is not valid Unicode text (lone surrogate)") from None
    if "\x00" in value:
        raise InvalidInput(field, "must not contain NUL characters")
    return value


def check_payload(
    value: Any, max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES, field: str = "payload"
) -> JSON:
    """The payload must survive a JSON round trip unchanged and fit the size limit.

    NUL characters and lone surrogates are refused because PostgreSQL's jsonb cannot hold
    them; refusing them everywhere keeps both backends answering alike.
    """
    return encode_payload(value, max_bytes, field)[0]


def encode_payload(
    value: Any, max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES, field: str = "payload"
) -> tuple[JSON, str]:
    """:func:`check_payload`'s value, and its JSON text as duetime stores it (the text of the
    returned value, too: our own compact text is the same after one round trip)."""
    if isinstance(value, dict) and len(value) == 1 and SEALED_MARK in value:
        if isinstance(value, Unopened):  # a stored payload read without its key, carried over
            raise SealKeyMissing(value.key_id)
        raise InvalidInput(
            field,
            f"must not be {{{SEALED_MARK!r}: …}}, the form of a sealed payload (a sealed payload "
            "this process cannot open reads so, and is never written back over the real one)",
        )
    try:
        text = json_text(value)
        # ASCII text is its own UTF-8 (no lone surrogate in it): its length is its size.
        size = len(text) if text.isascii() else len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidInput(field, "contains text that is not valid Unicode") from None
    except RecursionError:
        raise InvalidInput(field, _TOO_DEEP) from None  # deeper than Python recurses, or a cycle
    except (TypeError, ValueError) as exc:
        raise InvalidInput(field, f"is not JSON: {exc}") from exc
    # Only a text with more brackets than the limit can nest deeper: the walk is for those.
    if text.count("[") + text.count("{") > MAX_PAYLOAD_DEPTH and _too_deep(value):
        raise InvalidInput(field, _TOO_DEEP)
    if len(text) > MAX_INT_DIGITS and _LONG_DIGITS.search(text) and _has_long_int(value):
        raise InvalidInput(
            field,
            f"holds an integer of more than {MAX_INT_DIGITS} digits, which a worker cannot read "
            "back (Python's limit on integer text)",
        )
    if "\\u0000" in text and _has_nul(value):
        raise InvalidInput(field, "must not contain NUL characters (\\u0000)")
    if size > max_bytes:
        raise InvalidInput(field, f"is {size} bytes as JSON; the limit is {max_bytes}")
    if type(value) is dict and _flat(value):
        return dict(value), text  # what reading the text back makes, in a tenth of the time
    return load_json(text), text


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _flat(value: dict[Any, Any]) -> bool:
    """Whether ``value`` is an object of text keys and plain scalars only, which reads back
    from its JSON text as a copy of itself: by the checks above, its text is valid Unicode
    without NUL, its floats finite, its integers within the digits a worker reads back (a
    subclass, an enum say, may encode otherwise: not flat)."""
    scalars = _SCALARS
    for key, item in value.items():
        if type(key) is not str or type(item) not in scalars:
            return False
    return True


def _too_deep(value: Any, limit: int = MAX_PAYLOAD_DEPTH) -> bool:
    """True when arrays and objects nest more than ``limit`` levels."""
    if not isinstance(value, dict | list | tuple):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


MAX_INT_DIGITS = 4300
"""Python's default limit on the digits of an integer read from text: a worker decodes the
payload under it, whatever limit the process that scheduled it ran with."""
_LONG_DIGITS = re.compile(rf"\d{{{MAX_INT_DIGITS + 1},}}")
_TOO_LONG_INT = 10**MAX_INT_DIGITS  # the least integer with one digit too many


def _has_long_int(value: Any) -> bool:
    """True when an integer anywhere in ``value`` has more than :data:`MAX_INT_DIGITS` digits."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, int) and not isinstance(item, bool):
            if abs(item) >= _TOO_LONG_INT:
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_has_nul(item) for item in value)
    return False


def parse_payload_text(text: str, field: str = "payload") -> JSON:
    """A payload given as JSON text (CLI, files)."""
    return parse_json_text(text, field)


def parse_json_text(text: str, field: str, *, depth: int = MAX_PAYLOAD_DEPTH) -> Any:
    """JSON text the CLI reads (``--payload``, a ``--from-file`` line, ``--routes``,
    ``--sources``): one reader and one depth rule for all, InvalidInput naming ``field`` for
    text that is not JSON or nests arrays and objects deeper than ``depth`` (a document that
    wraps a payload allows the levels around it). Without the rule, JSON deep enough made the
    reader, or whatever walks the value next, fail with a RecursionError traceback."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise InvalidInput(field, _too_deep_message(depth)) from None
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}" if "\n" in text else f"position {exc.pos}"
        raise InvalidInput(field, f"is not valid JSON: {exc.msg} at {where}") from None
    if text.count("[") + text.count("{") > depth and _too_deep(value, depth):
        raise InvalidInput(field, _too_deep_message(depth))
    return value


def _too_deep_message(depth: int) -> str:
    return f"nests arrays and objects deeper than {depth} levels"


def whole_number(value: object) -> object:
    """``3.0`` as ``3``: JSON has one number type, and JSON Schema calls 3.0 an integer."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def check_max_attempts(value: object, field: str = "max_attempts") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(field, "must be a whole number")
    if not 1 <= value <= MAX_ATTEMPTS_LIMIT:
        raise InvalidInput(field, f"must be between 1 and {MAX_ATTEMPTS_LIMIT}")
    return value


PRIORITY_DEFAULT = 0
PRIORITY_MAX = 9


def check_priority(value: object, field: str = "priority") -> int:
    """Priority within the due timers: 0 (the default) is normal, up to 9 the most urgent.
    Among the due timers a claim takes the higher priority first, then the earlier due."""
    if value is None:
        return PRIORITY_DEFAULT
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(field, f"must be a whole number from 0 to {PRIORITY_MAX}")
    if not PRIORITY_DEFAULT <= value <= PRIORITY_MAX:
        raise InvalidInput(field, f"must be between 0 and {PRIORITY_MAX} (9 the most urgent)")
    return value


def check_expires_after(value: object, field: str = "expires_after") -> timedelta | None:
    """A positive span of at most 100 years, as seconds, ISO 8601 text or a timedelta (a month
    counts 31 days): bounded so that ``due_at + expires_after`` never overflows."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, timedelta | int | float | str):
        raise InvalidInput(field, "must be a duration: seconds, or ISO 8601 like 'PT1H'")
    from duetime.timemath.durations import parse_span

    span = parse_span(value, field)
    if span <= timedelta(0):
        raise InvalidInput(field, "must be a positive duration")
    return span


def check_limit(value: object, field: str = "limit", maximum: int = 1000) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise InvalidInput(field, f"must be a whole number from 1 to {maximum}")
    return value


ON_CONFLICT_MODES = ("update", "keep", "error")


def check_on_conflict(value: object, field: str = "on_conflict") -> None:
    """What to do with an existing key: update it, keep it, or answer an error."""
    if value not in ON_CONFLICT_MODES:
        raise InvalidInput(field, f"must be one of {', '.join(ON_CONFLICT_MODES)}")
