"""The text formats of the REST API's fields, as the JSON Schema patterns /openapi.json shows.

Every value a pattern here admits is one the server's own parsers accept, whatever the other
fields say, so a client generated from the document never sends a request it will refuse:
dates are calendar dates (``02-29`` only in leap years), instants lie a year inside the range
duetime stores (so no UTC offset carries one out of it), and durations have few enough digits
per part that no sum of them passes the 100 years a duration may span. The server reads a few
spellings more (``p1d``, a space for ``T``): a pattern describes the canonical ones only.

Patterns use ``[0-9]`` for digits, never ``\\d``: in Python's and Rust's regex engines ``\\d``
also matches other scripts' digits, in JSON Schema's (ECMA 262) only the ASCII ones.
"""

from __future__ import annotations

from collections.abc import Sequence

from duetime.timemath.bounds import MAX_DURATION_SECONDS
from duetime.timemath.tzmath import zone_names

__all__ = [
    "CONTROL",
    "CORRELATION_PATTERN",
    "CRON_PATTERN",
    "DATE_PATTERN",
    "DURATION_PATTERN",
    "EVERY_PATTERN",
    "EXPIRES_PATTERN",
    "GRACE_PATTERN",
    "INSTANT_PATTERN",
    "LOCAL_PATTERN",
    "MAX_SECONDS",
    "NAMESPACE_PATTERN",
    "PAYLOAD_MATCH_PATTERN",
    "TYPE_PATTERN",
    "WHEN_PATTERN",
    "identifier_pattern",
    "timezones",
]

MAX_SECONDS = int(MAX_DURATION_SECONDS)

CONTROL = r"\x00-\x1f\x7f-\x9f\u2028\u2029"
"""C0, DEL, C1 and the line separators: what an identifier may not hold (see validation.py)."""
_BLANK = r" \xa0\u1680\u2000-\u200a\u202f\u205f\u3000"
"""The whitespace Python's ``str.strip`` removes that is not already a control character."""


NAMESPACE_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,62}$"
"""A namespace's name (``validation.check_namespace``'s rule, and the API's paths')."""
TYPE_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.:/-]*$"
"""An event type (``validation.check_type``'s rule)."""
CORRELATION_PATTERN = f"^[^{CONTROL}]+$"
"""A correlation id: any text without control characters."""


def identifier_pattern() -> str:
    """Text with no control character and something besides whitespace (a key, a subject)."""
    return f"^[^{CONTROL}]*[^{CONTROL}{_BLANK}][^{CONTROL}]*$"


# Years 1971-8998: a year inside [1970, 9000), the range of instants duetime stores, so that
# neither a UTC offset nor a zone's wall clock moves a written instant out of it.
_YEAR = "(?:197[1-9]|19[89][0-9]|[2-7][0-9]{3}|8[0-8][0-9]{2}|89[0-8][0-9]|899[0-8])"
_LEAP_YEAR = (
    "(?:197[26]|198[048]|199[26]|[2-8][0-9](?:0[48]|[2468][048]|[13579][26])"
    "|(?:[2468][048]|[357][26])00)"
)
_MONTH_DAY = (
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    "|02-(?:0[1-9]|1[0-9]|2[0-8]))"
)
_DATE = f"(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"
_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:\.[0-9]{1,6})?)?"
_OFFSET = "(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
_INSTANT = f"{_DATE}T{_TIME}{_OFFSET}"

DATE_PATTERN = f"^{_DATE}$"
"""A calendar day: ``2025-03-15``."""
LOCAL_PATTERN = f"^{_DATE}T{_TIME}$"
"""A wall-clock time without an offset: ``2025-03-15T09:00``, seconds and fraction optional."""
INSTANT_PATTERN = f"^{_INSTANT}$"
"""An instant with its offset: ``2025-03-15T13:00:00Z``, ``2025-03-15T09:00+05:30``."""


def _at_least_one(parts: Sequence[str]) -> str:
    """Each of ``parts`` optional, in order, and at least one of them present."""
    choices = [
        part + "".join(f"(?:{later})?" for later in parts[index + 1 :])
        for index, part in enumerate(parts)
    ]
    return "(?:" + "|".join(choices) + ")"


