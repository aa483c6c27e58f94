"""Modules are named after what they hold; an old name users may import still works, and warns.

``duetime.history`` held the event log's filters (now ``duetime.event_filters``) beside the
records it re-exported (``duetime.model.history``); ``duetime.model.limits`` held flow control's
rules (``duetime.model.flow_rules``); ``duetime.model.slots`` the fast constructors
(``duetime.model.fast_records``), not the worker's slots.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from duetime import event_filters
from duetime.model import fast_records, flow_rules
from duetime.model import history as history_records

MOVED = {
    "duetime.history": ("duetime.event_filters", [event_filters, history_records]),
    "duetime.model.limits": ("duetime.model.flow_rules", [flow_rules]),
    "duetime.model.slots": ("duetime.model.fast_records", [fast_records]),
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_name_warns_naming_the_new_and_gives_the_same_objects(
    old: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    new, homes = MOVED[old]
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        module = importlib.import_module(old)
    names = module.__all__
    assert names
    for name in names:
        assert any(getattr(home, name, None) is getattr(module, name) for home in homes), name


def test_nothing_in_duetime_imports_an_old_name() -> None:
    packages = ["duetime", "duetime.app", "duetime.worker", "duetime.store", "duetime.cli"]
    code = (
        "import importlib, sys\n"
        f"for name in {packages!r}: importlib.import_module(name)\n"
        f"print(sorted(set({sorted(MOVED)!r}) & set(sys.modules)))\n"
    )
    run = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", code],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
