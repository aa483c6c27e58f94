"""docs/architecture.md names what is there, and names every package that is there.

A module or package the document names (a backticked path such as `worker/producer.py` or
`store/`, or a dotted `duetime.…` name) must exist: relative to ``src/duetime``, or, in a table
about one package, inside some package. Every package under ``src/duetime`` must be named, so a
new one cannot be added without saying where it sits.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "duetime"
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")

CODE = re.findall(r"`([^`\n]+)`", DOC)
PATHS = sorted({c for c in CODE if re.fullmatch(r"[a-z_]+(/[a-z_]+)*(\.py|/)", c)})
DOTTED = sorted({c for c in CODE if re.fullmatch(r"duetime(\.[a-z_]+)+", c)})


def packages() -> list[str]:
    """Every package under src/duetime, as its path there with a trailing slash."""
    return sorted(
        str(init.parent.relative_to(PACKAGE)) + "/"
        for init in PACKAGE.rglob("__init__.py")
        if init.parent != PACKAGE
    )


def exists(path: str) -> bool:
    for prefix in ("src/duetime/", "duetime/"):
        if path.startswith(prefix):
            return (PACKAGE / path.removeprefix(prefix)).exists()
    if path.split("/")[0] in ("tests", "bench", "docs", "examples", "scripts"):
        return (ROOT / path).exists()
    if (PACKAGE / path).exists():
        return True
    # Inside the table of one package, a module is named relative to that package.
    return any((package / path).exists() for package in PACKAGE.rglob("*") if package.is_dir())


def test_the_document_names_paths_at_all() -> None:
    assert len(PATHS) > 50, PATHS
    assert len(DOTTED) > 5, DOTTED


@pytest.mark.parametrize("path", PATHS)
def test_every_path_named_exists(path: str) -> None:
    assert exists(path), f"docs/architecture.md names `{path}`, which src/duetime does not have"


@pytest.mark.parametrize("name", DOTTED)
def test_every_dotted_name_is_a_module_or_one_of_its_attributes(name: str) -> None:
    module, _, attribute = name.rpartition(".")
    if importlib.util.find_spec(name) is not None:
        return
    assert module, name
    assert importlib.util.find_spec(module) is not None, name
    assert hasattr(importlib.import_module(module), attribute), name


@pytest.mark.parametrize("package", packages())
def test_every_package_is_named(package: str) -> None:
    dotted = "duetime." + package.rstrip("/").replace("/", ".")
    # In a table about one package, a subpackage is named relative to it (`migrations/`).
    named = package in PATHS or dotted in DOTTED or package.split("/")[-2] + "/" in PATHS
    assert named, f"docs/architecture.md does not say where {package} sits"


def api_modules() -> list[str]:
    return sorted(
        f"api/{path.name}" for path in (PACKAGE / "api").glob("*.py") if path.name != "__init__.py"
    )


@pytest.mark.parametrize("module", api_modules())
def test_every_module_of_the_api_is_named(module: str) -> None:
    assert module in PATHS, f"docs/architecture.md does not say what {module} holds"
