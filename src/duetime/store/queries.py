"""Named SQL queries: each backend keeps its SQL in ``.sql`` files by area (timers, claims,
limits, history, ...), next to the modules that run it.

A block starts with ``-- name: <method_name>`` and runs until the next one; the name is the
store method that runs it, so SQL and Python can be read side by side. Whole-line comments stay
in the file and out of the statements: psycopg caches its parse of a statement only up to 4 KiB,
and the comments had taken the busiest ones (scheduling's upsert, a worker's outcomes) past it.
A line ``-- include: <name>`` stands for the block of that name, for SQL that several
statements share word for word; a module loads the files it runs, and a block may include one
of another file loaded with it.
"""

from __future__ import annotations

import re
from importlib import resources

_NAME = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
_COMMENT_LINE = re.compile(r"^[ \t]*--.*(?:\n|$)", re.MULTILINE)
_INCLUDE = re.compile(r"^([ \t]*)--\s*include:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def load_queries(package: str, filename: str, *more: str) -> dict[str, str]:
    """Read ``filename`` (and ``more`` files) from ``package`` and split them into
    ``{name: sql}``; a name may be defined once among them all."""
    files = resources.files(package)
    return parse_queries(
        *(files.joinpath(name).read_text(encoding="utf-8") for name in (filename, *more))
    )


def query_files(package: str) -> list[str]:
    """The names of ``package``'s query files (``*.sql``), in order."""
    return sorted(
        entry.name for entry in resources.files(package).iterdir() if entry.name.endswith(".sql")
    )


def parse_queries(*texts: str) -> dict[str, str]:
    """``{name: sql}`` of the blocks of ``texts``, their includes resolved across them all."""
    bodies: dict[str, str] = {}
    for text in texts:
        parts = _NAME.split(text)
        for name, body in zip(parts[1::2], parts[2::2], strict=True):
            if name in bodies:
                raise ValueError(f"query {name!r} is defined twice")
            bodies[name] = body

    def included(match: re.Match[str]) -> str:
        indent, name = match[1], match[2]
        if name not in bodies:
            raise ValueError(f"no query {name!r} to include")
        return "\n".join(indent + line for line in _statement(bodies[name]).splitlines())

    return {name: _statement(_INCLUDE.sub(included, body)) for name, body in bodies.items()}


def _statement(body: str) -> str:
    return _COMMENT_LINE.sub("", body).strip().rstrip(";").strip()


def load_migrations(package: str) -> list[tuple[int, str, str]]:
    """``(version, name, sql)`` for every ``NNNN_name.sql`` in ``package``, in order."""
    found: list[tuple[int, str, str]] = []
    for entry in resources.files(package).iterdir():
        match = re.fullmatch(r"(\d{4})_([a-z0-9_]+)\.sql", entry.name)
        if match:
            found.append((int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort()
    versions = [version for version, _, _ in found]
    if versions != list(range(1, len(versions) + 1)):
        raise ValueError(f"migrations of {package} are not numbered 1..n: {versions}")
    return found
