"""Every constant and alias a module of duetime defines is read somewhere: by code, a test, a
benchmark or the documents. A name defined and never read says something nobody relies on.

Module-level assignments only (functions and classes are reached through frameworks'
decorators, which a text search cannot follow); private names are the module's own business.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "duetime"
READERS = ("src", "tests", "bench", "docs", "examples")
SUFFIXES = {".py", ".md", ".toml", ".sql", ".js", ".html"}


def words() -> Counter[str]:
    counts: Counter[str] = Counter()
    for base in READERS:
        for path in (ROOT / base).rglob("*"):
            if path.suffix in SUFFIXES and path.is_file():
                counts.update(re.findall(r"\w+", path.read_text(encoding="utf-8", errors="ignore")))
    return counts


def defined(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return [name for name in names if not name.startswith("_")]


def test_every_module_level_name_is_read_somewhere() -> None:
    counts = words()
    sources = sorted(PACKAGE.rglob("*.py"))
    assert len(sources) > 200
    unread = [
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in sources
        for name in defined(path)
        if counts[name] <= 1
    ]
    assert unread == []
