"""``transaction=django.db.connection`` inside ``transaction.atomic()``, on a real PostgreSQL.

Django is configured minimally in a process of its own (``django_outbox_app.py``: its settings
are process-wide); a worker here fires what that process committed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from outbox_kit import Elsewhere, PgOutbox, WorkerThread, elsewhere, pg_outbox

pytestmark = pytest.mark.slow  # Django's processes and databases

__all__ = ["elsewhere", "pg_outbox"]

APP = Path(__file__).with_name("django_outbox_app.py")


def run_django(pg_outbox: PgOutbox, *other_dsn: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, str(APP), pg_outbox.url, pg_outbox.dsn, pg_outbox.user_schema, *other_dsn],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answers: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return answers


def test_django_atomic_blocks_commit_fire_and_roll_back(pg_outbox: PgOutbox) -> None:
    with WorkerThread(pg_outbox.url) as worker:
        answers = run_django(pg_outbox)
        worker.wait_fired("d1")
        worker.wait_fired("d3-event")
    assert answers["driver"].startswith("psycopg")  # psycopg 3, under Django 4.2+
    keys = set(pg_outbox.timer_keys())
    assert {"d1", "d3-event", "outer", "later", "kept"} <= keys
    assert not {"d2", "d2-event", "inner", "autocommit"} & keys  # rolled back, or refused
    assert pg_outbox.orders() == ["d1"]
    assert "d2" not in worker.fired
    assert answers["cancelled"] == "cancelled"
    assert pg_outbox.status("later") == "cancelled"
    assert pg_outbox.status("kept") == "scheduled"  # its cancel rolled back


def test_django_outside_an_atomic_block_is_refused(pg_outbox: PgOutbox) -> None:
    answers = run_django(pg_outbox)
    field, message = answers["outside_atomic"]  # type: ignore[misc]
    assert field == "transaction"
    assert "transaction.atomic()" in message


def test_django_connection_to_another_database_is_refused(
    pg_outbox: PgOutbox, elsewhere: Elsewhere
) -> None:
    answers = run_django(pg_outbox, elsewhere.dsn)
    field, message = answers["other_database"]  # type: ignore[misc]
    assert field == "transaction"
    assert "not this app's database" in message
    assert elsewhere.timer_keys() == []
    assert "other" not in pg_outbox.timer_keys()
