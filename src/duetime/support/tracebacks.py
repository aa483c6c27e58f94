"""A failed attempt's traceback with the user's frames first.

A handler's traceback begins with duetime's executor, its handler wrapper and the thread pool
that ran the function: frames every failure shares, before the ones that say what went wrong.
:func:`trimmed` folds those (and the standard library's concurrency frames) into one line each
run, keeping the user's frames, the exception lines and the chaining between them. It works on
the stored text, so tracebacks written by other processes (another path, another version) trim
alike; nothing is dropped from what is stored, the full text stays beside it.
"""

from __future__ import annotations

import re
from pathlib import Path

_FRAME = re.compile(r'^  File "(?P<path>[^"]*)", line \d+')
_PACKAGE = str(Path(__file__).resolve().parents[1])
_OWN = re.compile(r"[/\\](?:site-packages|dist-packages|src)[/\\]duetime[/\\]")
_RUNTIME = re.compile(
    r"[/\\](?:asyncio|concurrent[/\\]futures)[/\\]|[/\\](?:threading|contextvars|runpy)\.py$"
)


def folded_frame(path: str, package: str = _PACKAGE) -> bool:
    """Whether a frame in ``path`` is duetime's own or the runtime's concurrency machinery."""
    return path.startswith(package) or bool(_OWN.search(path) or _RUNTIME.search(path))


def trimmed(text: str | None, package: str = _PACKAGE) -> str | None:
    """``text`` with each run of folded frames (:func:`folded_frame`) as one line saying how
    many; None for None, and the text itself when nothing folds."""
    if text is None:
        return None
    out: list[str] = []
    folded = 0
    in_folded_frame = False
    for line in text.splitlines(keepends=True):
        frame = _FRAME.match(line)
        if frame is not None:
            in_folded_frame = folded_frame(frame["path"], package)
            if in_folded_frame:
                folded += 1
                continue
        elif line.startswith("    ") and in_folded_frame:
            continue  # the folded frame's source line and its carets
        else:
            in_folded_frame = False
        if folded:
            out.append(_fold_line(folded))
            folded = 0
        out.append(line)
    if folded:
        out.append(_fold_line(folded))
    return "".join(out)


def _fold_line(count: int) -> str:
    return f"  [{count} duetime and runtime frame{'s' if count != 1 else ''} folded]\n"
