"""One tenant sending the most expensive requests it can while another creates timers, on a
real ``duetime serve``: the quiet tenant's creates go on while the noisy requests run, on both
stores.

The noisy tenant's shapes are ``bench/tenant_isolation.py``'s, at a smaller size: the status of
a hundred rules over 20,000 held types, and pages of 1,000 timers of 25 KB payloads and of
100 audit entries of 260 KB (25 MB of JSON a page, uncut). Before the listings were bounded,
such a page held the event loop for seconds and the status tallied the types in Python; the
quiet tenant's creates waited as long.

The test checks an order of events, not a speed (the figures are the benchmark's, and depend on
the machine and whatever else runs on it): every request's interval is recorded, on the one
monotonic clock all processes share, and of the noisy requests long enough to matter (many
times a quiet create alone, in the same run) at least half must have had a whole quiet create
start and finish while they were in flight. A server frozen by the noisy request answers no
create until the noisy answer is ready, whatever the machine's speed. Every create and every
noisy answer must also be whole.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import threading
import time
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from pathlib import Path

import httpx
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import PG_URL, require_pg  # noqa: E402
from tenant_isolation import QUIET, SHAPES, Shape, noisy_server  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # a real server, a filled database

Interval = tuple[float, float]
"""When a request was sent and when its answer was whole (``time.monotonic``, system-wide)."""

NOISY_ANSWERS = 12
"""Noisy requests answered while the quiet tenant creates, at least: the quiet tenant goes on
until then, so its creates overlap several whole noisy requests, at any machine speed."""

LONG = 10
"""A noisy request is long when it took this many times the quiet tenant's median create
alone, measured in the same run: one long enough to hold the quiet tenant up if it froze the
server. A noisy request shorter than that (one the server cut short, a cheap page) may end
before a create started beside it, frozen or not: such requests prove nothing either way."""


def options(backend: str) -> argparse.Namespace:
    return argparse.Namespace(
        backend=backend,
        pg_url=PG_URL,
        reads_per_namespace=None,
        held_types=20_000,
        payload_kb=25,
        clients=1,
    )


def noisy_client(
    base_url: str,
    token: str,
    shape: Shape,
    args: argparse.Namespace,
    stop: Event,
    answered: Event,
    out: Connection,
) -> None:
    """In a process of its own (its work on the answers slows only the server): the shape's
    request, one after another until ``stop``; sends back each one's interval and whether its
    answer was whole (a ``503``, a request the server ended past its budget, is whole too)."""
    intervals: list[tuple[float, float, bool]] = []
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=600) as client:
        while not stop.is_set():
            sent = time.monotonic()
            answer = client.get(shape.path, params=shape.params)
            done = time.monotonic()
            whole = answer.status_code == 503 or (
                answer.status_code == 200 and shape.complete(answer.json(), args)
            )
            intervals.append((sent, done, whole))
            answered.set()
    out.send(intervals)
    out.close()


def quiet_creates(
    client: httpx.Client,
    enough: threading.Event,
    intervals: list[Interval],
    failed: list[str],
    prefix: str,
) -> None:
    """Timer creates one after another until ``enough`` is set: each one's interval to
    ``intervals``; a create refused ends them, its answer to ``failed``."""
    n = 0
    while not enough.is_set():
        body = {"key": f"{prefix}-{n}", "type": "quiet.tick", "delay": "PT1H"}
        sent = time.monotonic()
        answer = client.post(f"{QUIET}/timers", json=body, timeout=600)
        if answer.status_code != 201:
            failed.append(f"a quiet create failed: {answer.status_code} {answer.text}")
            return
        intervals.append((sent, time.monotonic()))
        n += 1


def count_to(n: int, intervals: list[Interval]) -> threading.Event:
    """An event that reads set once ``intervals`` holds ``n`` of them."""

    class Enough(threading.Event):
        def is_set(self) -> bool:
            return len(intervals) >= n

    return Enough()


def nested(quiet: list[Interval], noisy: list[Interval]) -> list[Interval]:
    """The quiet intervals that lie inside one noisy interval."""
    return [q for q in quiet if any(n[0] <= q[0] and q[1] <= n[1] for n in noisy)]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@pytest.mark.parametrize("shape", ["held-types", "big-timers", "big-audit", "costly-rule"])
def test_the_quiet_tenant_keeps_creating_beside_the_noisy_one(backend: str, shape: str) -> None:
    if backend == "postgres":
        require_pg()
    args = options(backend)
    context = multiprocessing.get_context("fork")
    stop, answered = context.Event(), context.Event()
    receiving, sending = context.Pipe(duplex=False)
    with noisy_server(backend, SHAPES[shape], args) as (base_url, noisy_token, quiet_token):
        headers = {"Authorization": f"Bearer {quiet_token}"}
        with httpx.Client(base_url=base_url, headers=headers) as client:
            alone: list[Interval] = []
            failed: list[str] = []
            quiet_creates(client, count_to(20, alone), alone, failed, "alone")
            assert not failed, failed
            noisy = context.Process(
                target=noisy_client,
                args=(base_url, noisy_token, SHAPES[shape], args, stop, answered, sending),
            )
            noisy.start()
            sending.close()
            try:
                while not answered.wait(0.05):  # the noisy requests are under way
                    assert noisy.is_alive(), "the noisy client died"
                enough = threading.Event()
                quiet: list[Interval] = []
                creating = threading.Thread(
                    target=quiet_creates, args=(client, enough, quiet, failed, "beside")
                )
                began = time.monotonic()
                creating.start()
                try:
                    # The creates go on until a few noisy requests sent after they began were
                    # answered: however slow the machine, they span whole noisy requests.
                    noise = watch_noise(noisy, answered)
                finally:
                    enough.set()
                    creating.join()
            finally:
                stop.set()
                intervals = receiving.recv() if noise_pending(noisy, receiving) else []
                noisy.join(120)
    assert not failed, failed
    assert intervals, "the noisy tenant was never answered"
    assert all(whole for _, _, whole in intervals), "a noisy answer was not whole"
    during = [(s, e) for s, e, _ in intervals if s >= began]
    assert len(during) >= NOISY_ANSWERS, noise
    typical = statistics.median(end - start for start, end in alone)
    long = [n for n in during if n[1] - n[0] > LONG * typical]
    served = [n for n in long if nested(quiet, [n])]
    print(
        f"{shape} on {backend}: {len(served)} of {len(long)} long noisy requests "
        f"({len(during)} in all) had a quiet create inside; {len(quiet)} creates"
    )
    assert len(served) * 2 >= len(long), (
        f"{shape} on {backend}: only {len(served)} of {len(long)} noisy requests longer than "
        f"{LONG} quiet creates had a whole quiet create run while they were in flight"
    )


def watch_noise(noisy: multiprocessing.process.BaseProcess, answered: Event) -> int:
    """Wait until :data:`NOISY_ANSWERS` noisy requests sent from now on were answered
    (``answered`` is set by each answer: one client, so each request is sent after the answer
    before it); return how many answers were seen."""
    count = 0
    while count < NOISY_ANSWERS + 1:  # the first answer may be of a request sent before
        answered.clear()
        while not answered.wait(0.05):
            assert noisy.is_alive(), "the noisy client died"
        count += 1
    return count


def noise_pending(noisy: multiprocessing.process.BaseProcess, receiving: Connection) -> bool:
    """Whether the noisy process has its intervals to send (it sends them once stopped)."""
    while not receiving.poll(0.05):
        if not noisy.is_alive():
            return receiving.poll()
    return True