def _duration(*, calendar: bool, positive: bool) -> str:
    """ISO 8601 durations of at most about 80 years (digits per part: Y 1, M 2, W 3, D 4, H 5,
    M 6, S 8); ``calendar`` allows years and months, ``positive`` makes every part at least
    one unit. Only seconds take a fraction."""

    def number(digits: int) -> str:
        return f"[1-9][0-9]{{0,{digits - 1}}}" if positive else f"[0-9]{{1,{digits}}}"

    seconds = f"{number(8)}(?:\\.[0-9]{{1,6}})?S"
    date_parts = [f"{number(3)}W", f"{number(4)}D"]
    if calendar:
        date_parts = [f"{number(1)}Y", f"{number(2)}M", *date_parts]
    time_part = "T" + _at_least_one([f"{number(5)}H", f"{number(6)}M", seconds])
    date_part = _at_least_one(date_parts)
    return f"P(?:{date_part}(?:{time_part})?|{time_part})"


_SECONDS = r"[0-9]{1,9}(?:\.[0-9]{1,6})?"
_POSITIVE_SECONDS = r"[1-9][0-9]{0,8}(?:\.[0-9]{1,6})?"
DURATION_PATTERN = f"^(?:{_duration(calendar=True, positive=False)}|{_SECONDS})$"
"""A delay: ``PT90S``, ``P15D``, ``P1M``, ``P2W``, or seconds as text (``90``)."""
EXPIRES_PATTERN = f"^(?:{_duration(calendar=True, positive=True)}|{_POSITIVE_SECONDS})$"
"""A positive span: ``PT1H``, ``P7D``, or seconds as text."""
EVERY_PATTERN = f"^(?:{_duration(calendar=False, positive=True)}|{_POSITIVE_SECONDS})$"
"""An interval of real time, at least a second: ``PT5M``, ``P1D`` (24 hours), seconds."""
GRACE_PATTERN = (
    r"^(?:P(?:[0-9]|[12][0-9]|3[01])D"
    r"|PT"
    + _at_least_one(["[0-9]{1,2}H", "[0-9]{1,2}M", r"[0-9]{1,2}(?:\.[0-9]{1,6})?S"])
    + r"|[0-9]{1,6}(?:\.[0-9]{1,6})?)$"
)
"""0 to 31 days: ``P3D``, ``PT5M``, ``PT1H30M``, or seconds as text."""
WHEN_PATTERN = f"^(?:{_INSTANT}|{_duration(calendar=True, positive=False)})$"
"""A filter's bound: an instant, or a duration meaning that long ago."""


_PAYLOAD_KEY = "[A-Za-z0-9_-]{1,64}"
PAYLOAD_MATCH_PATTERN = (
    f"^(?:payload\\.)?{_PAYLOAD_KEY}(?:\\.{_PAYLOAD_KEY}){{0,7}}"
    "=(?:[^\\s\\x00\\x1c-\\x1f\\x85\\[{][^\\x00]*)?$"
)
"""A payload filter, ``PATH=VALUE``: one to eight keys (a leading ``payload.`` allowed), and a
value that is not a JSON array or object (the server refuses those; it strips whitespace, so
a value must not start with it, nor with ``[`` or ``{``), and holds no NUL. What a pattern
cannot say the server refuses too: a JSON number beyond 64 bits or not finite, an escaped NUL
(``"\\u0000"``)."""


def timezones() -> list[str]:
    """The zone names a request may give: every IANA ``Area/City`` name, and ``UTC``."""
    return sorted(name for name in zone_names() if "/" in name or name == "UTC")


def _cron_field(value: str) -> str:
    """``*``, ``*/N`` (N 1-9) or a list of values."""
    return f"(?:\\*(?:/[1-9])?|{value}(?:,{value})*)"


_CRON_FIELDS = (
    "(?:[0-9]|[1-5][0-9])",  # minute
    "(?:[0-9]|1[0-9]|2[0-3])",  # hour
    "(?:[1-9]|1[0-9]|2[0-8])",  # day of the month: one every month has
    "(?:[1-9]|1[0-2])",  # month
    "[0-6]",  # day of the week, Sunday 0
)
CRON_PATTERN = (
    "^(?:@(?:yearly|annually|monthly|weekly|daily|midnight|hourly)|"
    + " ".join(_cron_field(field) for field in _CRON_FIELDS)
    + ")$"
)
"""Cron expressions that fire in every zone: an alias, or five fields of values, lists and
``*``/``*/N``, with days of the month a month always has (the server takes the full syntax:
ranges, names, days 29-31; the document describes what always fires)."""
