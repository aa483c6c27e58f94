"""Requests' CPU work (rule expansions) runs in a thread, one at a time per event loop."""

from __future__ import annotations

import asyncio
import functools
import sys
import threading

from duetime.support.cpu_work import SWITCH_INTERVAL, _turns, run_cpu_work


def test_expansions_of_one_loop_run_one_after_another_off_the_loop() -> None:
    loop_thread = threading.get_ident()
    running = 0
    most = 0
    threads: list[int] = []
    lock = threading.Lock()
    first_started = threading.Event()
    release_first = threading.Event()

    def work(n: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
            threads.append(threading.get_ident())
        if n == 0:
            first_started.set()
            release_first.wait(30)  # the others must queue behind this one, not run beside it
        with lock:
            running -= 1
        return n

    async def main() -> list[int]:
        tasks = [asyncio.ensure_future(run_cpu_work(functools.partial(work, n))) for n in range(4)]
        await asyncio.to_thread(first_started.wait, 30)
        turn = _turns[asyncio.get_running_loop()]
        for _ in range(10_000):  # the other three reach the turn within a few loop passes
            if len(turn._waiters or ()) == 3:
                break
            await asyncio.sleep(0)
        assert len(turn._waiters or ()) == 3  # waiting for their turn, not running beside it
        assert running == 1
        release_first.set()
        return list(await asyncio.gather(*tasks))

    assert asyncio.run(main()) == [0, 1, 2, 3]
    assert most == 1
    assert loop_thread not in threads
    assert sys.getswitchinterval() <= SWITCH_INTERVAL
