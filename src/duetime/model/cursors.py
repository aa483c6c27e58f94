"""What each listing's cursor looks like, for the stores that issue and read them and for the
API that documents them: one definition, so the document describes exactly what is issued.

Every text a pattern admits names a place in its listing (empty: the first page), so a client
may keep one and come back with it; a place past the last possible one (an id over 2**63 - 1,
an instant after 9999) reads as the newest.
"""

from __future__ import annotations

ID_CURSOR_PATTERN = r"^(?:id\.[0-9]{1,19})?$"
"""A listing by id, newest first: before this id."""
EVENT_CURSOR_PATTERN = r"^(?:event\.[0-9]{1,18}\.[0-9]{1,19})?$"
"""The event log: before this (fired_at in microseconds since 1970, id)."""
NAME_CURSOR_PATTERN = r"^(?:name\.[A-Za-z0-9_.:@+=-]{1,200})?$"
"""A listing by name: after this name."""
PATTERN_CURSOR_PATTERN = r"^(?:pattern\.[A-Za-z0-9_.:/*@-]{1,201})?$"
"""The flow control rules, by pattern: after this pattern (a type glob, or ``@`` and a
destination's name)."""
AUDIT_CURSOR_PATTERN = r"^(?:audit\.[0-9]{1,19})?$"
"""The audit log, newest first: before this entry's id."""
TOKEN_CURSOR_PATTERN = r"^(?:token\.[0-9]{1,19})?$"
"""The API tokens, oldest first: after this token's id."""
