"""A failed attempt's traceback trimmed to the user's frames: duetime's executor, its handler
wrapper, the thread pool and asyncio folded, the exception lines and chaining kept."""

from __future__ import annotations

from pathlib import Path

from duetime.support.tracebacks import folded_frame, trimmed

SYNC_CHAINED = """\
Traceback (most recent call last):
  File "/srv/app/jobs.py", line 6, in h
    helper(event.payload["n"])
  File "/srv/app/jobs.py", line 3, in helper
    raise RuntimeError(f"boom {x}")
RuntimeError: boom 1

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/venv/lib/python3.12/site-packages/duetime/worker/executor.py", line 215, in _invoke
    result = await handler(event, may_start)
             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/venv/lib/python3.12/site-packages/duetime/handlers.py", line 172, in __call__
    return await HANDLER_THREADS.run(self.func, event, may_start=may_start)
  File "/venv/lib/python3.12/site-packages/duetime/support/threads.py", line 88, in run
    return await future
  File "/usr/lib/python3.12/concurrent/futures/thread.py", line 58, in run
    result = self.fn(*self.args, **self.kwargs)
  File "/srv/app/jobs.py", line 8, in h
    raise ValueError("wrapped") from e
    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
ValueError: wrapped
"""


def test_duetimes_and_the_thread_pools_frames_fold_into_one_line_the_users_stay() -> None:
    assert (
        trimmed(SYNC_CHAINED, package="/nowhere")
        == """\
Traceback (most recent call last):
  File "/srv/app/jobs.py", line 6, in h
    helper(event.payload["n"])
  File "/srv/app/jobs.py", line 3, in helper
    raise RuntimeError(f"boom {x}")
RuntimeError: boom 1

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  [4 duetime and runtime frames folded]
  File "/srv/app/jobs.py", line 8, in h
    raise ValueError("wrapped") from e
    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
ValueError: wrapped
"""
    )


def test_a_traceback_of_duetime_alone_keeps_its_exception_and_says_what_folded() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/x/src/duetime/worker/executor.py", line 1, in _invoke\n'
        "    prepare()\n"
        "KeyError: 'payload'\n"
    )
    assert trimmed(text, package="/nowhere") == (
        "Traceback (most recent call last):\n"
        "  [1 duetime and runtime frame folded]\n"
        "KeyError: 'payload'\n"
    )


def test_nothing_to_fold_leaves_the_text_as_it_was_and_none_stays_none() -> None:
    text = SYNC_CHAINED.split("\n\nThe above")[0] + "\n"
    assert trimmed(text, package="/nowhere") == text
    assert trimmed(None) is None
    assert trimmed("... (900 characters of outer frames cut)\nValueError: x\n") == (
        "... (900 characters of outer frames cut)\nValueError: x\n"
    )


def test_which_frames_fold() -> None:
    here = str(Path("/opt/checkout/duetime/src/duetime"))
    assert folded_frame(f"{here}/worker/executor.py", package=here)
    assert folded_frame("/usr/lib/python3.11/asyncio/events.py", package=here)
    assert folded_frame("/usr/lib/python3.11/threading.py", package=here)
    assert not folded_frame("/srv/app/duetime_jobs.py", package=here)
    assert not folded_frame("/srv/app/asyncio_helpers.py", package=here)
    assert not folded_frame("/srv/app/threading.py.bak", package=here)


def test_a_real_handlers_traceback_leads_with_the_handler(tmp_path: Path) -> None:
    from duetime import App

    def helper() -> None:
        raise RuntimeError("boom")

    def handle(event: object) -> None:
        helper()

    async def handle_async(event: object) -> None:
        helper()

    with App(database_url=f"sqlite:///{tmp_path / 'db'}", namespace="default") as app:
        app.handler("sync")(handle)
        app.handler("async")(handle_async)
        app.schedule("sync", {}, delay=0, key="s", max_attempts=1)
        app.schedule("async", {}, delay=0, key="a", max_attempts=1)
        app.tick()
        for key, name in (("s", "handle"), ("a", "handle_async")):
            (attempt,) = app.timers.attempts(key)
            full, short = attempt.traceback or "", trimmed(attempt.traceback) or ""
            assert "executor.py" in full
            assert "executor.py" not in short
            assert "threads.py" not in short
            frames = [line for line in short.splitlines() if line.startswith('  File "')]
            assert frames[0].endswith(f", in {name}"), short
            assert short.rstrip().endswith("RuntimeError: boom")
