"""The SQL functions from outside Python: a psql session and a Node service (``pg``), the
examples of docs/sql.md run as they are, their timers read back through duetime."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import NoReturn

import pytest
from storekit import PG_URL

from duetime import AsyncApp, FrozenClock
from duetime.errors import NotFound
from duetime.model import HELD_AT, Status

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sql"
NODE_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "duetime-tests"
"""Where the Node test installs the ``pg`` package once, when no DUETIME_TEST_NODE_PATH names
one: outside the checkout, so a fresh clone installs it on its first run."""


def _missing(reason: str) -> NoReturn:
    """Skip on a laptop without the tool; under CI a missing tool is a failure, never a skip."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (required under CI)")
    pytest.skip(reason)


@pytest.fixture
def shop(pg_url: str, pg_schema: str, runner: asyncio.Runner) -> Iterator[tuple[AsyncApp, str]]:
    """An app on namespace ``shop`` (which opening it creates) of a migrated schema."""
    app = AsyncApp(pg_url, "shop", clock=FrozenClock(datetime(2029, 1, 1, tzinfo=UTC)))
    runner.run(app.open())
    try:
        yield app, pg_schema
    finally:
        runner.run(app.close())


def _run(args: list[str], schema: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PGOPTIONS": f"-c search_path={schema}", **env},
    )


async def test_a_psql_session(shop: tuple[AsyncApp, str]) -> None:
    app, schema = shop
    psql = shutil.which("psql")
    if psql is None:
        _missing("psql is not installed")
    done = _run(
        [
            psql,
            PG_URL,
            "-X",
            "-q",
            "-At",
            "-v",
            "ON_ERROR_STOP=1",
            "-f",
            str(EXAMPLES / "session.sql"),
        ],
        schema,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "invoice-7|created",
        "invoice-7|kept",
        "standup|created",
        "2",
        "cancelled",
        "created|pending",
        "kept|applied",
    ]
    invoice = await app.get("invoice-7")
    assert invoice.payload == {"invoice": 7}
    standup = await app.get("standup")
    assert standup.run_at == HELD_AT  # until a worker resolves it with duetime's tz data
    assert (await app.get("d2")).status is Status.CANCELLED
    digest = await app.schedules.get("weekly-digest")
    assert (digest.cron, digest.next_at) == ("0 9 * * MON", HELD_AT)  # a worker plans it


def _node_with_pg() -> tuple[str, dict[str, str]]:
    """Node, with an environment in which ``require('pg')`` works: the folder
    DUETIME_TEST_NODE_PATH names, or ``pg`` installed once with npm into :data:`NODE_CACHE`."""
    node = shutil.which("node")
    if node is None:
        _missing("node is not installed")
    given = os.environ.get("DUETIME_TEST_NODE_PATH")
    env = {"NODE_PATH": given or str(NODE_CACHE / "node_modules")}
    if not _requires_pg(node, env) and given is None:
        npm = shutil.which("npm")
        if npm is not None:
            subprocess.run(
                [npm, "install", "--prefix", str(NODE_CACHE), "pg@8", "--no-audit", "--no-fund"],
                capture_output=True,
                check=False,
                timeout=300,
            )
    if not _requires_pg(node, env):
        _missing("the pg package is not installed for node (npm install pg, or set "
                 "DUETIME_TEST_NODE_PATH to its node_modules)")  # fmt: skip
    return node, env


def _requires_pg(node: str, env: dict[str, str]) -> bool:
    found = subprocess.run(
        [node, "-e", "require('pg')"],
        capture_output=True,
        check=False,
        env={**os.environ, **env},
        timeout=30,
    )
    return found.returncode == 0


async def test_a_node_service_schedules_in_its_own_transaction(shop: tuple[AsyncApp, str]) -> None:
    app, schema = shop
    node, env = _node_with_pg()
    service = str(EXAMPLES / "service.cjs")
    url = {"DATABASE_URL": PG_URL, "DUETIME_SCHEMA": schema, **env}

    rolled_back = _run([node, service, "41", "rollback"], schema, **url)
    assert rolled_back.returncode == 0, rolled_back.stderr
    done = _run([node, service, "42"], schema, **url)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["reminder"]["timer_key"] == "reminder-42"
    assert answer["reminder"]["action"] == "created"
    assert answer["placed"]["action"] == "created"

    reminder = await app.get("reminder-42")
    assert reminder.payload == {"order": "42"}
    assert reminder.type == "order.reminder"
    with pytest.raises(NotFound):
        await app.get("reminder-41")  # its transaction rolled back

    bad = _run([node, service, "x" * 300], schema, **url)
    assert bad.returncode == 1
    assert json.loads(bad.stderr) == {
        "code": "22001",
        "field": "key",
        "message": "key: is 309 characters; at most 255",
    }
