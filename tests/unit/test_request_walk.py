"""scripts/request_walk.py follows a real request to its row and a real worker to the handler;
it fails (SystemExit) when a walk cannot be traced, e.g. the handler is never reached."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("request_walk", ROOT / "scripts/request_walk.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["request_walk"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_walks_of_a_request_and_of_its_firing_are_traced() -> None:
    create, fire = _script().walks()
    assert create.files[0].startswith("api/")
    assert create.files[-1].startswith("store/sqlite/")
    assert "requests.py" in create.files
    assert fire.files[0] == "worker/worker.py"
    assert "worker/executor.py" in fire.files
    assert "store/sqlite/claims.py" in fire.files
    for walk in (create, fire):
        assert walk.distinct == len(set(walk.files)) > 3
        assert all(a != b for a, b in zip(walk.files, walk.files[1:], strict=False))
        assert 0 < walk.climbs < len(walk.files)
        assert walk.returns > 0
