"""Finding timers beyond the filter bar: a payload field equal to a value, a chosen order of
the listing, and a selection of keys for the bulk actions.

The stores turn a :class:`PayloadMatch` into their own JSON operators (SQLite ``json_type`` /
``json_extract``, PostgreSQL ``jsonb @>``), so the comparison is the same on both: the same
JSON type and an equal value (``42`` matches ``42`` and ``42.0``, never ``"42"``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from duetime.model.cursors import ID_CURSOR_PATTERN

Scalar = str | int | float | bool | None

TimerSort = Literal["newest", "due", "updated", "attempts"]
"""The order of a timer listing: ``newest`` (by id, the default), ``due`` (earliest due first),
``updated`` (latest change first), ``attempts`` (most attempts first); ties by id."""
TIMER_SORTS: tuple[TimerSort, ...] = ("newest", "due", "updated", "attempts")

SORTED_CURSOR_PATTERN = r"^(?:(?:due|updated|attempts)\.-?[0-9]{1,19}\.[0-9]{1,19})?$"
"""A sorted timer listing: after this (sort value, id); the value is microseconds since 1970
for ``due`` and ``updated``, a count for ``attempts``."""
TIMER_CURSOR_PATTERN = f"^(?:{ID_CURSOR_PATTERN.strip('^$')}|{SORTED_CURSOR_PATTERN.strip('^$')})$"
"""Any cursor of ``GET …/timers``: by id (newest first) or after a sorted row."""

MAX_SELECTED_KEYS = 1000
"""Keys one bulk action may name (a page of the console at most)."""


@dataclass(frozen=True, slots=True)
class PayloadMatch:
    """Timers whose payload holds ``value`` at ``path`` (keys from the payload's top)."""

    path: tuple[str, ...]
    value: Scalar

    @property
    def kind(self) -> str:
        """The JSON type the value must have: number, text, true, false or null."""
        if self.value is None:
            return "null"
        if isinstance(self.value, bool):
            return "true" if self.value else "false"
        if isinstance(self.value, int | float):
            return "number"
        return "text"

    @property
    def sqlite_path(self) -> str:
        """``$."a"."b"``: every key quoted (a key holds no quote: see timer_filters)."""
        return "$" + "".join(f'."{key}"' for key in self.path)

    @property
    def document(self) -> str:
        """``{"a": {"b": value}}``: what PostgreSQL's ``@>`` looks for."""
        doc: object = self.value
        for key in reversed(self.path):
            doc = {key: doc}
        return json.dumps(doc)

    def __str__(self) -> str:
        return f"{'.'.join(self.path)}={json.dumps(self.value)}"
