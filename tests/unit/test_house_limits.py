"""Every module, class and object of the package stays within the first house's limits.

A module past 500 lines, a class past 300 or an object (a class with its mixins) past 500 holds
more than a reader can keep in mind: split it by idea, into parts that own their state. The
limits and the counting are ``scripts/object_sizes.py``'s, so the test and the script agree.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]

OVER_FOR_NOW: dict[str, int] = {}
"""What is still over a limit, with its size: nothing else may be, and these may not grow."""


@functools.cache
def sizes() -> ModuleType:
    spec = importlib.util.spec_from_file_location("object_sizes", ROOT / "scripts/object_sizes.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["object_sizes"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def over_the_limits() -> dict[str, int]:
    script = sizes()
    modules, classes = script.read_package()
    measured = {
        **{f"module {name}": lines for name, lines in modules.items()},
        **{f"class {where}": info.lines for where, info in classes.items()},
    }
    objects = {f"object {w}": script.object_lines(i, classes)[0] for w, i in classes.items()}
    limits = script.LIMITS
    return {
        what: lines
        for what, lines in {**measured, **objects}.items()
        if lines > limits[what.split(" ", 1)[0]]
    }


def test_nothing_new_is_over_the_limits() -> None:
    over = over_the_limits()
    grown = {what: n for what, n in over.items() if n > OVER_FOR_NOW.get(what, 0)}
    assert grown == {}, "split it by idea (see docs/architecture.md): " + ", ".join(grown)


def test_what_is_under_the_limits_again_leaves_the_list() -> None:
    over = over_the_limits()
    assert [what for what in OVER_FOR_NOW if what not in over] == []
