"""Every method of the Store protocol and of its parts is called by something outside the store.

A method only the stores define and nothing calls is code both backends keep, test and migrate
for nobody. Read from the source: an attribute of that name used in some module of duetime
outside ``store/``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from duetime.store import parts, protocol

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "duetime"
PROTOCOLS = [
    protocol.Store,
    parts.ScheduleStore,
    parts.HistoryStore,
    parts.TransactionStore,
    parts.OutboxStore,
    parts.AuditStore,
    parts.TokenStore,
    parts.LimitStore,
]
READ_BY_TESTS = {("ScheduleStore", "due_schedules")}
"""The due backlog as the store sees it: the conformance tests read it beside the
materialisation that works on it (``materialize_due``), which the services call."""


def attributes_used_outside_the_store() -> set[str]:
    used: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        if path.relative_to(PACKAGE).parts[0] == "store":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute):
                used.add(node.attr)
    return used


USED = attributes_used_outside_the_store()


@pytest.mark.parametrize("proto", PROTOCOLS, ids=lambda p: p.__name__)
def test_every_protocol_method_has_a_caller(proto: type) -> None:
    methods = [name for name, value in vars(proto).items() if callable(value)]
    assert methods, proto
    unused = [
        name
        for name in methods
        if not name.startswith("_")
        and name not in USED
        and (proto.__name__, name) not in READ_BY_TESTS
    ]
    assert unused == [], f"{proto.__name__} has methods nothing outside the store calls"
