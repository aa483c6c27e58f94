"""Every named query a store module runs is in the .sql files it loads.

SQL lives in a backend's .sql files, one per area, and each module loads the files it needs;
a query moved to another file, or a module that starts running one of another area, would
otherwise fail only when that path runs (a KeyError deep in a worker or a request).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

STORE = Path(__file__).resolve().parents[2] / "src" / "duetime" / "store"
MODULES = sorted(
    path for backend in ("postgres", "sqlite") for path in (STORE / backend).glob("*.py")
)


@pytest.mark.parametrize("path", MODULES, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_every_query_a_module_names_is_loaded(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    module = importlib.import_module(f"duetime.store.{path.parent.name}.{path.stem}")
    for name in re.findall(r"^([A-Z_]+) = load_queries\(", text, re.MULTILINE):
        loaded = getattr(module, name)
        used = set(re.findall(re.escape(name) + r'\["([a-z_0-9]+)"\]', text))
        assert used <= set(loaded), f"{name} lacks {sorted(used - set(loaded))}"


def test_the_modules_run_named_queries_at_all() -> None:
    runs = [p for p in MODULES if re.search(r'\bQ\["', p.read_text(encoding="utf-8"))]
    assert len(runs) >= 10, runs
