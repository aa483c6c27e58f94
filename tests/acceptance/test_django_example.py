"""The Django example (examples/django_app), run as its README says: Django's ``migrate``,
``manage.py duetime_migrate``, the ASGI application under uvicorn (Django, with duetime's API at
``/duetime``) and ``manage.py duetime_worker``, each a process of its own, on a PostgreSQL
database made for the test and dropped after it.

A request to the view stores the order and its follow-up timer together (the timer is read back
through the mounted API); a request the view refuses leaves neither; the worker fires the
handler, whose ORM write commits with the timer's completion. Skipped without PostgreSQL,
failed under CI.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "django_app"
sys.path.insert(0, str(ROOT / "tests" / "store"))

from storekit import PG_URL, require_pg  # noqa: E402

pytestmark = pytest.mark.slow  # the Django example's processes end to end

WITHIN = 120.0


def admin(statement: str) -> None:
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(statement)


@pytest.fixture
def database() -> Iterator[str]:
    """A database of the test's own on the test server, as a URL."""
    require_pg()
    name = f"duetime_django_{uuid.uuid4().hex[:12]}"
    admin(f"CREATE DATABASE {name}")
    try:
        yield PG_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Shop:
    """The example's processes, started from the repository root as the README does."""

    def __init__(self, database: str, logs: Path) -> None:
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("DUETIME_") and k != "DJANGO_SETTINGS_MODULE"
        }
        self.env["SHOP_DATABASE_URL"] = database
        self.logs = logs
        self.procs: list[subprocess.Popen[bytes]] = []
        self.port = free_port()
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=10)

    def manage(self, *args: str) -> str:
        """``manage.py <args>``'s output; it must succeed and leave nothing on stderr."""
        done = self.run_manage(*args)
        assert not done.stderr.strip(), done.stderr  # the app closed cleanly at exit too
        return done.stdout

    def run_manage(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, str(EXAMPLE / "manage.py"), *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
        return done

    def start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = (self.logs / f"{name}.log").open("wb")
        proc = subprocess.Popen(args, cwd=ROOT, env=self.env, stdout=log, stderr=log)
        self.procs.append(proc)
        return proc

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")

    def serving(self) -> bool:
        try:
            return self.http.get("/duetime/healthz").status_code == 200
        except httpx.TransportError:
            return False

    def timer(self, key: str) -> dict[str, Any]:
        answer = self.http.get(f"/duetime/v1/namespaces/shop/timers/{key}")
        assert answer.status_code == 200, answer.text
        timer: dict[str, Any] = answer.json()["timer"]
        return timer

    def stop(self) -> list[int | None]:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        codes = []
        for proc in self.procs:
            try:
                codes.append(proc.wait(timeout=WITHIN))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                codes.append(None)
        self.http.close()
        return codes


@pytest.fixture
def shop(database: str, tmp_path: Path) -> Iterator[Shop]:
    running = Shop(database, tmp_path)
    try:
        yield running
    finally:
        running.stop()


def test_the_examples_own_tests_pass_under_djangos_test_runner(shop: Shop) -> None:
    """``manage.py test orders``: duetime follows the runner to its test database, and the
    runner can drop that database at the end (duetime's connections are closed first)."""
    report = shop.run_manage("test", "orders", "--noinput").stderr
    assert "Ran 3 tests" in report
    assert "\nOK" in report
    assert "Destroying test database" in report


def test_the_django_example_schedules_in_the_views_transaction_and_fires(shop: Shop) -> None:
    assert "Applying orders.0001_initial... OK" in shop.manage("migrate")
    migrated = shop.manage("duetime_migrate")
    assert "applied now: 1, 2" in migrated
    assert "namespace 'shop' ready" in migrated
    assert "applied now: none (up to date)" in shop.manage("duetime_migrate")

    uvicorn = [sys.executable, "-m", "uvicorn", "--app-dir", str(EXAMPLE)]
    shop.start("web", *uvicorn, "shopsite.asgi:application", "--port", str(shop.port))
    wait_until(shop.serving, WITHIN, "the ASGI app", explain=lambda: shop.log("web"))

    page = shop.http.get("/duetime/").text  # the dashboard, its files and calls under /duetime
    assert 'src="static/app.js"' in page  # relative: resolved below /duetime/
    assert shop.http.get("/duetime/static/app.js").status_code == 200
    assert shop.http.get("/duetime/docs").status_code == 200
    assert shop.http.get("/orders/").json() == {"items": []}  # and Django beside it

    placed = shop.http.post(
        "/orders/", content=json.dumps({"email": "ada@example.com", "follow_up": "PT1S"})
    )
    assert placed.status_code == 201, placed.text
    order = placed.json()
    key = order["follow_up"]["key"]
    assert key == f"order:{order['id']}:follow-up"
    timer = shop.timer(key)  # stored, and read back through duetime's API under /duetime
    assert (timer["status"], timer["subject"]) == ("scheduled", "ada@example.com")

    refused = shop.http.post(
        "/orders/", content=json.dumps({"email": "bob@example.com", "follow_up": "soon"})
    )
    assert refused.status_code == 400
    assert refused.json()["field"] == "delay"
    emails = [o["email"] for o in shop.http.get("/orders/").json()["items"]]
    assert emails == ["ada@example.com"]  # the refused order rolled back with its timer

    shop.start("worker", sys.executable, str(EXAMPLE / "manage.py"), "duetime_worker")

    def followed_up() -> bool:
        return shop.http.get(f"/orders/{order['id']}/").json()["followed_up_at"] is not None

    wait_until(followed_up, WITHIN, "the follow-up handler", explain=lambda: shop.log("worker"))
    timer = shop.timer(key)
    assert (timer["status"], timer["attempts"]) == ("done", 1)
    web, worker = shop.stop()
    assert worker == 0
    assert "order.follow_up" in shop.log("worker")  # it said what it serves
    # uvicorn raises SIGTERM again once it has shut down gracefully (duetime's API included)
    assert web in (0, -signal.SIGTERM)
    assert "Application shutdown complete" in shop.log("web")
