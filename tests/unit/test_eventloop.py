"""Choosing the event loop of duetime's own processes (DUETIME_EVENT_LOOP)."""

from __future__ import annotations

import asyncio
import sys

import pytest

from duetime import eventloop
from duetime.errors import InvalidInput


async def running_loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_auto_runs_on_uvloop_where_it_is_installed() -> None:
    pytest.importorskip("uvloop", reason="uvloop is not installed on this platform")
    assert eventloop.chosen({}) == "uvloop"
    assert eventloop.run(running_loop_module(), env={}).startswith("uvloop")
    asked = {"DUETIME_EVENT_LOOP": " UVLOOP "}
    assert eventloop.run(running_loop_module(), env=asked).startswith("uvloop")


def test_asyncio_keeps_the_standard_loop() -> None:
    env = {"DUETIME_EVENT_LOOP": "asyncio"}
    assert eventloop.chosen(env) == "asyncio"
    assert eventloop.run(running_loop_module(), env=env).startswith("asyncio")


def test_without_uvloop_auto_falls_back_and_uvloop_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop → ImportError
    assert eventloop.chosen({}) == "asyncio"
    assert eventloop.chosen({"DUETIME_EVENT_LOOP": ""}) == "asyncio"
    with pytest.raises(InvalidInput) as raised:
        eventloop.chosen({"DUETIME_EVENT_LOOP": "uvloop"})
    assert raised.value.field == "DUETIME_EVENT_LOOP"
    assert "not installed" in str(raised.value)


def test_an_unknown_choice_names_the_variable_and_never_starts_the_coroutine() -> None:
    started = []

    async def main() -> None:
        started.append(True)

    coro = main()
    with pytest.raises(InvalidInput) as raised:
        eventloop.run(coro, env={"DUETIME_EVENT_LOOP": "trio"})
    assert raised.value.field == "DUETIME_EVENT_LOOP"
    assert "'trio'" in str(raised.value)
    assert started == []
    assert coro.cr_frame is None  # closed, so no "never awaited" warning


def test_run_returns_the_result_and_propagates_errors() -> None:
    async def fails() -> None:
        raise ValueError("boom")

    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    assert eventloop.run(answer(), env={}) == 42
    with pytest.raises(ValueError, match="boom"):
        eventloop.run(fails(), env={})
