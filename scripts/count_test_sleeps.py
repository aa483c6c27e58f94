"""Count the test suite's sleeps and wall-clock upper bounds, so the figure is reproducible.

A test that sleeps guesses how long something takes; on a busy machine the guess is wrong
and the test fails (or, waiting for "nothing happens", passes without proving anything).
This reads the tests' source (no import) and sorts each non-zero sleep call into:

- ``poll``: inside a loop, waiting a moment between two looks at a condition;
- ``fixed``: a test or fixture body that sleeps once, to let time pass or to prove that
  nothing happens meanwhile: a guess. A line may carry ``# timed: <why>`` when the time
  passing *is* what the test is about (a lease or a grace period running out);
- ``work``: anything else (a handler or a helper process standing in for slow work).

It also lists wall-clock upper bounds: asserts that something measured took less than a
number of seconds (``assert took < 2.0``), which a busy machine fails.

Usage: ``python scripts/count_test_sleeps.py [tests] [--list]``.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SLEEPS = {("time", "sleep"), ("asyncio", "sleep"), ("anyio", "sleep"), ("trio", "sleep")}
TIMED = "# timed:"
"""The mark of a fixed sleep whose passing time is the subject of the test."""
CLOCK_WORDS = (
    "elapsed",
    "took",
    "duration",
    "monotonic",
    "perf_counter",
    "recovered",
    "loop().time()",
)


@dataclass(frozen=True)
class Found:
    path: Path
    line: int
    kind: str  # poll, fixed, timed, work, or bound
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.kind}: {self.text.strip()}"


def _is_sleep(call: ast.Call) -> bool:
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return (func.value.id, func.attr) in SLEEPS
    return isinstance(func, ast.Name) and func.id == "sleep"


def _is_zero(call: ast.Call) -> bool:
    if not call.args:
        return not call.keywords  # sleep() with no argument sleeps no time
    arg = call.args[0]
    return isinstance(arg, ast.Constant) and arg.value in (0, 0.0)


def _is_test_or_fixture(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    if func.name.startswith("test_"):
        return True
    return any("fixture" in ast.unparse(d) for d in func.decorator_list)


def _is_body(func: ast.AST | None, inside_test: bool) -> bool:
    """Whether ``func`` is a test's own steps: the test or fixture itself, or a function it
    defines that takes nothing and is not registered (``async def main()`` run by the test),
    unlike a handler, which takes the event it handles."""
    if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    if _is_test_or_fixture(func):
        return True
    takes = func.args.args + func.args.posonlyargs + func.args.kwonlyargs
    return inside_test and not takes and not func.decorator_list


def _walk(
    node: ast.AST, body: bool, in_loop: bool, in_test: bool = False
) -> Iterator[tuple[ast.AST, bool, bool]]:
    """Every node under ``node``, with whether it is in a test's own steps and in a loop."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            child_body = _is_body(child, in_test)
            yield from _walk(child, child_body, False, in_test or child_body)
            continue
        yield child, body, in_loop
        loop = in_loop or isinstance(child, ast.While | ast.For | ast.AsyncFor)
        yield from _walk(child, body, loop, in_test)


def _is_upper_bound(node: ast.Assert) -> bool:
    test = node.test
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return False
    op, right, left = test.ops[0], test.comparators[0], test.left
    if isinstance(op, ast.Lt | ast.LtE):
        measured, bound = left, right
    elif isinstance(op, ast.Gt | ast.GtE):
        measured, bound = right, left
    else:
        return False
    said = ast.unparse(measured).lower()
    if not any(word in said for word in CLOCK_WORDS):
        return False
    if isinstance(bound, ast.Constant):
        return isinstance(bound.value, int | float)
    return "deadline" not in ast.unparse(bound).lower()  # a poll's deadline bounds a wait


def scan(path: Path) -> list[Found]:
    source = path.read_text()
    lines = source.splitlines()
    found = []
    for node, body, in_loop in _walk(ast.parse(source), False, False):
        text = lines[node.lineno - 1] if hasattr(node, "lineno") else ""
        if isinstance(node, ast.Assert) and _is_upper_bound(node):
            found.append(Found(path, node.lineno, "bound", text))
        if not (isinstance(node, ast.Call) and _is_sleep(node)) or _is_zero(node):
            continue
        if in_loop:
            kind = "poll"
        elif body:
            kind = "timed" if TIMED in text else "fixed"
        else:
            kind = "work"
        found.append(Found(path, node.lineno, kind, text))
    return found


def scan_tree(root: Path) -> list[Found]:
    return [f for path in sorted(root.rglob("*.py")) for f in scan(path)]


def main(argv: list[str]) -> int:
    root = Path(next((a for a in argv if not a.startswith("-")), "tests"))
    found = scan_tree(root)
    if "--list" in argv:
        for f in found:
            print(f)
    sleeps = [f for f in found if f.kind != "bound"]
    print(f"non-zero sleeps: {len(sleeps)}")
    for kind in ("poll", "fixed", "timed", "work", "bound"):
        print(f"  {kind}: {sum(f.kind == kind for f in found)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
