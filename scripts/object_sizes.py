"""The largest module, class and object of the duetime package, in lines.

An *object* is a class counted with every base class and mixin of the package it is made of
(each once, however many paths lead to it): what a reader has to hold in mind to know what an
instance of it can do. A class's lines run from its ``class`` line to its last line.

    python scripts/object_sizes.py [--top N] [--check]

``--check`` exits 1 when a module is over 500 lines, a class over 300 or an object over 500.
Bases are resolved by name: the names a module imports from the package, else its own classes.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "duetime"
LIMITS = {"module": 500, "class": 300, "object": 500}


@dataclass
class ClassInfo:
    module: str
    name: str
    lines: int
    bases: list[str] = field(default_factory=list)
    """Each base as ``module:Name`` when it is the package's own, else left out."""

    @property
    def where(self) -> str:
        return f"{self.module}:{self.name}"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def read_package() -> tuple[dict[str, int], dict[str, ClassInfo]]:
    """Every module's lines, and every class (top level or nested) by ``module:Name``."""
    modules: dict[str, int] = {}
    parsed: dict[str, ast.Module] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        name = module_name(path)
        modules[name] = len(text.splitlines())
        parsed[name] = ast.parse(text)
    classes: dict[str, ClassInfo] = {}
    for name, tree in parsed.items():
        imported: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    imported[alias.asname or alias.name] = f"{node.module}:{alias.name}"
        own = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            info = ClassInfo(name, node.name, (node.end_lineno or node.lineno) - node.lineno + 1)
            for base in node.bases:
                base_name = _base_name(base)
                if base_name in own:
                    info.bases.append(f"{name}:{base_name}")
                elif base_name in imported and imported[base_name].startswith("duetime"):
                    info.bases.append(imported[base_name])
            classes[info.where] = info
    return modules, classes


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Subscript):  # Generic[T], Protocol[T]
        node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def object_lines(start: ClassInfo, classes: dict[str, ClassInfo]) -> tuple[int, list[str]]:
    """The class's lines with those of each of its package's bases, counted once."""
    seen: dict[str, int] = {}
    todo = [start.where]
    while todo:
        where = todo.pop()
        info = classes.get(where)
        if info is None or where in seen:
            continue
        seen[where] = info.lines
        todo.extend(info.bases)
    return sum(seen.values()), sorted(seen)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=3, help="how many of each to show")
    parser.add_argument("--check", action="store_true", help="exit 1 past the limits")
    args = parser.parse_args(argv)
    modules, classes = read_package()
    objects = {where: object_lines(info, classes) for where, info in classes.items()}
    tables = {
        "module": sorted(modules.items(), key=lambda item: -item[1]),
        "class": sorted(((w, c.lines) for w, c in classes.items()), key=lambda item: -item[1]),
        "object": sorted(((w, o[0]) for w, o in objects.items()), key=lambda item: -item[1]),
    }
    over = []
    for kind, rows in tables.items():
        print(f"largest {kind}s (limit {LIMITS[kind]}):")
        for where, lines in rows[: args.top]:
            made_of = ""
            if kind == "object" and len(objects[where][1]) > 1:
                made_of = f"  ({len(objects[where][1])} classes)"
            print(f"  {lines:6d}  {where}{made_of}")
        over += [f"{kind} {where}: {lines}" for where, lines in rows if lines > LIMITS[kind]]
    if over:
        print("over the limits:\n  " + "\n  ".join(over))
    return 1 if args.check and over else 0


if __name__ == "__main__":
    sys.exit(main())
