"""Choosing the event loop of duetime's own processes (DUETIME_EVENT_LOOP)."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from duetime.errors import InvalidInput
from duetime.support import eventloop


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


EAGER = sys.version_info >= (3, 12)


@pytest.mark.parametrize("loop_choice", ["asyncio", "uvloop"])
def test_start_task_runs_the_first_step_at_once_where_python_can(loop_choice: str) -> None:
    if loop_choice == "uvloop":
        pytest.importorskip("uvloop", reason="uvloop is not installed on this platform")
    seen: list[object] = []

    async def quick() -> str:
        seen.append(asyncio.current_task())
        return "done"

    async def main() -> None:
        loop = asyncio.get_running_loop()
        task = eventloop.start_task(loop, quick())
        # 3.12+: finished already, inside its own task; 3.11: started by the loop later.
        assert task.done() is EAGER
        assert (seen == [task]) is EAGER
        assert await task == "done"
        assert seen == [task]

    eventloop.run(main(), env={"DUETIME_EVENT_LOOP": loop_choice})


def test_a_started_task_that_suspends_is_finished_by_the_loop_in_its_own_task() -> None:
    steps: list[str] = []

    async def slow() -> int:
        steps.append("first")
        async with asyncio.timeout(5):  # needs current_task() to be this task
            await asyncio.sleep(0)
        steps.append("second")
        return 7

    async def main() -> None:
        task = eventloop.start_task(asyncio.get_running_loop(), slow())
        assert steps == (["first"] if EAGER else [])
        assert not task.done()
        assert await task == 7
        assert steps == ["first", "second"]

    eventloop.run(main(), env={"DUETIME_EVENT_LOOP": "asyncio"})


def test_a_loop_with_its_own_task_factory_keeps_it() -> None:
    made: list[asyncio.Task[object]] = []

    def factory(loop: asyncio.AbstractEventLoop, coro: Any) -> asyncio.Task[object]:
        task: asyncio.Task[object] = asyncio.Task(coro, loop=loop)
        made.append(task)
        return task

    async def quick() -> int:
        return 1

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_task_factory(factory)
        task = eventloop.start_task(loop, quick())
        assert made == [task]
        assert not task.done()  # the factory's own (lazy) task
        assert await task == 1

    eventloop.run(main(), env={"DUETIME_EVENT_LOOP": "asyncio"})
