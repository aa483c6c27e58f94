"""JSON answers that are safe to print on a terminal.

JSON leaves DEL, the C1 controls and U+2028/U+2029 raw inside strings, so a key, a payload or a
handler's error holding them would drive the terminal of anyone who curls the API. Every JSON
answer is written with those characters as ``\\u`` escapes: the same document to a parser.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi.responses import JSONResponse as _PlainJSONResponse

from duetime.support.escaping import escape_json_controls


class JSONResponse(_PlainJSONResponse):
    """Starlette's JSON answer, with the characters JSON leaves raw escaped."""

    def render(self, content: Any) -> bytes:
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return escape_json_controls(text).encode("utf-8")
